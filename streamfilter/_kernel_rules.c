/* The verification of candidates, compiled: a post's verification set, the
 * Jaccard of two sets, word edits, and best_match, which applies the rules
 * of _rules.py to a post's ranked candidates in one call.
 *
 * Each function computes exactly what its Python reference in _rules.py
 * does, value for value: verification_set (sorted), jaccard, word_edits,
 * and best_match's Python loop (with under_threshold, edit_similarity and embedded).
 * tests/test_kernel.py holds each to it on generated posts and candidates.
 * Verification sets cross as bytes of sorted native uint64 values without
 * repeats; word hashes as bytes of native uint32 values, in order.
 */
#include <string.h>

#include "_kernel.h"
#include <structmember.h>

/* CachedPost, compiled (_rules.CachedPost is this type where the kernel is
 * built): a stored post's time, id, word hashes and verification set.
 *
 * Unlike a Python class, it is not tracked by the cyclic garbage collector.
 * A post cache holds tens of thousands of these (the memory store, its whole
 * index), and each one tracked made every full collection walk them all: a
 * pause every few seconds of a busy stream (docs/benchmarks.md, "Streaming
 * latency"). It can take no part in a cycle: its fields hold a
 * float, a str, bytes, and None, bytes or a set of ints, and nothing of
 * streamfilter's stores a post in them. */
typedef struct {
    PyObject_HEAD PyObject *timestamp, *post_id, *words, *members, *packed;
} CachedPost;

static PyTypeObject CachedPostType;

/* A candidate's field ``name``, at ``offset`` in a CachedPost: read in place
 * from this module's own type, through getattr from any other; a new
 * reference, or NULL with an error set. Best_of reads three fields of each
 * of a post's candidates, and a getattr is a type lookup each time. */
static PyObject *field_of(PyObject *post, PyObject *name, size_t offset) {
    if (Py_IS_TYPE(post, &CachedPostType)) {
        PyObject *field = *(PyObject **)((char *)post + offset);
        if (field != NULL)
            return Py_NewRef(field);
    }
    return PyObject_GetAttr(post, name);
}

/* The Jaccard of two sorted sets without repeats; -1 when both are empty. */
static double jaccard_of(const uint64_t *x, Py_ssize_t nx, const uint64_t *y, Py_ssize_t ny) {
    Py_ssize_t i = 0, j = 0, shared = 0;
    if (nx + ny == 0)
        return -1.0;
    while (i < nx && j < ny) { /* without branches on the values, which no predictor guesses */
        uint64_t a = x[i], b = y[j];
        shared += a == b;
        i += a <= b;
        j += b <= a;
    }
    return (double)shared / (double)(nx + ny - shared);
}

/* The word-level edit distance of x and y, or limit + 1 once it is known to
 * be over limit, computing only the cells within limit of the diagonal (a
 * cell outside the band counts as over); -1 with MemoryError set. */
