/* The scan that tells which JSON texts orjson reads as json does
 * (_json.py): how deep a text nests, and whether it may hold an integer past
 * 64 bits. tests/test_json.py holds it to _json.depth_ok and the digit runs,
 * on JSON-like texts. */
#include "_kernel.h"

/* json_scan(text) -> (depth, long_number), for _json.loads, in one pass
 * over a str's characters (no UTF-8 needed, lone surrogates and all), or
 * over the bytes of UTF-8 text (a multi-byte character's bytes are all
 * 0x80 or above, so the ASCII that counts reads the same either way):
 * depth, how deep the brackets outside strings go at most (_json.depth_ok's
 * running depth, exactly: an unterminated string runs to the end); and
 * long_number, whether a run of 20 or more ASCII digits, or a '-' and 19 or
 * more, stands outside strings: an integer that may lie past 64 bits, which
 * orjson reads as a float where json reads it exactly. */
struct json_scan {
    Py_ssize_t depth, deepest, run;
    int in_string, negative, long_number;
};

/* One character of the scan; 1 when the character after it is escaped. */
static inline int json_step(struct json_scan *scan, Py_UCS4 c) {
    if (scan->in_string) {
        if (c == '\\')
            return 1; /* the escaped character, whatever it is, is skipped */
        if (c == '"')
            scan->in_string = 0;
        return 0;
    }
    if (c >= '0' && c <= '9') {
        scan->run++;
        if (scan->run >= 20 || (scan->negative && scan->run >= 19))
            scan->long_number = 1;
        return 0;
    }
    scan->negative = c == '-';
    scan->run = 0;
    if (c == '"')
        scan->in_string = 1;
    else if (c == '[' || c == '{') {
        if (++scan->depth > scan->deepest)
            scan->deepest = scan->depth;
    } else if (c == ']' || c == '}')
        scan->depth--;
    return 0;
}

PyObject *sf_json_scan(PyObject *self, PyObject *arg) {
    struct json_scan scan = {0};
    Py_ssize_t i;
    if (PyUnicode_Check(arg)) {
        int kind = PyUnicode_KIND(arg);
        const void *data = PyUnicode_DATA(arg);
        Py_ssize_t size = PyUnicode_GET_LENGTH(arg);
        for (i = 0; i < size; i++)
            i += json_step(&scan, PyUnicode_READ(kind, data, i));
    } else if (PyBytes_Check(arg)) {
        const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(arg);
        Py_ssize_t size = PyBytes_GET_SIZE(arg);
        for (i = 0; i < size; i++)
            i += json_step(&scan, data[i]);
    } else {
        PyErr_SetString(PyExc_TypeError, "json_scan takes a str or bytes");
        return NULL;
    }
    return Py_BuildValue("(nO)", scan.deepest, scan.long_number ? Py_True : Py_False);
}
