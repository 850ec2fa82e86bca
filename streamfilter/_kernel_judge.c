/* A batch's candidates, ranked, compiled: the Ranker type, which _judge.py
 * uses where the kernel is built in place of _stored_sharers, _InBatch,
 * _with_batch_sharers and _rules.rank_candidates.
 *
 * Ranker(hit_query, hit_serial, inverse, owner, queries, count, limit, verified, oldest)
 * takes the batch's look-up as judge_batch holds it (int64 buffers): the
 * stored members of each query, sorted by query, newest first; each band key
 * occurrence's query and sketch, sketches in order. Then, for the sketches in
 * order, candidates(index, recorded) gives a sketch's candidate serials in
 * rank order (a list, or None when it has none) and file(index, serial)
 * records a sketch of the batch, which the later sketches that share its keys
 * see: exactly what _InBatch.candidates (with _stored_sharers' answer) or
 * _first give, and what _InBatch.file does. tests/test_kernel.py holds the
 * two to it on generated batches. Or, instead of those two, judge(...) runs
 * the judge's whole loop over the batch (_kernel_judge_loop.c).
 */
#include <stdlib.h>
#include <string.h>

#include "_kernel.h"

int sf_newest_first(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* An in-place quicksort of n items of type T, ``BEFORE(a, b)`` saying that a
 * goes first: qsort calls its comparison through a pointer, and a flood's
 * posts sort two hundred serials each. */
#define SORT_BODY(T, BEFORE)                                                                                           \
    while (n > 16) {                                                                                                  \
        T pivot = items[n / 2], swap;                                                                                  \
        Py_ssize_t i = 0, j = n - 1;                                                                                   \
        while (i <= j) {                                                                                               \
            while (BEFORE(items[i], pivot))                                                                            \
                i++;                                                                                                   \
            while (BEFORE(pivot, items[j]))                                                                            \
                j--;                                                                                                   \
            if (i <= j) {                                                                                              \
                swap = items[i], items[i] = items[j], items[j] = swap;                                                 \
                i++, j--;                                                                                              \
            }                                                                                                          \
        }                                                                                                              \
        if (j + 1 < n - i) { /* the smaller side by recursion, the larger by the loop */                              \
            SORT_SELF(items, j + 1);                                                                                   \
            items += i, n -= i;                                                                                        \
        } else {                                                                                                       \
            SORT_SELF(items + i, n - i);                                                                               \
            n = j + 1;                                                                                                 \
        }                                                                                                              \
    }                                                                                                                  \
    for (Py_ssize_t i = 1; i < n; i++) {                                                                              \
        T item = items[i];                                                                                             \
        Py_ssize_t j = i;                                                                                              \
        for (; j > 0 && BEFORE(item, items[j - 1]); j--)                                                               \
            items[j] = items[j - 1];                                                                                   \
        items[j] = item;                                                                                               \
    }

#define RANKS_BEFORE(a, b) ((a).count > (b).count || ((a).count == (b).count && (a).serial > (b).serial))

#define SORT_SELF sort_by_rank
static void sort_by_rank(Shared *items, Py_ssize_t n) { SORT_BODY(Shared, RANKS_BEFORE) }
#undef SORT_SELF

static void ranker_dealloc(Ranker *self) {
    if (self->filed != NULL)
        for (Py_ssize_t q = 0; q < self->queries; q++)
            PyMem_Free(self->filed[q]);
    PyMem_Free(self->filed);
    PyMem_Free(self->hit_start);
    PyMem_Free(self->hit_count);
    PyMem_Free(self->hit_serial);
    PyMem_Free(self->inverse);
    PyMem_Free(self->sketch_start);
    PyMem_Free(self->first_holder);
    PyMem_Free(self->last_holder);
    PyMem_Free(self->filed_count);
    PyMem_Free(self->filed_head);
    PyMem_Free(self->scratch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int64_t *copied(const Py_buffer *view) {
    int64_t *copy = PyMem_Malloc(view->len ? view->len : 1);
    if (copy == NULL)
        PyErr_NoMemory();
    else
        memcpy(copy, view->buf, view->len);
    return copy;
}

static int ranker_init(Ranker *self, PyObject *args, PyObject *kwargs) {
    Py_buffer hit_query, hit_serial, inverse, owner;
    Py_ssize_t queries, count, limit, verified, oldest, i;
    if (self->hit_start != NULL) {
        PyErr_SetString(PyExc_TypeError, "a Ranker is set up once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "y*y*y*y*nnnnn", &hit_query, &hit_serial, &inverse, &owner, &queries, &count, &limit,
                          &verified, &oldest))
        return -1;
    int result = -1;
    Py_ssize_t hits = hit_query.len / 8, occurrences = inverse.len / 8;
    const int64_t *query_of = hit_query.buf, *owner_of = owner.buf;
    if (hit_query.len % 8 || hit_serial.len != hit_query.len || inverse.len % 8 || owner.len != inverse.len ||
        queries < 0 || count < 0 || limit < 0 || verified < 0 || oldest < 0) {
        PyErr_SetString(PyExc_ValueError, "bad Ranker arguments");
        goto done;
    }
    self->queries = queries;
    self->count = count;
    self->limit = limit;
    self->verified = verified;
    self->oldest = oldest;
    self->hit_start = PyMem_Calloc(queries + 1, sizeof(int64_t));
    self->hit_count = PyMem_Calloc(queries + 1, sizeof(int64_t));
    self->first_holder = PyMem_Malloc((queries + 1) * sizeof(int64_t));
    self->last_holder = PyMem_Malloc((queries + 1) * sizeof(int64_t));
    self->filed = PyMem_Calloc(queries + 1, sizeof(int64_t *));
    self->filed_count = PyMem_Calloc(queries + 1, sizeof(int64_t));
    self->filed_head = PyMem_Calloc(queries + 1, sizeof(int64_t));
    self->sketch_start = PyMem_Calloc(count + 1, sizeof(Py_ssize_t));
    self->hit_serial = copied(&hit_serial);
    self->inverse = copied(&inverse);
    if (!self->hit_start || !self->hit_count || !self->first_holder || !self->last_holder || !self->filed ||
        !self->filed_count || !self->filed_head || !self->sketch_start || !self->hit_serial || !self->inverse) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < hits; i++) { /* sorted by query: each query's members are one run */
        int64_t q = query_of[i];
        if (q < 0 || q >= queries || (i && q < query_of[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "hits are not sorted by query");
            goto done;
        }
        if (self->hit_count[q]++ == 0)
            self->hit_start[q] = i;
    }
    for (i = 0; i < queries; i++) {
        self->first_holder[i] = count;
        self->last_holder[i] = -1;
    }
    for (i = 0; i < occurrences; i++) {
        int64_t q = self->inverse[i], s = owner_of[i];
        if (q < 0 || q >= queries || s < 0 || s >= count || (i && s < owner_of[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "band keys are not in their sketches' order");
            goto done;
        }
        if (s < self->first_holder[q])
            self->first_holder[q] = s;
        if (s > self->last_holder[q])
            self->last_holder[q] = s;
    }
    for (i = 0; i <= count; i++) /* sketch s's occurrences: [sketch_start[s], sketch_start[s + 1]) */
        self->sketch_start[i] = 0;
    for (i = 0; i < occurrences; i++)
        self->sketch_start[owner_of[i] + 1]++;
    for (i = 0; i < count; i++)
        self->sketch_start[i + 1] += self->sketch_start[i];
    result = 0;
done:
    PyBuffer_Release(&hit_query);
    PyBuffer_Release(&hit_serial);
    PyBuffer_Release(&inverse);
    PyBuffer_Release(&owner);
    return result;
}

/* Room in self->scratch for n Shared and a table of ``slots`` int32; 0, or -1 with MemoryError. */
static int scratch_for(Ranker *self, Py_ssize_t n, Py_ssize_t slots) {
    Py_ssize_t needed = n * (Py_ssize_t)(sizeof(Shared) / sizeof(int64_t)) + slots / 2 + 1;
    if (needed <= self->scratch_size)
        return 0;
    PyMem_Free(self->scratch);
    self->scratch = PyMem_Malloc(needed * sizeof(int64_t));
    self->scratch_size = self->scratch == NULL ? 0 : needed;
    if (self->scratch == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* A sketch's candidates being counted: each serial once in ``shared``, with
 * how many of the sketch's keys it is under, found through an open-addressing
 * table of indexes into it (-1 for an empty slot). */
typedef struct {
    Shared *shared;
    int32_t *table;
    uint64_t mask; /* slots - 1, slots a power of two at least twice the serials */
    Py_ssize_t kept;
} Tally;

/* Adds ``delta`` to the count of ``serial``; a serial not yet there is added
 * when ``add`` is set, else left out. */
static inline void tally(Tally *tally, int64_t serial, int64_t delta, int add) {
    uint64_t slot = ((uint64_t)serial * 0x9E3779B97F4A7C15ULL) >> 32 & tally->mask;
    for (;; slot = (slot + 1) & tally->mask) {
        int32_t at = tally->table[slot];
        if (at < 0) {
            if (add) {
                tally->table[slot] = (int32_t)tally->kept;
                tally->shared[tally->kept++] = (Shared){serial, delta};
            }
            return;
        }
        if (tally->shared[at].serial == serial) {
            tally->shared[at].count += delta;
            return;
        }
    }
}

/* Puts the first ``wanted`` of ``items`` in rank order at their front, the
 * rest after them in no order: a post verifies its first few candidates of
 * the tens a flood gives it, and needs no more of them ranked. */
static void rank_first(Shared *items, Py_ssize_t n, Py_ssize_t wanted) {
    if (wanted >= n) {
        sort_by_rank(items, n);
        return;
    }
    Py_ssize_t top = 0; /* items[0..top) is the best so far, in rank order */
    for (Py_ssize_t i = 0; i < n; i++) {
        Shared item = items[i];
        if (top == wanted && !RANKS_BEFORE(item, items[top - 1]))
            continue;
        Py_ssize_t j = top < wanted ? top++ : top - 1;
        items[i] = items[j]; /* what it displaces goes where it was: among the rest */
        for (; j > 0 && RANKS_BEFORE(item, items[j - 1]); j--)
            items[j] = items[j - 1];
        items[j] = item;
    }
}

/* Sketch ``index``'s candidates, at *ranked (the Ranker's scratch, valid
 * until its next use), the first ``wanted`` of them in rank order: how many,
 * or -1 with an error set. *none is set when the sketch has none at all
 * (candidates' None). ``recorded`` says whether the batch filed any sketch yet. */
Py_ssize_t sf_ranked_of(Ranker *self, Py_ssize_t index, int recorded, Py_ssize_t wanted, Shared **ranked, int *none) {
    Py_ssize_t occ, j;
    *none = 0;
    if (self->sketch_start == NULL || index < 0 || index >= self->count) {
        PyErr_SetString(PyExc_IndexError, "no such sketch in the batch");
        return -1;
    }
    Py_ssize_t start = self->sketch_start[index], end = self->sketch_start[index + 1], gathered = 0;
    for (occ = start; occ < end; occ++) {
        int64_t q = self->inverse[occ];
        gathered += self->hit_count[q];
        if (recorded && index > self->first_holder[q])
            gathered += self->filed_count[q];
    }
    Py_ssize_t slots = 16;
    while (slots < 2 * gathered)
        slots *= 2;
    if (gathered >= INT32_MAX / 2) {
        PyErr_SetString(PyExc_OverflowError, "too many candidates for one post");
        return -1;
    }
    if (scratch_for(self, gathered, slots) < 0)
        return -1;
    Tally counts = {(Shared *)self->scratch, (int32_t *)(self->scratch + gathered * 2), (uint64_t)slots - 1, 0};
    memset(counts.table, 0xff, slots * sizeof(int32_t));
    *ranked = counts.shared;
    for (occ = start; occ < end; occ++) { /* _stored_sharers: every stored member under each key */
        int64_t q = self->inverse[occ];
        for (j = 0; j < self->hit_count[q]; j++)
            tally(&counts, self->hit_serial[self->hit_start[q] + j], 1, 1);
    }
    Py_ssize_t stored = counts.kept, in_batch = 0;
    /* _InBatch.candidates: the batch's filed serials under keys an earlier sketch holds too (none is
     * stored), and the stored members they crowd out of a key's newest ``limit``, which lose that key */
    for (occ = start; recorded && occ < end; occ++) {
        int64_t q = self->inverse[occ];
        if (index <= self->first_holder[q] || self->filed[q] == NULL)
            continue;
        for (j = 0; j < self->filed_count[q]; j++, in_batch++)
            tally(&counts, self->filed[q][j], 1, 1);
        /* the stored hits neither among the newest ``limit`` with the batch's nor among the oldest */
        int64_t first = self->limit - self->filed_count[q], last = self->hit_count[q] - self->oldest;
        for (j = first > 0 ? first : 0; j < last; j++)
            tally(&counts, self->hit_serial[self->hit_start[q] + j], -1, 0);
    }
    Py_ssize_t kept = 0;
    for (j = 0; j < counts.kept; j++) /* the crowded-out go at none (_with_batch_sharers) */
        if (j >= stored || counts.shared[j].count > 0)
            counts.shared[kept++] = counts.shared[j];
    *none = stored == 0 && in_batch == 0; /* _first: None for a sketch that shares no key */
    rank_first(counts.shared, kept, wanted);
    return kept;
}

/* candidates(index, recorded) -> list or None: the sketch's candidate serials
 * in rank order; ``recorded`` says whether the batch filed any sketch yet. */
static PyObject *ranker_candidates(Ranker *self, PyObject *args) {
    Py_ssize_t index;
    int recorded, none;
    Shared *ranked;
    if (!PyArg_ParseTuple(args, "np", &index, &recorded))
        return NULL;
    Py_ssize_t n = sf_ranked_of(self, index, recorded, PY_SSIZE_T_MAX, &ranked, &none);
    if (n < 0)
        return NULL;
    if (none)
        Py_RETURN_NONE;
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list != NULL && i < n; i++) {
        PyObject *serial = PyLong_FromLongLong(ranked[i].serial);
        if (serial == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, serial);
    }
    return list;
}

/* _InBatch.file: sketch ``index`` is recorded as ``serial``; 0, or -1 with an error set */
int sf_filed_as(Ranker *self, Py_ssize_t index, int64_t serial) {
    if (self->sketch_start == NULL || index < 0 || index >= self->count) {
        PyErr_SetString(PyExc_IndexError, "no such sketch in the batch");
        return -1;
    }
    /* a key keeps its newest ``limit`` serials (its first one even at a limit of 0), and its first ones
     * while it has fewer stored than its oldest, as _InBatch.file */
    Py_ssize_t newest = self->limit > 0 ? self->limit : 1;
    for (Py_ssize_t occ = self->sketch_start[index]; occ < self->sketch_start[index + 1]; occ++) {
        int64_t q = self->inverse[occ];
        if (index >= self->last_holder[q]) /* no later sketch holds the key */
            continue;
        Py_ssize_t kept_first = self->oldest > self->hit_count[q] ? self->oldest - self->hit_count[q] : 0;
        Py_ssize_t room = kept_first + newest;
        if (self->filed[q] == NULL && (self->filed[q] = PyMem_Malloc(room * sizeof(int64_t))) == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (self->filed_count[q] < room) {
            self->filed[q][self->filed_count[q]++] = serial;
        } else { /* the oldest of the newest gives way: order within a key does not count */
            self->filed[q][kept_first + self->filed_head[q]] = serial;
            self->filed_head[q] = (self->filed_head[q] + 1) % newest;
        }
    }
    return 0;
}

/* file(index, serial): sketch ``index`` is recorded as ``serial`` (_InBatch.file) */
static PyObject *ranker_file(Ranker *self, PyObject *args) {
    Py_ssize_t index;
    long long serial;
    if (!PyArg_ParseTuple(args, "nL", &index, &serial))
        return NULL;
    self->spent = 1; /* its filings are no longer a new batch's: judge refuses it */
    if (sf_filed_as(self, index, serial) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Each key's slot among the distinct keys, in the order first seen, into
 * ``slot``; the distinct keys into ``seen``; returns how many, or -1 when out
 * of memory. Open addressing in a table at most half full. */
static Py_ssize_t slots_by_hash(const uint64_t *keys, Py_ssize_t count, uint64_t *seen, int64_t *slot) {
    int bits = 4;
    while (((Py_ssize_t)1 << bits) < 2 * count)
        bits++;
    size_t mask = ((size_t)1 << bits) - 1;
    int32_t *table = malloc((mask + 1) * sizeof(int32_t));
    if (table == NULL)
        return -1;
    memset(table, 0xff, (mask + 1) * sizeof(int32_t)); /* -1: empty */
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t key = keys[i];
        size_t at = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> (64 - bits));
        while (table[at] >= 0 && seen[table[at]] != key)
            at = (at + 1) & mask;
        if (table[at] < 0) {
            table[at] = (int32_t)kept;
            seen[kept++] = key;
        }
        slot[i] = table[at];
    }
    free(table);
    return kept;
}

/* Sort ``keys`` with their ``slots`` by key, least significant byte first,
 * skipping the bytes where no two keys differ (a store's keys keep 40 bits);
 * ``spare``/``spare_slots``: room for as many. The sorted pair is left where
 * ``keys`` and ``slots`` point. */
static void radix_sort(uint64_t **keys, int32_t **slots, uint64_t **spare, int32_t **spare_slots, Py_ssize_t count) {
    uint64_t differ = 0;
    for (Py_ssize_t i = 1; i < count; i++)
        differ |= (*keys)[i] ^ (*keys)[0];
    for (int shift = 0; shift < 64; shift += 8) {
        if (((differ >> shift) & 0xff) == 0)
            continue;
        Py_ssize_t start[256] = {0};
        for (Py_ssize_t i = 0; i < count; i++)
            start[((*keys)[i] >> shift) & 0xff]++;
        for (Py_ssize_t digit = 0, total = 0; digit < 256; digit++) {
            Py_ssize_t here = start[digit];
            start[digit] = total;
            total += here;
        }
        for (Py_ssize_t i = 0; i < count; i++) {
            Py_ssize_t to = start[((*keys)[i] >> shift) & 0xff]++;
            (*spare)[to] = (*keys)[i];
            (*spare_slots)[to] = (*slots)[i];
        }
        uint64_t *k = *keys;
        int32_t *s = *slots;
        *keys = *spare, *slots = *spare_slots, *spare = k, *spare_slots = s;
    }
}

/* Up to this many distinct keys are sorted by insertion, not by radix; from
 * this many keys on, distinct works without the interpreter's lock. */
#define FEW_KEYS 64
#define FREE_THE_LOCK_FROM 4096

/* Sort a few keys with their slots in place, by key. */
static void insertion_sort(uint64_t *keys, int32_t *slots, Py_ssize_t count) {
    for (Py_ssize_t i = 1; i < count; i++) {
        uint64_t key = keys[i];
        int32_t slot = slots[i];
        Py_ssize_t j = i;
        for (; j > 0 && keys[j - 1] > key; j--)
            keys[j] = keys[j - 1], slots[j] = slots[j - 1];
        keys[j] = key, slots[j] = slot;
    }
}

/* The distinct keys, sorted, into ``out`` and each key's index among them
 * into ``index`` (the rest: room for count + 1 values each); how many, or -1
 * when out of memory. */
static Py_ssize_t ranked(const uint64_t *keys, Py_ssize_t count, uint64_t *out, int64_t *index, uint64_t *sorted,
                         uint64_t *spare, int32_t *slots, int32_t *spare_slots, int64_t *rank) {
    Py_ssize_t kept = slots_by_hash(keys, count, sorted, index);
    if (kept < 0)
        return -1;
    for (Py_ssize_t d = 0; d < kept; d++)
        slots[d] = (int32_t)d;
    uint64_t *k = sorted;
    int32_t *sl = slots;
    if (kept <= FEW_KEYS)
        insertion_sort(k, sl, kept);
    else
        radix_sort(&k, &sl, &spare, &spare_slots, kept);
    for (Py_ssize_t r = 0; r < kept; r++) {
        out[r] = k[r];
        rank[sl[r]] = r;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        index[i] = rank[index[i]];
    return kept;
}

/* distinct(keys) -> (distinct keys: bytearray of uint64, sorted; inverse:
 * bytearray of int64, each key's index among them): np.unique(keys,
 * return_inverse=True) (_judge._distinct). A batch's keys are told apart by
 * hashing and only the distinct ones are sorted, so a campaign's thousands of
 * shared keys cost a look-up each. */
PyObject *sf_distinct(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint64_t *keys = (const uint64_t *)view.buf;
    Py_ssize_t count = view.len / 8, kept = 0;
    if (count > INT32_MAX) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_OverflowError, "distinct: more than 2**31 - 1 keys");
        return NULL;
    }
    PyObject *distinct = PyByteArray_FromStringAndSize(NULL, count * 8);
    PyObject *inverse = PyByteArray_FromStringAndSize(NULL, count * 8);
    uint64_t *sorted = PyMem_RawMalloc((count + 1) * 8), *spare = PyMem_RawMalloc((count + 1) * 8);
    int32_t *slots = PyMem_RawMalloc((count + 1) * 4), *spare_slots = PyMem_RawMalloc((count + 1) * 4);
    int64_t *rank = PyMem_RawMalloc((count + 1) * 8);
    int failed = distinct == NULL || inverse == NULL || !sorted || !spare || !slots || !spare_slots || !rank;
    if (!failed) {
        uint64_t *out = (uint64_t *)PyByteArray_AS_STRING(distinct);
        int64_t *index = (int64_t *)PyByteArray_AS_STRING(inverse);
        if (count >= FREE_THE_LOCK_FROM) { /* a batch's keys: the merging thread may run meanwhile */
            Py_BEGIN_ALLOW_THREADS kept = ranked(keys, count, out, index, sorted, spare, slots, spare_slots, rank);
            Py_END_ALLOW_THREADS
        } else { /* a post's: handing the lock over would cost more than the work */
            kept = ranked(keys, count, out, index, sorted, spare, slots, spare_slots, rank);
        }
        failed = kept < 0;
    }
    PyBuffer_Release(&view);
    PyMem_RawFree(sorted), PyMem_RawFree(spare), PyMem_RawFree(slots), PyMem_RawFree(spare_slots), PyMem_RawFree(rank);
    if (failed || PyByteArray_Resize(distinct, kept * 8) < 0) {
        Py_XDECREF(distinct);
        Py_XDECREF(inverse);
        return failed && !PyErr_Occurred() ? PyErr_NoMemory() : NULL;
    }
    return Py_BuildValue("(NN)", distinct, inverse);
}

/* How many keys offered as many members as a key offers: buckets a flood has filled (_judge._full_buckets). */
static PyObject *ranker_full_buckets(Ranker *self, PyObject *Py_UNUSED(ignored)) {
    Py_ssize_t full = 0;
    for (Py_ssize_t q = 0; q < self->queries; q++)
        full += self->hit_count[q] >= self->limit + self->oldest;
    return PyLong_FromSsize_t(full);
}

static PyMethodDef ranker_methods[] = {
    {"full_buckets", (PyCFunction)ranker_full_buckets, METH_NOARGS, "How many keys' buckets are full (_judge)."},
    {"candidates", (PyCFunction)ranker_candidates, METH_VARARGS, "A sketch's candidate serials in rank order, or None."},
    {"file", (PyCFunction)ranker_file, METH_VARARGS, "Record a sketch of the batch under its shared keys."},
    {"judge", (PyCFunction)sf_ranker_judge, METH_VARARGS, "Judge the whole batch, as _judge.judge_batch's loop does."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RankerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streamfilter._kernel.Ranker",
    .tp_basicsize = sizeof(Ranker),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A batch's candidates, ranked (_judge._InBatch and _stored_sharers).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ranker_init,
    .tp_dealloc = (destructor)ranker_dealloc,
    .tp_methods = ranker_methods,
};

int sf_add_ranker(PyObject *module) {
    if (sf_intern_names() < 0)
        return -1;
    return PyModule_AddType(module, &RankerType); /* as "Ranker", the last part of tp_name */
}
