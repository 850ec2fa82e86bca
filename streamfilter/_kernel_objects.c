/* The replay's per-post objects, built in C: a worker's batch rebuilt as
 * Entry, Post and Sketch objects (_prepared.PreparedBatch.from_wire and
 * Columns.sketches), its Verdict objects (Engine._verdicts), and the bytes
 * of its --verdicts lines (Verdict.json_line).
 *
 * Post, Entry, Sketch and Verdict are slotted dataclasses whose __init__
 * only stores each field; here each object is allocated by its type and its
 * slots are filled directly, by the offsets their member descriptors give.
 * The descriptors come from Python in field order and are checked here:
 * each must be a writable object slot of that very type, so the objects are
 * the ones __init__ would build, field for field. Should one of those
 * __init__s ever do more than store its fields, this file must do it too.
 * The Python loops stay as the reference: tests/test_kernel_objects.py
 * holds each loop here to its own, on every fixture. */
#include "_kernel.h"

#include <structmember.h>

#define POST_FIELDS 8
#define ENTRY_FIELDS 9
#define ROW_FIELDS 7  /* line, kind, reason, sketch index, reference, the post's fields or None, deletes */
#define POST_VALUES 7 /* id, text, timestamp, retweet of, is retweet, platform, author (raw is the record's) */

/* The object slot at ``offset`` bytes into ``object``. */
#define SLOT(object, offset) (*(PyObject **)((char *)(object) + (offset)))

/* The offsets of ``type``'s slots, from ``slots``, its member descriptors in
 * field order (a tuple of ``count``); 0, or -1 with an error set. */
static int slot_offsets(PyTypeObject *type, PyObject *slots, Py_ssize_t count, Py_ssize_t *offsets) {
    if (!PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != count) {
        PyErr_Format(PyExc_TypeError, "%s: expected a tuple of %zd slot descriptors", type->tp_name, count);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *slot = PyTuple_GET_ITEM(slots, i);
        if (!Py_IS_TYPE(slot, &PyMemberDescr_Type) || PyDescr_TYPE(slot) != type ||
            ((PyMemberDescrObject *)slot)->d_member->type != T_OBJECT_EX ||
            (((PyMemberDescrObject *)slot)->d_member->flags & READONLY)) {
            PyErr_Format(PyExc_TypeError, "%s: field %zd is not one of its writable object slots", type->tp_name, i);
            return -1;
        }
        offsets[i] = ((PyMemberDescrObject *)slot)->d_member->offset;
    }
    return 0;
}

/* A new object of ``type`` whose slots at ``offsets`` hold ``values`` (borrowed); NULL with an error set. */
static PyObject *filled(PyTypeObject *type, const Py_ssize_t *offsets, PyObject *const *values, Py_ssize_t count) {
    PyObject *object = type->tp_alloc(type, 0);
    if (object == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++)
        SLOT(object, offsets[i]) = Py_NewRef(values[i]);
    return object;
}

/* entries_from_wire(rows, raw_of, Post, post_slots, Entry, entry_slots): the
 * batch's Entry objects, each with its Post (from_wire's loop). */