static long edits_within(const uint32_t *x, Py_ssize_t n, const uint32_t *y, Py_ssize_t m, long limit) {
    long over = limit + 1, result = over;
    Py_ssize_t i, j;
    if (n - m > limit || m - n > limit)
        return over;
    long *rows = PyMem_Malloc(2 * (m + 1) * sizeof(long));
    if (rows == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    long *previous = rows, *current = rows + m + 1;
    for (j = 0; j <= m; j++)
        previous[j] = current[j] = j <= limit ? j : over;
    for (i = 1; i <= n; i++) {
        Py_ssize_t low = i - limit > 1 ? i - limit : 1, high = i + limit < m ? i + limit : m;
        long least = i <= limit ? i : over;
        current[0] = least;
        if (low - 1 >= 1)
            current[low - 1] = over; /* left of the band */
        if (high + 1 <= m)
            current[high + 1] = over; /* right of it, read by the next row */
        for (j = low; j <= high; j++) {
            long cell = previous[j] + 1;
            if (current[j - 1] + 1 < cell)
                cell = current[j - 1] + 1;
            long diagonal = previous[j - 1] + (x[i - 1] != y[j - 1]);
            if (diagonal < cell)
                cell = diagonal;
            current[j] = cell;
            if (cell < least)
                least = cell;
        }
        if (least > limit)
            goto done;
        long *swap = previous;
        previous = current;
        current = swap;
    }
    result = previous[m] < over ? previous[m] : over;
done:
    PyMem_Free(rows);
    return result;
}

/* verification(words, shingle_size) -> bytes: one post's verification set as
 * sorted native uint64 values (_shingle.verification_set, sorted) */
PyObject *sf_verification(PyObject *self, PyObject *args) {
    Py_buffer view;
    int shingle_size;
    if (!PyArg_ParseTuple(args, "y*i", &view, &shingle_size))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t count = view.len / 4;
    if (shingle_size < 1 || shingle_size > MAX_SHINGLE || view.len % 4) {
        PyErr_SetString(PyExc_ValueError, "bad verification parameters");
    } else {
        result = PyBytes_FromStringAndSize(NULL, count * shingle_size * 8);
        if (result != NULL) {
            Py_ssize_t kept =
                sf_runs_of((const uint32_t *)view.buf, count, shingle_size, (uint64_t *)PyBytes_AS_STRING(result));
            if (_PyBytes_Resize(&result, kept * 8) < 0)
                result = NULL;
        }
    }
    PyBuffer_Release(&view);
    return result;
}

/* jaccard(a, b) -> float: the Jaccard similarity of two sets given as sorted
 * native uint64 values without repeats (_rules.jaccard, exactly) */
PyObject *sf_jaccard(PyObject *self, PyObject *args) {
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "y*y*", &a, &b))
        return NULL;
    double found = jaccard_of((const uint64_t *)a.buf, a.len / 8, (const uint64_t *)b.buf, b.len / 8);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    if (found < 0) {
        PyErr_SetString(PyExc_ZeroDivisionError, "the Jaccard of two empty sets");
        return NULL;
    }
    return PyFloat_FromDouble(found);
}

/* word_edits(first, second, limit) -> int: the word-level edit distance of
 * two posts' word hashes (uint32 buffers), or limit + 1 once it is known to
 * be over limit: _rules.word_edits, exactly. */
PyObject *sf_word_edits(PyObject *self, PyObject *args) {
    Py_buffer first, second;
    int limit;
    long result = -1;
    if (!PyArg_ParseTuple(args, "y*y*i", &first, &second, &limit))
        return NULL;
    if (limit < 0 || first.len % 4 || second.len % 4)
        PyErr_SetString(PyExc_ValueError, "bad word_edits arguments");
    else
        result = edits_within((const uint32_t *)first.buf, first.len / 4, (const uint32_t *)second.buf,
                              second.len / 4, limit);
    PyBuffer_Release(&first);
    PyBuffer_Release(&second);
    return result < 0 ? NULL : PyLong_FromLong(result);
}


/* _rules.may_embed */
static int may_embed(Py_ssize_t length, Py_ssize_t other_length, const Rules *rules) {
    Py_ssize_t shorter = length < other_length ? length : other_length;
    Py_ssize_t longer = length < other_length ? other_length : length;
    return rules->embed_min_words <= shorter && rules->embed_min_share * (double)longer <= (double)shorter &&
           longer <= rules->embed_max_words;
}

/* _rules.embedded: whether the shorter of x and y (at least embed_min_words,
 * which the caller has checked) stands unbroken and in order in the longer. */
static int embedded(const uint32_t *x, Py_ssize_t n, const uint32_t *y, Py_ssize_t m) {
    const uint32_t *shorter = n <= m ? x : y, *longer = n <= m ? y : x;
    Py_ssize_t size = n <= m ? n : m, span = n <= m ? m : n;
    for (Py_ssize_t at = 0; at + size <= span; at++)
        if (longer[at] == shorter[0] && memcmp(longer + at, shorter, size * 4) == 0)
            return 1;
    return 0;
}

/* _rules.under_threshold: ``whole``, the Jaccard of the judged post and a
 * candidate (its words), or what the cut-off, edit or embedded-copy rule raises it to.
 * scratch has room for (judged->count + 1) * k values. -1 with an error set. */
