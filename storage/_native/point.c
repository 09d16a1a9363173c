/* Point reads of a dense block: the binary search of its row keys and the
 * rows' {b"family:qualifier": value} dicts.
 *
 * `point_row` answers one key; `point_rows` answers a run of sorted keys with
 * one call (a multi-get's keys that fall in the block), the block's buffers
 * taken once for all of them, the keys searched in groups whose memory misses
 * overlap; where the caller knows the block's last row ends in it (`whole`),
 * it answers that row and the keys after it too.  The Python twin of both is
 * storage/storefile/point.py's `point_row_py`; all take a block's
 * `native_form` (point.py) and answer the same. */
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

/* The first of the `n` fixed-width entries at or after `lo` that is >= key. */
static Py_ssize_t rs_lower_bound(const char *base, Py_ssize_t width, Py_ssize_t lo, Py_ssize_t n, const char *key,
                                 Py_ssize_t klen) {
    Py_ssize_t hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (rs_key_cmp(key, klen, base + mid * width, width) > 0) lo = mid + 1; else hi = mid;
    }
    return lo;
}

#if defined(__GNUC__) || defined(__clang__)
#define RS_PREFETCH(p) __builtin_prefetch(p)
#else
#define RS_PREFETCH(p) ((void)0)
#endif
#define RS_SEARCH_GROUP 8

/* The lower bound of each of the m bytes keys in the n (>= 1) fixed-width entries at
 * `base`: the keys of a group of RS_SEARCH_GROUP are searched in step (every search
 * halves the same length), each one's next probe prefetched while the others compare,
 * so their memory misses overlap instead of following one another. */
static void rs_lower_bounds(const char *base, Py_ssize_t width, Py_ssize_t n, PyObject *const *keys, Py_ssize_t m,
                            Py_ssize_t *pos) {
    for (Py_ssize_t g0 = 0; g0 < m; g0 += RS_SEARCH_GROUP) {
        Py_ssize_t g = m - g0 < RS_SEARCH_GROUP ? m - g0 : RS_SEARCH_GROUP, b[RS_SEARCH_GROUP], len = n;
        for (Py_ssize_t k = 0; k < g; k++) b[k] = 0;
        while (len > 1) {
            Py_ssize_t half = len / 2, next;
            for (Py_ssize_t k = 0; k < g; k++) {
                PyObject *key = keys[g0 + k];
                if (rs_key_cmp(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), base + (b[k] + half - 1) * width, width) > 0)
                    b[k] += half;
            }
            len -= half;
            next = len / 2;
            if (next > 0)
                for (Py_ssize_t k = 0; k < g; k++) RS_PREFETCH(base + (b[k] + next - 1) * width);
        }
        for (Py_ssize_t k = 0; k < g; k++) {
            PyObject *key = keys[g0 + k];
            pos[g0 + k] = b[k] + (rs_key_cmp(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), base + b[k] * width, width) > 0);
        }
    }
}

/* The block's keys as a view holding at least `n` entries of `width` bytes; 0 or -1 with an error. */
static int rs_keys_open(rs_view *kv, PyObject *keys, Py_ssize_t width, Py_ssize_t n, const char *who) {
    if (width <= 0 || n <= 0) {
        PyErr_Format(PyExc_ValueError, "%s: width and count must be positive, got %zd and %zd", who, width, n);
        return -1;
    }
    if (rs_view_get(kv, keys, "point_row keys", 0) < 0) return -1;
    if (kv->view.len / width < n) {
        PyErr_Format(PyExc_ValueError, "%s: %zd keys of %zd bytes need %zd bytes, the buffer has %zd", who, n,
                     width, n * width, kv->view.len);
        rs_view_release(kv);
        return -1;
    }
    return 0;
}

/* One column of a form is 8 items of the flat columns tuple: name, offsets,
 * offsets itemsize, data, valid or None, run ends or None, run ends itemsize,
 * timestamp offset.  Opened once per call (its types, widths and buffers
 * checked), then read row by row. */
typedef struct {
    PyObject *name;  /* borrowed from the columns tuple */
    Py_ssize_t osize, esize, ts_offset;
    rs_view offsets, data, valid, ends;
} rs_column;

static void rs_column_close(rs_column *c) {
    rs_view_release(&c->offsets);
    rs_view_release(&c->data);
    rs_view_release(&c->valid);
    rs_view_release(&c->ends);
}

