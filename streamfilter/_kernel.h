/* What the kernel's source files share: _kernel.c (sketching, the LMDB run
 * search, the JSON scan and the module), _kernel_rules.c (the verification
 * of candidates, by _rules.py's rules), _kernel_judge.c (a batch's
 * candidates, ranked) and _kernel_text.c (the words of an ASCII text). */
#ifndef STREAMFILTER_KERNEL_H
#define STREAMFILTER_KERNEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_SHINGLE 8

/* Every run of 1 to k words of one post (uint32 word hashes), sorted,
 * without repeats, into out (room for count * k values); how many. */
Py_ssize_t sf_runs_of(const uint32_t *post, Py_ssize_t count, int shingle_size, uint64_t *out);

PyObject *sf_verification(PyObject *self, PyObject *args);
PyObject *sf_jaccard(PyObject *self, PyObject *args);
PyObject *sf_word_edits(PyObject *self, PyObject *args);
PyObject *sf_best_match(PyObject *self, PyObject *args);
PyObject *sf_ascii_words(PyObject *self, PyObject *arg);

/* Adds the Ranker type (_kernel_judge.c) to the module; 0, or -1 with an error set. */
int sf_add_ranker(PyObject *module);

#endif