static double raised(double whole, const Judged *judged, const uint32_t *other, Py_ssize_t other_count,
                     const Rules *rules, uint64_t *scratch) {
    double best = whole;
    Py_ssize_t length = judged->count, size;
    if (judged->cut_off && length >= rules->cut_off_min_words && other_count > length) {
        double start = -1.0;
        for (size = length; size <= length + 1; size++) {
            Py_ssize_t kept = sf_runs_of(other, size, judged->shingle_size, scratch);
            double found = jaccard_of(judged->set, judged->set_size, scratch, kept);
            if (found > start)
                start = found;
        }
        double least = judged->threshold > rules->cut_off_min_similarity ? judged->threshold
                                                                         : rules->cut_off_min_similarity;
        if (length < rules->cut_off_exact_below)
            least = 1.0;
        if (start >= least && start > best)
            best = start;
    }
    if (whole >= rules->edit_min_jaccard) {
        double edit = 0.0;
        Py_ssize_t shorter = length < other_count ? length : other_count;
        Py_ssize_t longer = length < other_count ? other_count : length;
        if (shorter >= rules->edit_min_words) {
            long edits = edits_within(judged->words, length, other, other_count, rules->edit_max_edits);
            if (edits < 0)
                return -1.0;
            if (edits <= rules->edit_max_edits)
                edit = 1.0 - (double)edits / (double)longer;
        }
        if (edit > best)
            best = edit;
    }
    if (best < judged->threshold && may_embed(length, other_count, rules) &&
        embedded(judged->words, length, other, other_count))
        best = 1.0; /* the Jaccard of the shorter and the words of the longer that hold it */
    return best;
}

/* A candidate's verification set, built from its words on first use and
 * kept in its ``packed``; a new reference, or NULL with an error set. */
static PyObject *packed_set(PyObject *post, PyObject *words, int shingle_size) {
    PyObject *packed = field_of(post, sf_name_packed, offsetof(CachedPost, packed));
    if (packed == NULL || packed != Py_None)
        return packed;
    Py_DECREF(packed);
    Py_ssize_t count = PyBytes_GET_SIZE(words) / 4;
    packed = PyBytes_FromStringAndSize(NULL, count * shingle_size * 8);
    if (packed == NULL)
        return NULL;
    Py_ssize_t kept = sf_runs_of((const uint32_t *)PyBytes_AS_STRING(words), count, shingle_size,
                                 (uint64_t *)PyBytes_AS_STRING(packed));
    if (_PyBytes_Resize(&packed, kept * 8) < 0)
        return NULL;
    if (Py_IS_TYPE(post, &CachedPostType)) {
        Py_XSETREF(((CachedPost *)post)->packed, Py_NewRef(packed));
    } else if (PyObject_SetAttr(post, sf_name_packed, packed) < 0) {
        Py_DECREF(packed);
        return NULL;
    }
    return packed;
}

int sf_ends_search(PyObject *post, const Judged *judged, double after) {
    if (!Py_IS_TYPE(post, &CachedPostType))
        return 0;
    CachedPost *cached = (CachedPost *)post;
    PyObject *words = cached->words;
    return cached->timestamp != NULL && PyFloat_CheckExact(cached->timestamp) &&
           PyFloat_AS_DOUBLE(cached->timestamp) > after && words != NULL && PyBytes_CheckExact(words) &&
           PyBytes_GET_SIZE(words) == judged->count * 4 &&
           memcmp(PyBytes_AS_STRING(words), judged->words, judged->count * 4) == 0;
}

