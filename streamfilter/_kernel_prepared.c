/* A batch's Sketch objects, cut from a worker's flat columns (_prepared.Columns.sketches).
 *
 * Sketch is a slotted dataclass whose __init__ only stores each field; here
 * each object is allocated by its type and its slots are filled directly,
 * by the offsets its member descriptors give. The descriptors come from
 * Python in field order and are checked here: each must be a writable
 * object slot of that very type. The Python loop stays as the reference:
 * tests/test_kernel_prepared.py holds this to it, on every fixture. */
#include "_kernel.h"

#include <structmember.h>

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

