/* Point reads of a dense block: the binary search of its row keys and the
 * row's {b"family:qualifier": value} dict in one call.
 *
 * The Python twin is storage/storefile/point.py's `point_row_py`; both take a
 * block's `native_form` (point.py) and answer the same. */
#include "regionscan_native.h"
#include <string.h>

/* -1, 0, 1: `key` (klen bytes) against an entry of exactly `width` bytes, as bytes compare. */
static int rs_key_cmp(const char *key, Py_ssize_t klen, const char *entry, Py_ssize_t width) {
    Py_ssize_t m = klen < width ? klen : width;
    int c = memcmp(key, entry, (size_t)m);
    if (c != 0) return c < 0 ? -1 : 1;
    return klen < width ? -1 : (klen > width ? 1 : 0);
}

/* The integer at `i` of a buffer of little-endian offsets or run ends of `itemsize` bytes. */
static int64_t rs_int_at(const char *buf, Py_ssize_t itemsize, Py_ssize_t i) {
    switch (itemsize) {
    case 8: { int64_t v; memcpy(&v, buf + i * 8, 8); return v; }
    case 4: { int32_t v; memcpy(&v, buf + i * 4, 4); return v; }
    default: { int16_t v; memcpy(&v, buf + i * 2, 2); return v; }
    }
}

/* One column of a form is 8 items of the flat columns tuple: name, offsets,
 * offsets itemsize, data, valid or None, run ends or None, run ends itemsize,
 * timestamp offset; each is checked against the row once. */
typedef struct {
    rs_view offsets, data, valid, ends;
} rs_column_views;

static void rs_column_release(rs_column_views *c) {
    rs_view_release(&c->offsets);
    rs_view_release(&c->data);
    rs_view_release(&c->valid);
    rs_view_release(&c->ends);
}

/* The column's value of row `i` into `out` (NULL: the row has no cell in it); 0 or -1 with an error. */
static int rs_column_value(PyObject **col, Py_ssize_t i, PyObject **out) {
    PyObject *offsets = col[1], *data = col[3], *valid = col[4], *ends = col[5];
    Py_ssize_t osize, esize, ts_offset;
    rs_column_views v;
    int rc = -1;
    *out = NULL;
    if (!PyBytes_Check(col[0]) || !PyLong_Check(col[2]) || !PyLong_Check(col[6]) || !PyLong_Check(col[7])) {
        PyErr_SetString(PyExc_ValueError, "point_row: a column's name must be bytes and its widths and offset ints");
        return -1;
    }
    osize = PyLong_AsSsize_t(col[2]);
    esize = PyLong_AsSsize_t(col[6]);
    ts_offset = PyLong_AsSsize_t(col[7]);
    if (PyErr_Occurred()) return -1;
    if ((osize != 4 && osize != 8) || (esize != 2 && esize != 4 && esize != 8)) {
        PyErr_Format(PyExc_ValueError, "point_row: offset widths must be 4 or 8 bytes and run end widths 2, 4 or 8, "
                     "got %zd and %zd", osize, esize);
        return -1;
    }
    memset(&v, 0, sizeof(v));
    if (rs_view_get(&v.offsets, offsets, "point_row offsets", 0) < 0 ||
        rs_view_get(&v.data, data, "point_row data", 0) < 0 ||
        rs_view_get(&v.valid, valid, "point_row validity", 1) < 0 ||
        rs_view_get(&v.ends, ends, "point_row run ends", 1) < 0)
        goto done;
    Py_ssize_t slot = i;
    if (v.ends.held) {
        /* the run holding row i: the first run end above i + ts_offset */
        Py_ssize_t n = v.ends.view.len / esize, lo = 0, hi = n;
        int64_t want = (int64_t)i + ts_offset;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (rs_int_at(v.ends.view.buf, esize, mid) <= want) lo = mid + 1; else hi = mid;
        }
        slot = lo;
        if (slot >= n) {
            PyErr_Format(PyExc_ValueError, "point_row: row %zd is past the column's %zd timestamp runs", i, n);
            goto done;
        }
    }
    if (v.valid.held) {
        if (slot >= v.valid.view.len) {
            PyErr_Format(PyExc_ValueError, "point_row: slot %zd is past the %zd validity entries", slot,
                         v.valid.view.len);
            goto done;
        }
        if (!((const char *)v.valid.view.buf)[slot]) { rc = 0; goto done; }  /* no cell in this column */
    }
    if ((i + 2) * osize > v.offsets.view.len) {
        PyErr_Format(PyExc_ValueError, "point_row: row %zd is past the %zd value offsets", i,
                     v.offsets.view.len / osize);
        goto done;
    }
    int64_t start = rs_int_at(v.offsets.view.buf, osize, i), end = rs_int_at(v.offsets.view.buf, osize, i + 1);
    if (start < 0 || end < start || end > v.data.view.len) {
        PyErr_Format(PyExc_ValueError, "point_row: value offsets %lld..%lld are outside the %zd data bytes",
                     (long long)start, (long long)end, v.data.view.len);
        goto done;
    }
    *out = PyBytes_FromStringAndSize((const char *)v.data.view.buf + start, (Py_ssize_t)(end - start));
    rc = *out == NULL ? -1 : 0;
done:
    rs_column_release(&v);
    return rc;
}

PyObject *rs_point_row(PyObject *self, PyObject *args) {
    PyObject *keys, *columns;
    Py_ssize_t width, n;
    const char *key;
    Py_ssize_t klen;
    rs_view kv;
    (void)self;
    if (!PyArg_ParseTuple(args, "Onny#O!", &keys, &width, &n, &key, &klen, &PyTuple_Type, &columns)) return NULL;
    if (width <= 0 || n <= 0) {
        PyErr_Format(PyExc_ValueError, "point_row: width and count must be positive, got %zd and %zd", width, n);
        return NULL;
    }
    if (rs_view_get(&kv, keys, "point_row keys", 0) < 0) return NULL;
    if (kv.view.len / width < n) {
        PyErr_Format(PyExc_ValueError, "point_row: %zd keys of %zd bytes need %zd bytes, the buffer has %zd", n,
                     width, n * width, kv.view.len);
        rs_view_release(&kv);
        return NULL;
    }
    /* the first entry >= key */
    const char *base = kv.view.buf;
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (rs_key_cmp(key, klen, base + mid * width, width) > 0) lo = mid + 1; else hi = mid;
    }
    int found = lo < n && rs_key_cmp(key, klen, base + lo * width, width) == 0;
    rs_view_release(&kv);
    if (!found) {
        if (lo < n) Py_RETURN_NONE;  /* every later entry and block sorts after the key */
        Py_RETURN_FALSE;             /* after the last entry: the next block decides */
    }
    if (lo == n - 1) Py_RETURN_FALSE;  /* the block's last row may go on in the next block */
    Py_ssize_t nitems = PyTuple_GET_SIZE(columns);
    if (nitems % 8) {
        PyErr_Format(PyExc_ValueError, "point_row: columns must hold 8 items per column, got %zd items", nitems);
        return NULL;
    }
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    PyObject **items = &PyTuple_GET_ITEM(columns, 0);
    for (Py_ssize_t c = 0; c < nitems; c += 8) {
        PyObject *value;
        if (rs_column_value(items + c, lo, &value) < 0) { Py_DECREF(out); return NULL; }
        if (value == NULL) continue;
        int bad = PyDict_SetItem(out, items[c], value);
        Py_DECREF(value);
        if (bad < 0) { Py_DECREF(out); return NULL; }
    }
    return out;
}
