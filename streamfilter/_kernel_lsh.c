/* The keys _lsh.py computes from a post's words in order (_lsh.exact_keys):
 * its exact-words key and its start keys, for every post of a batch in one
 * call. It computes what the numpy reference computes, value for value
 * (tests/test_kernel.py), in uint64 arithmetic that wraps as numpy's does. */
#include "_kernel.h"

#define GOLDEN 0x9E3779B97F4A7C15ULL

/* text_keys(words, offsets, seed, firsts) -> bytearray of uint64, posts x len(firsts):
 * row p, column c is exact_keys(words, offsets, seed, firsts[c])[p].
 * words: uint32 buffer; offsets: int64 buffer of posts + 1; firsts: a tuple of ints >= 0. */
PyObject *sf_text_keys(PyObject *self, PyObject *args) {
    Py_buffer words_view, offsets_view;
    unsigned long long seed;
    PyObject *firsts, *keys = NULL;
    if (!PyArg_ParseTuple(args, "y*y*KO!", &words_view, &offsets_view, &seed, &PyTuple_Type, &firsts))
        return NULL;
    const uint32_t *words = (const uint32_t *)words_view.buf;
    const int64_t *offsets = (const int64_t *)offsets_view.buf;
    Py_ssize_t posts = offsets_view.len / 8 - 1, columns = PyTuple_GET_SIZE(firsts), total = words_view.len / 4;
    uint64_t salts[8];
    Py_ssize_t limits[8];
    if (posts < 0 || columns > 8 || (posts >= 0 && (offsets[0] != 0 || offsets[posts] > total))) {
        PyErr_SetString(PyExc_ValueError, "offsets do not fit the words, or too many start keys");
        goto done;
    }
    for (Py_ssize_t c = 0; c < columns; c++) {
        Py_ssize_t first = PyLong_AsSsize_t(PyTuple_GET_ITEM(firsts, c));
        if (first < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a start key takes a count of words >= 0");
            goto done;
        }
        limits[c] = first == 0 ? PY_SSIZE_T_MAX : first; /* 0: all the words */
        salts[c] = fmix64((uint64_t)seed + GOLDEN * (uint64_t)(first + 1));
    }
    keys = PyByteArray_FromStringAndSize(NULL, posts * columns * 8);
    if (keys == NULL)
        goto done;
    uint64_t *out = (uint64_t *)PyByteArray_AS_STRING(keys);
    for (Py_ssize_t p = 0; p < posts; p++) {
        int64_t start = offsets[p], end = offsets[p + 1];
        if (end < start) {
            PyErr_SetString(PyExc_ValueError, "offsets must not decrease");
            Py_CLEAR(keys);
            goto done;
        }
        for (Py_ssize_t c = 0; c < columns; c++) {
            Py_ssize_t count = end - start < limits[c] ? end - start : limits[c];
            uint64_t sum = 0;
            for (Py_ssize_t at = 0; at < count; at++)
                sum += fmix64(((uint64_t)words[start + at] | ((uint64_t)at << 32)) ^ salts[c]);
            out[p * columns + c] = fmix64(sum ^ ((uint64_t)count * GOLDEN) ^ salts[c]);
        }
    }
done:
    PyBuffer_Release(&words_view);
    PyBuffer_Release(&offsets_view);
    return keys;
}