PyObject *sf_entries_from_wire(PyObject *self, PyObject *args) {
    PyObject *rows, *raw_of, *post_slots, *entry_slots;
    PyTypeObject *post_type, *entry_type;
    if (!PyArg_ParseTuple(args, "O!O!O!OO!O", &PyList_Type, &rows, &PyDict_Type, &raw_of, &PyType_Type, &post_type,
                          &post_slots, &PyType_Type, &entry_type, &entry_slots))
        return NULL;
    Py_ssize_t post_offsets[POST_FIELDS], entry_offsets[ENTRY_FIELDS];
    if (slot_offsets(post_type, post_slots, POST_FIELDS, post_offsets) < 0 ||
        slot_offsets(entry_type, entry_slots, ENTRY_FIELDS, entry_offsets) < 0)
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(rows);
    PyObject *entries = PyList_New(count);
    if (entries == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != ROW_FIELDS) {
            PyErr_Format(PyExc_ValueError, "entry row %zd is not a tuple of %d", i, ROW_FIELDS);
            goto failed;
        }
        PyObject *line = PyTuple_GET_ITEM(row, 0), *fields = PyTuple_GET_ITEM(row, 5);
        PyObject *raw = PyDict_GetItemWithError(raw_of, line); /* borrowed */
        if (raw == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, line);
            goto failed;
        }
        PyObject *post = Py_None;
        if (fields != Py_None) {
            if (!PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != POST_VALUES) {
                PyErr_Format(PyExc_ValueError, "entry row %zd: a post's fields are not a tuple of %d", i, POST_VALUES);
                goto failed;
            }
            PyObject *const *value = &PyTuple_GET_ITEM(fields, 0);
            PyObject *values[POST_FIELDS] = {value[0], value[1], value[2], value[3], value[4], value[5], raw, value[6]};
            if ((post = filled(post_type, post_offsets, values, POST_FIELDS)) == NULL)
                goto failed;
        }
        PyObject *const *value = &PyTuple_GET_ITEM(row, 0);
        PyObject *values[ENTRY_FIELDS] = {line, raw, post, value[1], value[2], value[3], value[4], Py_False, value[6]};
        PyObject *entry = filled(entry_type, entry_offsets, values, ENTRY_FIELDS);
        if (post != Py_None)
            Py_DECREF(post);
        if (entry == NULL)
            goto failed;
        PyList_SET_ITEM(entries, i, entry);
    }
    return entries;
failed:
    Py_DECREF(entries);
    return NULL;
}

/* The bytes of a batch's --verdicts lines, each Verdict.json_line() and a
 * newline, in UTF-8 (_post.verdict_lines). */

typedef struct {
    char *data;
    Py_ssize_t size, room;
} Buffer;

static int reserve(Buffer *buffer, Py_ssize_t more) {
    if (buffer->size + more <= buffer->room)
        return 0;
    Py_ssize_t room = (buffer->room + more) * 2;
    char *data = PyMem_Realloc(buffer->data, room);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    buffer->data = data;
    buffer->room = room;
    return 0;
}

static int put(Buffer *buffer, const char *text, Py_ssize_t size) {
    if (reserve(buffer, size) < 0)
        return -1;
    memcpy(buffer->data + buffer->size, text, size);
    buffer->size += size;
    return 0;
}

#define PUT_LITERAL(buffer, text) put((buffer), (text), (Py_ssize_t)sizeof(text) - 1)

/* ``text`` (a str) as json.encoder.encode_basestring writes it: quoted, with
 * '"', '\\' and the control characters escaped, the rest as it is. UTF-8 of
 * a non-ASCII character holds no byte below 0x80, so escaping bytes escapes
 * characters. 1 when the text has a lone surrogate (no UTF-8 for it: the
 * caller takes the Python path), 0, or -1 with an error set. */
static int put_json_string(Buffer *buffer, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "a verdict's id or reason is not a str");
        return -1;
    }
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size);
    if (utf8 == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return -1;
        PyErr_Clear();
        return 1;
    }
    if (reserve(buffer, size * 6 + 2) < 0)
        return -1;
    static const char hex[] = "0123456789abcdef";
    char *out = buffer->data + buffer->size;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < size; i++) {
        unsigned char c = (unsigned char)utf8[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
        case '"': *out++ = '"'; break;
        case '\\': *out++ = '\\'; break;
        case '\b': *out++ = 'b'; break;
        case '\f': *out++ = 'f'; break;
        case '\n': *out++ = 'n'; break;
        case '\r': *out++ = 'r'; break;
        case '\t': *out++ = 't'; break;
        default:
            memcpy(out, "u00", 3);
            out[3] = hex[c >> 4];
            out[4] = hex[c & 15];
            out += 5;
        }
    }
    *out++ = '"';
    buffer->size = out - buffer->data;
    return 0;
}

