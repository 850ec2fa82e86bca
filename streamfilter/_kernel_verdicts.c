/* The --verdicts lines of a judged batch, from its columns (_verdicts.verdict_lines).
 *
 * It takes lists of plain values, one item a verdict: ids and kinds (str),
 * duplicate_of and reasons (str or None), similarities (float or None) and
 * line numbers (int), and returns the UTF-8 bytes of each line, as
 * _post.json_line writes it, with its newline. Python's loop stays as the
 * reference: tests/test_verdicts.py holds this to it. */
#include "_kernel.h"

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
 * '"', '\\' and the control characters escaped, and NEL, U+2028 and U+2029
 * too (_post._json_string), the rest as it is. UTF-8 of
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
        /* NEL (C2 85), U+2028 and U+2029 (E2 80 A8/A9): line breaks to many readers, escaped as _post._json_string */
        if ((c == 0xC2 && i + 1 < size && (unsigned char)utf8[i + 1] == 0x85) ||
            (c == 0xE2 && i + 2 < size && (unsigned char)utf8[i + 1] == 0x80 &&
             ((unsigned char)utf8[i + 2] == 0xA8 || (unsigned char)utf8[i + 2] == 0xA9))) {
            memcpy(out, c == 0xC2 ? "\\u0085" : utf8[i + 2] == (char)0xA8 ? "\\u2028" : "\\u2029", 6);
            out += 6;
            i += c == 0xC2 ? 1 : 2;
            continue;
        }
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

/* One verdict's line; as put_json_string. */
static int put_verdict(Buffer *buffer, PyObject *post_id, PyObject *kind, PyObject *duplicate_of, PyObject *similarity,
                       PyObject *reason, PyObject *line) {
    if (!PyLong_CheckExact(line)) {
        PyErr_SetString(PyExc_TypeError, "a verdict's line is not an int");
        return -1;
    }
    long long number = PyLong_AsLongLong(line);
    if (number == -1 && PyErr_Occurred())
        return -1;
    char digits[32];
    int length = snprintf(digits, sizeof(digits), "%lld", number);
    int done;
    if (PUT_LITERAL(buffer, "{\"id\": ") < 0)
        return -1;
    if ((done = put_json_string(buffer, post_id)) != 0)
        return done;
    if (PUT_LITERAL(buffer, ", \"verdict\": \"") < 0 || put_str(buffer, kind) < 0 ||
        PUT_LITERAL(buffer, "\", \"duplicate_of\": ") < 0)
        return -1;
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

#define COLUMNS 6

/* verdict_lines(ids, kinds, duplicate_of, similarity, reasons, lines): the
 * UTF-8 bytes of the verdicts' lines, each with its newline; None when a
 * string holds a lone surrogate, which only the Python loop writes (as
 * JSON's own \udc00 escape). */
PyObject *sf_verdict_lines(PyObject *self, PyObject *args) {
    PyObject *columns[COLUMNS];
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!", &PyList_Type, &columns[0], &PyList_Type, &columns[1], &PyList_Type,
                          &columns[2], &PyList_Type, &columns[3], &PyList_Type, &columns[4], &PyList_Type, &columns[5]))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(columns[0]);
    for (int column = 1; column < COLUMNS; column++)
        if (PyList_GET_SIZE(columns[column]) != count) {
            PyErr_SetString(PyExc_ValueError, "verdict_lines: the columns differ in length");
            return NULL;
        }
    Buffer buffer = {NULL, 0, 0};
    PyObject *result = NULL;
    int done = 0;
    for (Py_ssize_t i = 0; i < count && done == 0; i++) {
        /* Each value is held while its line is written: a float's __round__
         * runs Python code, which might change the lists. */
        PyObject *values[COLUMNS];
        for (int column = 0; column < COLUMNS; column++)
            values[column] = Py_NewRef(PyList_GET_ITEM(columns[column], i));
        done = put_verdict(&buffer, values[0], values[1], values[2], values[3], values[4], values[5]);
        for (int column = 0; column < COLUMNS; column++)
            Py_DECREF(values[column]);
        for (int column = 0; column < COLUMNS && done == 0; column++)
            if (PyList_GET_SIZE(columns[column]) != count) {
                PyErr_SetString(PyExc_RuntimeError, "verdict_lines: a column changed size");
                done = -1;
            }
    }
    if (done == 0)
        result = PyBytes_FromStringAndSize(buffer.data != NULL ? buffer.data : "", buffer.size);
    else if (done == 1)
        result = Py_NewRef(Py_None);
    PyMem_Free(buffer.data);
    return result;
}
