/* wal_record: one WAL record (frame header and payload) built from cell tuples in one call.
 *
 * A write's cells reach the log as a list of 6-tuples (row, family, qualifier,
 * timestamp, type, value).  The reference, storage/wal/format.py's
 * `encode_record_py`, splits them into columns with zip(), builds arrays of the
 * timestamps, types and lengths, joins each column and then the parts, and
 * prepends the frame: the values are copied three times and every cell passes
 * through several Python-level steps.  Here one pass reads the tuples and sizes
 * the record, a second copies every field once into the bytes object returned.
 * The layout is docs/formats/wal.md's, byte for byte (the golden files and a
 * hypothesis test hold the two equal).
 *
 * Anything the reference would refuse or convert (a tuple of another length, a
 * bytes-like that is not bytes, a timestamp outside int64, a type outside the
 * valid set, a record over the size limit) makes this return None: the
 * reference then runs and raises its one-line error, so both paths refuse the
 * same input with the same words.
 *
 * The copy runs without the GIL when the record is large: each cell tuple is
 * held by a new reference meanwhile, so its bytes objects stay alive whatever
 * another thread does to the list. */
#include "regionscan_native.h"
#include <string.h>

#define RS_WAL_HEADER 12   /* payload_len u32 | payload_crc u32 | frame_crc u32 */
#define RS_WAL_PAYLOAD_HEAD 16  /* seq_id i64 | n u32 | reserved u32 */
#define RS_WAL_GIL_BYTES (1 << 18)  /* copies of at least this many bytes release the GIL */

static void rs_put_u32(char *p, uint32_t v) {
    p[0] = (char)(v & 0xff);
    p[1] = (char)((v >> 8) & 0xff);
    p[2] = (char)((v >> 16) & 0xff);
    p[3] = (char)((v >> 24) & 0xff);
}

static void rs_put_u64(char *p, uint64_t v) {
    rs_put_u32(p, (uint32_t)(v & 0xffffffffu));
    rs_put_u32(p + 4, (uint32_t)(v >> 32));
}

/* The CRC of `size` bytes at `data` by the caller's crc32(buffer, value=0); -1 on error. */
static long long rs_crc(PyObject *crc32, char *data, Py_ssize_t size) {
    PyObject *view = PyMemoryView_FromMemory(data, size, PyBUF_READ);
    if (view == NULL) return -1;
    PyObject *value = PyObject_CallOneArg(crc32, view);
    Py_DECREF(view);
    if (value == NULL) return -1;
    unsigned long long crc = PyLong_AsUnsignedLongLong(value);
    Py_DECREF(value);
    if (crc == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    return (long long)(crc & 0xffffffffu);
}

PyObject *rs_wal_record(PyObject *self, PyObject *args) {
    long long seq_id;
    PyObject *cells, *valid_types, *crc32;
    Py_ssize_t limit;
    (void)self;
    if (!PyArg_ParseTuple(args, "LOOnO", &seq_id, &cells, &valid_types, &limit, &crc32)) return NULL;
    if (seq_id < 0) {
        PyErr_SetString(PyExc_ValueError, "wal_record: seq_id must not be negative");
        return NULL;
    }
    if (!PyList_Check(cells)) {
        PyErr_SetString(PyExc_ValueError, "wal_record: cells must be a list of 6-tuples");
        return NULL;
    }
    if (!PyBytes_Check(valid_types) || PyBytes_GET_SIZE(valid_types) != 256) {
        PyErr_SetString(PyExc_ValueError, "wal_record: valid_types must be 256 bytes (1: a valid cell type)");
        return NULL;
    }
    if (!PyCallable_Check(crc32)) {
        PyErr_SetString(PyExc_ValueError, "wal_record: crc32 must be callable");
        return NULL;
    }
    const char *valid = PyBytes_AS_STRING(valid_types);
    Py_ssize_t n = PyList_GET_SIZE(cells);
    if (n > 0xffffffffLL) Py_RETURN_NONE;
    /* the tuples, held for the copy; the timestamps and types read now, with the GIL */
    PyObject **held = PyMem_Malloc(sizeof(PyObject *) * (size_t)(n ? n : 1));
    int64_t *stamps = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    char *types = PyMem_Malloc((size_t)(n ? n : 1));
    if (held == NULL || stamps == NULL || types == NULL) {
        PyMem_Free(held);
        PyMem_Free(stamps);
        PyMem_Free(types);
        return PyErr_NoMemory();
    }
    Py_ssize_t taken = 0, data = 0;
    PyObject *out = NULL;
    int refused = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *cell = PyList_GET_ITEM(cells, i);
        if (!PyTuple_Check(cell) || PyTuple_GET_SIZE(cell) != 6) { refused = 1; break; }
        PyObject *ts = PyTuple_GET_ITEM(cell, 3), *kind = PyTuple_GET_ITEM(cell, 4);
        if (!PyLong_Check(ts) || !PyLong_Check(kind)) { refused = 1; break; }
        int overflow = 0;
        long long stamp = PyLong_AsLongLongAndOverflow(ts, &overflow);
        if (overflow || (stamp == -1 && PyErr_Occurred())) { PyErr_Clear(); refused = 1; break; }
        long k = PyLong_AsLongAndOverflow(kind, &overflow);
        if (overflow || k < 0 || k > 255 || !valid[k]) { PyErr_Clear(); refused = 1; break; }
        static const int fields[4] = {0, 1, 2, 5};
        for (int f = 0; f < 4; f++) {
            PyObject *b = PyTuple_GET_ITEM(cell, fields[f]);
            if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) > 0xffffffffLL) { refused = 1; break; }
            data += PyBytes_GET_SIZE(b);
        }
        if (refused || data > limit) { refused = 1; break; }
        stamps[i] = (int64_t)stamp;
        types[i] = (char)k;
        Py_INCREF(cell);
        held[taken++] = cell;
    }
    Py_ssize_t payload = RS_WAL_PAYLOAD_HEAD + 25 * n + data;
    if (refused || payload > limit) goto done;  /* the reference raises the error */
    out = PyBytes_FromStringAndSize(NULL, RS_WAL_HEADER + payload);
    if (out == NULL) goto done;
    char *base = PyBytes_AS_STRING(out), *p = base + RS_WAL_HEADER;
    rs_put_u64(p, (uint64_t)seq_id);
    rs_put_u32(p + 8, (uint32_t)n);
    rs_put_u32(p + 12, 0);
    char *ts_at = p + RS_WAL_PAYLOAD_HEAD, *len_at = ts_at + 8 * n, *type_at = len_at + 16 * n;
    char *at = type_at + n;
    PyThreadState *ts_state = data >= RS_WAL_GIL_BYTES ? PyEval_SaveThread() : NULL;
    memcpy(type_at, types, (size_t)n);
    for (Py_ssize_t i = 0; i < n; i++) rs_put_u64(ts_at + 8 * i, (uint64_t)stamps[i]);
    /* the columns one after the other: rows, families, qualifiers, values */
    static const int fields[4] = {0, 1, 2, 5};
    for (int f = 0; f < 4; f++) {
        char *lengths = len_at + 4 * n * f;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *b = PyTuple_GET_ITEM(held[i], fields[f]);
            Py_ssize_t size = PyBytes_GET_SIZE(b);
            rs_put_u32(lengths + 4 * i, (uint32_t)size);
            memcpy(at, PyBytes_AS_STRING(b), (size_t)size);
            at += size;
        }
    }
    if (ts_state) PyEval_RestoreThread(ts_state);
    long long payload_crc = rs_crc(crc32, p, payload);
    if (payload_crc < 0) { Py_CLEAR(out); goto done; }
    rs_put_u32(base, (uint32_t)payload);
    rs_put_u32(base + 4, (uint32_t)payload_crc);
    long long frame_crc = rs_crc(crc32, base, 8);
    if (frame_crc < 0) { Py_CLEAR(out); goto done; }
    rs_put_u32(base + 8, (uint32_t)frame_crc);
