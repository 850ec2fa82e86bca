/* The LMDB index's loops (stores/lmdb/_runs.py, _caches.py): the search of
 * one run for a batch's band keys, and the marking of keys in the key
 * filter's bits or the run masks' table. Each computes what its numpy
 * reference does, value for value (tests/test_kernel_index.py):
 * Run.find_in_numpy, and _Bits.add or RunMasks.add_in_numpy of Run.prefixes. */
#include "_kernel.h"

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)(address))
#endif
#define PREFETCH_AHEAD 16

/* The first position in [low, high) of stored whose value is > (above) or
 * >= (not above) rest: a binary search of one fence bucket. */
static inline int64_t bucket_search(const uint32_t *stored, int64_t low, int64_t high, uint32_t rest, int above) {
    while (low < high) {
        int64_t middle = (low + high) >> 1;
        if (above ? stored[middle] <= rest : stored[middle] < rest)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

/* find_in_run(stored, fence, bits, queries, found, first, end) -> count
 * A run's entries: stored, each key's low 32 bits (uint32), sorted within
 * each of the 2**bits fence buckets, fence[b] the first entry of bucket b.
 * queries: 40-bit keys (uint64). Writes, for the ``count`` queries found,
 * their indexes, the position of each one's first entry and of the entry
 * after its last, into the int64 buffers found, first and end (each as long
 * as queries): Run.find, exactly. */
PyObject *sf_find_in_run(PyObject *self, PyObject *args) {
    Py_buffer stored_view, fence_view, queries_view, found_view, first_view, end_view;
    int bits;
    if (!PyArg_ParseTuple(args, "y*y*iy*w*w*w*", &stored_view, &fence_view, &bits, &queries_view, &found_view,
                          &first_view, &end_view))
        return NULL;
    Py_ssize_t count = queries_view.len / 8, entries = stored_view.len / 4, found = 0, q;
    int ok = bits >= 8 && bits <= 32 && fence_view.len == (((Py_ssize_t)1 << bits) + 1) * 4 &&
             found_view.len >= count * 8 && first_view.len >= count * 8 && end_view.len >= count * 8;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "bad find_in_run buffers");
    } else {
        const uint32_t *stored = (const uint32_t *)stored_view.buf, *fence = (const uint32_t *)fence_view.buf;
        const uint64_t *queries = (const uint64_t *)queries_view.buf;
        int64_t *found_at = (int64_t *)found_view.buf, *first_at = (int64_t *)first_view.buf,
                *end_at = (int64_t *)end_view.buf;
        Py_BEGIN_ALLOW_THREADS
        for (q = 0; q < count; q++) {
            /* The large runs of a large index span gigabytes of the map, and
             * a key's search misses the cache twice: in the fence, then in
             * its bucket. The fence of the key PREFETCH_AHEAD on is fetched
             * ahead, and the bucket of the key half as far on (in a large
             * run, a cache line or two), so the misses overlap. */
            if (q + PREFETCH_AHEAD < count) {
                uint64_t ahead = queries[q + PREFETCH_AHEAD] >> (40 - bits);
                if (!(ahead >> bits))
                    PREFETCH(&fence[ahead]);
            }
            if (q + PREFETCH_AHEAD / 2 < count) {
                uint64_t ahead = queries[q + PREFETCH_AHEAD / 2] >> (40 - bits);
                if (!(ahead >> bits) && fence[ahead] < (uint64_t)entries)
                    PREFETCH(&stored[fence[ahead]]);
            }
            uint64_t bucket = queries[q] >> (40 - bits);
            if (bucket >> bits)
                continue;  /* not a 40-bit key: in no run */
            uint32_t rest = (uint32_t)queries[q];
            int64_t low = fence[bucket], high = fence[bucket + 1];
            if (high > entries)
                high = entries;  /* a damaged fence reads no further than the run */
            int64_t at = bucket_search(stored, low, high, rest, 0);
            if (at < high && stored[at] == rest) {
                found_at[found] = q;
                first_at[found] = at;
                end_at[found] = bucket_search(stored, at + 1, high, rest, 1);
                found++;
            }
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&stored_view);
    PyBuffer_Release(&fence_view);
    PyBuffer_Release(&queries_view);
    PyBuffer_Release(&found_view);
    PyBuffer_Release(&first_view);
    PyBuffer_Release(&end_view);
    return ok ? PyLong_FromSsize_t(found) : NULL;
}

/* Where marking writes: the key filter's bits (bit p & 7 of byte p >> 3,
 * when masks is NULL), or the run masks' uint16 table (plane | into slot p). */
typedef struct {
    uint8_t *bits;
    uint16_t *masks;
    uint16_t plane;
    int shift; /* 40 - width: a key's prefix is key >> shift */
} Marks;

static inline void mark(const Marks *marks, uint64_t key) {
    uint64_t slot = key >> marks->shift;
    if (marks->masks != NULL)
        marks->masks[slot] |= marks->plane;
    else
        marks->bits[slot >> 3] |= (uint8_t)(1u << (slot & 7));
}

/* Parses (out, width, plane) into marks: out, 2**width bits (plane -1) or
 * 2**width uint16 masks (plane 0 to 15), writable; 0, or -1 with an error set
 * (out is then released). */
static int marks_of(Py_buffer *out, int width, int plane, Marks *marks) {
    Py_ssize_t slots = width >= 8 && width <= 32 ? (Py_ssize_t)1 << width : 0;
    int ok = plane == -1 ? out->len * 8 == slots : plane >= 0 && plane < 16 && out->len == slots * 2;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "bad marks buffer for its width and plane");
        PyBuffer_Release(out);
        return -1;
    }
    marks->bits = (uint8_t *)out->buf;
    marks->masks = plane == -1 ? NULL : (uint16_t *)out->buf;
    marks->plane = (uint16_t)(plane == -1 ? 0 : 1u << plane);
    marks->shift = 40 - width;
    return 0;
}

