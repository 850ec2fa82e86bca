/* The per-post loops of sketching, compiled: word hashes, k-shingles,
 * MinHash signatures, band keys and verification sets. The verification of
 * candidates by _rules.py's rules is in _kernel_rules.c, the ranking of a
 * batch's candidates in _kernel_judge.c, the LMDB index's loops in
 * _kernel_lmdb.c, the JSON scan in _kernel_json.c, Twitter's times in
 * _kernel_time.c.
 *
 * Each function computes exactly what its Python reference does, value for
 * value: _shingle.py, _minhash.py and _lsh.py. tests/test_kernel.py holds
 * each to it, on generated text in every script and generated word lists.
 * Word hashes are MurmurHash3 x86 32-bit of the word's UTF-8 as
 * mmh3.hash(hashed_form(word), seed, signed=False) computes them: each l
 * read as an i, each rn as an m, and a letter drawn out as that letter once
 * (_shingle.hashed_form). Arrays cross as bytearrays of native-endian
 * integers, which _sketching.py wraps as numpy arrays without a copy. */
#include <stdlib.h>
#include <string.h>

#include "_kernel.h"

static const uint64_t POSITION_MULTIPLIERS[MAX_SHINGLE] = {
    0x9E3779B97F4A7C15ULL, 0xC2B2AE3D27D4EB4FULL, 0x165667B19E3779F9ULL, 0xD6E8FEB86659FD93ULL,
    0xFF51AFD7ED558CCDULL, 0xC4CEB9FE1A85EC53ULL, 0x94D049BB133111EBULL, 0xBF58476D1CE4E5B9ULL,
};
static const uint64_t BAND_MULTIPLIER = 0x9E3779B97F4A7C15ULL;

static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static const uint32_t MURMUR_C1 = 0xcc9e2d51, MURMUR_C2 = 0x1b873593;

static inline uint32_t murmur_block(uint32_t h1, uint32_t k1) {
    k1 *= MURMUR_C1;
    k1 = rotl32(k1, 15);
    k1 *= MURMUR_C2;
    h1 ^= k1;
    h1 = rotl32(h1, 13);
    return h1 * 5 + 0xe6546b64;
}

static inline uint32_t murmur_end(uint32_t h1, uint32_t tail, Py_ssize_t tail_len, Py_ssize_t len) {
    if (tail_len) {
        tail *= MURMUR_C1;
        tail = rotl32(tail, 15);
        tail *= MURMUR_C2;
        h1 ^= tail;
    }
    h1 ^= (uint32_t)len;
    h1 ^= h1 >> 16;
    h1 *= 0x85ebca6b;
    h1 ^= h1 >> 13;
    h1 *= 0xc2b2ae35;
    return h1 ^ (h1 >> 16);
}

/* Whether the character of ``size`` bytes at ``utf8`` is a decimal digit
 * (what \d matches in Python's re, Unicode's Nd). */
static int is_decimal(const uint8_t *utf8, Py_ssize_t size) {
    if (size == 1)
        return utf8[0] >= '0' && utf8[0] <= '9';
    Py_UCS4 code = utf8[0] & (0x7F >> size);
    for (Py_ssize_t i = 1; i < size; i++)
        code = code << 6 | (utf8[i] & 0x3F);
    return Py_UNICODE_ISDECIMAL(code);
}

/* One pass of a word's reading (see the top of this file) from in to out,
 * which may be in itself (it never grows); returns its length. The first
 * pass reads each l as an i, and sets *rn where it writes an rn; the second
 * reads each rn as an m. Each reads a run of one character other than a
 * decimal digit as that character once. */
