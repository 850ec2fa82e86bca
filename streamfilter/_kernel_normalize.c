/* Two steps of _normalize.words_and_cut: the words of an ASCII text (its
 * last two steps, mentions out, then the ASCII words, in one pass), and the
 * folding of a text's non-ASCII runs; and _confusables' question whether a
 * text holds a look-alike. */
#include "_kernel.h"

/* regex's \w and \s, on ASCII: [A-Za-z0-9_] and [ \t\n\v\f\r] (not the
 * separators \x1c-\x1f, which str.isspace takes as spaces and \s does not). */
static inline int is_word(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static inline int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static inline int is_via(const unsigned char *text, Py_ssize_t at, Py_ssize_t size) {
    /* c | 32 folds exactly the two cases of a letter onto its small one */
    return at + 2 < size && (text[at] | 32) == 'v' && (text[at + 1] | 32) == 'i' && (text[at + 2] | 32) == 'a';
}

/* Where a match of _normalize._MENTION that starts at ``at`` ends, or -1:
 *     (?<!\w)@\w+(?:\s+via\b)?  |  \bvia\s+@\w+     (via in any case)
 * The two alternatives start with different characters, so at most one
 * applies; each is read as the regex reads it, greedily. */
static Py_ssize_t mention_end(const unsigned char *text, Py_ssize_t size, Py_ssize_t at) {
    if (at > 0 && is_word(text[at - 1]))
        return -1; /* (?<!\w) before '@'; \b before 'v', a word character */
    Py_ssize_t end, after;
    if (text[at] == '@') {
        for (end = at + 1; end < size && is_word(text[end]); end++)
            ;
        if (end == at + 1)
            return -1;
        for (after = end; after < size && is_space(text[after]); after++)
            ;
        if (after > end && is_via(text, after, size) && (after + 3 == size || !is_word(text[after + 3])))
            return after + 3;
        return end;
    }
    if (!is_via(text, at, size))
        return -1;
    for (after = at + 3; after < size && is_space(text[after]); after++)
        ;
    if (after == at + 3 || after == size || text[after] != '@')
        return -1;
    for (end = after + 1; end < size && is_word(text[end]); end++)
        ;
    return end > after + 1 ? end : -1;
}

/* Appends word[0..length) to words as a str; 0, or -1 with an error set. */
static int add_word(PyObject *words, const char *word, Py_ssize_t length) {
    PyObject *item = PyUnicode_New(length, 127);
    if (item == NULL)
        return -1;
    memcpy(PyUnicode_1BYTE_DATA(item), word, length);
    int failed = PyList_Append(words, item);
    Py_DECREF(item);
    return failed;
}

/* ascii_words(text) -> list of str: for an ASCII str, exactly
 * _normalize._ascii_words(_MENTION.sub(" ", text)): each mention (and its
 * "via") a gap; letters and digits lowercased and kept; ' and ` dropped
 * without a gap; anything else a gap. */
PyObject *sf_ascii_words(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg) || !PyUnicode_IS_ASCII(arg)) {
        PyErr_SetString(PyExc_TypeError, "ascii_words takes an ASCII str");
        return NULL;
    }
    const unsigned char *text = PyUnicode_1BYTE_DATA(arg);
    Py_ssize_t size = PyUnicode_GET_LENGTH(arg), length = 0, at;
    char *word = PyMem_Malloc(size + 1);
    PyObject *words = PyList_New(0);
    if (word == NULL || words == NULL)
        goto failed;
    for (at = 0; at < size; at++) {
        unsigned char c = text[at];
        if (c == '@' || (c | 32) == 'v') {
            Py_ssize_t end = mention_end(text, size, at);
            if (end >= 0) {
                if (length > 0 && add_word(words, word, length) < 0)
                    goto failed;
                length = 0;
                at = end - 1;
                continue;
            }
        }
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
            word[length++] = (char)c;
        else if (c >= 'A' && c <= 'Z')
            word[length++] = (char)(c | 32);
        else if (c != '\'' && c != '`') {
            if (length > 0 && add_word(words, word, length) < 0)
                goto failed;
            length = 0;
        }
    }
    if (length > 0 && add_word(words, word, length) < 0)
        goto failed;
    PyMem_Free(word);
    return words;