/* mark_run(out, width, plane, stored, tops): marks the key of each entry of
 * a run, read in place: entry i's key is (t << 32) | stored[i] for
 * tops[t] <= i < tops[t + 1] (tops: 257 uint32, where each value of the keys'
 * top 8 bits starts, as the fence holds them). */
PyObject *sf_mark_run(PyObject *self, PyObject *args) {
    Py_buffer out, stored_view, tops_view;
    int width, plane;
    Marks marks;
    if (!PyArg_ParseTuple(args, "w*iiy*y*", &out, &width, &plane, &stored_view, &tops_view))
        return NULL;
    int ok = marks_of(&out, width, plane, &marks) == 0;
    if (ok && tops_view.len != 257 * 4) {
        PyErr_SetString(PyExc_ValueError, "a run's tops are 257 uint32");
        PyBuffer_Release(&out);
        ok = 0;
    }
    if (ok) {
        const uint32_t *stored = (const uint32_t *)stored_view.buf, *tops = (const uint32_t *)tops_view.buf;
        Py_ssize_t entries = stored_view.len / 4;
        Py_BEGIN_ALLOW_THREADS
        for (int top = 0; top < 256; top++) {
            Py_ssize_t stop = tops[top + 1] < entries ? (Py_ssize_t)tops[top + 1] : entries;
            for (Py_ssize_t at = tops[top]; at < stop; at++)
                mark(&marks, (uint64_t)top << 32 | stored[at]);
        }
        Py_END_ALLOW_THREADS
        PyBuffer_Release(&out);
    }
    PyBuffer_Release(&stored_view);
    PyBuffer_Release(&tops_view);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}

/* mark_keys(out, width, plane, keys): marks each of keys (40-bit, uint64). */
PyObject *sf_mark_keys(PyObject *self, PyObject *args) {
    Py_buffer out, keys_view;
    int width, plane;
    Marks marks;
    if (!PyArg_ParseTuple(args, "w*iiy*", &out, &width, &plane, &keys_view))
        return NULL;
    int ok = marks_of(&out, width, plane, &marks) == 0;
    if (ok) {
        const uint64_t *keys = (const uint64_t *)keys_view.buf;
        Py_ssize_t count = keys_view.len / 8, at;
        Py_BEGIN_ALLOW_THREADS
        for (at = 0; at < count && keys[at] >> 40 == 0; at++)
            mark(&marks, keys[at]);
        Py_END_ALLOW_THREADS
        PyBuffer_Release(&out);
        if (at < count) {
            PyErr_SetString(PyExc_ValueError, "a key of more than 40 bits");
            ok = 0;
        }
    }
    PyBuffer_Release(&keys_view);
    if (!ok)
        return NULL;
    Py_RETURN_NONE;
}
