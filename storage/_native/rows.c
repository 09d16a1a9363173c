/* row_dicts: happybase's (key, {name: value}) pairs of a dense row batch in one call.
 *
 * scan() of a dense table spends most of its time making Python objects: a
 * bytes object per key and value, a dict and a tuple per row.  Built from the
 * batch's Arrow buffers here, each row costs those objects and nothing else
 * (no intermediate lists, no Python call per row).  The reference and fallback
 * is storage/read/python_rows.py's `rows_to_dicts_py`; both answer the same.
 *
 * A column is a tuple (validity or None, offsets, data or None, offset,
 * length): the buffers of an Arrow binary array (int32 offsets), its offset
 * as the array's slice start.  Every buffer is checked against the rows it
 * must hold, and every offset used against the data, before the first object
 * is made; the views are released before the call returns.  The objects are
 * Python's, so the GIL stays held, and the cyclic collector is paused meanwhile.
 *
 * `start` and `stop` (optional: the whole batch) make rows [start, stop) only.
 * scan() makes a batch's rows a few hundred at a time, each piece once the
 * reader has taken the one before (storage/read/python_rows.py's
 * `row_dict_chunks`): every pair holds a dict, so CPython keeps every pair
 * tracked by the cyclic collector, and a whole batch's pairs alive at once
 * make the collections that follow visit tens of thousands of them, and take
 * tens of megabytes the allocator returns to the system and faults back in at
 * the next batch.  A few hundred pairs alive stay in memory the next piece
 * reuses, and under the collector's first threshold. */
#include "regionscan_native.h"
#include <string.h>

typedef struct {
    rs_view valid, offsets, data;
    const uint8_t *bits;  /* NULL: no nulls */
    const int32_t *off;   /* offsets from the slice start: length + 1 of them */
    const char *bytes;
    Py_ssize_t bit0;      /* the bit of the slice's first row in `bits` */
} rs_binary;

static void rs_binary_release(rs_binary *c) {
    rs_view_release(&c->valid);
    rs_view_release(&c->offsets);
    rs_view_release(&c->data);
}

/* Take column `what` (a 5-tuple, see above) of `rows` rows (-1: its own length, stored in *rows).
 * Only the offsets of rows [start, stop) are checked (stop -1: to the last row): a call that makes
 * some of the rows reads no others, and a batch made in many calls is checked once in all. */
static int rs_binary_get(rs_binary *c, PyObject *spec, const char *what, Py_ssize_t *rows,
                         Py_ssize_t start, Py_ssize_t stop) {
    Py_ssize_t offset, length;
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 5) {
        PyErr_Format(PyExc_ValueError, "row_dicts: %s must be a tuple (validity, offsets, data, offset, length)", what);
        return -1;
    }
    offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 3));
    length = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 4));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "row_dicts: %s's offset and length must be ints", what);
        return -1;
    }
    if (offset < 0 || length < 0) {
        PyErr_Format(PyExc_ValueError, "row_dicts: %s has a negative offset %zd or length %zd", what, offset, length);
        return -1;
    }
    if (*rows >= 0 && length != *rows) {
        PyErr_Format(PyExc_ValueError, "row_dicts: %s has %zd rows, the keys %zd", what, length, *rows);
        return -1;
    }
    *rows = length;
    if (rs_view_get(&c->valid, PyTuple_GET_ITEM(spec, 0), what, 1) < 0) return -1;
    if (rs_view_get(&c->offsets, PyTuple_GET_ITEM(spec, 1), what, 1) < 0) return -1;
    if (rs_view_get(&c->data, PyTuple_GET_ITEM(spec, 2), what, 1) < 0) return -1;
    if (length == 0) {  /* nothing is read: an empty array may come without buffers */
        c->bits = NULL;
        return 0;
    }
    if (c->offsets.view.len / (Py_ssize_t)sizeof(int32_t) < offset + length + 1) {
        PyErr_Format(PyExc_ValueError, "row_dicts: %s's offsets hold %zd bytes, fewer than %zd rows from %zd need",
                     what, c->offsets.view.len, length, offset);
        return -1;
    }
    if (c->valid.held && c->valid.view.len * 8 < offset + length) {
        PyErr_Format(PyExc_ValueError, "row_dicts: %s's validity holds %zd bytes, fewer than %zd rows from %zd need",
                     what, c->valid.view.len, length, offset);
        return -1;
    }
    c->bits = c->valid.held ? (const uint8_t *)c->valid.view.buf : NULL;
    c->bit0 = offset;
    c->off = (const int32_t *)c->offsets.view.buf + offset;
    c->bytes = c->data.held ? (const char *)c->data.view.buf : "";
    if (stop < 0 || stop > length) stop = length;
    if (start < 0 || start > stop) start = stop;  /* out of range: refused by the caller */
    /* every offset used: not falling, within the data */
    Py_ssize_t size = c->data.held ? c->data.view.len : 0;
    if (c->off[start] < 0 || c->off[stop] > size) {
        PyErr_Format(PyExc_ValueError, "row_dicts: %s's offsets %d..%d fall outside its %zd data bytes", what,
                     (int)c->off[start], (int)c->off[stop], size);
        return -1;
    }
    for (Py_ssize_t i = start; i < stop; i++) {
        if (c->off[i] > c->off[i + 1]) {
            PyErr_Format(PyExc_ValueError, "row_dicts: %s's offsets fall at row %zd", what, i);
            return -1;
        }
    }
    return 0;
}

