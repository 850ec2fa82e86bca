/* Twitter v1.1's times (_time._from_twitter), read without strptime: the
 * seconds since the epoch of a time of the usual shape, exactly as the
 * Python reading gives them (tests/test_kernel.py). */
#include <string.h>

#include "_kernel.h"

/* Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard
 * Hinnant's days_from_civil), as calendar.timegm counts them. */
static int64_t days_from_civil(int64_t year, int month, int day) {
    year -= month <= 2;
    int64_t era = (year >= 0 ? year : year - 399) / 400;
    int64_t of_era = year - era * 400;
    int64_t of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    return era * 146097 + of_era * 365 + of_era / 4 - of_era / 100 + of_year - 719468;
}

/* The value of text[at..at+width) as ASCII digits, or -1. */
static int digits(const char *text, int at, int width) {
    int value = 0;
    for (int i = at; i < at + width; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -1;
        value = value * 10 + (text[i] - '0');
    }
    return value;
}

/* twitter_time(text) -> float or None: the seconds since the epoch of a
 * Twitter v1.1 time of the usual shape, "Wed Feb 24 11:35:00 +0000 2015"
 * (30 ASCII characters, a day of 2 digits, a year from 1900), when it names
 * a real time; None for anything else, which _time._from_twitter reads
 * whole, refusing what it must. Its answer for these, exactly. */
PyObject *sf_twitter_time(PyObject *self, PyObject *text) {
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    static const int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "twitter_time takes a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text) || PyUnicode_GET_LENGTH(text) != 30)
        Py_RETURN_NONE;
    const char *t = (const char *)PyUnicode_DATA(text);
    int month = 0, day = digits(t, 8, 2), hour = digits(t, 11, 2), minute = digits(t, 14, 2);
    int second = digits(t, 17, 2), shift_hours = digits(t, 21, 2), shift_minutes = digits(t, 23, 2);
    int year = digits(t, 26, 4);
    for (int m = 0; m < 12; m++)
        if (memcmp(t + 4, months + 3 * m, 3) == 0)
            month = m + 1;
    if (t[0] == ' ' || t[1] == ' ' || t[2] == ' ' || t[3] != ' ' || t[7] != ' ' || t[10] != ' ' || t[13] != ':' ||
        t[16] != ':' || t[19] != ' ' || (t[20] != '+' && t[20] != '-') || t[25] != ' ' || month == 0 || day < 1 ||
        hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59 || shift_hours < 0 ||
        shift_hours > 23 || shift_minutes < 0 || shift_minutes > 59 || year < 1900)
        Py_RETURN_NONE;
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if (day > month_days[month - 1] + (month == 2 && leap))
        Py_RETURN_NONE;
    int64_t shift = shift_hours * 3600 + shift_minutes * 60;
    int64_t midnight = days_from_civil(year, month, day) * 86400 + (t[20] == '+' ? -shift : shift);
    return PyFloat_FromDouble((double)(midnight + hour * 3600 + minute * 60 + second));
}
