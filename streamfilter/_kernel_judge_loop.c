/* The batch judge's loop, compiled: Ranker.judge, which _judge.judge_batch
 * calls where the kernel is built in place of its Python loop.
 *
 * For each sketch of the batch in order, as the loop does: move the clock,
 * take the Ranker's candidates, fetch them (the batch's own recorded posts,
 * else the transaction's post()), verify them (best_match, _kernel_rules.c)
 * or, for a reference, find the post it refers to (_rules.referenced), and
 * record a novel sketch so the later ones see it. Python objects are built
 * where the loop builds them (CachedPost, Match), by calling their types,
 * so the Judgement is the same object for object. tests/test_kernel.py and
 * tests/stores/test_differential.py hold the two loops to it.
 */
#include "_kernel.h"

PyObject *sf_name_timestamp, *sf_name_refers_to, *sf_name_words, *sf_name_shingles, *sf_name_cut_off, *sf_name_post_id,
    *sf_name_packed;

int sf_intern_names(void) {
    const char *names[] = {"timestamp", "refers_to", "words", "shingles", "cut_off", "post_id", "packed"};
    PyObject **slots[] = {&sf_name_timestamp, &sf_name_refers_to, &sf_name_words,  &sf_name_shingles,
                          &sf_name_cut_off,   &sf_name_post_id,   &sf_name_packed};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    return 0;
}

/* What a batch being judged keeps: the posts it recorded (serials from first_serial on). */
typedef struct {
    PyObject *fetch, *posts; /* txn.post; Judgement.posts */
    PyObject *recent;        /* txn.recent_posts: a RecentPosts, or None */
    PyObject *get, *db;      /* txn.record_reader: an LMDB get(key, default, db) and its posts table, or NULL */
    PyObject *cached_post;   /* the CachedPost type */
    long long first_serial;
} Known;

/* A record's id (_records.decode_record) at *at, which it moves past: a new
 * str, or NULL (no error set) for one the kernel leaves to Python: a Bluesky
 * URI, or a record too short for its id. */
static PyObject *record_id(const unsigned char *record, Py_ssize_t size, Py_ssize_t *at) {
    unsigned marker = record[8];
    Py_ssize_t length = marker;
    if (marker == 255) { /* a decimal id, as 8 bytes */
        if (size < 17)
            return NULL;
        unsigned long long number = 0;
        for (int i = 7; i >= 0; i--)
            number = number << 8 | record[9 + i];
        *at = 17;
        return PyUnicode_FromFormat("%llu", number);
    }
    if (marker == 253)
        return NULL;
    *at = 9;
    if (marker == 254) { /* a 2-byte length, then the id */
        if (size < 11)
            return NULL;
        length = record[9] | record[10] << 8;
        *at = 11;
    }
    if (size < *at + length)
        return NULL;
    *at += length;
    PyObject *id = PyUnicode_DecodeUTF8((const char *)record + *at - length, length, "replace");
    if (id == NULL)
        PyErr_Clear();
    return id;
}

/* The post under ``serial`` read from the LMDB posts table and decoded, as
 * PostCache.get does, and kept among the recent posts: a new reference (None
 * when there is no such record), or NULL (no error set) where Python is to
 * read it instead: a read that failed, or a record the kernel leaves to it. */
