/* The batch judge's loop, compiled: Ranker.judge, which _judge.judge_batch
 * calls where the kernel is built in place of its Python loop
 * (_judge._py_judge_candidates).
 *
 * It reads the batch's sketches as their columns (_values.Sketches): lists
 * of ids and of reposted ids, and buffers of times, flags, offsets, shingles
 * and word hashes. For each sketch in order, as the loop does: move the
 * clock, take the Ranker's candidates, fetch them (the batch's own recorded
 * posts, else the transaction's post()), verify them (best_match,
 * _kernel_rules.c) or, for a reference, find the post it refers to
 * (_rules.referenced), and record a novel sketch so the later ones see it,
 * as a CachedPost (the kernel's own type). The matches come back as columns
 * (_values.Matches). tests/test_kernel.py and tests/stores/test_differential.py
 * hold the two loops to the same Judgement.
 */
#include "_kernel.h"

PyObject *sf_name_timestamp, *sf_name_words, *sf_name_post_id, *sf_name_packed;

int sf_intern_names(void) {
    const char *names[] = {"timestamp", "words", "post_id", "packed"};
    PyObject **slots[] = {&sf_name_timestamp, &sf_name_words, &sf_name_post_id, &sf_name_packed};
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
    long long first_serial;
} Known;

/* The batch's sketches, as the columns of _values.Sketches. */
typedef struct {
    PyObject *post_ids, *refers_to; /* lists of str, and of str or None */
    Py_buffer times, made_up, cut_off, shingle_ends, shingles, word_ends, words;
    Py_ssize_t count;
} Columns;

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
        post = sf_new_post(timestamp, id, (const uint32_t *)((const char *)view.buf + at), (view.len - at) / 4);
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

/* Whether a candidate is the sketch itself, recorded by an earlier attempt
 * at its batch (_base.is_same_post): its id, and its time where the id was
 * made up. 1, 0, or -1 with an error set. */
static int is_itself(PyObject *post, const Columns *batch, Py_ssize_t i) {
    PyObject *post_id = PyObject_GetAttr(post, sf_name_post_id);
    if (post_id == NULL)
        return -1;
    int same = PyObject_RichCompareBool(post_id, PyList_GET_ITEM(batch->post_ids, i), Py_EQ);
    Py_DECREF(post_id);
    if (same <= 0 || !((const unsigned char *)batch->made_up.buf)[i])
        return same;
    PyObject *timestamp = PyObject_GetAttr(post, sf_name_timestamp);
    if (timestamp == NULL)
        return -1;
    double when = PyFloat_AsDouble(timestamp);
    Py_DECREF(timestamp);
    if (when == -1.0 && PyErr_Occurred())
        return -1;
    return when == ((const double *)batch->times.buf)[i];
}

/* The candidates of sketch i, with text, fetched in rank order: a new list,
 * or NULL with an error set. Where replays are seen (a shared index), a
 * candidate that is the sketch itself, recorded by an earlier attempt, is
 * None. The list ends at a candidate that ends sf_best_of's search (a live
 * copy of the very words): those after it would be fetched for nothing. */
static PyObject *fetched(const Known *known, const Shared *ranked, Py_ssize_t n, const Columns *batch, Py_ssize_t i,
                         int replays_seen, const Judged *judged, double after) {
    PyObject *posts = PyList_New(n);
    /* A flood's candidates are scattered through the recent posts: their
     * slots are asked of the memory at once, not one miss after another. */
    for (Py_ssize_t at = 0; known->recent != Py_None && at < n; at++)
        sf_recent_prefetch(known->recent, ranked[at].serial);
    for (Py_ssize_t at = 0; posts != NULL && at < n; at++) {
        PyObject *post = post_of(known, ranked[at].serial);
        if (post != NULL && post != Py_None && replays_seen) {
            int same = is_itself(post, batch, i);
            if (same != 0)
                Py_SETREF(post, same < 0 ? NULL : Py_NewRef(Py_None));
        }
        if (post == NULL) {
            Py_CLEAR(posts);
            break;
        }
        PyList_SET_ITEM(posts, at, post);
        if (at + 1 < n && sf_ends_search(post, judged, after) && PyList_SetSlice(posts, at + 1, n, NULL) < 0)
            Py_CLEAR(posts);
        if (posts == NULL || PyList_GET_SIZE(posts) == at + 1)
            break;
    }
    return posts;
}