static int put_str(Buffer *buffer, PyObject *text) {
    Py_ssize_t size;
    const char *utf8 = PyUnicode_Check(text) ? PyUnicode_AsUTF8AndSize(text, &size) : NULL;
    if (utf8 == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "a verdict's kind is not a str");
        return -1;
    }
    return put(buffer, utf8, size);
}

/* A float as repr(round(value, 4)) writes it; 0, or -1 with an error set. */
static int put_similarity(Buffer *buffer, PyObject *value) {
    static PyObject *round_name = NULL, *four = NULL;
    if (round_name == NULL && (round_name = PyUnicode_InternFromString("__round__")) == NULL)
        return -1;
    if (four == NULL && (four = PyLong_FromLong(4)) == NULL)
        return -1;
    PyObject *rounded = PyObject_CallMethodOneArg(value, round_name, four);
    if (rounded == NULL)
        return -1;
    PyObject *text = PyObject_Repr(rounded);
    Py_DECREF(rounded);
    if (text == NULL)
        return -1;
    int done = put_str(buffer, text);
    Py_DECREF(text);
    return done;
}

enum { V_KIND, V_LINE, V_POST, V_DUPLICATE_OF, V_SIMILARITY, V_REASON, V_RAW, V_RECORD_ID, VERDICT_FIELDS };

/* Whether every slot at ``offsets`` of ``object`` is set; 0 with AttributeError set if not. */
static int all_set(PyObject *object, const Py_ssize_t *offsets, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++)
        if (SLOT(object, offsets[i]) == NULL) {
            PyErr_Format(PyExc_AttributeError, "a %s with a field unset", Py_TYPE(object)->tp_name);
            return 0;
        }
    return 1;
}

/* One verdict's line; as put_json_string. */
static int put_verdict(Buffer *buffer, PyObject *verdict, const Py_ssize_t *offsets, PyTypeObject *post_type,
                       Py_ssize_t post_id_offset) {
    static PyObject *value_name = NULL;
    if (value_name == NULL && (value_name = PyUnicode_InternFromString("_value_")) == NULL)
        return -1;
    if (!all_set(verdict, offsets, VERDICT_FIELDS))
        return -1;
    PyObject *line = SLOT(verdict, offsets[V_LINE]), *post = SLOT(verdict, offsets[V_POST]);
    if (!PyLong_CheckExact(line)) {
        PyErr_SetString(PyExc_TypeError, "a verdict's line is not an int");
        return -1;
    }
    long long number = PyLong_AsLongLong(line);
    if (number == -1 && PyErr_Occurred())
        return -1;
    char digits[32];
    int length = snprintf(digits, sizeof(digits), "%lld", number);
    if (post != Py_None && !PyObject_TypeCheck(post, post_type)) {
        PyErr_SetString(PyExc_TypeError, "a verdict's post is not a Post");
        return -1;
    }
    PyObject *post_id = post == Py_None ? SLOT(verdict, offsets[V_RECORD_ID]) : SLOT(post, post_id_offset);
    if (post_id == NULL) {
        PyErr_SetString(PyExc_AttributeError, "a verdict's post has no id set");
        return -1;
    }
    int done;
    if (PUT_LITERAL(buffer, "{\"id\": ") < 0)
        return -1;
    if (post_id != Py_None)
        done = put_json_string(buffer, post_id);
    else
        done = PUT_LITERAL(buffer, "\"line:") < 0 || put(buffer, digits, length) < 0 || PUT_LITERAL(buffer, "\"") < 0
                   ? -1
                   : 0;
    if (done != 0)
        return done;
    PyObject *kind = PyObject_GetAttr(SLOT(verdict, offsets[V_KIND]), value_name);
    if (kind == NULL)
        return -1;
    done = PUT_LITERAL(buffer, ", \"verdict\": \"") < 0 || put_str(buffer, kind) < 0 ? -1 : 0;
    Py_DECREF(kind);
    if (done < 0 || PUT_LITERAL(buffer, "\", \"duplicate_of\": ") < 0)
        return -1;
    PyObject *duplicate_of = SLOT(verdict, offsets[V_DUPLICATE_OF]), *similarity = SLOT(verdict, offsets[V_SIMILARITY]),
             *reason = SLOT(verdict, offsets[V_REASON]);
    if ((done = duplicate_of == Py_None ? PUT_LITERAL(buffer, "null") : put_json_string(buffer, duplicate_of)) != 0)
        return done;
    if (PUT_LITERAL(buffer, ", \"similarity\": ") < 0 ||
        (similarity == Py_None ? PUT_LITERAL(buffer, "null") : put_similarity(buffer, similarity)) < 0 ||
        PUT_LITERAL(buffer, ", \"reason\": ") < 0)
        return -1;
    if ((done = reason == Py_None ? PUT_LITERAL(buffer, "null") : put_json_string(buffer, reason)) != 0)
        return done;
    if (PUT_LITERAL(buffer, ", \"line\": ") < 0 || put(buffer, digits, length) < 0 || PUT_LITERAL(buffer, "}\n") < 0)
        return -1;
    return 0;
}