failed:
    PyMem_Free(word);
    Py_XDECREF(words);
    if (!PyErr_Occurred())
        PyErr_NoMemory();
    return NULL;
}

/* fold_runs(text, fold_short, fold_long, limit) -> str: ``text`` with each
 * run of non-ASCII characters replaced by what fold_short (a run of at most
 * ``limit`` characters) or fold_long returns for it, as
 * _normalize._NON_ASCII_RUN.sub(_normalize._fold_run, text) does, without a
 * match object and a Python call for each run. */
PyObject *sf_fold_runs(PyObject *self, PyObject *args) {
    PyObject *text, *fold_short, *fold_long, *parts, *result = NULL;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "UOOn", &text, &fold_short, &fold_long, &limit))
        return NULL;
    if (PyUnicode_IS_ASCII(text))
        return Py_NewRef(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), at = 0, plain = 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if ((parts = PyList_New(0)) == NULL)
        return NULL;
    while (at < size) {
        if (PyUnicode_READ(kind, data, at) < 0x80) {
            at++;
            continue;
        }
        Py_ssize_t start = at;
        while (at < size && PyUnicode_READ(kind, data, at) >= 0x80)
            at++;
        PyObject *before = start > plain ? PyUnicode_Substring(text, plain, start) : NULL;
        if (start > plain && (before == NULL || PyList_Append(parts, before) < 0)) {
            Py_XDECREF(before);
            goto done;
        }
        Py_XDECREF(before);
        PyObject *run = PyUnicode_Substring(text, start, at);
        PyObject *folded = run == NULL ? NULL : PyObject_CallOneArg(at - start <= limit ? fold_short : fold_long, run);
        Py_XDECREF(run);
        if (folded != NULL && !PyUnicode_Check(folded)) {
            PyErr_Format(PyExc_TypeError, "expected str instance, %.200s found", Py_TYPE(folded)->tp_name);
            Py_CLEAR(folded);
        }
        if (folded == NULL || PyList_Append(parts, folded) < 0) {
            Py_XDECREF(folded);
            goto done;
        }
        Py_DECREF(folded);
        plain = at;
    }
    if (plain < size) {
        PyObject *rest = PyUnicode_Substring(text, plain, size);
        if (rest == NULL || PyList_Append(parts, rest) < 0) {
            Py_XDECREF(rest);
            goto done;
        }
        Py_DECREF(rest);
    }
    PyObject *empty = PyUnicode_New(0, 0);
    if (empty != NULL)
        result = PyUnicode_Join(empty, parts);
    Py_XDECREF(empty);
done:
    Py_DECREF(parts);
    return result;
}

/* holds_any(text, members) -> bool: whether a character of ``text`` is one
 * of ``members``, a bitmap of code points (bytes; bit c % 8 of byte c / 8
 * for code point c), as frozenset.isdisjoint answers it of the characters
 * themselves, without a str made for each (_confusables._py_holds_lookalike). */
PyObject *sf_holds_any(PyObject *self, PyObject *args) {
    PyObject *text;
    Py_buffer members;
    if (!PyArg_ParseTuple(args, "Uy*", &text, &members))
        return NULL;
    const unsigned char *bits = (const unsigned char *)members.buf;
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), bytes = members.len, at;
    int kind = PyUnicode_KIND(text), found = 0;
    const void *data = PyUnicode_DATA(text);
    for (at = 0; at < size && !found; at++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, at);
        found = (Py_ssize_t)(c >> 3) < bytes && (bits[c >> 3] >> (c & 7)) & 1;
    }
    PyBuffer_Release(&members);
    return PyBool_FromLong(found);
}
