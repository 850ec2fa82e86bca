/* What the kernel's source files share. Each file is named after the Python
 * it mirrors: _kernel.c (the module; _sketching.py's sketching, _json.py's
 * scan), _kernel_rules.c (_rules.py: verification sets,
 * word edits, best_match, CachedPost), _kernel_judge.c and
 * _kernel_judge_loop.c (_judge.py: a batch's candidates ranked, and the loop
 * that judges them), _kernel_normalize.c (_normalize.py: an ASCII text's
 * words, the folding of non-ASCII runs; _confusables.py: whether a text holds
 * a look-alike), _kernel_lmdb.c (stores/lmdb: the run
 * search, what runs offer, the key filter's marks), _kernel_cache.c
 * (stores/_base.py's recent posts, the records a batch writes),
 * _kernel_verdicts.c (_verdicts.py: the --verdicts lines), _kernel_clock.c
 * (_clock.py: the event-time clock) and _kernel_lsh.c (_lsh.py: the keys of a
 * post's words in order, and of its id). */
#ifndef STREAMFILTER_KERNEL_H
#define STREAMFILTER_KERNEL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_SHINGLE 8

/* MurmurHash3's 64-bit finaliser. */
static inline uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)(address))
#endif

/* Every run of 1 to k words of one post (uint32 word hashes), sorted,
 * without repeats, into out (room for count * k values); how many. */
Py_ssize_t sf_runs_of(const uint32_t *post, Py_ssize_t count, int shingle_size, uint64_t *out);

/* The rules' constants, as _rules.py passes them (_KERNEL_RULES). */
typedef struct {
    Py_ssize_t cut_off_min_words;
    double cut_off_min_similarity;
    Py_ssize_t cut_off_exact_below; /* a cut post of fewer words matches only a start of its very words */
    Py_ssize_t edit_min_words;
    long edit_max_edits;
    double edit_min_jaccard;
    Py_ssize_t embed_min_words;
    double embed_min_share;
    Py_ssize_t embed_max_words;
} Rules;

/* The post being judged. */
typedef struct {
    const uint32_t *words;
    Py_ssize_t count;
    const uint64_t *set;
    Py_ssize_t set_size;
    int cut_off;
    double threshold;
    int shingle_size;
} Judged;

/* best_match's loop (_kernel_rules.c) over posts, a list of CachedPost or
 * None in rank order: sets *index to the candidate the judged post
 * duplicates (-1 for none) and *similarity to theirs; 0, or -1 with an
 * error set. */
int sf_best_of(PyObject *posts, const Judged *judged, const Rules *rules, double after, Py_ssize_t *index,
               double *similarity);
/* Whether sf_best_of's search would end at this candidate, before any other
 * that follows it: a live CachedPost with the judged post's very words. */
int sf_ends_search(PyObject *post, const Judged *judged, double after);

PyObject *sf_verification(PyObject *self, PyObject *args);
PyObject *sf_jaccard(PyObject *self, PyObject *args);
PyObject *sf_word_edits(PyObject *self, PyObject *args);
PyObject *sf_best_match(PyObject *self, PyObject *args);
PyObject *sf_ascii_words(PyObject *self, PyObject *arg);
PyObject *sf_fold_runs(PyObject *self, PyObject *args);
PyObject *sf_holds_any(PyObject *self, PyObject *args);
PyObject *sf_find_in_run(PyObject *self, PyObject *args);
PyObject *sf_members_in_runs(PyObject *self, PyObject *args);
PyObject *sf_with_held(PyObject *self, PyObject *args);
PyObject *sf_mark_run(PyObject *self, PyObject *args);
PyObject *sf_mark_keys(PyObject *self, PyObject *args);
PyObject *sf_marked(PyObject *self, PyObject *args);
PyObject *sf_place_times(PyObject *self, PyObject *args);
PyObject *sf_text_keys(PyObject *self, PyObject *args);
PyObject *sf_id_keys(PyObject *self, PyObject *args);
PyObject *sf_verdict_lines(PyObject *self, PyObject *args);
PyObject *sf_distinct(PyObject *self, PyObject *arg);

/* The Ranker (_kernel_judge.c): a batch's candidates, ranked. */
typedef struct {
    PyObject_HEAD Py_ssize_t count, queries, limit, verified, oldest;
    int64_t *hit_start, *hit_count, *hit_serial; /* per query: its stored members, newest first */
    int64_t *inverse;                            /* per band key occurrence: its query */
    Py_ssize_t *sketch_start;                    /* per sketch: its first occurrence (count + 1 values) */
    int64_t *first_holder, *last_holder;         /* per query: the first and last sketch holding it */
    int64_t **filed;                             /* per query: the batch's serials filed under it (a ring) */
    int64_t *filed_count, *filed_head;
    int64_t *scratch; /* room for a sketch's gathered serials */
    Py_ssize_t scratch_size;
    int spent; /* it judged its batch (judge) */
} Ranker;

typedef struct {
    int64_t serial, count;
} Shared;

/* Sketch ``index``'s candidates in rank order at *ranked (the Ranker's
 * scratch, valid until its next use): how many, or -1 with an error set;
 * *none is set when it has none at all (candidates' None). */
Py_ssize_t sf_ranked_of(Ranker *self, Py_ssize_t index, int recorded, Py_ssize_t wanted, Shared **ranked, int *none);
/* Sketch ``index`` is recorded as ``serial`` (file); 0, or -1 with an error set. */
int sf_filed_as(Ranker *self, Py_ssize_t index, int64_t serial);
/* qsort's order of int64 values, largest first. */
int sf_newest_first(const void *a, const void *b);

/* Ranker.judge (_kernel_judge_loop.c): the batch judge's loop. */
PyObject *sf_ranker_judge(Ranker *self, PyObject *args);

/* The attribute names the kernel reads of posts (_kernel_judge_loop.c),
 * interned once by sf_intern_names when the module is set up. */
extern PyObject *sf_name_timestamp, *sf_name_words, *sf_name_post_id, *sf_name_packed;
/* 0, or -1 with an error set. */
int sf_intern_names(void);

/* Adds the Ranker type to the module; 0, or -1 with an error set. */
int sf_add_ranker(PyObject *module);

/* A new CachedPost (_kernel_rules.c) of a sketch's time, id and ``count``
 * word hashes, or NULL with an error set. */
PyObject *sf_new_post(double timestamp, PyObject *post_id, const uint32_t *words, Py_ssize_t count);
/* Keeps a recorded CachedPost's verification set with it, from its sketch's
 * ``size`` values; 0, or -1 with an error set. */
int sf_keep_set(PyObject *post, const uint64_t *set, Py_ssize_t size);
/* Adds the CachedPost type to the module; 0, or -1 with an error set. */
int sf_add_cached_post(PyObject *module);

/* PostCache's recent posts (_kernel_cache.c): the post under ``serial``, a
 * borrowed reference, or NULL (no error set) for none; keeping a post there. */
extern PyTypeObject RecentPostsType;
PyObject *sf_recent_post(PyObject *recent, int64_t serial);
/* Asks the memory for where sf_recent_post will look for ``serial``, ahead of the look. */
void sf_recent_prefetch(PyObject *recent, int64_t serial);
int sf_keep_recent(PyObject *recent, int64_t serial, PyObject *post);
int sf_add_recent_posts(PyObject *module);
PyObject *sf_recorded_items(PyObject *self, PyObject *args);
/* _kernel_json.c, _kernel_time.c */
PyObject *sf_json_scan(PyObject *self, PyObject *arg);
PyObject *sf_twitter_time(PyObject *self, PyObject *text);

#endif
