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
