/* The recent posts of stores/_base.PostCache, compiled: the RecentPosts type,
 * which PostCache keeps its posts in where the kernel is built, in place of
 * its two dicts.
 *
 * Two generations of at most ``half`` posts each, keyed by serial: put adds
 * to the newer one, first starting a new one (the older dropped) when it is
 * full; get looks in the newer, then the older. The compiled judge looks its
 * candidates up here by serial, with no int object made for the look-up and
 * no dict probed: a flood's posts look up eight candidates each.
 * tests/test_kernel.py holds it to the two dicts it replaces.
 */
#include "_kernel.h"

typedef struct {
    int64_t serial;
    PyObject *post; /* NULL: an empty slot */
} Slot;

typedef struct {
    Slot *slots;
    uint64_t mask; /* slots - 1 */
    Py_ssize_t used;
} Table;

typedef struct {
    PyObject_HEAD Table tables[2]; /* the newer generation, then the older */
    Py_ssize_t half;
} RecentPosts;

static inline uint64_t slot_of(const Table *table, int64_t serial) {
    return ((uint64_t)serial * 0x9E3779B97F4A7C15ULL) >> 32 & table->mask;
}

static Slot *find(const Table *table, int64_t serial) {
    for (uint64_t at = slot_of(table, serial);; at = (at + 1) & table->mask) {
        Slot *slot = &table->slots[at];
        if (slot->post == NULL || slot->serial == serial)
            return slot;
    }
}

static void empty(Table *table) {
    for (uint64_t at = 0; table->slots != NULL && at <= table->mask; at++)
        Py_CLEAR(table->slots[at].post);
    table->used = 0;
}

PyObject *sf_recent_post(PyObject *recent, int64_t serial) {
    RecentPosts *self = (RecentPosts *)recent;
    if (self->tables[0].slots == NULL) /* not set up: holds nothing */
        return NULL;
    for (int generation = 0; generation < 2; generation++) {
        Slot *slot = find(&self->tables[generation], serial);
        if (slot->post != NULL)
            return slot->post;
    }
    return NULL;
}

void sf_recent_prefetch(PyObject *recent, int64_t serial) {
    RecentPosts *self = (RecentPosts *)recent;
    for (int generation = 0; generation < 2 && self->tables[generation].slots != NULL; generation++)
        PREFETCH(&self->tables[generation].slots[slot_of(&self->tables[generation], serial)]);
}

int sf_keep_recent(PyObject *recent, int64_t serial, PyObject *post) {
    RecentPosts *self = (RecentPosts *)recent;
    if (self->tables[0].slots == NULL) /* not set up: keeps nothing */
        return -1;
    Table *newer = &self->tables[0];
    if (newer->used >= self->half) { /* a new generation; the older one's posts are dropped */
        Table older = self->tables[1];
        empty(&older);
        self->tables[1] = *newer;
        *newer = older;
    }
    Slot *slot = find(newer, serial);
    if (slot->post == NULL)
        newer->used++;
    slot->serial = serial;
    Py_XSETREF(slot->post, Py_NewRef(post));
    return 0;
}

static int recent_init(RecentPosts *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"half", NULL};
    Py_ssize_t half;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n:RecentPosts", names, &half))
        return -1;
    if (half < 1 || half > (Py_ssize_t)1 << 28) {
        PyErr_SetString(PyExc_ValueError, "a generation holds 1 to 2**28 posts");
        return -1;
    }
    if (self->tables[0].slots != NULL) {
        PyErr_SetString(PyExc_TypeError, "a RecentPosts is set up once");
        return -1;
    }
    uint64_t slots = 16;
    while (slots < 2 * (uint64_t)half)
        slots *= 2;
    for (int generation = 0; generation < 2; generation++) {
        self->tables[generation].slots = PyMem_Calloc(slots, sizeof(Slot));
        if (self->tables[generation].slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->tables[generation].mask = slots - 1;
    }
    self->half = half;
    return 0;
}

