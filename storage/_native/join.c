/* join_sorted: the union of sorted runs of distinct uint64 key codes, as row placements.
 *
 * A scan of several families joins each family's rows on the row key (storage/read/
 * family_join.py): each family's keys are sorted and distinct, a key may be in several
 * families, and the answer is their union in key order with, per family, the row each union
 * key has there.  The NumPy reference (storage.kernels.row_merge.join_keys) sorts the codes
 * laid end to end; this walks the runs once, comparing their heads. */
#include "regionscan_native.h"
#include <string.h>

#define RS_JOIN_MAX_RUNS 64

/* join_sorted(codes, bounds, picks, index) -> rows.  codes: uint64 key codes, runs laid end to
 * end; bounds: int64, the runs' starts and the end (runs + 1 entries, from 0 to len(codes));
 * picks: int64 out, len(codes) entries, each union row's key as its position in codes (the
 * first run holding it); index: int64 out, runs x len(codes), row r of run t at t * len(codes)
 * + r: the union row's position within run t, or -1.  ValueError when a run is not strictly
 * ascending. */
PyObject *rs_join_sorted(PyObject *self, PyObject *args) {
    PyObject *codes_obj, *bounds_obj, *picks_obj, *index_obj, *result = NULL;
    rs_view codes = {0}, bounds = {0}, picks = {0}, index = {0};
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO:join_sorted", &codes_obj, &bounds_obj, &picks_obj, &index_obj)) return NULL;
    if (rs_view_get(&codes, codes_obj, "codes", 0) < 0 || rs_view_get(&bounds, bounds_obj, "bounds", 0) < 0)
        goto done;
    if (codes.view.len % 8 || bounds.view.len % 8 || bounds.view.len < 16) {
        PyErr_SetString(PyExc_ValueError, "codes must be uint64 and bounds int64 with at least two entries");
        goto done;
    }
    Py_ssize_t n = codes.view.len / 8, runs = bounds.view.len / 8 - 1;
    const int64_t *b = (const int64_t *)bounds.view.buf;
    if (runs > RS_JOIN_MAX_RUNS) {
        PyErr_Format(PyExc_ValueError, "join_sorted takes at most %d runs, got %zd", RS_JOIN_MAX_RUNS, runs);
        goto done;
    }
    int bounds_ok = b[0] == 0 && b[runs] == n;
    for (Py_ssize_t t = 0; t < runs && bounds_ok; t++) bounds_ok = b[t] <= b[t + 1];
    if (!bounds_ok) {
        PyErr_Format(PyExc_ValueError, "bounds must rise from 0 to %zd, the codes' length", n);
        goto done;
    }
    if (rs_view_out(&picks, picks_obj, n * 8) < 0 || rs_view_out(&index, index_obj, runs * n * 8) < 0) goto done;
    const uint64_t *c = (const uint64_t *)codes.view.buf;
    int64_t *pk = (int64_t *)picks.view.buf, *ix = (int64_t *)index.view.buf;
    int64_t at[RS_JOIN_MAX_RUNS];
    for (Py_ssize_t t = 0; t < runs; t++) at[t] = b[t];
    Py_ssize_t rows = 0;
    int ascending = 1;
    RS_RELEASE_GIL(n)
    for (;;) {
        Py_ssize_t first = -1;
        uint64_t low = 0;
        for (Py_ssize_t t = 0; t < runs; t++) {  /* the least head; the first run holding it */
            if (at[t] < b[t + 1] && (first < 0 || c[at[t]] < low)) {
                low = c[at[t]];
                first = t;
            }
        }
        if (first < 0) break;
        pk[rows] = at[first];
        for (Py_ssize_t t = 0; t < runs; t++) {
            int64_t *row = ix + t * n + rows;
            if (at[t] < b[t + 1] && c[at[t]] == low) {
                *row = at[t] - b[t];
                at[t]++;
                if (at[t] < b[t + 1] && c[at[t]] <= low) ascending = 0;
            } else {
                *row = -1;
            }
        }
        rows++;
        if (!ascending) break;
    }
    RS_ACQUIRE_GIL()
    if (!ascending) {
        PyErr_SetString(PyExc_ValueError, "codes: a run is not strictly ascending");
        goto done;
    }
    result = PyLong_FromSsize_t(rows);
done:
    rs_view_release(&codes);
    rs_view_release(&bounds);
    rs_view_release(&picks);
    rs_view_release(&index);
    return result;
}