static Py_ssize_t read_pass(const uint8_t *in, Py_ssize_t len, uint8_t *out, int second, int *rn) {
    Py_ssize_t at = 0, i = 0, last = 0, last_size = 0; /* where the last character written starts, its size */
    while (i < len) {
        uint8_t byte = in[i];
        if (byte < 0x80) { /* most characters: one byte, no call */
            if (!second && byte == 'l')
                byte = 'i';
            else if (second && byte == 'r' && i + 1 < len && in[i + 1] == 'n')
                byte = 'm', i++;
            i++;
            if (last_size == 1 && out[last] == byte && (byte < '0' || byte > '9'))
                continue;
            if (!second && byte == 'n' && last_size == 1 && out[last] == 'r')
                *rn = 1;
            last = at, last_size = 1;
            out[at++] = byte;
            continue;
        }
        Py_ssize_t size = byte < 0xE0 ? 2 : byte < 0xF0 ? 3 : 4;
        if (size > len - i)
            size = len - i;
        uint8_t bytes[4] = {0}; /* read first: out may be in, behind it */
        Py_ssize_t b, same = size == last_size;
        for (b = 0; b < size; b++) {
            bytes[b] = in[i + b];
            same = same && out[last + b] == bytes[b];
        }
        i += size;
        if (same && !is_decimal(bytes, size))
            continue;
        for (b = 0; b < size; b++)
            out[at + b] = bytes[b];
        last = at, last_size = size;
        at += size;
    }
    return at;
}

/* Whether a word's hash reads it as it is written: ASCII with no l, no rn
 * and no character twice in a row (most words; hashed_bytes reads the rest). */
static int read_as_written(const uint8_t *data, Py_ssize_t len) {
    uint8_t before = 0;
    for (Py_ssize_t i = 0; i < len; before = data[i++])
        if (data[i] >= 0x80 || data[i] == 'l' || data[i] == before || (before == 'r' && data[i] == 'n'))
            return 0;
    return 1;
}

/* A word's UTF-8 as its hash reads it, written to out (room for len bytes). */
static Py_ssize_t hashed_bytes(const uint8_t *data, Py_ssize_t len, uint8_t *out) {
    int rn = 0;
    Py_ssize_t read = read_pass(data, len, out, 0, &rn);
    return rn ? read_pass(out, read, out, 1, &rn) : read;
}

/* MurmurHash3 x86 32-bit of len bytes. */
static uint32_t murmur3_32(const uint8_t *data, Py_ssize_t len, uint32_t seed) {
    uint32_t h1 = seed, k1 = 0;
    Py_ssize_t blocks = len / 4, i;
    for (i = 0; i < blocks; i++) {
        memcpy(&k1, data + i * 4, 4); /* little-endian, as the kernel is only built where uint32s are */
        h1 = murmur_block(h1, k1);
    }
    const uint8_t *tail = data + blocks * 4;
    k1 = 0;
    switch (len & 3) {
    case 3:
        k1 ^= (uint32_t)tail[2] << 16; /* fall through */
    case 2:
        k1 ^= (uint32_t)tail[1] << 8; /* fall through */
    case 1:
        k1 ^= tail[0];
    }
    return murmur_end(h1, k1, len & 3, len);
}

