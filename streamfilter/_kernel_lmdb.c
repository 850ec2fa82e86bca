/* The LMDB index's loops (stores/lmdb/_runs.py, _caches.py, _batch.py,
 * _held.py): the search of one run for a batch's band keys, what the runs
 * offer a batch, a group's held posts filed among them, and the marking of
 * keys in the key filter's bits or the run masks' table. Each computes what
 * its numpy or Python reference does, value for value
 * (tests/test_kernel_lmdb.py): Run._py_find; run_members_in_numpy of each
 * of searches_of, with by_query_newest_first and offered;
 * HeldPosts._py_with_held; and _Bits.add or RunMasks.add_in_numpy of
 * Run.prefixes. */
#include "_kernel.h"

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

/* A run being searched: its stored low 32 bits, its fence of 2**bits buckets, its entries. */
typedef struct {
    const uint32_t *stored, *fence;
    int bits;
    int64_t entries;
} Searched;

/* Where query q of queries lies in the run: 1 with [*first, *end) its entries,
 * else 0. The large runs of a large index span gigabytes of the map, and a
 * key's search misses the cache twice: in the fence, then in its bucket. The
 * fence of the key PREFETCH_AHEAD on is fetched ahead, and the bucket of the
 * key half as far on (in a large run, a cache line or two), so the misses overlap. */