/* best_match's loop: see _kernel.h. */
int sf_best_of(PyObject *posts, const Judged *judged, const Rules *rules, double after, Py_ssize_t *index,
               double *similarity) {
    uint64_t *scratch = NULL;
    Py_ssize_t best_index = -1, i;
    double best = 0.0;
    int failed = 0;
    for (i = 0; i < PyList_GET_SIZE(posts); i++) { /* each candidate's fields, asked of the memory at once */
        PyObject *post = PyList_GET_ITEM(posts, i);
        if (!Py_IS_TYPE(post, &CachedPostType))
            continue;
        CachedPost *cached = (CachedPost *)post;
        PREFETCH(cached->timestamp);
        PREFETCH(cached->words);
        PREFETCH(cached->packed);
        PREFETCH((char *)cached->packed + 64);
        PREFETCH((char *)cached->packed + 128);
    }
    for (i = 0; i < PyList_GET_SIZE(posts); i++) {
        PyObject *post = PyList_GET_ITEM(posts, i);
        if (post == Py_None)
            continue;
        Py_INCREF(post); /* the list may change under a setattr's side effects */
        PyObject *timestamp = field_of(post, sf_name_timestamp, offsetof(CachedPost, timestamp));
        double when = timestamp == NULL ? -1.0 : PyFloat_AsDouble(timestamp);
        Py_XDECREF(timestamp);
        PyObject *other = NULL, *packed = NULL;
        double found;
        failed = timestamp == NULL || (when == -1.0 && PyErr_Occurred());
        if (failed || when <= after)
            goto next;
        other = field_of(post, sf_name_words, offsetof(CachedPost, words));
        if (other == NULL || !PyBytes_Check(other) || PyBytes_GET_SIZE(other) % 4) {
            if (other != NULL)
                PyErr_SetString(PyExc_TypeError, "a candidate's words are not bytes of uint32 values");
            failed = 1;
            goto next;
        }
        Py_ssize_t other_count = PyBytes_GET_SIZE(other) / 4;
        const uint32_t *other_words = (const uint32_t *)PyBytes_AS_STRING(other);
        if (other_count == judged->count && memcmp(other_words, judged->words, judged->count * 4) == 0) {
            best_index = i; /* the same words in the same order: the same set, and the search ends */
            best = 1.0;
            Py_DECREF(other);
            Py_DECREF(post);
            break;
        }
        packed = packed_set(post, other, judged->shingle_size);
        if (packed == NULL || !PyBytes_Check(packed) || PyBytes_GET_SIZE(packed) % 8) {
            if (packed != NULL)
                PyErr_SetString(PyExc_TypeError, "a candidate's verification set is not bytes of uint64 values");
            failed = 1;
            goto next;
        }
        found = jaccard_of(judged->set, judged->set_size, (const uint64_t *)PyBytes_AS_STRING(packed),
                           PyBytes_GET_SIZE(packed) / 8);
        if (found < 0) {
            PyErr_SetString(PyExc_ZeroDivisionError, "the Jaccard of two empty sets");
            failed = 1;
            goto next;
        }
        if (found < judged->threshold && (found >= rules->edit_min_jaccard || judged->cut_off ||
                                          may_embed(judged->count, other_count, rules))) { /* the rarer cases */
            if (scratch == NULL &&
                (scratch = PyMem_Malloc((judged->count + 1) * judged->shingle_size * sizeof(uint64_t))) == NULL) {
                PyErr_NoMemory();
                failed = 1;
                goto next;
            }
            found = raised(found, judged, other_words, other_count, rules, scratch);
            failed = found < 0;
        }
        if (!failed && found >= judged->threshold && (best_index < 0 || found > best)) {
            best_index = i;
            best = found;
        }
    next:
        Py_XDECREF(other);
        Py_XDECREF(packed);
        Py_DECREF(post);
        if (failed)
            break;
        if (best_index == i && best == 1.0)
            break;
    }
    PyMem_Free(scratch);
    *index = best_index;
    *similarity = best;
    return failed ? -1 : 0;
}

/* best_match(posts, words, set, after, threshold, shingle_size, cut_off, rules)
 *   -> (index, similarity) or None
 * posts: the candidates in rank order, a list of CachedPost or None; words:
 * the judged post's word hashes (bytes of uint32); set: its verification
 * set (a buffer of sorted uint64); rules: _rules._KERNEL_RULES.
 * _rules.best_match's Python loop, exactly; a candidate's verification set is
 * kept in its ``packed`` for its next comparison. */
PyObject *sf_best_match(PyObject *self, PyObject *args) {
    PyObject *posts, *result = NULL;
    Py_buffer words, set;
    double after, best;
    Py_ssize_t best_index;
    Judged judged;
    Rules rules;
    if (!PyArg_ParseTuple(args, "O!y*y*ddip(ndnnldndn)", &PyList_Type, &posts, &words, &set, &after, &judged.threshold,
                          &judged.shingle_size, &judged.cut_off, &rules.cut_off_min_words,
                          &rules.cut_off_min_similarity, &rules.cut_off_exact_below, &rules.edit_min_words, &rules.edit_max_edits,
                          &rules.edit_min_jaccard, &rules.embed_min_words, &rules.embed_min_share,
                          &rules.embed_max_words))
        return NULL;
    if (words.len % 4 || set.len % 8 || judged.shingle_size < 1 || judged.shingle_size > MAX_SHINGLE ||
        rules.edit_max_edits < 0 || rules.embed_min_words < 1) {
        PyErr_SetString(PyExc_ValueError, "bad best_match arguments");
        goto done;
    }
    judged.words = (const uint32_t *)words.buf;
    judged.count = words.len / 4;
    judged.set = (const uint64_t *)set.buf;
    judged.set_size = set.len / 8;
    if (sf_best_of(posts, &judged, &rules, after, &best_index, &best) == 0)
        result = best_index < 0 ? Py_NewRef(Py_None) : Py_BuildValue("(nd)", best_index, best);
done:
    PyBuffer_Release(&words);
    PyBuffer_Release(&set);
    return result;
}