static inline uint64_t finalize64(uint64_t v) {
    v ^= v >> 33;
    v *= 0xFF51AFD7ED558CCDULL;
    v ^= v >> 33;
    v *= 0xC4CEB9FE1A85EC53ULL;
    return v ^ (v >> 33);
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts values in place: quicksort (median of three, Hoare's partition) down
 * to runs of 16, then insertion sort; faster than qsort on a post's few
 * dozen values, since qsort calls a comparison function each step. After
 * ``depth`` partitions a part goes to qsort, so crafted values cannot make
 * it quadratic (introsort's guard). */
static void sort_u64(uint64_t *values, Py_ssize_t count, int depth) {
    while (count > 16) {
        if (depth-- == 0) {
            qsort(values, count, sizeof(uint64_t), compare_u64);
            return;
        }
        Py_ssize_t middle = count / 2, last = count - 1, i = -1, j = count;
        uint64_t swap;
#define SWAP(x, y) (swap = (x), (x) = (y), (y) = swap)
        if (values[middle] < values[0])
            SWAP(values[middle], values[0]);
        if (values[last] < values[0])
            SWAP(values[last], values[0]);
        if (values[last] < values[middle])
            SWAP(values[last], values[middle]);
        SWAP(values[0], values[middle]); /* the median first: the partition leaves both sides non-empty */
        uint64_t pivot = values[0];
        for (;;) {
            do
                i++;
            while (values[i] < pivot);
            do
                j--;
            while (values[j] > pivot);
            if (i >= j)
                break;
            SWAP(values[i], values[j]);
        }
#undef SWAP
        /* values[0..j] <= pivot <= values[j+1..]: sort the smaller side, loop on the larger */
        if (j + 1 < count - j - 1) {
            sort_u64(values, j + 1, depth);
            values += j + 1;
            count -= j + 1;
        } else {
            sort_u64(values + j + 1, count - j - 1, depth);
            count = j + 1;
        }
    }
    for (Py_ssize_t i = 1; i < count; i++) {
        uint64_t value = values[i];
        Py_ssize_t j = i;
        for (; j > 0 && values[j - 1] > value; j--)
            values[j] = values[j - 1];
        values[j] = value;
    }
}

Py_ssize_t sf_runs_of(const uint32_t *post, Py_ssize_t count, int shingle_size, uint64_t *out) {
    Py_ssize_t at = 0, s, q, kept, i;
    int size;
    for (size = 1; size <= shingle_size; size++) {
        for (s = 0; s + size <= count; s++) {
            uint64_t value;
            if (size == 1)
                value = post[s];
            else if (size == 2)
                value = (uint64_t)post[s] << 32 | post[s + 1];
            else {
                value = (uint64_t)size;
                for (q = 0; q < size; q++)
                    value += (uint64_t)post[s + q] * POSITION_MULTIPLIERS[q];
            }
            out[at++] = value;
        }
    }
    sort_u64(out, at, 64);
    for (kept = 0, i = 0; i < at; i++)
        if (i == 0 || out[i] != out[kept - 1])
            out[kept++] = out[i];
    return kept;
}

/* A word's UTF-8, of *size bytes: an ASCII word's own characters, or the
 * word encoded into *buffer (grown to fit, *room bytes). Encoding here spares
 * the str the UTF-8 copy that PyUnicode_AsUTF8AndSize would allocate and
 * keep on it, a malloc a word. A lone surrogate has no UTF-8: Python raises
 * on it as it would. NULL with an error set. */
static const uint8_t *word_utf8(PyObject *word, uint8_t **buffer, Py_ssize_t *room, uint8_t *small,
                                Py_ssize_t *size) {
    if (!PyUnicode_Check(word))
        return (const uint8_t *)PyUnicode_AsUTF8AndSize(word, size); /* raises its TypeError */
    Py_ssize_t length = PyUnicode_GET_LENGTH(word), i, at = 0;
    if (PyUnicode_IS_ASCII(word)) {
        *size = length;
        return PyUnicode_DATA(word);
    }
    if (length * 4 > *room) {
        uint8_t *larger = PyMem_Malloc(length * 4);
        if (larger == NULL)
            return (const uint8_t *)PyErr_NoMemory();
        if (*buffer != small)
            PyMem_Free(*buffer);
        *buffer = larger, *room = length * 4;
    }
    int kind = PyUnicode_KIND(word);
    const void *data = PyUnicode_DATA(word);
    uint8_t *out = *buffer;
    for (i = 0; i < length; i++) {
        Py_UCS4 code = PyUnicode_READ(kind, data, i);
        if (code < 0x80) {
            out[at++] = (uint8_t)code;
        } else if (code < 0x800) {
            out[at++] = (uint8_t)(0xC0 | code >> 6);
            out[at++] = (uint8_t)(0x80 | (code & 0x3F));
        } else if (code < 0x10000) {
            if (code >= 0xD800 && code <= 0xDFFF)
                return (const uint8_t *)PyUnicode_AsUTF8AndSize(word, size); /* raises UnicodeEncodeError */
            out[at++] = (uint8_t)(0xE0 | code >> 12);
            out[at++] = (uint8_t)(0x80 | (code >> 6 & 0x3F));
            out[at++] = (uint8_t)(0x80 | (code & 0x3F));
        } else {
            out[at++] = (uint8_t)(0xF0 | code >> 18);
            out[at++] = (uint8_t)(0x80 | (code >> 12 & 0x3F));
            out[at++] = (uint8_t)(0x80 | (code >> 6 & 0x3F));
            out[at++] = (uint8_t)(0x80 | (code & 0x3F));
        }
    }
    *size = at;
    return out;
}

/* hash_words(word_lists, seed) -> (words: bytearray of uint32, offsets: bytearray of int64) */
static PyObject *hash_words(PyObject *self, PyObject *args) {
    PyObject *lists;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "OK", &lists, &seed))
        return NULL;
    PyObject *outer = PySequence_Fast(lists, "word_lists must be a sequence");
    if (outer == NULL)
        return NULL;
    Py_ssize_t posts = PySequence_Fast_GET_SIZE(outer), total = 0, p, w;
    PyObject **items = PySequence_Fast_ITEMS(outer);
    PyObject *inner_lists = PyList_New(posts);
    if (inner_lists == NULL)
        goto fail_outer;
    for (p = 0; p < posts; p++) {
        PyObject *inner = PySequence_Fast(items[p], "each post's words must be a sequence");
        if (inner == NULL)
            goto fail_lists;
        PyList_SET_ITEM(inner_lists, p, inner);
        total += PySequence_Fast_GET_SIZE(inner);
    }
    PyObject *words = PyByteArray_FromStringAndSize(NULL, total * 4);
    PyObject *offsets = PyByteArray_FromStringAndSize(NULL, (posts + 1) * 8);
    if (words == NULL || offsets == NULL) {
        Py_XDECREF(words);
        Py_XDECREF(offsets);
        goto fail_lists;
    }
    uint32_t *out = (uint32_t *)PyByteArray_AS_STRING(words);
    int64_t *ends = (int64_t *)PyByteArray_AS_STRING(offsets);
    Py_ssize_t at = 0, room = 256, encoded_room = 256;
    uint8_t small[256], *read = small; /* a word as its hash reads it: on the heap past 256 bytes */
    uint8_t encoded_small[256], *encoded = encoded_small; /* a word's UTF-8, where it is not ASCII */
    ends[0] = 0;
    for (p = 0; p < posts; p++) {
        PyObject *inner = PyList_GET_ITEM(inner_lists, p);
        Py_ssize_t count = PySequence_Fast_GET_SIZE(inner);
        PyObject **word_items = PySequence_Fast_ITEMS(inner);
        /* A batch's words are cold by now: each is asked of the memory eight
         * words ahead of its turn, the next post's first words at this one's end. */
        PyObject **next_items = NULL;
        Py_ssize_t next_count = 0;
        if (p + 1 < posts) {
            PyObject *next = PyList_GET_ITEM(inner_lists, p + 1);
            next_items = PySequence_Fast_ITEMS(next), next_count = PySequence_Fast_GET_SIZE(next);
        }
        for (w = 0; w < count; w++) {
            PyObject *ahead = w + 8 < count                ? word_items[w + 8]
                              : w + 8 - count < next_count ? next_items[w + 8 - count]
                                                           : NULL;
            if (ahead != NULL) {
                PREFETCH(ahead);
                PREFETCH((char *)ahead + 64);
            }
            Py_ssize_t size;
            const uint8_t *word = word_utf8(word_items[w], &encoded, &encoded_room, encoded_small, &size);
            if (word != NULL && size > room) {
                uint8_t *larger = PyMem_Malloc(size);
                if (larger == NULL)
                    PyErr_NoMemory();
                if (read != small)
                    PyMem_Free(read);
                read = larger, room = larger == NULL ? 0 : size;
            }
            if (word == NULL || read == NULL) {
                if (read != small)
                    PyMem_Free(read);
                if (encoded != encoded_small)
                    PyMem_Free(encoded);
                Py_DECREF(words);
                Py_DECREF(offsets);
                goto fail_lists;
            }
            out[at++] = read_as_written(word, size) ? murmur3_32(word, size, (uint32_t)seed)
                                                    : murmur3_32(read, hashed_bytes(word, size, read), (uint32_t)seed);
        }
        ends[p + 1] = at;
    }
    if (read != small)
        PyMem_Free(read);
    if (encoded != encoded_small)
        PyMem_Free(encoded);
    Py_DECREF(inner_lists);
    Py_DECREF(outer);
    return Py_BuildValue("(NN)", words, offsets);
fail_lists:
    Py_DECREF(inner_lists);
fail_outer:
    Py_DECREF(outer);
    return NULL;
}

/* sketch(words, offsets, shingle_size, multipliers, increments, bands, rows)
 *   -> (verification hashes: bytearray of uint64, their offsets: bytearray of int64,
 *       band keys: bytearray of uint64, posts x bands)
 * words: uint32 buffer; offsets: int64 buffer of posts + 1; multipliers and
 * increments: uint64 buffers of num_perm values each. */
static PyObject *sketch(PyObject *self, PyObject *args) {
    Py_buffer words_view, offsets_view, mult_view, inc_view;
    int shingle_size, bands, rows;
    if (!PyArg_ParseTuple(args, "y*y*iy*y*ii", &words_view, &offsets_view, &shingle_size, &mult_view, &inc_view,
                          &bands, &rows))
        return NULL;
    PyObject *result = NULL, *verified = NULL, *verified_offsets = NULL, *keys = NULL;
    uint64_t *mins_scratch = NULL, *shingles = NULL;
    const uint32_t *words = (const uint32_t *)words_view.buf;
    const int64_t *offsets = (const int64_t *)offsets_view.buf;
    const uint64_t *mult = (const uint64_t *)mult_view.buf, *inc = (const uint64_t *)inc_view.buf;
    Py_ssize_t posts = offsets_view.len / 8 - 1, num_perm = mult_view.len / 8, p;
    if (shingle_size < 1 || shingle_size > MAX_SHINGLE || posts < 0 || inc_view.len != mult_view.len ||
        bands < 1 || rows < 1 || (Py_ssize_t)bands * rows > num_perm) {
        PyErr_SetString(PyExc_ValueError, "bad sketch parameters");
        goto done;
    }
    Py_ssize_t total_words = words_view.len / 4;
    if (posts >= 0 && (offsets[0] != 0 || offsets[posts] > total_words)) {
        PyErr_SetString(PyExc_ValueError, "offsets do not fit the words");
        goto done;
    }
    /* verification runs: at most k values a word */
    Py_ssize_t most = total_words * shingle_size;
    verified = PyByteArray_FromStringAndSize(NULL, most * 8);
    verified_offsets = PyByteArray_FromStringAndSize(NULL, (posts + 1) * 8);
    keys = PyByteArray_FromStringAndSize(NULL, posts * bands * 8);
    mins_scratch = (uint64_t *)malloc(sizeof(uint64_t) * (num_perm > 0 ? num_perm : 1));
    shingles = (uint64_t *)malloc(sizeof(uint64_t) * (total_words > 0 ? total_words : 1));
    if (verified == NULL || verified_offsets == NULL || keys == NULL || mins_scratch == NULL || shingles == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    uint64_t *ver = (uint64_t *)PyByteArray_AS_STRING(verified);
    int64_t *ver_ends = (int64_t *)PyByteArray_AS_STRING(verified_offsets);
    uint64_t *key_out = (uint64_t *)PyByteArray_AS_STRING(keys);
    Py_ssize_t at = 0;
    ver_ends[0] = 0;
    for (p = 0; p < posts; p++) {
        int64_t start = offsets[p], end = offsets[p + 1], count = end - start, s, q;
        if (end < start) {
            PyErr_SetString(PyExc_ValueError, "offsets must not decrease");
            goto done;
        }
        const uint32_t *post = words + start;
        /* MinHash shingles: one per start of k words; a shorter post with words gets one of them all */
        Py_ssize_t shingle_count = count == 0 ? 0 : (count - shingle_size + 1 > 1 ? count - shingle_size + 1 : 1);
        for (s = 0; s < shingle_count; s++) {
            uint64_t combined = 0;
            for (q = 0; q < shingle_size && s + q < count; q++)
                combined += (uint64_t)post[s + q] * POSITION_MULTIPLIERS[q];
            shingles[s] = finalize64(combined);
        }
        uint32_t *mins = (uint32_t *)mins_scratch;
        Py_ssize_t perm;
        for (perm = 0; perm < num_perm; perm++)
            mins[perm] = 0xFFFFFFFFu;
        for (s = 0; s < shingle_count; s++) {
            uint64_t folded = (shingles[s] ^ (shingles[s] >> 32)) & 0xFFFFFFFFULL;
            for (perm = 0; perm < num_perm; perm++) {
                uint32_t value = (uint32_t)((mult[perm] * folded + inc[perm]) >> 32);
                if (value < mins[perm])
                    mins[perm] = value;
            }
        }
        /* band keys (_lsh.band_keys) */
        int band, row;
        for (band = 0; band < bands; band++) {
            uint64_t key = (uint64_t)(band + 1) * BAND_MULTIPLIER;
            for (row = 0; row < rows; row++) {
                key ^= (uint64_t)mins[band * rows + row];
                key *= BAND_MULTIPLIER;
                key ^= key >> 29;
            }
            key *= 0xBF58476D1CE4E5B9ULL;
            key ^= key >> 32;
            key_out[p * bands + band] = key;
        }
        /* verification set: every run of 1 to k words, sorted, without repeats */
        at += sf_runs_of(post, count, shingle_size, ver + at);
        ver_ends[p + 1] = at;
    }
    if (PyByteArray_Resize(verified, at * 8) < 0)
        goto done;
    result = Py_BuildValue("(OOO)", verified, verified_offsets, keys);
done:
    Py_XDECREF(verified);
    Py_XDECREF(verified_offsets);
    Py_XDECREF(keys);
    free(mins_scratch);
    free(shingles);
    PyBuffer_Release(&words_view);
    PyBuffer_Release(&offsets_view);
    PyBuffer_Release(&mult_view);
    PyBuffer_Release(&inc_view);
    return result;
}

/* sketch_posts(word_lists, seed, shingle_size, multipliers, increments, bands, rows, firsts, post_ids)
 *   -> (word hashes, their offsets, verification hashes, their offsets, keys)
 * hash_words, then sketch, then each post's keys in one row of
 * bands + len(firsts) + 1: its band keys, its text keys (text_keys for
 * firsts) and its id key (id_keys of post_ids), as
 * _sketching._PyBatchSketcher.sketch_posts gives them. One call where a
 * post or two would otherwise cost more in calls than in work. */
static PyObject *sketch_posts(PyObject *self, PyObject *args) {
    PyObject *lists, *multipliers, *increments, *firsts, *ids;
    unsigned long long seed;
    int shingle_size, bands, rows;
    if (!PyArg_ParseTuple(args, "OKiOOiiO!O!", &lists, &seed, &shingle_size, &multipliers, &increments, &bands, &rows,
                          &PyTuple_Type, &firsts, &PyList_Type, &ids))
        return NULL;
    PyObject *hashed = NULL, *sketched = NULL, *texts = NULL, *id_column = NULL, *keys = NULL, *call, *result = NULL;
    if ((call = Py_BuildValue("(OK)", lists, seed)) == NULL)
        return NULL;
    hashed = hash_words(self, call);
    Py_DECREF(call);
    if (hashed == NULL)
        goto done;
    PyObject *words = PyTuple_GET_ITEM(hashed, 0), *offsets = PyTuple_GET_ITEM(hashed, 1);
    if ((call = Py_BuildValue("(OOiOOii)", words, offsets, shingle_size, multipliers, increments, bands, rows)) == NULL)
        goto done;
    sketched = sketch(self, call);
    Py_DECREF(call);
    if (sketched == NULL || (call = Py_BuildValue("(OOKO)", words, offsets, seed, firsts)) == NULL)
        goto done;
    texts = sf_text_keys(self, call);
    Py_DECREF(call);
    if (texts == NULL || (call = Py_BuildValue("(OK)", ids, seed)) == NULL)
        goto done;
    id_column = sf_id_keys(self, call);
    Py_DECREF(call);
    if (id_column == NULL)
        goto done;
    Py_ssize_t posts = PyByteArray_GET_SIZE(offsets) / 8 - 1, columns = PyTuple_GET_SIZE(firsts);
    Py_ssize_t width = bands + columns + 1;
    if (PyList_GET_SIZE(ids) != posts) {
        PyErr_SetString(PyExc_ValueError, "one post id a post");
        goto done;
    }
    if ((keys = PyByteArray_FromStringAndSize(NULL, posts * width * 8)) == NULL)
        goto done;
    uint64_t *out = (uint64_t *)PyByteArray_AS_STRING(keys);
    const uint64_t *band_in = (const uint64_t *)PyByteArray_AS_STRING(PyTuple_GET_ITEM(sketched, 2));
    const uint64_t *text_in = (const uint64_t *)PyByteArray_AS_STRING(texts);
    const uint64_t *id_in = (const uint64_t *)PyByteArray_AS_STRING(id_column);
    for (Py_ssize_t p = 0; p < posts; p++) {
        memcpy(out + p * width, band_in + p * bands, bands * 8);
        memcpy(out + p * width + bands, text_in + p * columns, columns * 8);
        out[p * width + bands + columns] = id_in[p];
    }
    result = Py_BuildValue("(OOOOO)", words, offsets, PyTuple_GET_ITEM(sketched, 0), PyTuple_GET_ITEM(sketched, 1), keys);
done:
    Py_XDECREF(hashed);
    Py_XDECREF(sketched);
    Py_XDECREF(texts);
    Py_XDECREF(id_column);
    Py_XDECREF(keys);
    return result;
}

static PyMethodDef methods[] = {
    {"verification", sf_verification, METH_VARARGS, "One post's verification set, sorted, from its word hashes."},
    {"jaccard", sf_jaccard, METH_VARARGS, "Jaccard similarity of two sorted sets of uint64 values."},
    {"hash_words", hash_words, METH_VARARGS, "Word hashes (MurmurHash3 x86 32 of UTF-8) and offsets of posts."},
    {"id_keys", sf_id_keys, METH_VARARGS, "Posts' id keys (MurmurHash3 x64 128 of their ids, as _lsh.id_keys)."},
    {"sketch", sketch, METH_VARARGS, "Verification sets and band keys of posts given by their word hashes."},
    {"sketch_posts", sketch_posts, METH_VARARGS, "Word hashes, verification sets and every key of posts (sketch_posts)."},
    {"json_scan", sf_json_scan, METH_O, "How deep a JSON text nests, and whether it may hold an integer past 64 bits."},
    {"ascii_words", sf_ascii_words, METH_O, "The words of an ASCII text, mentions out (_normalize._ascii_words)."},
    {"fold_runs", sf_fold_runs, METH_VARARGS, "A text with its non-ASCII runs folded (_normalize._fold_run)."},
    {"holds_any", sf_holds_any, METH_VARARGS, "Whether a text holds a code point of a bitmap (_confusables)."},
    {"twitter_time", sf_twitter_time, METH_O, "Seconds since the epoch of a Twitter v1.1 time of the usual shape, or None."},
    {"word_edits", sf_word_edits, METH_VARARGS, "Word-level edit distance within a limit (_rules.word_edits)."},
    {"best_match", sf_best_match, METH_VARARGS, "The candidate a post duplicates, by the rules (_rules.best_match)."},
    {"find_in_run", sf_find_in_run, METH_VARARGS, "The band keys found in one LMDB run, and where (Run.find)."},
    {"recorded_items", sf_recorded_items, METH_VARARGS, "The keys and records of a batch's recorded posts (Batch.record)."},
    {"members_in_runs", sf_members_in_runs, METH_VARARGS, "The serials the LMDB runs offer a batch (Batch.members)."},
    {"with_held", sf_with_held, METH_VARARGS, "The hits with a group's held posts filed in (HeldPosts.with_held)."},
    {"mark_run", sf_mark_run, METH_VARARGS, "Marks a run's keys in a key filter's bits or masks (_Bits, RunMasks)."},
    {"mark_keys", sf_mark_keys, METH_VARARGS, "Marks 40-bit keys in a key filter's bits or masks (_Bits, RunMasks)."},
    {"marked", sf_marked, METH_VARARGS, "The indexes of the 40-bit keys marked in a key filter's bits (_Bits)."},
    {"verdict_lines", sf_verdict_lines, METH_VARARGS, "The --verdicts lines of a batch's columns (_verdicts.verdict_lines)."},
    {"text_keys", sf_text_keys, METH_VARARGS, "Posts' exact-words and start keys (_lsh.exact_keys), posts x firsts."},
    {"distinct", sf_distinct, METH_O, "A few keys' distinct values and each key's index among them (_judge._distinct)."},
    {"place_times", sf_place_times, METH_VARARGS, "The times a batch's posts are placed at (EventClock.place)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernel", "streamfilter's compiled sketching loops.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__kernel(void) {
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && (sf_add_ranker(created) < 0 || sf_add_cached_post(created) < 0 || sf_add_recent_posts(created) < 0))
        Py_CLEAR(created);
    return created;
}