/* Row i's values of a column cut by ``ends`` (``size`` values): 0 with
 * *start and *count set, or -1 with an error set. Read again at each use,
 * since a fetch runs Python, which could write into the caller's arrays. */
static int span_of(const Py_buffer *ends, Py_ssize_t size, Py_ssize_t i, Py_ssize_t *start, Py_ssize_t *count) {
    const int64_t *end = ends->buf;
    if (end[i] < 0 || end[i] > end[i + 1] || end[i + 1] > size) {
        PyErr_SetString(PyExc_ValueError, "a sketch's offsets lie outside its batch's values");
        return -1;
    }
    *start = end[i];
    *count = end[i + 1] - end[i];
    return 0;
}

/* Sketch i's words and verification set, into *judged: 0, or -1 with an error set. */
static int judged_as(const Columns *batch, Py_ssize_t i, Judged *judged) {
    Py_ssize_t word, set;
    if (span_of(&batch->word_ends, batch->words.len / 4, i, &word, &judged->count) < 0 ||
        span_of(&batch->shingle_ends, batch->shingles.len / 8, i, &set, &judged->set_size) < 0)
        return -1;
    judged->words = (const uint32_t *)batch->words.buf + word;
    judged->set = (const uint64_t *)batch->shingles.buf + set;
    judged->cut_off = ((const unsigned char *)batch->cut_off.buf)[i] != 0;
    return 0;
}

/* The match of sketch i, with text, among its candidates (best_match): 1
 * with *original (a new reference to the post's id), *similarity and
 * *serial set, 0 for none, or -1 with an error set. */
static int matched_by(const Known *known, const Shared *ranked, Py_ssize_t n, const Columns *batch, Py_ssize_t i,
                      int replays_seen, Judged *judged, const Rules *rules, double after, PyObject **original,
                      double *similarity, int64_t *serial) {
    if (judged_as(batch, i, judged) < 0)
        return -1;
    PyObject *posts = fetched(known, ranked, n, batch, i, replays_seen, judged, after);
    if (posts == NULL)
        return -1;
    /* a fetch runs Python, which could write into the batch's arrays: the spans are read again */
    if (judged_as(batch, i, judged) < 0) {
        Py_DECREF(posts);
        return -1;
    }
    Py_ssize_t index;
    int found = sf_best_of(posts, judged, rules, after, &index, similarity) < 0 ? -1 : 0;
    if (found == 0 && index >= 0) {
        *original = PyObject_GetAttr(PyList_GET_ITEM(posts, index), sf_name_post_id);
        *serial = ranked[index].serial;
        found = *original == NULL ? -1 : 1;
    }
    Py_DECREF(posts);
    return found;
}

/* Sketch i as the post it is recorded as: a new CachedPost, or NULL with an error set. */
static PyObject *own_post(const Columns *batch, Py_ssize_t i) {
    Py_ssize_t start, count;
    if (span_of(&batch->word_ends, batch->words.len / 4, i, &start, &count) < 0)
        return NULL;
    return sf_new_post(((const double *)batch->times.buf)[i], PyList_GET_ITEM(batch->post_ids, i),
                       (const uint32_t *)batch->words.buf + start, count);
}

/* Whether the columns are a batch of ``count`` sketches whose offsets stay
 * within their values: 1, or 0 with an error set. */