/* Check and take the views of the column whose 8 items start at `col`; 0 or -1 with an error. */
static int rs_column_open(rs_column *c, PyObject **col) {
    memset(c, 0, sizeof(*c));
    if (!PyBytes_Check(col[0]) || !PyLong_Check(col[2]) || !PyLong_Check(col[6]) || !PyLong_Check(col[7])) {
        PyErr_SetString(PyExc_ValueError, "point_row: a column's name must be bytes and its widths and offset ints");
        return -1;
    }
    c->name = col[0];
    c->osize = PyLong_AsSsize_t(col[2]);
    c->esize = PyLong_AsSsize_t(col[6]);
    c->ts_offset = PyLong_AsSsize_t(col[7]);
    if (PyErr_Occurred()) return -1;
    if ((c->osize != 4 && c->osize != 8) || (c->esize != 2 && c->esize != 4 && c->esize != 8)) {
        PyErr_Format(PyExc_ValueError, "point_row: offset widths must be 4 or 8 bytes and run end widths 2, 4 or 8, "
                     "got %zd and %zd", c->osize, c->esize);
        return -1;
    }
    if (rs_view_get(&c->offsets, col[1], "point_row offsets", 0) < 0 ||
        rs_view_get(&c->data, col[3], "point_row data", 0) < 0 ||
        rs_view_get(&c->valid, col[4], "point_row validity", 1) < 0 ||
        rs_view_get(&c->ends, col[5], "point_row run ends", 1) < 0) {
        rs_column_close(c);
        return -1;
    }
    return 0;
}

/* The column's value of row `i` into `out` (NULL: the row has no cell in it); 0 or -1 with an error. */
static int rs_column_read(const rs_column *c, Py_ssize_t i, PyObject **out) {
    Py_ssize_t slot = i, osize = c->osize;
    *out = NULL;
    if (c->ends.held) {
        /* the run holding row i: the first run end above i + ts_offset */
        Py_ssize_t n = c->ends.view.len / c->esize, lo = 0, hi = n;
        int64_t want = (int64_t)i + c->ts_offset;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (rs_int_at(c->ends.view.buf, c->esize, mid) <= want) lo = mid + 1; else hi = mid;
        }
        slot = lo;
        if (slot >= n) {
            PyErr_Format(PyExc_ValueError, "point_row: row %zd is past the column's %zd timestamp runs", i, n);
            return -1;
        }
    }
    if (c->valid.held) {
        if (slot >= c->valid.view.len) {
            PyErr_Format(PyExc_ValueError, "point_row: slot %zd is past the %zd validity entries", slot,
                         c->valid.view.len);
            return -1;
        }
        if (!((const char *)c->valid.view.buf)[slot]) return 0;  /* no cell in this column */
    }
    if ((i + 2) * osize > c->offsets.view.len) {
        PyErr_Format(PyExc_ValueError, "point_row: row %zd is past the %zd value offsets", i,
                     c->offsets.view.len / osize);
        return -1;
    }
    int64_t start = rs_int_at(c->offsets.view.buf, osize, i), end = rs_int_at(c->offsets.view.buf, osize, i + 1);
    if (start < 0 || end < start || end > c->data.view.len) {
        PyErr_Format(PyExc_ValueError, "point_row: value offsets %lld..%lld are outside the %zd data bytes",
                     (long long)start, (long long)end, c->data.view.len);
        return -1;
    }
    *out = PyBytes_FromStringAndSize((const char *)c->data.view.buf + start, (Py_ssize_t)(end - start));
    return *out == NULL ? -1 : 0;
}

/* The dict of row `i` from `ncols` open columns; NULL with an error. */
static PyObject *rs_row_dict(const rs_column *cols, Py_ssize_t ncols, Py_ssize_t i) {
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        PyObject *value;
        if (rs_column_read(cols + c, i, &value) < 0) { Py_DECREF(out); return NULL; }
        if (value == NULL) continue;
        int bad = PyDict_SetItem(out, cols[c].name, value);
        Py_DECREF(value);
        if (bad < 0) { Py_DECREF(out); return NULL; }
    }
    return out;
}

/* The number of columns of a flat columns tuple (8 items each); -1 with an error. */
static Py_ssize_t rs_column_count(PyObject *columns, const char *who) {
    Py_ssize_t nitems = PyTuple_GET_SIZE(columns);
    if (nitems % 8) {
        PyErr_Format(PyExc_ValueError, "%s: columns must hold 8 items per column, got %zd items", who, nitems);
        return -1;
    }
    return nitems / 8;
}

PyObject *rs_point_row(PyObject *self, PyObject *args) {
    PyObject *keys, *columns;
    Py_ssize_t width, n;
    const char *key;
    Py_ssize_t klen;
    rs_view kv;
    (void)self;
    if (!PyArg_ParseTuple(args, "Onny#O!", &keys, &width, &n, &key, &klen, &PyTuple_Type, &columns)) return NULL;
    if (rs_keys_open(&kv, keys, width, n, "point_row") < 0) return NULL;
    Py_ssize_t lo = rs_lower_bound(kv.view.buf, width, 0, n, key, klen);
    int found = lo < n && rs_key_cmp(key, klen, (const char *)kv.view.buf + lo * width, width) == 0;
    rs_view_release(&kv);
    if (!found) {
        if (lo < n) Py_RETURN_NONE;  /* every later entry and block sorts after the key */
        Py_RETURN_FALSE;             /* after the last entry: the next block decides */
    }
    if (lo == n - 1) Py_RETURN_FALSE;  /* the block's last row may go on in the next block */
    Py_ssize_t ncols = rs_column_count(columns, "point_row");
    if (ncols < 0) return NULL;
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    PyObject **items = &PyTuple_GET_ITEM(columns, 0);
    for (Py_ssize_t c = 0; c < ncols; c++) {
        rs_column col;
        PyObject *value;
        if (rs_column_open(&col, items + 8 * c) < 0) { Py_DECREF(out); return NULL; }
        int bad = rs_column_read(&col, lo, &value);
        rs_column_close(&col);
        if (bad < 0) { Py_DECREF(out); return NULL; }
        if (value == NULL) continue;
        bad = PyDict_SetItem(out, items[8 * c], value);
        Py_DECREF(value);
        if (bad < 0) { Py_DECREF(out); return NULL; }
    }
    return out;
}