static PyObject *read_post(const Known *known, int64_t serial) {
    unsigned char key[8];
    for (int i = 0; i < 8; i++)
        key[i] = (unsigned char)((uint64_t)serial >> (56 - 8 * i));
    PyObject *key_bytes = PyBytes_FromStringAndSize((const char *)key, 8), *post = NULL;
    if (key_bytes == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *args[3] = {key_bytes, Py_None, known->db};
    PyObject *value = PyObject_Vectorcall(known->get, args, 3, NULL);
    Py_DECREF(key_bytes);
    if (value == NULL || value == Py_None) {
        PyErr_Clear();
        return value;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(value, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        Py_DECREF(value);
        return NULL;
    }
    Py_ssize_t at = 0;
    PyObject *id = view.len >= 9 ? record_id(view.buf, view.len, &at) : NULL;
    if (id != NULL && (view.len - at) % 4 == 0) {
        double timestamp;
        memcpy(&timestamp, view.buf, 8); /* little-endian, as the kernel is only built where doubles are */
        PyObject *words = PyBytes_FromStringAndSize((const char *)view.buf + at, view.len - at);
        PyObject *when = PyFloat_FromDouble(timestamp);
        if (words != NULL && when != NULL)
            post = PyObject_CallFunctionObjArgs(known->cached_post, when, id, words, NULL);
        Py_XDECREF(words);
        Py_XDECREF(when);
        if (post != NULL)
            sf_keep_recent(known->recent, serial, post);
        else
            PyErr_Clear();
    }
    Py_XDECREF(id);
    PyBuffer_Release(&view);
    Py_DECREF(value);
    return post;
}

/* The post under ``serial``: the batch's own, one of the store's recent posts, or fetch(serial); a new
 * reference, or NULL with an error set. A flood's candidates are mostly recent: no Python call for them. */
static PyObject *post_of(const Known *known, int64_t serial) {
    if (serial >= known->first_serial && serial - known->first_serial < PyList_GET_SIZE(known->posts))
        return Py_NewRef(PyList_GET_ITEM(known->posts, serial - known->first_serial));
    PyObject *post = known->recent == Py_None ? NULL : sf_recent_post(known->recent, serial);
    if (post != NULL)
        return Py_NewRef(post);
    if (known->get != NULL && (post = read_post(known, serial)) != NULL)
        return post;
    PyObject *number = PyLong_FromLongLong(serial);
    if (number == NULL)
        return NULL;
    post = PyObject_CallOneArg(known->fetch, number);
    Py_DECREF(number);
    return post;
}

/* Whether a post, found under the sketch's id key, is the live post it refers to: 1, 0, or -1. */
static int is_referred(PyObject *post, PyObject *refers_to, double after) {
    if (post == Py_None)
        return 0;
    PyObject *post_id = PyObject_GetAttr(post, sf_name_post_id);
    if (post_id == NULL)
        return -1;
    int same = PyObject_RichCompareBool(post_id, refers_to, Py_EQ);
    Py_DECREF(post_id);
    if (same <= 0)
        return same;
    PyObject *timestamp = PyObject_GetAttr(post, sf_name_timestamp);
    if (timestamp == NULL)
        return -1;
    PyObject *later = PyFloat_FromDouble(after);
    int live = later == NULL ? -1 : PyObject_RichCompareBool(timestamp, later, Py_GT);
    Py_DECREF(timestamp);
    Py_XDECREF(later);
    return live;
}

/* A reference's match (_rules.referenced): the candidates newest first, every
 * one fetched as the Python judge fetches them, then the first that is the
 * live post referred to. 1 with *serial set, 0 for none, or -1 with an error set. */
static int referred(const Known *known, const Shared *ranked, Py_ssize_t n, PyObject *refers_to, double after,
                    int64_t *serial) {
    Py_ssize_t i;
    int found = 0;
    int64_t *newest = PyMem_Malloc((n ? n : 1) * sizeof(int64_t));
    PyObject *posts = newest == NULL ? NULL : PyList_New(n);
    if (posts == NULL) {
        if (newest == NULL)
            PyErr_NoMemory();
        PyMem_Free(newest);
        return -1;
    }
    for (i = 0; i < n; i++)
        newest[i] = ranked[i].serial;
    qsort(newest, n, sizeof(int64_t), sf_newest_first);
    for (i = 0; i < n && found >= 0; i++) {
        PyObject *post = post_of(known, newest[i]);
        if (post == NULL)
            found = -1;
        else
            PyList_SET_ITEM(posts, i, post);
    }
    for (i = 0; i < n && found == 0; i++) {
        found = is_referred(PyList_GET_ITEM(posts, i), refers_to, after);
        if (found > 0)
            *serial = newest[i];
    }
    PyMem_Free(newest);
    Py_DECREF(posts);
    return found;
}

/* The candidates of a sketch with text, fetched: a new list, or NULL with an
 * error set. With same_post (a shared index: is_same_post), a candidate that
 * is the sketch itself, recorded by an earlier attempt, is None. */
static PyObject *fetched(const Known *known, const Shared *ranked, Py_ssize_t n, PyObject *sketch,
                         PyObject *same_post) {
    PyObject *posts = PyList_New(n);
    /* A flood's candidates are scattered through the recent posts: their
     * slots are asked of the memory at once, not one miss after another. */
    for (Py_ssize_t i = 0; known->recent != Py_None && i < n; i++)
        sf_recent_prefetch(known->recent, ranked[i].serial);
    for (Py_ssize_t i = 0; posts != NULL && i < n; i++) {
        PyObject *post = post_of(known, ranked[i].serial);
        if (post != NULL && post != Py_None && same_post != Py_None) {
            PyObject *post_id = PyObject_GetAttr(post, sf_name_post_id);
            PyObject *timestamp = post_id == NULL ? NULL : PyObject_GetAttr(post, sf_name_timestamp);
            PyObject *itself =
                timestamp == NULL ? NULL : PyObject_CallFunctionObjArgs(same_post, sketch, post_id, timestamp, NULL);
            int same = itself == NULL ? -1 : PyObject_IsTrue(itself);
            Py_XDECREF(post_id);
            Py_XDECREF(timestamp);
            Py_XDECREF(itself);
            if (same != 0)
                Py_SETREF(post, same < 0 ? NULL : Py_NewRef(Py_None));
        }
        if (post == NULL)
            Py_CLEAR(posts);
        else
            PyList_SET_ITEM(posts, i, post);
    }
    return posts;
}

/* The match of a sketch with text among its candidates (best_match): 1 with
 * *match and *serial set, 0 for none, or -1 with an error set. */
static int matched_by(const Known *known, const Shared *ranked, Py_ssize_t n, PyObject *sketch, PyObject *own,
                      PyObject *same_post, Judged *judged, const Rules *rules, double after, PyObject *match_type,
                      PyObject **match, int64_t *serial) {
    PyObject *posts = fetched(known, ranked, n, sketch, same_post), *shingles = NULL, *cut_off = NULL,
             *words = NULL;
    Py_buffer set = {0};
    int found = -1, have_set = 0;
    Py_ssize_t index;
    double similarity;
    if (posts == NULL || (words = PyObject_GetAttr(own, sf_name_words)) == NULL ||
        (shingles = PyObject_GetAttr(sketch, sf_name_shingles)) == NULL ||
        (cut_off = PyObject_GetAttr(sketch, sf_name_cut_off)) == NULL)
        goto done;
    if (!PyBytes_Check(words) || PyBytes_GET_SIZE(words) % 4) {
        PyErr_SetString(PyExc_TypeError, "a post's words are not bytes of uint32 values");
        goto done;
    }
    if (PyObject_GetBuffer(shingles, &set, PyBUF_SIMPLE) < 0)
        goto done;
    have_set = 1;
    if (set.len % 8) {
        PyErr_SetString(PyExc_ValueError, "a sketch's verification set is not of uint64 values");
        goto done;
    }
    if ((judged->cut_off = PyObject_IsTrue(cut_off)) < 0)
        goto done;
    judged->words = (const uint32_t *)PyBytes_AS_STRING(words);
    judged->count = PyBytes_GET_SIZE(words) / 4;
    judged->set = set.buf;
    judged->set_size = set.len / 8;
    if (sf_best_of(posts, judged, rules, after, &index, &similarity) < 0)
        goto done;
    found = 0;
    if (index >= 0) {
        PyObject *post_id = PyObject_GetAttr(PyList_GET_ITEM(posts, index), sf_name_post_id);
        *match = post_id == NULL ? NULL : PyObject_CallFunction(match_type, "Od", post_id, similarity);
        Py_XDECREF(post_id);
        *serial = ranked[index].serial;
        found = *match == NULL ? -1 : 1;
    }
done:
    if (have_set)
        PyBuffer_Release(&set);
    Py_XDECREF(posts);
    Py_XDECREF(words);
    Py_XDECREF(shingles);
    Py_XDECREF(cut_off);
    return found;
}

/* judge(sketches, fetch, first_serial, clock, ttl, threshold, shingle_size, rules, types, same_post, recent,
 *       reader) -> (matches, matched, recorded, posts, clock, capped)
 * _judge.judge_batch's loop over the whole batch, exactly, for a Ranker not
 * used before: sketches, a list of Sketch; fetch, the transaction's post();
 * types, (CachedPost, Match); same_post, is_same_post for a shared index, or
 * None; recent, the posts fetch finds without a read (a RecentPosts), or
 * None; reader, (get, db) where the kernel may
 * read a post's record itself (LMDB's get and the posts table), or None. The
 * answer is the Judgement's fields. */
PyObject *sf_ranker_judge(Ranker *self, PyObject *args) {
    PyObject *sketches, *cached_post, *match_type, *same_post, *result = NULL;
    Known known;
    double clock, ttl;
    Judged judged;
    Rules rules;
    Py_ssize_t capped = 0; /* sketches with more candidates than are verified */
    PyObject *reader;
    if (!PyArg_ParseTuple(args, "O!OLdddi(ndnnld)(OO)OOO", &PyList_Type, &sketches, &known.fetch, &known.first_serial,
                          &clock, &ttl, &judged.threshold, &judged.shingle_size, &rules.cut_off_min_words,
                          &rules.cut_off_min_similarity, &rules.cut_off_exact_below, &rules.edit_min_words, &rules.edit_max_edits,
                          &rules.edit_min_jaccard, &cached_post, &match_type, &same_post, &known.recent, &reader))
        return NULL;
    if (known.recent != Py_None && !Py_IS_TYPE(known.recent, &RecentPostsType)) {
        PyErr_SetString(PyExc_TypeError, "recent posts must be a RecentPosts, or None");
        return NULL;
    }
    known.get = known.db = NULL;
    known.cached_post = cached_post;
    if (reader != Py_None) {
        if (!PyTuple_Check(reader) || PyTuple_GET_SIZE(reader) != 2 || known.recent == Py_None) {
            PyErr_SetString(PyExc_TypeError, "a record reader is (get, db), beside recent posts to keep its posts in");
            return NULL;
        }
        known.get = PyTuple_GET_ITEM(reader, 0);
        known.db = PyTuple_GET_ITEM(reader, 1);
    }
    if (self->sketch_start == NULL || self->spent || PyList_GET_SIZE(sketches) != self->count ||
        judged.shingle_size < 1 || judged.shingle_size > MAX_SHINGLE || rules.edit_max_edits < 0) {
        PyErr_SetString(PyExc_ValueError, "bad judge arguments (a Ranker judges its own batch, once)");
        return NULL;
    }
    self->spent = 1;
    PyObject *matches = PyList_New(0), *matched = PyDict_New(), *recorded = PyList_New(0);
    known.posts = PyList_New(0);
    if (matches == NULL || matched == NULL || recorded == NULL || known.posts == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < self->count; i++) {
        if (i >= PyList_GET_SIZE(sketches)) { /* a fetch shortened the list */
            PyErr_SetString(PyExc_RuntimeError, "the batch changed while it was judged");
            goto done;
        }
        PyObject *sketch = Py_NewRef(PyList_GET_ITEM(sketches, i)), *own = NULL, *match = NULL;
        PyObject *timestamp = PyObject_GetAttr(sketch, sf_name_timestamp);
        PyObject *refers_to = timestamp == NULL ? NULL : PyObject_GetAttr(sketch, sf_name_refers_to);
        double when = timestamp == NULL ? -1.0 : PyFloat_AsDouble(timestamp);
        int64_t serial = 0;
        int failed = 1, none, found = 0;
        Shared *ranked;
        Py_ssize_t n;
        if (refers_to == NULL || (when == -1.0 && PyErr_Occurred()))
            goto next;
        if (when > clock) /* max(clock, timestamp) */
            clock = when;
        double after = ttl > 0 ? clock - ttl : -Py_HUGE_VAL;
        if ((n = sf_ranked_of(self, i, PyList_GET_SIZE(recorded) > 0, self->verified, &ranked, &none)) < 0)
            goto next;
        if (refers_to != Py_None) {
            if ((found = referred(&known, ranked, n, refers_to, after, &serial)) > 0)
                match = PyObject_CallFunction(match_type, "Od", refers_to, 1.0);
        } else if (!none) {
            capped += n > self->verified;
            if ((own = sf_post_of(cached_post, sketch, timestamp)) != NULL)
                found = matched_by(&known, ranked, n < self->verified ? n : self->verified, sketch, own, same_post,
                                   &judged, &rules, after, match_type, &match, &serial);
        }
        if (found < 0 || (found > 0 && match == NULL) || (refers_to == Py_None && !none && own == NULL))
            goto next;
        if (found) {
            PyObject *key = PyLong_FromSsize_t(i), *value = PyLong_FromLongLong(serial);
            failed = key == NULL || value == NULL || PyList_Append(matches, match) < 0 ||
                     PyDict_SetItem(matched, key, value) < 0;
            Py_XDECREF(key);
            Py_XDECREF(value);
            goto next;
        }
        if (PyList_Append(matches, Py_None) < 0)
            goto next;
        if (refers_to != Py_None) { /* a reference is never recorded */
            failed = 0;
            goto next;
        }
        serial = known.first_serial + PyList_GET_SIZE(recorded);
        if (own == NULL && (own = sf_post_of(cached_post, sketch, timestamp)) == NULL)
            goto next;
        PyObject *index = PyLong_FromSsize_t(i);
        failed = index == NULL || sf_keep_set(own, sketch) < 0 || sf_filed_as(self, i, serial) < 0 ||
                 PyList_Append(recorded, index) < 0 || PyList_Append(known.posts, own) < 0;
        Py_XDECREF(index);
    next:
        Py_DECREF(sketch);
        Py_XDECREF(timestamp);
        Py_XDECREF(refers_to);
        Py_XDECREF(own);
        Py_XDECREF(match);
        if (failed)
            goto done;
    }
    result = Py_BuildValue("(OOOOdn)", matches, matched, recorded, known.posts, clock, capped);
done:
    Py_XDECREF(matches);
    Py_XDECREF(matched);
    Py_XDECREF(recorded);
    Py_XDECREF(known.posts);
    return result;
}