static int well_formed(const Columns *batch, Py_ssize_t count) {
    Py_ssize_t ends = (count + 1) * (Py_ssize_t)sizeof(int64_t);
    if (PyList_GET_SIZE(batch->post_ids) != count || PyList_GET_SIZE(batch->refers_to) != count ||
        batch->times.len != count * (Py_ssize_t)sizeof(double) || batch->made_up.len != count ||
        batch->cut_off.len != count || batch->shingle_ends.len != ends || batch->word_ends.len != ends ||
        batch->shingles.len % 8 || batch->words.len % 4) {
        PyErr_SetString(PyExc_ValueError, "the sketches' columns are not of one batch of the Ranker's size");
        return 0;
    }
    for (Py_ssize_t i = 0, start, values; i < count; i++) {
        if (span_of(&batch->shingle_ends, batch->shingles.len / 8, i, &start, &values) < 0 ||
            span_of(&batch->word_ends, batch->words.len / 4, i, &start, &values) < 0)
            return 0;
        if (!PyUnicode_Check(PyList_GET_ITEM(batch->post_ids, i))) {
            PyErr_SetString(PyExc_TypeError, "a sketch's post id is not a str");
            return 0;
        }
    }
    return 1;
}

/* Appends one row to the matches' columns: 0, or -1 with an error set. */
static int add_match(PyObject *duplicate_of, PyObject *similarities, PyObject *original, double similarity) {
    if (original == NULL)
        return PyList_Append(duplicate_of, Py_None) < 0 || PyList_Append(similarities, Py_None) < 0 ? -1 : 0;
    PyObject *value = PyFloat_FromDouble(similarity);
    int failed = value == NULL || PyList_Append(duplicate_of, original) < 0 || PyList_Append(similarities, value) < 0;
    Py_XDECREF(value);
    return failed ? -1 : 0;
}

/* judge(columns, fetch, first_serial, clock, ttl, threshold, shingle_size, rules, replays_seen, recent, reader)
 *   -> (duplicate_of, similarity, matched, recorded, posts, clock, capped)
 * _judge.judge_batch's loop over the whole batch, exactly, for a Ranker not
 * used before: columns, Sketches.columns(); fetch, the transaction's post();
 * replays_seen, whether a candidate may be the sketch itself (a shared index:
 * is_same_post); recent, the posts fetch finds without a read (a
 * RecentPosts), or None; reader, (get, db) where the kernel may read a post's
 * record itself (LMDB's get and the posts table), or None. The answer is the
 * Judgement's fields, its matches as their two columns. */