static void recent_dealloc(RecentPosts *self) {
    for (int generation = 0; generation < 2; generation++) {
        empty(&self->tables[generation]);
        PyMem_Free(self->tables[generation].slots);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ready(RecentPosts *self) {
    if (self->tables[0].slots != NULL)
        return 1;
    PyErr_SetString(PyExc_ValueError, "a RecentPosts not set up");
    return 0;
}

/* get(serial) -> the post, or None */
static PyObject *recent_get(RecentPosts *self, PyObject *arg) {
    long long serial = PyLong_AsLongLong(arg);
    if ((serial == -1 && PyErr_Occurred()) || !ready(self))
        return NULL;
    PyObject *post = sf_recent_post((PyObject *)self, serial);
    return Py_NewRef(post == NULL ? Py_None : post);
}

/* put(serial, post) */
static PyObject *recent_put(RecentPosts *self, PyObject *args) {
    long long serial;
    PyObject *post;
    if (!PyArg_ParseTuple(args, "LO", &serial, &post) || !ready(self))
        return NULL;
    if (post == Py_None) {
        PyErr_SetString(PyExc_ValueError, "a recent post is a post, not None");
        return NULL;
    }
    sf_keep_recent((PyObject *)self, serial, post);
    Py_RETURN_NONE;
}

static PyObject *recent_clear(RecentPosts *self, PyObject *unused) {
    for (int generation = 0; generation < 2; generation++)
        empty(&self->tables[generation]);
    Py_RETURN_NONE;
}

static Py_ssize_t recent_length(RecentPosts *self) {
    return self->tables[0].used + self->tables[1].used;
}

static PyMethodDef recent_methods[] = {
    {"get", (PyCFunction)recent_get, METH_O, "The post under a serial, newer generation first, or None."},
    {"put", (PyCFunction)recent_put, METH_VARARGS, "Keep a post under its serial in the newer generation."},
    {"clear", (PyCFunction)recent_clear, METH_NOARGS, "Drop every post."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods recent_sequence = {.sq_length = (lenfunc)recent_length};

PyTypeObject RecentPostsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "streamfilter._kernel.RecentPosts",
    .tp_basicsize = sizeof(RecentPosts),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "PostCache's two generations of recent posts, by serial.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)recent_init,
    .tp_dealloc = (destructor)recent_dealloc,
    .tp_methods = recent_methods,
    .tp_as_sequence = &recent_sequence,
};

int sf_add_recent_posts(PyObject *module) {
    return PyModule_AddType(module, &RecentPostsType);
}

/* recorded_items(posts, first_serial, recent, encode) -> [(key, record), ...]
 * Batch.record's writes, compiled: for the batch's recorded posts (a list
 * of CachedPost, serials from first_serial on), each one's key (its serial,
 * 8 bytes big-endian) and record (_records.encode_record), and each kept in
 * recent (a RecentPosts), as PostCache.put keeps it. A decimal id of up to
 * 19 digits is packed here; encode(timestamp, post_id, words) makes any
 * other record. */
PyObject *sf_recorded_items(PyObject *self, PyObject *args) {
    PyObject *posts, *recent, *encode;
    long long first_serial;
    if (!PyArg_ParseTuple(args, "O!LO!O", &PyList_Type, &posts, &first_serial, &RecentPostsType, &recent, &encode))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(posts);
    PyObject *items = PyList_New(count);
    for (Py_ssize_t i = 0; items != NULL && i < count; i++) {
        PyObject *post = PyList_GET_ITEM(posts, i), *timestamp = NULL, *post_id = NULL, *words = NULL;
        PyObject *key = NULL, *record = NULL, *item = NULL;
        int64_t serial = first_serial + i;
        unsigned char packed_key[8];
        for (int b = 0; b < 8; b++)
            packed_key[b] = (unsigned char)((uint64_t)serial >> (56 - 8 * b));
        if ((timestamp = PyObject_GetAttr(post, sf_name_timestamp)) == NULL ||
            (post_id = PyObject_GetAttr(post, sf_name_post_id)) == NULL ||
            (words = PyObject_GetAttr(post, sf_name_words)) == NULL)
            goto next;
        double when = PyFloat_AsDouble(timestamp);
        if (when == -1.0 && PyErr_Occurred())
            goto next;
        Py_ssize_t length = PyUnicode_Check(post_id) ? PyUnicode_GET_LENGTH(post_id) : 0;
        int decimal = length >= 1 && length <= 19 && PyUnicode_IS_ASCII(post_id) && PyBytes_Check(words);
        const char *digits = decimal ? (const char *)PyUnicode_DATA(post_id) : NULL;
        unsigned long long number = 0;
        for (Py_ssize_t d = 0; decimal && d < length; d++) {
            decimal = digits[d] >= '0' && digits[d] <= '9' && (d > 0 || digits[0] != '0' || length == 1);
            number = number * 10 + (unsigned long long)(digits[d] - '0');
        }
        if (decimal) { /* _HEADER (<dB), the marker 255, the id as <Q, then the words */
            Py_ssize_t size = PyBytes_GET_SIZE(words);
            record = PyBytes_FromStringAndSize(NULL, 17 + size);
            if (record != NULL) {
                unsigned char *out = (unsigned char *)PyBytes_AS_STRING(record);
                memcpy(out, &when, 8); /* little-endian, as the kernel is only built where doubles are */
                out[8] = 255;
                for (int b = 0; b < 8; b++)
                    out[9 + b] = (unsigned char)(number >> (8 * b));
                memcpy(out + 17, PyBytes_AS_STRING(words), size);
            }
        } else {
            record = PyObject_CallFunctionObjArgs(encode, timestamp, post_id, words, NULL);
        }
        if (record != NULL && (key = PyBytes_FromStringAndSize((const char *)packed_key, 8)) != NULL &&
            (item = PyTuple_Pack(2, key, record)) != NULL && sf_keep_recent(recent, serial, post) == 0) {
            PyList_SET_ITEM(items, i, item);
            item = NULL;
        } else if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "a RecentPosts not set up");
        }
    next:
        if (PyErr_Occurred())
            Py_CLEAR(items);
        Py_XDECREF(timestamp);
        Py_XDECREF(post_id);
        Py_XDECREF(words);
        Py_XDECREF(key);
        Py_XDECREF(record);
        Py_XDECREF(item);
    }
    return items;
}