static inline int key_range(const Searched *run, const uint64_t *queries, Py_ssize_t count, Py_ssize_t q,
                            int64_t *first, int64_t *end) {
    const uint32_t *stored = run->stored, *fence = run->fence;
    int bits = run->bits;
    if (q + PREFETCH_AHEAD < count) {
        uint64_t ahead = queries[q + PREFETCH_AHEAD] >> (40 - bits);
        if (!(ahead >> bits))
            PREFETCH(&fence[ahead]);
    }
    if (q + PREFETCH_AHEAD / 2 < count) {
        uint64_t ahead = queries[q + PREFETCH_AHEAD / 2] >> (40 - bits);
        if (!(ahead >> bits) && fence[ahead] < (uint64_t)run->entries)
            PREFETCH(&stored[fence[ahead]]);
    }
    uint64_t bucket = queries[q] >> (40 - bits);
    if (bucket >> bits)
        return 0; /* not a 40-bit key: in no run */
    uint32_t rest = (uint32_t)queries[q];
    int64_t low = fence[bucket], high = fence[bucket + 1];
    if (high > run->entries)
        high = run->entries; /* a damaged fence reads no further than the run */
    int64_t at = bucket_search(stored, low, high, rest, 0);
    if (at >= high || stored[at] != rest)
        return 0;
    *first = at;
    *end = bucket_search(stored, at + 1, high, rest, 1);
    return 1;
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
        Searched run = {stored, fence, bits, entries};
        Py_BEGIN_ALLOW_THREADS
        for (q = 0; q < count; q++)
            if (key_range(&run, queries, count, q, &first_at[found], &end_at[found]))
                found_at[found++] = q;
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

/* The serial of a run's entry ``at``: the run's first serial plus its offset,
 * whose low 16 or 32 bits are in low (2 or 4 bytes an entry) and, for
 * offsets of 3 bytes, whose high 8 bits are in high. */
typedef struct {
    const void *low;
    const uint8_t *high;
    int low_bytes;
    int64_t first;
} Offsets;

static inline int64_t serial_at(const Offsets *offsets, int64_t at) {
    int64_t offset = offsets->low_bytes == 2 ? ((const uint16_t *)offsets->low)[at]
                                             : ((const uint32_t *)offsets->low)[at];
    if (offsets->high != NULL)
        offset |= (int64_t)offsets->high[at] << 16;
    return offsets->first + offset;
}

/* Writes, for each of queries (count, with passed[q] their indexes in the
 * batch) that the run holds, its live entries' serials (first_live and
 * later), at most the newest ``limit`` and the oldest ``oldest`` of them,
 * each with passed[q], at out_query and out_serial from *written on (room
 * in all). 0, or -1 (what it wrote is then to be written again) when there
 * was no room. */
static int search_run(const Searched *run, const Offsets *offsets, const uint64_t *queries, const int64_t *passed,
                      Py_ssize_t count, int64_t first_live, int64_t limit, int64_t oldest, int64_t *out_query,
                      int64_t *out_serial, Py_ssize_t room, Py_ssize_t *written) {
    Py_ssize_t at_out = *written;
    for (Py_ssize_t q = 0; q < count; q++) {
        int64_t low, high;
        if (!key_range(run, queries, count, q, &low, &high))
            continue;
        if (offsets->first < first_live) { /* its oldest entries may be purged: the key's live ones start later */
            int64_t below = low, above = high;
            while (below < above) { /* a key's entries are in serial order */
                int64_t middle = (below + above) >> 1;
                if (serial_at(offsets, middle) < first_live)
                    below = middle + 1;
                else
                    above = middle;
            }
            low = below;
        }
        int64_t size = high - low, newest = size < limit ? size : limit;
        int64_t old = size - newest < oldest ? size - newest : oldest;
        if (at_out + newest + old > room)
            return -1;
        for (int64_t at = high - newest; at < high; at++, at_out++) {
            out_query[at_out] = passed[q];
            out_serial[at_out] = serial_at(offsets, at);
        }
        for (int64_t at = low; at < low + old; at++, at_out++) {
            out_query[at_out] = passed[q];
            out_serial[at_out] = serial_at(offsets, at);
        }
    }
    *written = at_out;
    return 0;
}

/* The queries a run is searched for (Batch.members): those of ``maybe``
 * (int64 indexes: every small run's, plane 0, gathered once), or those
 * whose mask has a large run's plane bit; their indexes into passed and
 * the keys into searched. Returns how many. */
static Py_ssize_t run_queries(const uint64_t *queries, Py_ssize_t count, const int64_t *maybe, Py_ssize_t maybes,
                              const uint16_t *masks, unsigned plane, int64_t *passed, uint64_t *searched) {
    Py_ssize_t taken = 0;
    if (plane == 0) {
        for (Py_ssize_t i = 0; i < maybes; i++)
            if (maybe[i] >= 0 && maybe[i] < count) {
                passed[taken] = maybe[i];
                searched[taken++] = queries[maybe[i]];
            }
    } else if (masks != NULL) {
        for (Py_ssize_t q = 0; q < count; q++)
            if (masks[q] & plane) {
                passed[taken] = q;
                searched[taken++] = queries[q];
            }
    }
    return taken;
}

/* by_query_newest_first, then _base.offered: of ``count`` hits (query
 * index below ``queries``, serial; each once, in no order) writes to
 * out_query and out_serial those sorted by query, each query's newest first,
 * each query's first ``limit`` and last ``oldest`` of them; returns how many.
 * start: ``queries`` + 1 zeros. A counting sort by query, then each query's
 * few serials in place. */
static Py_ssize_t offer(const int64_t *query_of, const int64_t *serial_of, Py_ssize_t count, Py_ssize_t queries,
                        int64_t limit, int64_t oldest, int64_t *out_query, int64_t *out_serial, int64_t *start) {
    Py_ssize_t kept = 0, from = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        start[query_of[i] + 1]++;
    for (Py_ssize_t q = 0; q < queries; q++)
        start[q + 1] += start[q];
    for (Py_ssize_t i = 0; i < count; i++) /* by query: start[q] is then where query q's hits end */
        out_serial[start[query_of[i]]++] = serial_of[i];
    for (Py_ssize_t q = 0; q < queries; q++) {
        Py_ssize_t end = start[q], size = end - from;
        int64_t *group = out_serial + from;
        for (Py_ssize_t i = 1; i < size; i++) { /* newest first */
            int64_t serial = group[i];
            Py_ssize_t j = i;
            for (; j > 0 && group[j - 1] < serial; j--)
                group[j] = group[j - 1];
            group[j] = serial;
        }
        for (Py_ssize_t i = 0; i < size; i++)
            if (i < limit || size - 1 - i < oldest) {
                out_query[kept] = q;
                out_serial[kept++] = group[i]; /* kept <= from + i: never ahead of what it reads */
            }
        from = end;
    }
    return kept;
}

/* members_in_runs(runs, queries, maybe, masks, first_live, limit, oldest,
 *                 found_query, found_serial, out_query, out_serial) -> count
 * Batch.members: the search of every live run for a batch's queries (40-bit
 * keys, uint64), and what each query offers of what they hold. runs, a list
 * of (stored, fence, bits, low, high, first, plane) (Run.stored,
 * Run.search_fence(), Run.low, Run.high or None, Run.first, the run's plane
 * bit in the run masks, 0 for a small run). A small run is searched for the
 * queries ``maybe`` indexes (int64, the key filter's), a large one for those
 * whose mask (masks, uint16 a query, or None without large runs) has its
 * plane. For each query a run holds, its live entries' serials, at most the
 * newest ``limit`` and the oldest ``oldest``, with the query's index, go to
 * found_query and found_serial, run after run; then those, by query, each
 * query's newest first and cut to what it offers, to out_query and
 * out_serial (all int64, of one length). Returns how many it offered, or -1
 * when they ran out of room (all is then to be done again, into larger
 * ones): a caller sizes them by the hits it finds, not by the most the runs
 * could give. */
PyObject *sf_members_in_runs(PyObject *self, PyObject *args) {
    PyObject *runs, *masks_object;
    Py_buffer queries_view, maybe_view, masks_view = {0}, query_view, serial_view, out_query_view, out_serial_view;
    long long first_live;
    Py_ssize_t limit, oldest, written = 0;
    if (!PyArg_ParseTuple(args, "O!y*y*OLnnw*w*w*w*", &PyList_Type, &runs, &queries_view, &maybe_view, &masks_object,
                          &first_live, &limit, &oldest, &query_view, &serial_view, &out_query_view, &out_serial_view))
        return NULL;
    Py_ssize_t count = queries_view.len / 8, room = query_view.len / 8;
    int ok = masks_object == Py_None || PyObject_GetBuffer(masks_object, &masks_view, PyBUF_SIMPLE) == 0;
    int have_masks = ok && masks_object != Py_None;
    if (ok && !(limit >= 0 && oldest >= 0 && serial_view.len == query_view.len && maybe_view.len % 8 == 0 &&
                out_query_view.len == query_view.len && out_serial_view.len == query_view.len &&
                (!have_masks || masks_view.len == count * 2))) {
        PyErr_SetString(PyExc_ValueError, "bad members_in_runs buffers");
        ok = 0;
    }
    /* passed, then searched, for the small runs (gathered once), then for a large run */
    int64_t *scratch = NULL, *start = NULL;
    if (ok && ((scratch = PyMem_Malloc(4 * (count + 1) * 8)) == NULL || (start = PyMem_Calloc(count + 1, 8)) == NULL))
        ok = 0, PyErr_NoMemory();
    int64_t *small_passed = NULL, *large_passed = NULL;
    uint64_t *small_searched = NULL, *large_searched = NULL;
    Py_ssize_t small = 0;
    if (ok) {
        small_passed = scratch, small_searched = (uint64_t *)scratch + (count + 1);
        large_passed = scratch + 2 * (count + 1), large_searched = (uint64_t *)scratch + 3 * (count + 1);
        small = run_queries((const uint64_t *)queries_view.buf, count, (const int64_t *)maybe_view.buf,
                            maybe_view.len / 8, NULL, 0, small_passed, small_searched);
    }
    for (Py_ssize_t r = 0; ok && r < PyList_GET_SIZE(runs) && written >= 0; r++) {
        Py_buffer stored_view, fence_view, low_view, high_view = {0};
        PyObject *high_object;
        int bits;
        long long first;
        unsigned int plane;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(runs, r), "y*y*iy*OLI", &stored_view, &fence_view, &bits, &low_view,
                              &high_object, &first, &plane)) {
            ok = 0;
            break;
        }
        ok = high_object == Py_None || PyObject_GetBuffer(high_object, &high_view, PyBUF_SIMPLE) == 0;
        int have_high = ok && high_object != Py_None;
        Py_ssize_t entries = stored_view.len / 4;
        int low_bytes = entries ? (int)(low_view.len / entries) : 2;
        if (ok && !(bits >= 8 && bits <= 32 && fence_view.len == (((Py_ssize_t)1 << bits) + 1) * 4 &&
                    (low_bytes == 2 || low_bytes == 4) && low_view.len == entries * low_bytes &&
                    (!have_high || (low_bytes == 2 && high_view.len == entries)) && plane <= 0xFFFF)) {
            PyErr_SetString(PyExc_ValueError, "bad members_in_runs run");
            ok = 0;
        }
        if (ok) {
            Offsets offsets = {low_view.buf, have_high ? (const uint8_t *)high_view.buf : NULL, low_bytes, first};
            Searched run = {(const uint32_t *)stored_view.buf, (const uint32_t *)fence_view.buf, bits, entries};
            Py_BEGIN_ALLOW_THREADS
            Py_ssize_t taken = plane == 0 ? small
                                          : run_queries((const uint64_t *)queries_view.buf, count, NULL, 0,
                                                        have_masks ? (const uint16_t *)masks_view.buf : NULL, plane,
                                                        large_passed, large_searched);
            if (search_run(&run, &offsets, plane == 0 ? small_searched : large_searched,
                           plane == 0 ? small_passed : large_passed, taken, first_live, limit, oldest,
                           (int64_t *)query_view.buf, (int64_t *)serial_view.buf, room, &written) < 0)
                written = -1;
            Py_END_ALLOW_THREADS
        }
        PyBuffer_Release(&stored_view);
        PyBuffer_Release(&fence_view);
        PyBuffer_Release(&low_view);
        if (have_high)
            PyBuffer_Release(&high_view);
    }
    Py_ssize_t kept = written;
    if (ok && written > 0) {
        Py_BEGIN_ALLOW_THREADS
        kept = offer((const int64_t *)query_view.buf, (const int64_t *)serial_view.buf, written, count, limit, oldest,
                     (int64_t *)out_query_view.buf, (int64_t *)out_serial_view.buf, start);
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(scratch);
    PyMem_Free(start);
    if (have_masks)
        PyBuffer_Release(&masks_view);
    PyBuffer_Release(&queries_view);
    PyBuffer_Release(&maybe_view);
    PyBuffer_Release(&query_view);
    PyBuffer_Release(&serial_view);
    PyBuffer_Release(&out_query_view);
    PyBuffer_Release(&out_serial_view);
    return ok ? PyLong_FromSsize_t(kept) : NULL;
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

/* marked(bits, width, keys) -> bytearray of int64: the indexes of the keys
 * (40-bit, uint64) whose bit is set in bits (2**width bits), in order
 * (_Bits.might_hold). */
PyObject *sf_marked(PyObject *self, PyObject *args) {
    Py_buffer bits_view, keys_view;
    int width;
    if (!PyArg_ParseTuple(args, "y*iy*", &bits_view, &width, &keys_view))
        return NULL;
    PyObject *found = NULL;
    Py_ssize_t slots = width >= 8 && width <= 32 ? (Py_ssize_t)1 << width : 0, count = keys_view.len / 8;
    if (bits_view.len * 8 != slots) {
        PyErr_SetString(PyExc_ValueError, "bad bits buffer for its width");
        goto done;
    }
    found = PyByteArray_FromStringAndSize(NULL, count * 8);
    if (found == NULL)
        goto done;
    const uint8_t *bits = (const uint8_t *)bits_view.buf;
    const uint64_t *keys = (const uint64_t *)keys_view.buf;
    int64_t *out = (int64_t *)PyByteArray_AS_STRING(found);
    Py_ssize_t kept = 0;
    for (Py_ssize_t at = 0; at < count; at++) {
        if (keys[at] >> 40) {
            PyErr_SetString(PyExc_ValueError, "a key of more than 40 bits");
            Py_CLEAR(found);
            goto done;
        }
        uint64_t slot = keys[at] >> (40 - width);
        if (bits[slot >> 3] >> (slot & 7) & 1)
            out[kept++] = at;
    }
    if (PyByteArray_Resize(found, kept * 8) < 0)
        Py_CLEAR(found);
done:
    PyBuffer_Release(&bits_view);
    PyBuffer_Release(&keys_view);
    return found;
}

/* with_held(queries, under, hit_query, hit_serial, limit, oldest) -> (query_of, serial_of) or None
 * HeldPosts.with_held: the stored hits (int64 query index, serial; by
 * query, newest first) with the held posts filed under each query (under:
 * a dict of key -> its one serial, or a list of serials, oldest first)
 * after its stored ones,
 * each query's members cut to its oldest ``oldest`` and newest ``limit``
 * (_rules.offered_per_key), newest first, as bytearrays of int64; None
 * when no query holds a held post (the hits stand). */
PyObject *sf_with_held(PyObject *self, PyObject *args) {
    Py_buffer queries_view, query_view, serial_view;
    PyObject *under, *result = NULL, *query_out = NULL, *serial_out = NULL;
    Py_ssize_t limit, oldest;
    if (!PyArg_ParseTuple(args, "y*O!y*y*nn", &queries_view, &PyDict_Type, &under, &query_view, &serial_view, &limit,
                          &oldest))
        return NULL;
    const uint64_t *queries = (const uint64_t *)queries_view.buf;
    const int64_t *hit_query = (const int64_t *)query_view.buf, *hit_serial = (const int64_t *)serial_view.buf;
    Py_ssize_t count = queries_view.len / 8, hits = query_view.len / 8, room = hits, most = oldest + limit;
    Py_ssize_t longest = 0; /* the most held serials under one query */
    PyObject **held = PyMem_Calloc(count ? count : 1, sizeof(PyObject *)); /* borrowed: the lists under each key */
    int any = 0;
    if (held == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (serial_view.len != query_view.len || limit < 1 || oldest < 0) {
        PyErr_SetString(PyExc_ValueError, "bad with_held arguments");
        goto done;
    }
    for (Py_ssize_t q = 0; q < count; q++) {
        PyObject *key = PyLong_FromUnsignedLongLong(queries[q]);
        if (key == NULL)
            goto done;
        PyObject *serials = PyDict_GetItemWithError(under, key);
        Py_DECREF(key);
        if (serials == NULL && PyErr_Occurred())
            goto done;
        if (serials != NULL && !PyList_Check(serials) && !PyLong_Check(serials)) {
            PyErr_SetString(PyExc_TypeError, "held serials must be an int or a list");
            goto done;
        }
        Py_ssize_t size = serials == NULL ? 0 : PyLong_Check(serials) ? 1 : PyList_GET_SIZE(serials);
        if (size > 0) {
            held[q] = serials;
            any = 1;
            room += size < most ? size : most;
            longest = size > longest ? size : longest;
        }
    }
    if (!any) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    query_out = PyByteArray_FromStringAndSize(NULL, room * 8);
    serial_out = PyByteArray_FromStringAndSize(NULL, room * 8);
    int64_t *every = PyMem_Malloc(sizeof(int64_t) * (hits + longest + 1)); /* one query's members, oldest first */
    if (query_out == NULL || serial_out == NULL || every == NULL) {
        PyMem_Free(every);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    int64_t *out_query = (int64_t *)PyByteArray_AS_STRING(query_out);
    int64_t *out_serial = (int64_t *)PyByteArray_AS_STRING(serial_out);
    Py_ssize_t at = 0, written = 0;
    for (Py_ssize_t q = 0; q < count; q++) {
        Py_ssize_t start = at;
        while (at < hits && hit_query[at] == q)
            at++;
        if (held[q] == NULL) { /* its stored members as they are */
            for (Py_ssize_t i = start; i < at; i++, written++) {
                out_query[written] = q;
                out_serial[written] = hit_serial[i];
            }
            continue;
        }
        /* oldest first: the stored ones (newest first in the hits) reversed, then the held ones */
        int one = PyLong_Check(held[q]);
        Py_ssize_t size = 0, taken = one ? 1 : PyList_GET_SIZE(held[q]);
        for (Py_ssize_t i = at - 1; i >= start; i--)
            every[size++] = hit_serial[i];
        Py_ssize_t total = size + taken, skip_from = total, skip_to = total; /* the part offered_per_key cuts */
        if (total > most)
            skip_from = oldest, skip_to = total - limit;
        for (Py_ssize_t i = 0; i < taken; i++) {
            Py_ssize_t position = size + i;
            if (position >= skip_from && position < skip_to)
                continue; /* cut: not read */
            long long serial = PyLong_AsLongLong(one ? held[q] : PyList_GET_ITEM(held[q], i));
            if (serial == -1 && PyErr_Occurred()) {
                PyMem_Free(every);
                goto done;
            }
            every[position] = serial;
        }
        for (Py_ssize_t i = total - 1; i >= 0; i--) { /* newest first */
            if (i >= skip_from && i < skip_to)
                continue;
            out_query[written] = q;
            out_serial[written++] = every[i];
        }
    }
    PyMem_Free(every);
    if (PyByteArray_Resize(query_out, written * 8) < 0 || PyByteArray_Resize(serial_out, written * 8) < 0)
        goto done;
    result = PyTuple_Pack(2, query_out, serial_out);
done:
    Py_XDECREF(query_out);
    Py_XDECREF(serial_out);
    PyMem_Free(held);
    PyBuffer_Release(&queries_view);
    PyBuffer_Release(&query_view);
    PyBuffer_Release(&serial_view);
    return result;
}