PyObject *sf_ranker_judge(Ranker *self, PyObject *args) {
    PyObject *key_ends, *keys, *result = NULL, *reader;
    Known known;
    Columns batch;
    double clock, ttl;
    Judged judged;
    Rules rules;
    int replays_seen, held = 0;
    Py_ssize_t capped = 0; /* sketches with more candidates than are verified */
    if (!PyArg_ParseTuple(args, "(O!y*y*y*O!OOy*y*y*y*)OLdddi(ndnnldndn)pOO", &PyList_Type, &batch.post_ids, &batch.times,
                          &batch.made_up, &batch.cut_off, &PyList_Type, &batch.refers_to, &key_ends, &keys,
                          &batch.shingle_ends, &batch.shingles, &batch.word_ends, &batch.words, &known.fetch,
                          &known.first_serial, &clock, &ttl, &judged.threshold, &judged.shingle_size,
                          &rules.cut_off_min_words, &rules.cut_off_min_similarity, &rules.cut_off_exact_below,
                          &rules.edit_min_words, &rules.edit_max_edits, &rules.edit_min_jaccard, &rules.embed_min_words,
                          &rules.embed_min_share, &rules.embed_max_words, &replays_seen,
                          &known.recent, &reader))
        return NULL;
    Py_buffer *views[] = {&batch.times,     &batch.made_up,   &batch.cut_off, &batch.shingle_ends,
                          &batch.shingles,  &batch.word_ends, &batch.words};
    PyObject *duplicate_of = NULL, *similarities = NULL, *matched = NULL, *recorded = NULL;
    known.posts = NULL;
    known.get = known.db = NULL;
    if (known.recent != Py_None && !Py_IS_TYPE(known.recent, &RecentPostsType)) {
        PyErr_SetString(PyExc_TypeError, "recent posts must be a RecentPosts, or None");
        goto done;
    }
    if (reader != Py_None) {
        if (!PyTuple_Check(reader) || PyTuple_GET_SIZE(reader) != 2 || known.recent == Py_None) {
            PyErr_SetString(PyExc_TypeError, "a record reader is (get, db), beside recent posts to keep its posts in");
            goto done;
        }
        known.get = PyTuple_GET_ITEM(reader, 0);
        known.db = PyTuple_GET_ITEM(reader, 1);
    }
    if (self->sketch_start == NULL || self->spent || judged.shingle_size < 1 || judged.shingle_size > MAX_SHINGLE ||
        rules.edit_max_edits < 0 || rules.embed_min_words < 1) {
        PyErr_SetString(PyExc_ValueError, "bad judge arguments (a Ranker judges its own batch, once)");
        goto done;
    }
    if (!well_formed(&batch, self->count))
        goto done;
    self->spent = 1;
    /* The lists stay the caller's, who may change them while a fetch runs: the loop reads copies. */
    batch.post_ids = PyList_GetSlice(batch.post_ids, 0, self->count);
    batch.refers_to = PyList_GetSlice(batch.refers_to, 0, self->count);
    held = 1;
    duplicate_of = PyList_New(0), similarities = PyList_New(0), matched = PyDict_New(), recorded = PyList_New(0);
    known.posts = PyList_New(0);
    if (batch.post_ids == NULL || batch.refers_to == NULL || duplicate_of == NULL || similarities == NULL ||
        matched == NULL || recorded == NULL || known.posts == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < self->count; i++) {
        PyObject *refers_to = PyList_GET_ITEM(batch.refers_to, i), *own = NULL, *original = NULL;
        double when = ((const double *)batch.times.buf)[i], similarity = 1.0;
        int64_t serial = 0;
        int failed = 1, none, found = 0;
        Shared *ranked;
        Py_ssize_t n;
        if (when > clock) /* max(clock, timestamp) */
            clock = when;
        double after = ttl > 0 ? clock - ttl : -Py_HUGE_VAL;
        if ((n = sf_ranked_of(self, i, PyList_GET_SIZE(recorded) > 0, self->verified, &ranked, &none)) < 0)
            goto next;
        if (refers_to != Py_None) {
            if ((found = referred(&known, ranked, n, refers_to, after, &serial)) > 0)
                original = Py_NewRef(refers_to);
        } else if (!none) {
            capped += n > self->verified;
            found = matched_by(&known, ranked, n < self->verified ? n : self->verified, &batch, i, replays_seen,
                               &judged, &rules, after, &original, &similarity, &serial);
        }
        if (found < 0 || add_match(duplicate_of, similarities, original, similarity) < 0)
            goto next;
        if (found) {
            PyObject *key = PyLong_FromSsize_t(i), *value = PyLong_FromLongLong(serial);
            failed = key == NULL || value == NULL || PyDict_SetItem(matched, key, value) < 0;
            Py_XDECREF(key);
            Py_XDECREF(value);
            goto next;
        }
        if (refers_to != Py_None) { /* a reference is never recorded */
            failed = 0;
            goto next;
        }
        serial = known.first_serial + PyList_GET_SIZE(recorded);
        Py_ssize_t set, set_size;
        if ((own = own_post(&batch, i)) == NULL ||
            span_of(&batch.shingle_ends, batch.shingles.len / 8, i, &set, &set_size) < 0)
            goto next;
        PyObject *index = PyLong_FromSsize_t(i);
        failed = index == NULL || sf_keep_set(own, (const uint64_t *)batch.shingles.buf + set, set_size) < 0 ||
                 sf_filed_as(self, i, serial) < 0 || PyList_Append(recorded, index) < 0 ||
                 PyList_Append(known.posts, own) < 0;
        Py_XDECREF(index);
    next:
        Py_XDECREF(own);
        Py_XDECREF(original);
        if (failed)
            goto done;
    }
    result = Py_BuildValue("(OOOOOdn)", duplicate_of, similarities, matched, recorded, known.posts, clock, capped);
done:
    for (size_t v = 0; v < sizeof(views) / sizeof(views[0]); v++)
        PyBuffer_Release(views[v]);
    if (held) {
        Py_XDECREF(batch.post_ids);
        Py_XDECREF(batch.refers_to);
    }
    Py_XDECREF(duplicate_of);
    Py_XDECREF(similarities);
    Py_XDECREF(matched);
    Py_XDECREF(recorded);
    Py_XDECREF(known.posts);
    return result;
}