done:
    for (Py_ssize_t i = 0; i < taken; i++) Py_DECREF(held[i]);
    PyMem_Free(held);
    PyMem_Free(stamps);
    PyMem_Free(types);
    if (out == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return out;
}

/* wal_columns: checked WAL record payloads decoded into the buffers of one Arrow cell table.
 *
 * A reader of a region's unflushed edits (the connector's pinned region) hands
 * over the payloads its records carry (checksums already passed, in log order).
 * The reference, storage/wal/arrow_decode.py's `payloads_to_table_py`, reads
 * the lengths with NumPy, joins each column's blocks and copies them again into
 * Arrow arrays.  Here pass 1 checks each payload's structure (cell count against
 * its size, lengths adding up to its size, known cell types) and sizes the
 * columns; pass 2 copies every field once.  The same pass notes, for the
 * cells in log order, whether they are in strict cell order (row, family,
 * qualifier ascending, timestamp and type descending, no two keys equal: the
 * log then needs no sort), all puts with one cell per column, and of one family.
 *
 * The output buffers come from allocate(size) (pyarrow.allocate_buffer), as gather_binary's do.
 * Records of no cells are skipped unchecked, as the reference does.  Anything
 * the reference refuses (a payload shorter than its header, a bad count or
 * length, an unknown type, a column over the int32 offsets' 2 GiB) makes this
 * return None: the reference then runs and raises its one-line error. */

#define RS_WAL_SORTED 1
#define RS_WAL_CLEAN 2
#define RS_WAL_ONE_FAMILY 4

static uint32_t rs_get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static int64_t rs_get_i64(const unsigned char *p) {
    return (int64_t)((uint64_t)rs_get_u32(p) | ((uint64_t)rs_get_u32(p + 4) << 32));
}

/* bytes order of two values (memcmp, then the shorter first), as Arrow compares binary */
static inline int rs_cmp_bytes(const char *a, Py_ssize_t na, const char *b, Py_ssize_t nb) {
    Py_ssize_t m = na < nb ? na : nb;
    if (m <= 16) {  /* row keys and qualifiers are short: no library call per cell */
        for (Py_ssize_t i = 0; i < m; i++)
            if (a[i] != b[i]) return (unsigned char)a[i] < (unsigned char)b[i] ? -1 : 1;
    } else {
        int c = memcmp(a, b, (size_t)m);
        if (c) return c;
    }
    return na < nb ? -1 : (na > nb ? 1 : 0);
}

/* Two equal-length word loads covering n bytes (4 <= n <= 16), both inside the n bytes: the
 * first and the last word, overlapping where n is not a multiple.  A fixed-size memcpy is one
 * load, and a library call per cell (a qualifier, a 4-byte value) costs more than the work. */