static int cached_post_init(CachedPost *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"timestamp", "post_id", "words", "members", NULL};
    PyObject *timestamp, *post_id, *words, *members = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|O:CachedPost", names, &timestamp, &post_id, &words, &members))
        return -1;
    Py_INCREF(timestamp);
    Py_XSETREF(self->timestamp, timestamp);
    Py_INCREF(post_id);
    Py_XSETREF(self->post_id, post_id);
    Py_INCREF(words);
    Py_XSETREF(self->words, words);
    Py_INCREF(members);
    Py_XSETREF(self->members, members);
    Py_INCREF(Py_None);
    Py_XSETREF(self->packed, Py_None);
    return 0;
}

static void cached_post_dealloc(CachedPost *self) {
    Py_XDECREF(self->timestamp);
    Py_XDECREF(self->post_id);
    Py_XDECREF(self->words);
    Py_XDECREF(self->members);
    Py_XDECREF(self->packed);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A recorded post's verification set, kept with it from its sketch's (the
 * same set: sorted, without repeats, of native uint64 values), so that the
 * posts after it compare with it without building it from its words; 0, or
 * -1 with an error set. */
int sf_keep_set(PyObject *post, const uint64_t *set, Py_ssize_t size) {
    if (!Py_IS_TYPE(post, &CachedPostType))
        return 0;
    PyObject *packed = PyBytes_FromStringAndSize((const char *)set, size * 8);
    if (packed == NULL)
        return -1;
    Py_XSETREF(((CachedPost *)post)->packed, packed);
    return 0;
}

PyObject *sf_new_post(double timestamp, PyObject *post_id, const uint32_t *words, Py_ssize_t count) {
    CachedPost *post = (CachedPost *)PyType_GenericAlloc(&CachedPostType, 0);
    if (post == NULL)
        return NULL;
    post->timestamp = PyFloat_FromDouble(timestamp);
    post->post_id = Py_NewRef(post_id);
    /* little-endian uint32, as they lie: the kernel is built only where they are */
    post->words = PyBytes_FromStringAndSize((const char *)words, count * 4);
    post->members = Py_NewRef(Py_None);
    post->packed = Py_NewRef(Py_None);
    if (post->timestamp == NULL || post->words == NULL)
        Py_CLEAR(post);
    return (PyObject *)post;
}

static PyMemberDef cached_post_members[] = {
    {"timestamp", T_OBJECT_EX, offsetof(CachedPost, timestamp), 0, "Its event time, seconds since the epoch."},
    {"post_id", T_OBJECT_EX, offsetof(CachedPost, post_id), 0, "Its id."},
    {"words", T_OBJECT_EX, offsetof(CachedPost, words), 0, "Its word hashes, bytes of little-endian uint32."},
    {"members", T_OBJECT, offsetof(CachedPost, members), 0, "Its verification set as a Python set, or None."},
    {"packed", T_OBJECT, offsetof(CachedPost, packed), 0, "Its verification set as sorted uint64 bytes, or None."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject CachedPostType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streamfilter._kernel.CachedPost",
    .tp_basicsize = sizeof(CachedPost),
    .tp_flags = Py_TPFLAGS_DEFAULT, /* no Py_TPFLAGS_HAVE_GC: see above */
    .tp_doc = "What verification needs of one stored post (_rules.CachedPost).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)cached_post_init,
    .tp_dealloc = (destructor)cached_post_dealloc,
    .tp_members = cached_post_members,
};

int sf_add_cached_post(PyObject *module) {
    return PyModule_AddType(module, &CachedPostType);
}