/* verdict_lines(verdicts, Verdict, verdict_slots, Post, post_slots): the
 * UTF-8 bytes of the verdicts' json_line()s, each with its newline; None
 * when a string holds a lone surrogate, which only the Python path writes
 * (as JSON's own \udc00 escape). */
PyObject *sf_verdict_lines(PyObject *self, PyObject *args) {
    PyObject *verdicts, *verdict_slots, *post_slots;
    PyTypeObject *verdict_type, *post_type;
    if (!PyArg_ParseTuple(args, "O!O!OO!O", &PyList_Type, &verdicts, &PyType_Type, &verdict_type, &verdict_slots,
                          &PyType_Type, &post_type, &post_slots))
        return NULL;
    Py_ssize_t offsets[VERDICT_FIELDS], post_offsets[POST_FIELDS];
    if (slot_offsets(verdict_type, verdict_slots, VERDICT_FIELDS, offsets) < 0 ||
        slot_offsets(post_type, post_slots, POST_FIELDS, post_offsets) < 0)
        return NULL;
    Buffer buffer = {NULL, 0, 0};
    PyObject *result = NULL;
    int done = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(verdicts) && done == 0; i++) {
        PyObject *verdict = PyList_GET_ITEM(verdicts, i);
        if (!Py_IS_TYPE(verdict, verdict_type)) {
            PyErr_SetString(PyExc_TypeError, "verdict_lines takes a list of Verdict");
            done = -1;
        } else {
            done = put_verdict(&buffer, verdict, offsets, post_type, post_offsets[0]);
        }
    }
    if (done == 0)
        result = PyBytes_FromStringAndSize(buffer.data != NULL ? buffer.data : "", buffer.size);
    else if (done == 1)
        result = Py_NewRef(Py_None);
    PyMem_Free(buffer.data);
    return result;
}

#define SKETCH_FIELDS 8  /* post id, timestamp, band keys, shingles, words, made-up id, refers to, cut off */
#define SKETCH_VALUES 5  /* a row: post id, timestamp, made-up id, refers to, cut off */