PyObject *rs_point_rows(PyObject *self, PyObject *args) {
    PyObject *keys, *columns, *wanted, *out, *spill;
    Py_ssize_t width, n, start, stop;
    int whole;  /* the block's last row does not go on in the next block */
    rs_view kv;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnnO!O!nnpO!O!", &keys, &width, &n, &PyTuple_Type, &columns, &PyList_Type, &wanted,
                          &start, &stop, &whole, &PyDict_Type, &out, &PyList_Type, &spill))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(wanted);
    if (start < 0 || stop < start || stop > count) {
        PyErr_Format(PyExc_ValueError, "point_rows: keys %zd..%zd are outside the %zd keys given", start, stop, count);
        return NULL;
    }
    if (spill == wanted) {
        PyErr_SetString(PyExc_ValueError, "point_rows: the spill list must not be the list of keys");
        return NULL;
    }
    /* the keys' types and order, checked before anything is read: the keys the call
     * cannot answer go to spill in the order asked, for a multi-get that wants them sorted */
    PyObject **asked = &PyList_GET_ITEM(wanted, 0);
    for (Py_ssize_t j = start; j < stop; j++) {
        if (!PyBytes_Check(asked[j])) {
            PyErr_Format(PyExc_ValueError, "point_rows: key %zd must be bytes, got %.80s", j, Py_TYPE(asked[j])->tp_name);
            return NULL;
        }
        if (j > start) {
            Py_ssize_t a = PyBytes_GET_SIZE(asked[j - 1]), b = PyBytes_GET_SIZE(asked[j]);
            if (rs_key_cmp(PyBytes_AS_STRING(asked[j - 1]), a, PyBytes_AS_STRING(asked[j]), b) > 0) {
                PyErr_Format(PyExc_ValueError, "point_rows: keys must be ascending, key %zd is below key %zd", j,
                             j - 1);
                return NULL;
            }
        }
    }
    Py_ssize_t ncols = rs_column_count(columns, "point_rows");
    if (ncols < 0) return NULL;
    if (rs_keys_open(&kv, keys, width, n, "point_rows") < 0) return NULL;
    rs_column *cols = PyMem_Calloc(ncols ? (size_t)ncols : 1, sizeof(rs_column));
    Py_ssize_t opened = 0, found = 0;
    int failed = cols == NULL;
    if (failed) PyErr_NoMemory();
    PyObject **items = &PyTuple_GET_ITEM(columns, 0);
    for (; !failed && opened < ncols; opened++) {
        if (rs_column_open(cols + opened, items + 8 * opened) < 0) { failed = 1; break; }
    }
    const char *base = kv.view.buf;
    Py_ssize_t *at = failed ? NULL : PyMem_Malloc((size_t)(stop - start + 1) * sizeof(Py_ssize_t));
    if (!failed && at == NULL) { PyErr_NoMemory(); failed = 1; }
    if (!failed) rs_lower_bounds(base, width, n, asked + start, stop - start, at);
    for (Py_ssize_t j = start; !failed && j < stop; j++) {
        PyObject *key = asked[j];
        const char *k = PyBytes_AS_STRING(key);
        Py_ssize_t klen = PyBytes_GET_SIZE(key), lo = at[j - start];
        /* the value offsets of the row 4 keys on, fetched while this row is built */
        if (j + 4 < stop && at[j + 4 - start] < n)
            for (Py_ssize_t c = 0; c < ncols; c++)
                RS_PREFETCH((const char *)cols[c].offsets.view.buf + at[j + 4 - start] * cols[c].osize);
        int hit = lo < n && rs_key_cmp(k, klen, base + lo * width, width) == 0;
        if (!whole && (hit ? lo == n - 1 : lo == n)) {
            /* the block's last row (it may go on in the next block), or after it: the next
             * block decides, as point_row's False */
            if (PyList_Append(spill, key) < 0) failed = 1;
            continue;
        }
        if (!hit) continue;  /* absent from the file */
        PyObject *row = rs_row_dict(cols, ncols, lo);
        if (row == NULL) { failed = 1; break; }
        if (PyDict_GET_SIZE(row)) {
            if (PyDict_SetItem(out, key, row) < 0) failed = 1;
            else found++;
        }
        Py_DECREF(row);
    }
    for (Py_ssize_t c = 0; c < opened; c++) rs_column_close(cols + c);
    PyMem_Free(cols);
    PyMem_Free(at);
    rs_view_release(&kv);
    if (failed) return NULL;
    return PyLong_FromSsize_t(found);
}
