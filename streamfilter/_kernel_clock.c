/* The event-time clock's placing of posts (_clock.py, EventClock.place),
 * for a batch of times at once. It computes what the Python rule computes,
 * value for value (tests/test_clock.py): the same comparisons, in the same
 * order, on the same doubles, so even a time that is not finite lands where
 * Python's bisect and max put it. */
#include "_kernel.h"

/* bisect.bisect_left and bisect.bisect_right over ordered[0..size). */
static Py_ssize_t bisect_left(const double *ordered, Py_ssize_t size, double value) {
    Py_ssize_t low = 0, high = size;
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        if (ordered[middle] < value)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

static Py_ssize_t bisect_right(const double *ordered, Py_ssize_t size, double value) {
    Py_ssize_t low = 0, high = size;
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        if (value < ordered[middle])
            high = middle;
        else
            low = middle + 1;
    }
    return low;
}

/* Python's max(a, b) and min(a, b): the first unless the second is larger (smaller). */
static inline double py_max(double a, double b) { return b > a ? b : a; }
static inline double py_min(double a, double b) { return b < a ? b : a; }

/* place_times(arrived, ordered, size, head, corroborated, new, slack, stream_time, looked, window,
 *             corroboration, lead, slack_divisor, wall, stamps, placed, streams)
 *   -> (size, head, corroborated, stream_time, looked)
 * EventClock.place for each of ``stamps`` in turn (float64): the time each
 * is placed at goes to ``placed``, and the stream's time after it to
 * ``streams`` (float64, as many). ``arrived`` is the window's times in
 * arrival order, a ring of ``window`` doubles whose oldest is at ``head``;
 * ``ordered`` the same ``size`` times, sorted. ``wall`` is called once a
 * post, as place calls it. */
PyObject *sf_place_times(PyObject *self, PyObject *args) {
    Py_buffer arrived_view, ordered_view, stamps_view, placed_view, streams_view;
    Py_ssize_t size, head, window, corroboration, lead;
    double corroborated, slack, stream_time, looked, slack_divisor;
    int new;
    PyObject *wall, *result = NULL;
    if (!PyArg_ParseTuple(args, "w*w*nndpdddnnndOy*w*w*", &arrived_view, &ordered_view, &size, &head, &corroborated,
                          &new, &slack, &stream_time, &looked, &window, &corroboration, &lead, &slack_divisor, &wall,
                          &stamps_view, &placed_view, &streams_view))
        return NULL;
    Py_ssize_t count = stamps_view.len / (Py_ssize_t)sizeof(double);
    if (window < 1 || corroboration < 1 || arrived_view.len < window * (Py_ssize_t)sizeof(double) ||
        ordered_view.len < window * (Py_ssize_t)sizeof(double) || size < 0 || size > window || head < 0 ||
        head >= window || stamps_view.len % sizeof(double) || placed_view.len < stamps_view.len ||
        streams_view.len < stamps_view.len) {
        PyErr_SetString(PyExc_ValueError, "bad clock window or buffers");
        goto done;
    }
    double *arrived = arrived_view.buf, *ordered = ordered_view.buf, *placed = placed_view.buf,
           *streams = streams_view.buf;
    const double *stamps = stamps_view.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        double timestamp = stamps[i], reached, allowance;
        if (size == window) { /* the oldest leaves the window */
            Py_ssize_t at = bisect_left(ordered, size, arrived[head]);
            if (at >= size) { /* Python's del would raise: a window out of step */
                PyErr_SetString(PyExc_IndexError, "the clock's window lost a time");
                goto done;
            }
            memmove(ordered + at, ordered + at + 1, (size - at - 1) * sizeof(double));
            size--;
            arrived[head] = timestamp;
            head = (head + 1) % window;
        } else {
            arrived[(head + size) % window] = timestamp;
        }
        Py_ssize_t at = bisect_right(ordered, size, timestamp);
        memmove(ordered + at + 1, ordered + at, (size - at) * sizeof(double));
        ordered[at] = timestamp;
        size++;
        if (size >= corroboration)
            reached = ordered[size - corroboration];
        else
            reached = new ? ordered[0] : corroborated;
        if (reached > corroborated)
            corroborated = reached;
        PyObject *now_object = PyObject_CallNoArgs(wall);
        double now = now_object == NULL ? -1.0 : PyFloat_AsDouble(now_object);
        Py_XDECREF(now_object);
        if (now_object == NULL || (now == -1.0 && PyErr_Occurred()))
            goto done;
        stream_time = py_max(corroborated, stream_time + (now - looked));
        looked = now;
        if (size <= corroboration) {
            allowance = slack * (new ? slack_divisor / 4 : 1);
        } else {
            Py_ssize_t below = size - corroboration, counted = below < corroboration ? below : corroboration;
            double pace = (ordered[below] - ordered[below - counted]) / (double)counted;
            allowance = py_max(slack, (double)(corroboration + lead) * pace);
        }
        placed[i] = py_min(timestamp, stream_time + allowance);
        streams[i] = stream_time;
    }
    result = Py_BuildValue("(nnddd)", size, head, corroborated, stream_time, looked);
done:
    PyBuffer_Release(&arrived_view);
    PyBuffer_Release(&ordered_view);
    PyBuffer_Release(&stamps_view);
    PyBuffer_Release(&placed_view);
    PyBuffer_Release(&streams_view);
    return result;
}
