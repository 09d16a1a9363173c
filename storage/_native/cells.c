/* cell_columns: a list of cell tuples as the buffers of an Arrow cell table, in one call.
 *
 * A flush hands the store file writer its memstore's cells (6-tuples: row,
 * family, qualifier, timestamp, type, value) as a CELL_SCHEMA table.  The
 * reference, storage/memstore/segment.py's `cells_to_table_py`, splits the
 * tuples into columns with zip() and converts each column with pyarrow, a
 * Python-level step per cell and field.  Here one pass reads the tuples and
 * sizes the columns, a second fills them: per binary column its int32 offsets
 * and its data, then the int64 timestamps and the uint8 types, each a bytes
 * object that pyarrow wraps without a copy.
 *
 * Anything the reference would convert or refuse (a bytes-like that is not
 * bytes, a timestamp outside int64, a type outside 0-255, a column over the
 * int32 offsets' 2 GiB) makes this return None: the reference then runs.
 * The copy runs without the GIL when it is large, each tuple held by a new
 * reference meanwhile. */
#include "regionscan_native.h"
#include <string.h>

#define RS_CELLS_GIL_BYTES (1 << 18)

static const int rs_cell_binary[4] = {0, 1, 2, 5};  /* row, family, qualifier, value */

PyObject *rs_cell_columns(PyObject *self, PyObject *args) {
    PyObject *cells;
    (void)self;
    if (!PyArg_ParseTuple(args, "O", &cells)) return NULL;
    if (!PyList_Check(cells)) {
        PyErr_SetString(PyExc_ValueError, "cell_columns: cells must be a list of 6-tuples");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(cells);
    PyObject **held = PyMem_Malloc(sizeof(PyObject *) * (size_t)(n ? n : 1));
    if (held == NULL) return PyErr_NoMemory();
    PyObject *bufs[10] = {NULL};
    PyObject *out = NULL;
    Py_ssize_t taken = 0, sizes[4] = {0, 0, 0, 0};
    int refused = 0;
    for (Py_ssize_t i = 0; i < n && !refused; i++) {
        PyObject *cell = PyList_GET_ITEM(cells, i);
        if (!PyTuple_Check(cell) || PyTuple_GET_SIZE(cell) != 6) { refused = 1; break; }
        PyObject *ts = PyTuple_GET_ITEM(cell, 3), *kind = PyTuple_GET_ITEM(cell, 4);
        if (!PyLong_Check(ts) || !PyLong_Check(kind)) { refused = 1; break; }
        for (int f = 0; f < 4; f++) {
            PyObject *b = PyTuple_GET_ITEM(cell, rs_cell_binary[f]);
            if (!PyBytes_Check(b)) { refused = 1; break; }
            sizes[f] += PyBytes_GET_SIZE(b);
            if (sizes[f] > 0x7fffffffLL) { refused = 1; break; }
        }
        if (refused) break;
        Py_INCREF(cell);
        held[taken++] = cell;
    }
    if (refused) goto done;
    /* the timestamps and types, read with the GIL (ints are objects) */
    bufs[8] = PyBytes_FromStringAndSize(NULL, 8 * n);
    bufs[9] = PyBytes_FromStringAndSize(NULL, n);
    if (bufs[8] == NULL || bufs[9] == NULL) goto done;
    int64_t *stamps = (int64_t *)PyBytes_AS_STRING(bufs[8]);
    uint8_t *types = (uint8_t *)PyBytes_AS_STRING(bufs[9]);
    for (Py_ssize_t i = 0; i < n; i++) {
        int overflow = 0;
        long long stamp = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(held[i], 3), &overflow);
        if (overflow || (stamp == -1 && PyErr_Occurred())) { PyErr_Clear(); refused = 1; goto done; }
        long k = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(held[i], 4), &overflow);
        if (overflow || k < 0 || k > 255) { PyErr_Clear(); refused = 1; goto done; }
        stamps[i] = (int64_t)stamp;
        types[i] = (uint8_t)k;
    }
    for (int f = 0; f < 4; f++) {
        bufs[2 * f] = PyBytes_FromStringAndSize(NULL, 4 * (n + 1));
        bufs[2 * f + 1] = PyBytes_FromStringAndSize(NULL, sizes[f]);
        if (bufs[2 * f] == NULL || bufs[2 * f + 1] == NULL) goto done;
    }
    {
        Py_ssize_t total = sizes[0] + sizes[1] + sizes[2] + sizes[3];
        PyThreadState *state = total >= RS_CELLS_GIL_BYTES ? PyEval_SaveThread() : NULL;
        for (int f = 0; f < 4; f++) {
            int32_t *offsets = (int32_t *)PyBytes_AS_STRING(bufs[2 * f]);
            char *data = PyBytes_AS_STRING(bufs[2 * f + 1]);
            int32_t at = 0;
            offsets[0] = 0;
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *b = PyTuple_GET_ITEM(held[i], rs_cell_binary[f]);
                Py_ssize_t size = PyBytes_GET_SIZE(b);
                memcpy(data + at, PyBytes_AS_STRING(b), (size_t)size);
                at += (int32_t)size;
                offsets[i + 1] = at;
            }
        }
        if (state) PyEval_RestoreThread(state);
    }
    out = PyTuple_New(10);
    if (out == NULL) goto done;
    for (int j = 0; j < 10; j++) {
        PyTuple_SET_ITEM(out, j, bufs[j]);  /* the tuple takes the reference */
        bufs[j] = NULL;
    }
done:
    for (int j = 0; j < 10; j++) Py_XDECREF(bufs[j]);
    for (Py_ssize_t i = 0; i < taken; i++) Py_DECREF(held[i]);
    PyMem_Free(held);
    if (out == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return out;
}