#define RS_VALID(c, i) (!(c)->bits || ((c)->bits[((c)->bit0 + (i)) >> 3] >> (((c)->bit0 + (i)) & 7) & 1))

/* Row i's value of column c as a new bytes object, or a new reference to None when null. */
static inline PyObject *rs_value(const rs_binary *c, Py_ssize_t i) {
    if (!RS_VALID(c, i)) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(c->bytes + c->off[i], (Py_ssize_t)(c->off[i + 1] - c->off[i]));
}

PyObject *rs_row_dicts(PyObject *self, PyObject *args) {
    PyObject *key_spec, *columns, *names, *out = NULL;
    rs_binary key;
    rs_binary *cols = NULL;
    Py_ssize_t ncols = 0, rows = -1, taken = 0, start = 0, stop = -1;
    int key_taken = 0, gc_was = 0;
    (void)self;
    memset(&key, 0, sizeof(key));
    if (!PyArg_ParseTuple(args, "OO!O!|nn:row_dicts", &key_spec, &PyTuple_Type, &columns, &PyTuple_Type, &names,
                          &start, &stop))
        return NULL;
    ncols = PyTuple_GET_SIZE(columns);
    if (PyTuple_GET_SIZE(names) != ncols) {
        PyErr_Format(PyExc_ValueError, "row_dicts: %zd names for %zd columns", PyTuple_GET_SIZE(names), ncols);
        return NULL;
    }
    for (Py_ssize_t j = 0; j < ncols; j++) {
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(names, j))) {
            PyErr_Format(PyExc_ValueError, "row_dicts: name %zd must be bytes, got %.80s", j,
                         Py_TYPE(PyTuple_GET_ITEM(names, j))->tp_name);
            return NULL;
        }
    }
    key_taken = 1;
    if (rs_binary_get(&key, key_spec, "key", &rows, start, stop) < 0) goto done;
    if (stop < 0) stop = rows;
    if (start < 0 || start > stop || stop > rows) {
        PyErr_Format(PyExc_ValueError, "row_dicts: rows %zd..%zd asked of a batch of %zd", start, stop, rows);
        goto done;
    }
    cols = PyMem_Calloc(ncols ? ncols : 1, sizeof(rs_binary));
    if (!cols) { PyErr_NoMemory(); goto done; }
    for (; taken < ncols; taken++) {
        char what[32];
        snprintf(what, sizeof(what), "column %zd", taken);
        if (rs_binary_get(&cols[taken], PyTuple_GET_ITEM(columns, taken), what, &rows, start, stop) < 0) {
            taken++;  /* release what it took */
            goto done;
        }
    }
    out = PyList_New(stop - start);
    if (!out) goto done;
    /* the cyclic collector is paused while the rows are made (and left as it was found):
     * every tuple and dict counts as an allocation of the youngest generation, so a call
     * of tens of thousands of rows would start a collection every few hundred rows, each
     * visiting the rows made so far, and together they cost more than making the rows.
     * Nothing here runs Python code or lets another thread in while it is paused. */
    gc_was = PyGC_Disable();
    for (Py_ssize_t i = start; i < stop; i++) {
        PyObject *k = rs_value(&key, i), *d = NULL, *pair;
        if (!k) goto fail;
        d = PyDict_New();
        if (!d) { Py_DECREF(k); goto fail; }
        for (Py_ssize_t j = 0; j < ncols; j++) {
            const rs_binary *c = &cols[j];
            if (!RS_VALID(c, i)) continue;  /* a row without this cell: not in its dict */
            PyObject *v = PyBytes_FromStringAndSize(c->bytes + c->off[i], (Py_ssize_t)(c->off[i + 1] - c->off[i]));
            if (!v || PyDict_SetItem(d, PyTuple_GET_ITEM(names, j), v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(k);
                Py_DECREF(d);
                goto fail;
            }
            Py_DECREF(v);
        }
        pair = PyTuple_New(2);
        if (!pair) { Py_DECREF(k); Py_DECREF(d); goto fail; }
        PyTuple_SET_ITEM(pair, 0, k);
        PyTuple_SET_ITEM(pair, 1, d);
        /* the pair stays tracked: its dict of bytes is not, but a reader may put a
         * container in it later, and an untracked pair in a cycle would never be freed
         * (CPython's collector keeps a tuple holding a dict tracked for that reason) */
        PyList_SET_ITEM(out, i - start, pair);
    }
    goto done;
fail:
    Py_CLEAR(out);  /* the list's unset items are NULL, which its deallocation skips */
done:
    if (gc_was) PyGC_Enable();
    if (key_taken) rs_binary_release(&key);
    for (Py_ssize_t j = 0; j < taken; j++) rs_binary_release(&cols[j]);
    PyMem_Free(cols);
    return out;
}