/* column[*start : *start + count] (a view), *start moved past it; NULL with an error set. */
static PyObject *cut(PyObject *column, Py_ssize_t *start, PyObject *count) {
    Py_ssize_t length = PyNumber_AsSsize_t(count, PyExc_OverflowError); /* an int, or what indexes as one */
    if (length == -1 && PyErr_Occurred())
        return NULL;
    if (length < 0) {
        PyErr_SetString(PyExc_ValueError, "a negative count in a batch's columns");
        return NULL;
    }
    PyObject *from = PyLong_FromSsize_t(*start), *to = PyLong_FromSsize_t(*start + length), *slice = NULL;
    if (from != NULL && to != NULL)
        slice = PySlice_New(from, to, NULL);
    Py_XDECREF(from);
    Py_XDECREF(to);
    if (slice == NULL)
        return NULL;
    PyObject *view = PyObject_GetItem(column, slice);
    Py_DECREF(slice);
    *start += length;
    return view;
}

/* sketches_from_columns(rows, key_counts, shingle_counts, word_counts, keys,
 * shingles, words, Sketch, sketch_slots): the batch's Sketch objects, each
 * holding views of the three columns (Columns.sketches' loop). */
PyObject *sf_sketches_from_columns(PyObject *self, PyObject *args) {
    PyObject *rows, *counts[3], *columns[3], *slots;
    PyTypeObject *sketch_type;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OOOO!O", &PyList_Type, &rows, &PyList_Type, &counts[0], &PyList_Type,
                          &counts[1], &PyList_Type, &counts[2], &columns[0], &columns[1], &columns[2], &PyType_Type,
                          &sketch_type, &slots))
        return NULL;
    Py_ssize_t offsets[SKETCH_FIELDS], count = PyList_GET_SIZE(rows), start[3] = {0, 0, 0};
    if (slot_offsets(sketch_type, slots, SKETCH_FIELDS, offsets) < 0)
        return NULL;
    for (int column = 0; column < 3; column++)
        if (PyList_GET_SIZE(counts[column]) != count) {
            PyErr_SetString(PyExc_ValueError, "a batch's rows and counts differ in length");
            return NULL;
        }
    PyObject *sketches = PyList_New(count);
    if (sketches == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i), *views[3] = {NULL, NULL, NULL}, *sketch = NULL;
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != SKETCH_VALUES) {
            PyErr_Format(PyExc_ValueError, "sketch row %zd is not a tuple of %d", i, SKETCH_VALUES);
            goto failed;
        }
        for (int column = 0; column < 3; column++)
            if ((views[column] = cut(columns[column], &start[column], PyList_GET_ITEM(counts[column], i))) == NULL)
                break;
        if (views[2] != NULL) {
            PyObject *const *value = &PyTuple_GET_ITEM(row, 0);
            PyObject *values[SKETCH_FIELDS] = {value[0], value[1], views[0], views[1], views[2],
                                               value[2], value[3], value[4]};
            sketch = filled(sketch_type, offsets, values, SKETCH_FIELDS);
        }
        for (int column = 0; column < 3; column++)
            Py_XDECREF(views[column]);
        if (sketch == NULL)
            goto failed;
        PyList_SET_ITEM(sketches, i, sketch);
    }
    return sketches;
failed:
    Py_DECREF(sketches);
    return NULL;
}

/* verdicts_of(entries, matches, Entry, entry_slots, Verdict, verdict_slots,
 * NOVEL, DUPLICATE, reason_unseen, reason_seen): a judged batch's Verdict
 * objects, one an entry (Engine._verdicts' loop). */
enum { E_LINE, E_RAW, E_POST, E_KIND, E_REASON, E_SKETCH_INDEX, E_REFERENCE, E_CUT_OFF, E_DELETES };

