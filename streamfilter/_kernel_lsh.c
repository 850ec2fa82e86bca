/* The keys _lsh.py computes beside the band keys: from a post's words in
 * order (_lsh.exact_keys), its exact-words key and its start keys; and from
 * its id (_lsh.id_keys), its id key. Each for every post of a batch in one
 * call. It computes what the reference computes, value for value
 * (tests/test_kernel.py), in uint64 arithmetic that wraps as numpy's does. */
#include <string.h>

#include "_kernel.h"

#define GOLDEN 0x9E3779B97F4A7C15ULL

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* One 8-byte lane of a MurmurHash3 x64 128 block, mixed. */
static inline uint64_t scrambled(uint64_t k, uint64_t first, uint64_t second, int rotation) {
    return rotl64(k * first, rotation) * second;
}

/* The first 64 bits of MurmurHash3 x64 128 (mmh3.hash64(data, seed, signed=False)[0]). */
static uint64_t murmur3_64(const uint8_t *data, Py_ssize_t len, uint32_t seed) {
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    uint64_t h1 = seed, h2 = seed, k1, k2;
    Py_ssize_t blocks = len / 16, i;
    for (i = 0; i < blocks; i++) {
        memcpy(&k1, data + i * 16, 8); /* little-endian: compiled_kernel refuses other hosts */
        memcpy(&k2, data + i * 16 + 8, 8);
        h1 ^= scrambled(k1, c1, c2, 31);
        h1 = (rotl64(h1, 27) + h2) * 5 + 0x52dce729;
        h2 ^= scrambled(k2, c2, c1, 33);
        h2 = (rotl64(h2, 31) + h1) * 5 + 0x38495ab5;
    }
    const uint8_t *tail = data + blocks * 16;
    Py_ssize_t rest = len & 15;
    k1 = k2 = 0;
    for (i = rest - 1; i >= 8; i--)
        k2 ^= (uint64_t)tail[i] << (8 * (i - 8));
    if (rest > 8)
        h2 ^= scrambled(k2, c2, c1, 33);
    for (i = (rest < 8 ? rest : 8) - 1; i >= 0; i--)
        k1 ^= (uint64_t)tail[i] << (8 * i);
    if (rest > 0)
        h1 ^= scrambled(k1, c1, c2, 31);
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    return h1 + h2;
}

/* id_keys(post_ids, seed) -> bytearray of uint64: each id's key, the first 64
 * bits of MurmurHash3 x64 128 of "\x01post-id:" and the id in UTF-8 (_lsh.id_keys). */
PyObject *sf_id_keys(PyObject *self, PyObject *args) {
    static const char prefix[] = "\x01post-id:";
    const Py_ssize_t prefix_size = sizeof(prefix) - 1;
    PyObject *ids;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "O!K", &PyList_Type, &ids, &seed))
        return NULL;
    if (seed > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "seed is out of range");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(ids), room = 256;
    PyObject *keys = PyByteArray_FromStringAndSize(NULL, count * 8);
    uint8_t *scratch = PyMem_Malloc(room);
    if (keys == NULL || scratch == NULL) {
        Py_XDECREF(keys);
        PyMem_Free(scratch);
        return PyErr_NoMemory();
    }
    memcpy(scratch, prefix, prefix_size);
    uint64_t *out = (uint64_t *)PyByteArray_AS_STRING(keys);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *post_id = PyList_GET_ITEM(ids, i);
        Py_ssize_t size;
        const char *utf8 = PyUnicode_Check(post_id) ? PyUnicode_AsUTF8AndSize(post_id, &size) : NULL;
        if (utf8 == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "a post id is a %s, not a str", Py_TYPE(post_id)->tp_name);
            goto failed;
        }
        if (prefix_size + size > room) {
            room = 2 * (prefix_size + size);
            uint8_t *larger = PyMem_Realloc(scratch, room);
            if (larger == NULL) {
                PyErr_NoMemory();
                goto failed;
            }
            scratch = larger;
        }
        memcpy(scratch + prefix_size, utf8, size);
        out[i] = murmur3_64(scratch, prefix_size + size, (uint32_t)seed);
    }
    PyMem_Free(scratch);
    return keys;
failed:
    PyMem_Free(scratch);
    Py_DECREF(keys);
    return NULL;
}

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