static inline uint64_t rs_load8(const char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t rs_load4(const char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* whether two values are the same bytes (a qualifier looked up, a family checked, once a cell) */
static inline int rs_eq_bytes(const char *a, Py_ssize_t na, const char *b, Py_ssize_t nb) {
    if (na != nb) return 0;
    if (na >= 8 && na <= 16) return rs_load8(a) == rs_load8(b) && rs_load8(a + na - 8) == rs_load8(b + na - 8);
    if (na >= 4 && na < 8) return rs_load4(a) == rs_load4(b) && rs_load4(a + na - 4) == rs_load4(b + na - 4);
    if (na < 4)  /* the first, middle and last byte are all of 1 to 3 bytes: no loop */
        return na == 0 || (a[0] == b[0] && a[na / 2] == b[na / 2] && a[na - 1] == b[na - 1]);
    return memcmp(a, b, (size_t)na) == 0;
}

/* rs_cmp_bytes of row keys, once a cell: keys of 4 to 8 bytes as two big-endian words (the
 * first and the last four bytes, overlapping: their order is the bytes' order where the first
 * words are equal), the rest as rs_cmp_bytes does */
static inline int rs_cmp_key(const char *a, Py_ssize_t na, const char *b, Py_ssize_t nb) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    Py_ssize_t m = na < nb ? na : nb;
    if (m >= 4 && m <= 8) {
        uint32_t x = __builtin_bswap32(rs_load4(a)), y = __builtin_bswap32(rs_load4(b));
        if (x == y) {
            x = __builtin_bswap32(rs_load4(a + m - 4));
            y = __builtin_bswap32(rs_load4(b + m - 4));
        }
        if (x != y) return x < y ? -1 : 1;
        return na < nb ? -1 : (na > nb ? 1 : 0);
    }
#endif
    return rs_cmp_bytes(a, na, b, nb);
}

/* memcpy of a row key or value, inline up to 16 bytes (the overlapping words above) */
static inline void rs_copy_short(char *to, const char *from, Py_ssize_t n) {
    if (n >= 8 && n <= 16) {
        uint64_t x = rs_load8(from), y = rs_load8(from + n - 8);
        memcpy(to, &x, 8);
        memcpy(to + n - 8, &y, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t x = rs_load4(from), y = rs_load4(from + n - 4);
        memcpy(to, &x, 4);
        memcpy(to + n - 4, &y, 4);
    } else if (n < 4) {
        for (Py_ssize_t i = 0; i < n; i++) to[i] = from[i];
    } else {
        memcpy(to, from, (size_t)n);
    }
}

/* A buffer of `size` bytes from allocate(size) (pyarrow.allocate_buffer: Arrow's memory pool,
 * whose pages are reused from read to read where fresh bytes objects would fault new pages in),
 * with a writable view of it in `v`; NULL with an error set. */
static PyObject *rs_new_buffer(PyObject *allocate, Py_ssize_t size, rs_view *v) {
    PyObject *obj = PyObject_CallFunction(allocate, "n", size);
    if (obj == NULL) return NULL;
    if (PyObject_GetBuffer(obj, &v->view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_Format(PyExc_ValueError, "allocate must return a writable buffer, got %.80s", Py_TYPE(obj)->tp_name);
        Py_DECREF(obj);
        return NULL;
    }
    v->held = 1;
    if (v->view.len < size) {
        PyErr_Format(PyExc_ValueError, "allocate(%zd) returned %zd bytes", size, v->view.len);
        rs_view_release(v);
        Py_DECREF(obj);
        return NULL;
    }
    return obj;
}

PyObject *rs_wal_columns(PyObject *self, PyObject *args) {
    PyObject *payloads, *valid_types, *allocate;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &payloads, &valid_types, &allocate)) return NULL;
    if (!PyList_Check(payloads)) {
        PyErr_SetString(PyExc_ValueError, "wal_columns: payloads must be a list of buffers");
        return NULL;
    }
    if (!PyBytes_Check(valid_types) || PyBytes_GET_SIZE(valid_types) != 256) {
        PyErr_SetString(PyExc_ValueError, "wal_columns: valid_types must be 256 bytes (1: a valid cell type)");
        return NULL;
    }
    const char *valid = PyBytes_AS_STRING(valid_types);
    Py_ssize_t np_ = PyList_GET_SIZE(payloads);
    /* a view of each payload with cells (bytes, or a pyarrow Buffer read from the file) */
    rs_view *held = PyMem_Malloc(sizeof(rs_view) * (size_t)(np_ ? np_ : 1));
    if (held == NULL) return PyErr_NoMemory();
    Py_ssize_t taken = 0, total = 0, sizes[4] = {0, 0, 0, 0};
    PyObject *bufs[10] = {NULL};
    rs_view outv[10];
    for (int k = 0; k < 10; k++) outv[k].held = 0;
    PyObject *out = NULL;
    int refused = 0;
    /* pass 1: each payload's structure, the columns' sizes */
    for (Py_ssize_t i = 0; i < np_; i++) {
        rs_view *pv = &held[taken];
        if (PyObject_GetBuffer(PyList_GET_ITEM(payloads, i), &pv->view, PyBUF_C_CONTIGUOUS) < 0) {
            PyErr_Clear();  /* not a buffer: the reference decides */
            refused = 1;
            break;
        }
        pv->held = 1;
        taken++;
        const unsigned char *b = pv->view.buf;
        Py_ssize_t size = pv->view.len;
        if (size < RS_WAL_PAYLOAD_HEAD) { refused = 1; break; }
        Py_ssize_t n = (Py_ssize_t)rs_get_u32(b + 8);
        if (n == 0) {  /* the reference skips records of no cells unchecked */
            rs_view_release(pv);
            taken--;
            continue;
        }
        if (RS_WAL_PAYLOAD_HEAD + 25 * n > size) { refused = 1; break; }
        const unsigned char *lens = b + RS_WAL_PAYLOAD_HEAD + 8 * n, *types = lens + 16 * n;
        Py_ssize_t sum = 0;
        for (int k = 0; k < 4; k++) {
            Py_ssize_t part = 0;
            for (Py_ssize_t j = 0; j < n; j++) part += (Py_ssize_t)rs_get_u32(lens + 4 * (k * n + j));
            sizes[k] += part;
            sum += part;
        }
        if (RS_WAL_PAYLOAD_HEAD + 25 * n + sum != size) { refused = 1; break; }
        for (Py_ssize_t j = 0; j < n; j++)
            if (!valid[types[j]]) { refused = 1; break; }
        if (refused) break;
        total += n;
    }
    for (int k = 0; k < 4 && !refused; k++)
        if (sizes[k] >= ((Py_ssize_t)1 << 31)) refused = 1;
    if (refused) goto done;
    for (int k = 0; k < 10; k++) {
        Py_ssize_t size = k == 8 ? 8 * total : k == 9 ? total : k % 2 ? sizes[k / 2] : 4 * (total + 1);
        bufs[k] = rs_new_buffer(allocate, size, &outv[k]);
        if (bufs[k] == NULL) goto done;
    }
    int flags = RS_WAL_SORTED | RS_WAL_CLEAN | RS_WAL_ONE_FAMILY;
    {
        char *off[4], *dat[4];
        for (int k = 0; k < 4; k++) {
            off[k] = outv[2 * k].view.buf;
            dat[k] = outv[2 * k + 1].view.buf;
            rs_put_u32(off[k], 0);
        }
        char *ts_out = outv[8].view.buf, *type_out = outv[9].view.buf;
        PyThreadState *ts_state = sizes[3] >= RS_WAL_GIL_BYTES ? PyEval_SaveThread() : NULL;
        Py_ssize_t cell = 0, at[4] = {0, 0, 0, 0};
        /* the previous cell's key, for the order flags: its fields' place in the output */
        Py_ssize_t prev_at[3] = {0, 0, 0}, prev_len[3] = {0, 0, 0};
        int64_t prev_ts = 0;
        unsigned char prev_type = 0;
        for (Py_ssize_t i = 0; i < taken; i++) {
            const unsigned char *b = held[i].view.buf;
            Py_ssize_t n = (Py_ssize_t)rs_get_u32(b + 8);
            const unsigned char *stamps = b + RS_WAL_PAYLOAD_HEAD, *lens = stamps + 8 * n, *types = lens + 16 * n;
            const char *src = (const char *)(types + n);
            /* the record's four blocks (rows, families, qualifiers, values) one after the other */
            for (int k = 0; k < 4; k++) {
                Py_ssize_t from = at[k];
                for (Py_ssize_t j = 0; j < n; j++) {
                    at[k] += (Py_ssize_t)rs_get_u32(lens + 4 * (k * n + j));
                    rs_put_u32(off[k] + 4 * (cell + j + 1), (uint32_t)at[k]);
                }
                memcpy(dat[k] + from, src, (size_t)(at[k] - from));  /* each block is contiguous */
                src += at[k] - from;
            }
            memcpy(type_out + cell, types, (size_t)n);
            for (Py_ssize_t j = 0; j < n; j++)  /* the log's little-endian int64s in native order */
            {
                int64_t v = rs_get_i64(stamps + 8 * j);
                memcpy(ts_out + 8 * (cell + j), &v, 8);
            }
            for (Py_ssize_t j = 0; j < n; j++) {
                Py_ssize_t c = cell + j, pos[3], len[3];
                for (int k = 0; k < 3; k++) {
                    pos[k] = (Py_ssize_t)rs_get_u32((const unsigned char *)off[k] + 4 * c);
                    len[k] = (Py_ssize_t)rs_get_u32((const unsigned char *)off[k] + 4 * (c + 1)) - pos[k];
                }
                int64_t ts = rs_get_i64(stamps + 8 * j);
                unsigned char type = types[j];
                if (type != 4) flags &= ~RS_WAL_CLEAN;  /* 4: a put */
                if (c > 0) {
                    int order = rs_cmp_key(dat[0] + prev_at[0], prev_len[0], dat[0] + pos[0], len[0]);
                    int family = rs_cmp_bytes(dat[1] + prev_at[1], prev_len[1], dat[1] + pos[1], len[1]);
                    if (family) flags &= ~RS_WAL_ONE_FAMILY;
                    if (order == 0) order = family;
                    if (order == 0)
                        order = rs_cmp_bytes(dat[2] + prev_at[2], prev_len[2], dat[2] + pos[2], len[2]);
                    if (order == 0) {
                        flags &= ~RS_WAL_CLEAN;  /* a second cell of one column */
                        if (prev_ts != ts) order = prev_ts > ts ? -1 : 1;
                        else order = prev_type > type ? -1 : 1;  /* equal keys: not strictly in order */
                    }
                    if (order > 0) flags &= ~RS_WAL_SORTED;
                }
                for (int k = 0; k < 3; k++) {
                    prev_at[k] = pos[k];
                    prev_len[k] = len[k];
                }
                prev_ts = ts;
                prev_type = type;
            }
            cell += n;
        }
        if (ts_state) PyEval_RestoreThread(ts_state);
    }
    out = Py_BuildValue("(nOOOOOOOOOOi)", total, bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], bufs[5],
                        bufs[6], bufs[7], bufs[8], bufs[9], flags);
done:
    for (Py_ssize_t i = 0; i < taken; i++) rs_view_release(&held[i]);
    PyMem_Free(held);
    for (int k = 0; k < 10; k++) {
        rs_view_release(&outv[k]);
        Py_XDECREF(bufs[k]);
    }
    if (out == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return out;
}

/* dense_pivot: sorted clean cells of one family as the columns of a dense block, in one call.
 *
 * A log's unflushed cells reach a rows scan as a dense block (storage/memstore/row_runs.py:
 * the distinct row keys, and per qualifier, ascending, a timestamp and a value per row, null
 * where the row lacks it).  The reference, storage/storefile/dense.py's `dense_from_cells`,
 * finds the row starts and the qualifiers with Arrow compute and places the values with one
 * `take` per qualifier.  Here pass 1 finds the row starts and the distinct qualifiers (and
 * refuses cells that are not puts, a second cell of one column, too many qualifiers or too
 * sparse a block), pass 2 writes every column once.
 *
 * Arguments: n, then the cells' buffers: row (int32 offsets, data), qualifier (offsets,
 * data), timestamps (int64), types (uint8), value (offsets, data), each from the first cell
 * (no slice offset, no nulls: the caller checks), and the limits max_qualifiers, max_fill
 * (rows x qualifiers <= max_fill x cells), min_rows, and allocate (pyarrow.allocate_buffer, for
 * the output buffers), and optionally `cells`: the ascending int64 positions of the cells to
 * pivot (a source's puts, its delete markers left out: the markers go their own way, and the
 * values are copied once, straight from the source's value column), and optionally `qualifiers`:
 * a tuple of the qualifiers to pivot, the cells of others left out.  Returns None when the
 * reference would return None, False for cells out of cell order (the reference decides), an
 * empty tuple when `qualifiers` leaves no cell to pivot, else (rows, row_offsets, row_data,
 * qualifiers, columns): per qualifier (timestamps, validity or None, value_offsets, value_data,
 * null_count). */

typedef struct {
    const char *data;
    Py_ssize_t len;
} rs_slice;

static int rs_offsets_ok(const rs_view *off, const rs_view *data, Py_ssize_t n) {
    if (off->view.len < 4 * (n + 1)) return 0;
    const int32_t *o = (const int32_t *)off->view.buf;
    if (o[0] < 0 || o[n] > data->view.len) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (o[i + 1] < o[i]) return 0;
    return 1;
}

/* Orders ``nq`` (at most 255) distinct qualifiers bytewise: ``byrank[r]`` is the id of
 * the r-th smallest and ``rank[id]`` its place.  An insertion sort: qualifiers are few. */
static void rs_rank_qualifiers(const rs_slice *q, Py_ssize_t nq, unsigned char *rank,
                               unsigned char *byrank) {
    for (Py_ssize_t a = 0; a < nq; a++) byrank[a] = (unsigned char)a;
    for (Py_ssize_t a = 1; a < nq; a++) {
        unsigned char x = byrank[a];
        Py_ssize_t b = a - 1;
        while (b >= 0 && rs_cmp_bytes(q[byrank[b]].data, q[byrank[b]].len, q[x].data, q[x].len) > 0) {
            byrank[b + 1] = byrank[b];
            b--;
        }
        byrank[b + 1] = x;
    }
    for (Py_ssize_t a = 0; a < nq; a++) rank[byrank[a]] = (unsigned char)a;
}

PyObject *rs_dense_pivot(PyObject *self, PyObject *args) {
    Py_ssize_t n, max_q, max_fill, min_rows;
    PyObject *objs[8], *allocate, *cells_obj = Py_None, *wanted_obj = Py_None;
    (void)self;
    if (!PyArg_ParseTuple(args, "nOOOOOOOOnnnO|OO", &n, &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                          &objs[6], &objs[7], &max_q, &max_fill, &min_rows, &allocate, &cells_obj, &wanted_obj))
        return NULL;
    static const char *names[8] = {"row offsets", "row data", "qualifier offsets", "qualifier data",
                                   "timestamps", "types", "value offsets", "value data"};
    rs_view v[8], rv[2], cv[4], pv = {0};
    rv[0].held = rv[1].held = 0;
    for (int k = 0; k < 4; k++) cv[k].held = 0;
    int got = 0;
    PyObject *out = NULL, *quals = NULL, *columns = NULL, *row_off = NULL, *row_data = NULL;
    rs_slice *q = NULL;
    Py_ssize_t *starts = NULL;
    unsigned char *qid = NULL;
    int64_t *kept = NULL;  /* the picked cells of the wanted qualifiers (`wanted`) */
    for (; got < 8; got++)
        if (rs_view_get(&v[got], objs[got], names[got], 0) < 0) goto fail;
    if (n < 1 || max_q < 1 || max_q > 255) {
        PyErr_SetString(PyExc_ValueError, "dense_pivot: n and max_qualifiers (1-255) must be positive");
        goto fail;
    }
    if (!rs_offsets_ok(&v[0], &v[1], n) || !rs_offsets_ok(&v[2], &v[3], n) || !rs_offsets_ok(&v[6], &v[7], n) ||
        v[4].view.len < 8 * n || v[5].view.len < n) {
        PyErr_SetString(PyExc_ValueError, "dense_pivot: a buffer is shorter than n cells or its offsets are damaged");
        goto fail;
    }
    const int32_t *ro = v[0].view.buf, *qo = v[2].view.buf, *vo = v[6].view.buf;
    const char *rd = v[1].view.buf, *qd = v[3].view.buf, *vd = v[7].view.buf;
    const int64_t *ts = v[4].view.buf;
    const unsigned char *types = v[5].view.buf;
    /* `cells`: the positions of the cells to pivot (ascending int64; a source's puts, its
     * markers left out), else every cell; m of them.  Below, i counts those cells and CELL(i)
     * is the i-th one's position in the buffers. */
    const int64_t *pick = NULL;
    Py_ssize_t m = n;
    if (cells_obj != Py_None) {
        if (rs_view_get(&pv, cells_obj, "cells", 0) < 0) goto fail;
        if (pv.view.len % 8) {
            PyErr_SetString(PyExc_ValueError, "dense_pivot: cells must be an int64 array");
            goto fail;
        }
        pick = pv.view.buf;
        m = pv.view.len / 8;
        for (Py_ssize_t i = 0; i < m; i++)
            if (pick[i] < 0 || pick[i] >= n || (i && pick[i] <= pick[i - 1])) {
                PyErr_Format(PyExc_ValueError, "dense_pivot: cells[%zd] = %lld is not an ascending position of the %zd cells",
                             i, (long long)pick[i], n);
                goto fail;
            }
        if (m == 0) goto none;
    }
#define CELL(i) (pick ? (Py_ssize_t)pick[(i)] : (i))
    /* `wanted`: a tuple of the qualifiers to pivot (at most max_qualifiers); the cells of
     * others are left out first (a read of some of a wide row's columns) */
    if (wanted_obj != Py_None) {
        if (!PyTuple_Check(wanted_obj) || PyTuple_GET_SIZE(wanted_obj) > max_q) {
            PyErr_Format(PyExc_ValueError, "dense_pivot: qualifiers must be a tuple of at most %zd bytes objects", max_q);
            goto fail;
        }
        Py_ssize_t nw = PyTuple_GET_SIZE(wanted_obj);
        rs_slice want[255];
        for (Py_ssize_t w = 0; w < nw; w++) {
            PyObject *item = PyTuple_GET_ITEM(wanted_obj, w);
            if (!PyBytes_Check(item)) {
                PyErr_Format(PyExc_ValueError, "dense_pivot: qualifiers[%zd] is %.80s, not bytes", w, Py_TYPE(item)->tp_name);
                goto fail;
            }
            want[w].data = PyBytes_AS_STRING(item);
            want[w].len = PyBytes_GET_SIZE(item);
        }
        kept = PyMem_Malloc(sizeof(int64_t) * (size_t)(m ? m : 1));
        if (kept == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        Py_ssize_t k = 0;
        for (Py_ssize_t i = 0; i < m; i++) {
            Py_ssize_t x = CELL(i), ql = qo[x + 1] - qo[x];
            for (Py_ssize_t w = 0; w < nw; w++)
                if (want[w].len == ql && memcmp(want[w].data, qd + qo[x], (size_t)ql) == 0) {
                    kept[k++] = x;
                    break;
                }
        }
        pick = kept;
        m = k;
        if (m == 0) {  /* none of the cells is of them: nothing to pivot, told apart from None */
            out = PyTuple_New(0);
            goto done;
        }
    }
    q = PyMem_Malloc(sizeof(rs_slice) * (size_t)max_q);
    starts = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(m + 1));
    qid = PyMem_Malloc((size_t)m);
    if (q == NULL || starts == NULL || qid == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    /* pass 1: row starts, distinct qualifiers (in first-seen order), each cell's qualifier */
    Py_ssize_t nrows = 0, nq = 0;
    int refused = 0, unsorted = 0;
    for (Py_ssize_t i = 0; i < m && !refused; i++) {
        Py_ssize_t x = CELL(i), w = i ? CELL(i - 1) : 0;  /* this cell and the one before */
        if (types[x] != 4) { refused = 1; break; }  /* 4: a put */
        const char *qp = qd + qo[x];
        Py_ssize_t ql = qo[x + 1] - qo[x];
        int new_row = i == 0 || rs_cmp_bytes(rd + ro[w], ro[w + 1] - ro[w], rd + ro[x], ro[x + 1] - ro[x]) != 0;
        if (new_row) starts[nrows++] = i;
        else {
            int c = rs_cmp_bytes(qd + qo[w], qo[w + 1] - qo[w], qp, ql);
            if (c == 0) { refused = 1; break; }  /* a second version of a column: not dense */
            if (c > 0) { unsorted = 1; break; }  /* not in cell order: the reference decides */
        }
        /* the previous cell's qualifier id + 1 is the usual hit: a row's qualifiers ascend */
        Py_ssize_t hint = (!new_row && qid[i - 1] + 1 < nq) ? qid[i - 1] + 1 : 0, j;
        for (j = 0; j < nq; j++) {
            Py_ssize_t k = (hint + j) % nq;
            if (q[k].len == ql && memcmp(q[k].data, qp, (size_t)ql) == 0) { j = k; break; }
        }
        if (j >= nq) {
            if (nq == max_q) { refused = 1; break; }
            q[nq].data = qp;
            q[nq].len = ql;
            j = nq++;
        }
        qid[i] = (unsigned char)j;
    }
    starts[nrows] = m;
    if (unsorted) {
        out = Py_NewRef(Py_False);
        goto done;
    }
    if (refused || nrows < min_rows || nrows * nq > max_fill * m) goto none;
    /* the qualifiers ascending, and each id's rank */
    unsigned char rank[256], byrank[256];
    rs_rank_qualifiers(q, nq, rank, byrank);
    /* the row keys */
    Py_ssize_t row_bytes = 0;
    for (Py_ssize_t r = 0; r < nrows; r++) row_bytes += ro[CELL(starts[r]) + 1] - ro[CELL(starts[r])];
    row_off = rs_new_buffer(allocate, 4 * (nrows + 1), &rv[0]);
    row_data = row_off ? rs_new_buffer(allocate, row_bytes, &rv[1]) : NULL;
    quals = PyTuple_New(nq);
    columns = PyList_New(nq);
    if (row_off == NULL || row_data == NULL || quals == NULL || columns == NULL) goto fail;
    {
        int32_t *o = rv[0].view.buf;
        char *d = rv[1].view.buf;
        Py_ssize_t at = 0;
        o[0] = 0;
        for (Py_ssize_t r = 0; r < nrows; r++) {
            Py_ssize_t s = CELL(starts[r]), len = ro[s + 1] - ro[s];
            memcpy(d + at, rd + ro[s], (size_t)len);
            at += len;
            o[r + 1] = (int32_t)at;
        }
    }
    /* per qualifier: its value bytes and present rows, then its columns */
    for (Py_ssize_t a = 0; a < nq; a++) {
        PyObject *qb = PyBytes_FromStringAndSize(q[byrank[a]].data, q[byrank[a]].len);
        if (qb == NULL) goto fail;
        PyTuple_SET_ITEM(quals, a, qb);
    }
    Py_ssize_t *vbytes = PyMem_Calloc((size_t)nq, sizeof(Py_ssize_t)), *present = PyMem_Calloc((size_t)nq, sizeof(Py_ssize_t));
    if (vbytes == NULL || present == NULL) {
        PyMem_Free(vbytes);
        PyMem_Free(present);
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        vbytes[rank[qid[i]]] += vo[CELL(i) + 1] - vo[CELL(i)];
        present[rank[qid[i]]]++;
    }
    int failed = 0;
    for (Py_ssize_t a = 0; a < nq && !failed; a++) {
        int full = present[a] == nrows;
        PyObject *t = rs_new_buffer(allocate, 8 * nrows, &cv[0]);
        PyObject *valid = t == NULL ? NULL : full ? Py_NewRef(Py_None) : rs_new_buffer(allocate, (nrows + 7) / 8, &cv[1]);
        PyObject *off = valid ? rs_new_buffer(allocate, 4 * (nrows + 1), &cv[2]) : NULL;
        PyObject *data = off ? rs_new_buffer(allocate, vbytes[a], &cv[3]) : NULL;
        PyObject *col = (t && valid && off && data) ? Py_BuildValue("(OOOOn)", t, valid, off, data, nrows - present[a]) : NULL;
        if (col == NULL) {
            failed = 1;
        } else {
            PyList_SET_ITEM(columns, a, col);
            int64_t *tw = cv[0].view.buf;
            int32_t *ow = cv[2].view.buf;
            char *dw = cv[3].view.buf;
            unsigned char *bits = full ? NULL : cv[1].view.buf;
            if (bits) memset(bits, 0, (size_t)((nrows + 7) / 8));
            Py_ssize_t at = 0;
            ow[0] = 0;
            for (Py_ssize_t r = 0; r < nrows; r++) {
                Py_ssize_t i = starts[r], end = starts[r + 1];
                while (i < end && rank[qid[i]] < a) i++;  /* a row's cells ascend by qualifier */
                if (i < end && rank[qid[i]] == a) {
                    Py_ssize_t x = CELL(i), len = vo[x + 1] - vo[x];
                    memcpy(dw + at, vd + vo[x], (size_t)len);
                    at += len;
                    tw[r] = ts[x];
                    if (bits) bits[r >> 3] |= (unsigned char)(1u << (r & 7));
                } else {
                    tw[r] = 0;
                }
                ow[r + 1] = (int32_t)at;
            }
        }
        for (int k = 0; k < 4; k++) rs_view_release(&cv[k]);
        Py_XDECREF(t);
        Py_XDECREF(valid);
        Py_XDECREF(off);
        Py_XDECREF(data);
    }
    PyMem_Free(vbytes);
    PyMem_Free(present);
    if (failed) goto fail;
    out = Py_BuildValue("(nOOOO)", nrows, row_off, row_data, quals, columns);
    goto done;
none:
    out = Py_NewRef(Py_None);
fail:
done:
#undef CELL
    for (int k = 0; k < got; k++) rs_view_release(&v[k]);
    rs_view_release(&pv);
    PyMem_Free(kept);
    rs_view_release(&rv[0]);
    rs_view_release(&rv[1]);
    PyMem_Free(q);
    PyMem_Free(starts);
    PyMem_Free(qid);
    Py_XDECREF(row_off);
    Py_XDECREF(row_data);
    Py_XDECREF(quals);
    Py_XDECREF(columns);
    return out;
}

/* wal_rows: checked WAL record payloads straight into the row form of their cells, in one call.
 *
 * A pinned region's log is usually what a table being updated writes: puts of whole rows,
 * one family, one cell per column, the rows in key order (appends) or, with `any_order`, in
 * any order (a table whose keys are hashed or salted is written so).  Its rows scan wants only the row form (the dense block
 * dense_pivot builds), so decoding every field into a cell table first (wal_columns) copies
 * the values twice and faults in pages for a table nothing reads.  Here pass 1 checks every
 * payload's structure exactly as wal_columns does, then walks the cells in log order where
 * they lie in the payloads, checking the shape the row form needs (every cell a put of the
 * first cell's family; a row's cells together, its qualifiers strictly ascending; the next
 * row's key above it, or with `any_order` any other key) and finding the rows and
 * qualifiers as dense_pivot does; pass 2 copies each row key and value once into its column.
 * Rows out of key order come out in log order, and the call says so: the caller sorts them
 * and refuses a row that is there twice (written again later in the log: a version or an
 * overwrite, which the cells resolve).
 *
 * With `markers_aside`, DeleteFamily markers (empty qualifier and value) may lie among the
 * puts (a table being updated and deleted from): they are left out of the row form, which the
 * puts alone must then fit, and their row keys and timestamps are copied aside in log order;
 * the caller applies them by timestamp, as it applies the markers of any source.
 *
 * Arguments: payloads (a list of buffers), max_qualifiers (1-255), max_fill, allocate
 * (pyarrow.allocate_buffer), any_order, markers_aside.  Returns None for anything else (a
 * damaged payload, no put, another type or family, a row's cells apart or its qualifiers out
 * of order or repeated, rows out of order without `any_order`, too many qualifiers or too
 * sparse rows, a column over 2 GiB): the caller then decodes the cells (wal_columns, or the
 * reference) and decides as before.  Else (n_cells, family, ascending, nrows, row_offsets,
 * row_data, qualifiers, columns, markers) with dense_pivot's qualifiers and columns;
 * `ascending`: every row's key above the one before (the row form is then in key order);
 * `markers`: None without any, else (count, row_offsets, row_data, timestamps) buffers. */

typedef struct {
    Py_ssize_t n;                       /* cells */
    const unsigned char *stamps, *lens; /* the record's timestamps and lengths */
    const unsigned char *types;         /* its cells' types */
    const char *block[4];               /* its rows, families, qualifiers, values */
} rs_wal_rec;

#define RS_PUT 4
#define RS_DELETE_FAMILY 14
#define RS_MARKER 2 /* new_row[c] of a DeleteFamily marker set aside */

PyObject *rs_wal_rows(PyObject *self, PyObject *args) {
    PyObject *payloads, *allocate;
    Py_ssize_t max_q, max_fill;
    int any_order = 0, descended = 0, aside = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnnO|pp", &payloads, &max_q, &max_fill, &allocate, &any_order, &aside)) return NULL;
    if (!PyList_Check(payloads)) {
        PyErr_SetString(PyExc_ValueError, "wal_rows: payloads must be a list of buffers");
        return NULL;
    }
    if (max_q < 1 || max_q > 255 || max_fill < 1) {
        PyErr_SetString(PyExc_ValueError, "wal_rows: max_qualifiers must be 1-255 and max_fill positive");
        return NULL;
    }
    Py_ssize_t np_ = PyList_GET_SIZE(payloads);
    rs_view *held = PyMem_Malloc(sizeof(rs_view) * (size_t)(np_ ? np_ : 1));
    rs_wal_rec *recs = PyMem_Malloc(sizeof(rs_wal_rec) * (size_t)(np_ ? np_ : 1));
    unsigned char *qid = NULL, *new_row = NULL;
    Py_ssize_t *wrote = NULL;
    rs_view *cv = NULL, rv[2], mv[3];
    PyObject **cobj = NULL, *row_off = NULL, *row_data = NULL, *quals = NULL, *columns = NULL, *out = NULL;
    PyObject *m_off = NULL, *m_data = NULL, *m_ts = NULL, *markers = NULL;
    rv[0].held = rv[1].held = 0;
    mv[0].held = mv[1].held = mv[2].held = 0;
    Py_ssize_t taken = 0, total = 0, nq = 0, nm = 0, m_bytes = 0;
    if (held == NULL || recs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* pass 1a: each payload's structure, as wal_columns checks it */
    for (Py_ssize_t i = 0; i < np_; i++) {
        rs_view *pv = &held[taken];
        if (PyObject_GetBuffer(PyList_GET_ITEM(payloads, i), &pv->view, PyBUF_C_CONTIGUOUS) < 0) {
            PyErr_Clear();
            goto done;
        }
        pv->held = 1;
        const unsigned char *b = pv->view.buf;
        Py_ssize_t size = pv->view.len;
        taken++;
        if (size < RS_WAL_PAYLOAD_HEAD) goto done;
        Py_ssize_t n = (Py_ssize_t)rs_get_u32(b + 8);
        if (n == 0) {  /* skipped unchecked, as the reference does */
            rs_view_release(pv);
            taken--;
            continue;
        }
        if (RS_WAL_PAYLOAD_HEAD + 25 * n > size) goto done;
        rs_wal_rec *r = &recs[taken - 1];
        r->n = n;
        r->stamps = b + RS_WAL_PAYLOAD_HEAD;
        r->lens = r->stamps + 8 * n;
        const unsigned char *types = r->types = r->lens + 16 * n;
        /* first: a log of other markers (a table being deleted from) is refused at once */
        unsigned char other = 0;  /* one pass with no exit in it, which the compiler vectorizes */
        if (aside) {
            Py_ssize_t marks = 0;
            for (Py_ssize_t j = 0; j < n; j++) {
                other |= (unsigned char)(types[j] != RS_PUT && types[j] != RS_DELETE_FAMILY);
                marks += types[j] == RS_DELETE_FAMILY;
            }
            nm += marks;
        } else {
            for (Py_ssize_t j = 0; j < n; j++) other |= (unsigned char)(types[j] ^ RS_PUT);
        }
        if (other) goto done;  /* 4: a put; any other type, known or not: no row form */
        const char *src = (const char *)(types + n);
        Py_ssize_t sum = 0;
        for (int k = 0; k < 4; k++) {
            Py_ssize_t part = 0;
            for (Py_ssize_t j = 0; j < n; j++) part += (Py_ssize_t)rs_get_u32(r->lens + 4 * (k * n + j));
            r->block[k] = src + sum;
            sum += part;
        }
        if (RS_WAL_PAYLOAD_HEAD + 25 * n + sum != size) goto done;
        total += n;
    }
    if (total == nm) goto done;  /* no put (no cell, or markers alone): nothing for a row form */
    qid = PyMem_Malloc((size_t)total);
    new_row = PyMem_Malloc((size_t)total);
    if (qid == NULL || new_row == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* pass 1b: the cells in log order, where they lie: rows, qualifiers, sizes */
    rs_slice q[255], fam = {NULL, 0}, prow = {NULL, 0}, pq = {NULL, 0};
    Py_ssize_t vbytes[255], present[255], nrows = 0, row_bytes = 0, c = 0, last_a = 0;
    for (Py_ssize_t i = 0; i < taken; i++) {
        rs_wal_rec *r = &recs[i];
        Py_ssize_t at[4] = {0, 0, 0, 0};
        for (Py_ssize_t j = 0; j < r->n; j++, c++) {
            Py_ssize_t len[4];
            for (int k = 0; k < 4; k++) len[k] = (Py_ssize_t)rs_get_u32(r->lens + 4 * (k * r->n + j));
            rs_slice row = {r->block[0] + at[0], len[0]}, f = {r->block[1] + at[1], len[1]},
                     ql = {r->block[2] + at[2], len[2]};
            Py_ssize_t vlen = len[3];
            for (int k = 0; k < 4; k++) at[k] += len[k];
            if (aside && r->types[j] == RS_DELETE_FAMILY) {  /* a marker: set aside, of the one family */
                if (fam.data == NULL) fam = f;
                else if (!rs_eq_bytes(fam.data, fam.len, f.data, f.len)) goto done;
                if (len[2] != 0 || vlen != 0) goto done;
                new_row[c] = RS_MARKER;
                m_bytes += row.len;
                continue;
            }
            int fresh;
            if (prow.data == NULL) {  /* the first put */
                if (fam.data == NULL) fam = f;
                else if (!rs_eq_bytes(fam.data, fam.len, f.data, f.len)) goto done;
                fresh = 1;
            } else {
                if (!rs_eq_bytes(fam.data, fam.len, f.data, f.len)) goto done;  /* several families */
                int order = rs_cmp_key(prow.data, prow.len, row.data, row.len);
                if (order > 0) {  /* a row below the one before */
                    if (!any_order) goto done;
                    descended = 1;
                }
                fresh = order != 0;
                if (!fresh && rs_cmp_bytes(pq.data, pq.len, ql.data, ql.len) >= 0) goto done;  /* a version, or out of order */
            }
            Py_ssize_t hint = (!fresh && last_a + 1 < nq) ? last_a + 1 : 0, a;  /* the put before's column, then the next */
            for (a = 0; a < nq; a++) {
                Py_ssize_t k = hint + a;  /* hint + a wraps once at most: no division a cell */
                if (k >= nq) k -= nq;
                if (rs_eq_bytes(q[k].data, q[k].len, ql.data, ql.len)) {
                    a = k;
                    break;
                }
            }
            if (a >= nq) {
                if (nq == max_q) goto done;
                q[nq] = ql;
                vbytes[nq] = present[nq] = 0;
                a = nq++;
            }
            qid[c] = (unsigned char)a;
            last_a = a;
            new_row[c] = (unsigned char)fresh;
            vbytes[a] += vlen;
            present[a]++;
            if (fresh) {
                nrows++;
                row_bytes += row.len;
            }
            prow = row;
            pq = ql;
        }
    }
    if (nrows * nq > max_fill * (total - nm) || row_bytes >= ((Py_ssize_t)1 << 31) || m_bytes >= ((Py_ssize_t)1 << 31))
        goto done;
    for (Py_ssize_t a = 0; a < nq; a++)
        if (vbytes[a] >= ((Py_ssize_t)1 << 31)) goto done;
    /* the qualifiers ascending, and each id's rank */
    unsigned char rank[256], byrank[256];
    rs_rank_qualifiers(q, nq, rank, byrank);
    /* every output buffer, before the copy (which may run without the GIL) */
    cv = PyMem_Calloc((size_t)(4 * nq), sizeof(rs_view));
    cobj = PyMem_Calloc((size_t)(4 * nq), sizeof(PyObject *));
    wrote = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)nq);
    quals = PyTuple_New(nq);
    columns = PyList_New(nq);
    if (cv == NULL || cobj == NULL || wrote == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (quals == NULL || columns == NULL) goto done;
    row_off = rs_new_buffer(allocate, 4 * (nrows + 1), &rv[0]);
    row_data = row_off ? rs_new_buffer(allocate, row_bytes, &rv[1]) : NULL;
    if (row_data == NULL) goto done;
    if (nm) {  /* the markers set aside: their row keys and timestamps */
        m_off = rs_new_buffer(allocate, 4 * (nm + 1), &mv[0]);
        m_data = m_off ? rs_new_buffer(allocate, m_bytes, &mv[1]) : NULL;
        m_ts = m_data ? rs_new_buffer(allocate, 8 * nm, &mv[2]) : NULL;
        if (m_ts == NULL) goto done;
        ((int32_t *)mv[0].view.buf)[0] = 0;
    }
    Py_ssize_t value_total = 0;
    for (Py_ssize_t a = 0; a < nq; a++) {
        Py_ssize_t id = byrank[a];
        PyObject *qb = PyBytes_FromStringAndSize(q[id].data, q[id].len);
        if (qb == NULL) goto done;
        PyTuple_SET_ITEM(quals, a, qb);
        int full = present[id] == nrows;
        rs_view *v = &cv[4 * a];
        PyObject **o = &cobj[4 * a];
        o[0] = rs_new_buffer(allocate, 8 * nrows, &v[0]);
        o[1] = o[0] == NULL ? NULL : full ? Py_NewRef(Py_None) : rs_new_buffer(allocate, (nrows + 7) / 8, &v[1]);
        o[2] = o[1] ? rs_new_buffer(allocate, 4 * (nrows + 1), &v[2]) : NULL;
        o[3] = o[2] ? rs_new_buffer(allocate, vbytes[id], &v[3]) : NULL;
        if (o[3] == NULL) goto done;
        PyObject *col = Py_BuildValue("(OOOOn)", o[0], o[1], o[2], o[3], nrows - present[id]);
        if (col == NULL) goto done;
        PyList_SET_ITEM(columns, a, col);
        if (!full) memset(v[1].view.buf, 0, (size_t)((nrows + 7) / 8));
        ((int32_t *)v[2].view.buf)[0] = 0;
        wrote[a] = -1;
        value_total += vbytes[id];
    }
    /* pass 2: each row key and value copied once into its column */
    {
        PyThreadState *gil = value_total >= RS_WAL_GIL_BYTES ? PyEval_SaveThread() : NULL;
        int32_t *ro = rv[0].view.buf;
        char *rd = rv[1].view.buf;
        Py_ssize_t r = -1, rat = 0, vat[255];
        /* each column's buffers in locals: the byte stores below could alias the views' fields,
         * which the compiler would then load again for every cell */
        int64_t *ts_col[255];
        unsigned char *valid_col[255];
        int32_t *off_col[255];
        char *val_col[255];
        size_t asked[255], val_size[255];  /* each value column's lines asked for (rs_prefetch_out) */
        for (Py_ssize_t a = 0; a < nq; a++) {
            vat[a] = 0;
            ts_col[a] = cv[4 * a].view.buf;
            valid_col[a] = cv[4 * a + 1].held ? cv[4 * a + 1].view.buf : NULL;
            off_col[a] = cv[4 * a + 2].view.buf;
            val_col[a] = cv[4 * a + 3].view.buf;
            asked[a] = 0;
            val_size[a] = (size_t)cv[4 * a + 3].view.len;
        }
        ro[0] = 0;
        c = 0;
        int32_t *mo = nm ? mv[0].view.buf : NULL;
        char *md = nm ? mv[1].view.buf : NULL;
        int64_t *mts = nm ? mv[2].view.buf : NULL;
        Py_ssize_t mi = 0, mat = 0;
        for (Py_ssize_t i = 0; i < taken; i++) {
            rs_wal_rec *rec = &recs[i];
            Py_ssize_t at[4] = {0, 0, 0, 0};
            for (Py_ssize_t j = 0; j < rec->n; j++, c++) {
                Py_ssize_t rlen = (Py_ssize_t)rs_get_u32(rec->lens + 4 * j);
                Py_ssize_t vlen = (Py_ssize_t)rs_get_u32(rec->lens + 4 * (3 * rec->n + j));
                if (new_row[c] == RS_MARKER) {  /* a marker set aside (no value: checked) */
                    rs_copy_short(md + mat, rec->block[0] + at[0], rlen);
                    mat += rlen;
                    mo[mi + 1] = (int32_t)mat;
                    mts[mi++] = rs_get_i64(rec->stamps + 8 * j);
                    at[0] += rlen;
                    continue;
                }
                if (new_row[c]) {
                    if (r >= 0)  /* the row before is done: its absent columns and offsets */
                        for (Py_ssize_t a = 0; a < nq; a++) {
                            if (wrote[a] != r) ts_col[a][r] = 0;
                            off_col[a][r + 1] = (int32_t)vat[a];
                        }
                    r++;
                    rs_copy_short(rd + rat, rec->block[0] + at[0], rlen);
                    rat += rlen;
                    ro[r + 1] = (int32_t)rat;
                }
                Py_ssize_t a = rank[qid[c]];
                rs_prefetch_out(val_col[a], &asked[a], (size_t)(vat[a] + vlen), val_size[a]);
                rs_copy_short(val_col[a] + vat[a], rec->block[3] + at[3], vlen);
                vat[a] += vlen;
                ts_col[a][r] = rs_get_i64(rec->stamps + 8 * j);
                if (valid_col[a] != NULL) valid_col[a][r >> 3] |= (unsigned char)(1u << (r & 7));
                wrote[a] = r;
                at[0] += rlen;
                at[3] += vlen;
            }
        }
        for (Py_ssize_t a = 0; a < nq; a++) {  /* the last row */
            if (wrote[a] != r) ts_col[a][r] = 0;
            off_col[a][r + 1] = (int32_t)vat[a];
        }
        if (gil) PyEval_RestoreThread(gil);
    }
    markers = nm ? Py_BuildValue("(nOOO)", nm, m_off, m_data, m_ts) : Py_NewRef(Py_None);
    if (markers == NULL) goto done;
    out = Py_BuildValue("(ny#OnOOOOO)", total, fam.data, fam.len, descended ? Py_False : Py_True, nrows, row_off,
                        row_data, quals, columns, markers);
done:
    for (Py_ssize_t i = 0; i < taken; i++) rs_view_release(&held[i]);
    PyMem_Free(held);
    PyMem_Free(recs);
    PyMem_Free(qid);
    PyMem_Free(new_row);
    PyMem_Free(wrote);
    rs_view_release(&rv[0]);
    rs_view_release(&rv[1]);
    for (int k = 0; k < 3; k++) rs_view_release(&mv[k]);
    if (cv != NULL)
        for (Py_ssize_t k = 0; k < 4 * nq; k++) rs_view_release(&cv[k]);
    if (cobj != NULL)
        for (Py_ssize_t k = 0; k < 4 * nq; k++) Py_XDECREF(cobj[k]);
    PyMem_Free(cv);
    PyMem_Free(cobj);
    Py_XDECREF(row_off);
    Py_XDECREF(row_data);
    Py_XDECREF(quals);
    Py_XDECREF(columns);
    Py_XDECREF(m_off);
    Py_XDECREF(m_data);
    Py_XDECREF(m_ts);
    Py_XDECREF(markers);
    if (out == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return out;
}