PyObject *sf_verdicts_of(PyObject *self, PyObject *args) {
    static PyObject *duplicate_of_name = NULL, *similarity_name = NULL;
    if (duplicate_of_name == NULL && (duplicate_of_name = PyUnicode_InternFromString("duplicate_of")) == NULL)
        return NULL;
    if (similarity_name == NULL && (similarity_name = PyUnicode_InternFromString("similarity")) == NULL)
        return NULL;
    PyObject *entries, *matches, *entry_slots, *verdict_slots, *novel, *duplicate, *unseen, *seen;
    PyTypeObject *entry_type, *verdict_type;
    if (!PyArg_ParseTuple(args, "O!O!O!OO!OOOOO", &PyList_Type, &entries, &PyList_Type, &matches, &PyType_Type,
                          &entry_type, &entry_slots, &PyType_Type, &verdict_type, &verdict_slots, &novel, &duplicate,
                          &unseen, &seen))
        return NULL;
    Py_ssize_t from[ENTRY_FIELDS], to[VERDICT_FIELDS], count = PyList_GET_SIZE(entries);
    if (slot_offsets(entry_type, entry_slots, ENTRY_FIELDS, from) < 0 ||
        slot_offsets(verdict_type, verdict_slots, VERDICT_FIELDS, to) < 0)
        return NULL;
    PyObject *verdicts = PyList_New(count);
    if (verdicts == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        if (!Py_IS_TYPE(entry, entry_type)) {
            PyErr_SetString(PyExc_TypeError, "verdicts_of takes a list of Entry");
            goto failed;
        }
        if (!all_set(entry, from, ENTRY_FIELDS))
            goto failed;
        /* The match's fields are read first: a getattr may run Python code,
         * and the entry's slots are read after it, the entry held meanwhile. */
        PyObject *values[VERDICT_FIELDS] = {NULL}, *verdict = NULL, *duplicate_of = NULL, *similarity = NULL;
        int decided = SLOT(entry, from[E_KIND]) != Py_None;
        Py_INCREF(entry);
        if (decided) { /* decided without the store */
            values[V_DUPLICATE_OF] = values[V_SIMILARITY] = Py_None;
        } else {
            Py_ssize_t at = PyNumber_AsSsize_t(SLOT(entry, from[E_SKETCH_INDEX]), PyExc_IndexError);
            if (at == -1 && PyErr_Occurred())
                goto next;
            if (at < 0 || at >= PyList_GET_SIZE(matches)) {
                PyErr_SetString(PyExc_IndexError, "an entry's sketch index is past the batch's matches");
                goto next;
            }
            int reference = PyObject_IsTrue(SLOT(entry, from[E_REFERENCE]));
            if (reference < 0)
                goto next;
            PyObject *match = Py_NewRef(PyList_GET_ITEM(matches, at));
            if (match != Py_None && (duplicate_of = PyObject_GetAttr(match, duplicate_of_name)) != NULL)
                similarity = PyObject_GetAttr(match, similarity_name);
            int found = match != Py_None;
            Py_DECREF(match);
            if (found && similarity == NULL)
                goto next;
            values[V_KIND] = found ? duplicate : novel;
            values[V_REASON] = reference ? (found ? seen : unseen) : Py_None;
            values[V_DUPLICATE_OF] = found ? duplicate_of : Py_None;
            values[V_SIMILARITY] = found ? similarity : Py_None;
        }
        if (!all_set(entry, from, ENTRY_FIELDS))
            goto next;
        if (decided) {
            values[V_KIND] = SLOT(entry, from[E_KIND]);
            values[V_REASON] = SLOT(entry, from[E_REASON]);
        }
        values[V_LINE] = SLOT(entry, from[E_LINE]);
        values[V_POST] = SLOT(entry, from[E_POST]);
        values[V_RAW] = SLOT(entry, from[E_RAW]);
        values[V_RECORD_ID] = Py_None; /* an invalid record's own id: Engine._verdicts reads it */
        verdict = filled(verdict_type, to, values, VERDICT_FIELDS);
    next:
        Py_XDECREF(duplicate_of);
        Py_XDECREF(similarity);
        Py_DECREF(entry);
        if (verdict == NULL)
            goto failed;
        PyList_SET_ITEM(verdicts, i, verdict);
    }
    return verdicts;
failed:
    Py_DECREF(verdicts);
    return NULL;
}
