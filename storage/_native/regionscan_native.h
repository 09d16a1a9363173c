/*
 * The shared header of regionscan's compiled kernels (the extension module
 * storage._native_ext, loaded by storage/native.py).
 *
 * Rules every kernel follows:
 *   - one job per function; the pure-Python/NumPy twin is the reference and
 *     the fallback, and a hypothesis test holds the two to the same answers;
 *   - buffers come in through the buffer protocol (rs_view) and are released
 *     before the call returns: no raw pointer outlives a call;
 *   - bounds are checked once per call, before the work, and a bad argument
 *     raises ValueError with a one-line message naming it;
 *   - a kernel that runs long releases the GIL (Py_BEGIN_ALLOW_THREADS) while
 *     it touches only the views it holds and memory it allocated.
 *
 * Adding a kernel in a new .c file (the build compiles every .c file of this
 * folder into the one module):
 *   1. write `PyObject *rs_mykernel(PyObject *self, PyObject *args)` there;
 *   2. declare it below and add one line to RS_METHODS:
 *        RS_METHOD(mykernel, "one-line docstring")
 *   3. give it a Python twin and a test in tests/storage/test_native_*.py.
 */
#ifndef REGIONSCAN_NATIVE_H
#define REGIONSCAN_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A read-only view of a bytes-like object (pyarrow Buffer, NumPy array, bytes). */
typedef struct {
    Py_buffer view;
    int held;
} rs_view;

/* Take a contiguous view of `obj` (None gives an empty, unheld view when
 * `none_ok`); 0 on success, -1 with a ValueError naming `what` otherwise. */
static inline int rs_view_get(rs_view *v, PyObject *obj, const char *what, int none_ok) {
    v->held = 0;
    if (obj == Py_None && none_ok) {
        memset(&v->view, 0, sizeof(v->view));
        return 0;
    }
    if (PyObject_GetBuffer(obj, &v->view, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Format(PyExc_ValueError, "%s must be a contiguous bytes-like buffer, got %.80s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    v->held = 1;
    return 0;
}

static inline void rs_view_release(rs_view *v) {
    if (v->held) {
        PyBuffer_Release(&v->view);
        v->held = 0;
    }
}

/* The Arrow C data and stream interfaces (a stable ABI, spelled out in Arrow's
 * "C Data Interface" and "C Stream Interface" specifications): pyarrow hands a
 * column over as a PyCapsule named "arrow_array_stream" (__arrow_c_stream__),
 * so a kernel reads every chunk's buffers without a Python object per chunk.
 * A kernel releases each ArrowArray it took before it returns; the capsule
 * releases the stream. */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif
#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};
#endif

/* One chunk of a binary column read from an Arrow C stream (rs_read_chunks). */
typedef struct {
    const int32_t *off;   /* the chunk's length + 1 offsets, its array offset applied */
    const char *data;
    const uint8_t *valid; /* NULL: no nulls */
    Py_ssize_t valid_bit; /* the bit of the chunk's first row in `valid` */
    Py_ssize_t length;
} rs_chunk;

/* The chunks of the binary column streamed by `capsule` (an "arrow_array_stream"
 * PyCapsule): each ArrowArray kept in *arrays_out (the caller releases each of the
 * *count and frees the three allocations, also after a failure), the chunks in *out and
 * their row starts (count + 1) in *starts_out, each chunk's first and last offsets
 * checked.  0, or -1 with a ValueError. (gather.c) */
int rs_read_chunks(PyObject *capsule, struct ArrowArray **arrays_out, rs_chunk **out, int64_t **starts_out,
                   Py_ssize_t *count);

/* Release what rs_read_chunks gave (each of the `count` arrays, the three allocations); any of
 * them NULL after a failure. (gather.c) */
void rs_release_chunks(struct ArrowArray *arrays, Py_ssize_t count, int64_t *starts, rs_chunk *c);

/* A writable view of at least `size` bytes of `obj`; 0, or -1 with a ValueError. (gather.c) */
int rs_view_out(rs_view *v, PyObject *obj, Py_ssize_t size);

/* How far ahead of a copy an output's cache lines are asked for, for writing.  Kernels that
 * copy many short values into a fresh buffer front to back (a gather's runs, the WAL's values
 * into row form) write memory that the scan's decompressions have pushed out of cache, and
 * each store of a few hundred bytes then waits on its line's read from memory; asked for this
 * far ahead, the line is there.  Measured on bench_live's 6.7 MB `rewrite` gathers after the
 * caches were emptied: 1.67 -> 1.37-1.41 ms (1,024 to 8,192 bytes ahead alike), 0.71 -> 0.63-0.65
 * ms warm; asking for the sources' lines as well measured no better. */
#define RS_OUT_AHEAD 2048

/* Ask for the lines of `out` from *next up to `end` + RS_OUT_AHEAD (at most `limit`, the
 * buffer's size), for writing; *next: the first byte not asked for yet, kept by the caller.  A
 * hint only: it cannot fault and does not change a byte. */
static inline void rs_prefetch_out(const char *out, size_t *next, size_t end, size_t limit) {
#if defined(__GNUC__) || defined(__clang__)
    size_t to = end + RS_OUT_AHEAD < limit ? end + RS_OUT_AHEAD : limit;
    for (; *next < to; *next += 64) __builtin_prefetch(out + *next, 1, 3);
#else
    (void)out; (void)next; (void)end; (void)limit;
#endif
}

/* The GIL is released only around work of at least this many elements: for a short call,
 * giving it up and taking it back costs more than the work (and may wait on another thread). */
#define RS_GIL_MIN_ITEMS 4096
#define RS_RELEASE_GIL(n) PyThreadState *rs_ts_ = (n) >= RS_GIL_MIN_ITEMS ? PyEval_SaveThread() : NULL;
#define RS_ACQUIRE_GIL() if (rs_ts_) PyEval_RestoreThread(rs_ts_);

/* --- the kernels, one line each (name, C function rs_<name>, docstring) --- */
PyObject *rs_gather_binary(PyObject *self, PyObject *args);
PyObject *rs_point_row(PyObject *self, PyObject *args);
PyObject *rs_point_rows(PyObject *self, PyObject *args);
PyObject *rs_row_dicts(PyObject *self, PyObject *args);
PyObject *rs_resolve_merge(PyObject *self, PyObject *args);
PyObject *rs_join_sorted(PyObject *self, PyObject *args);
PyObject *rs_key_codes(PyObject *self, PyObject *args);
PyObject *rs_key_pairs(PyObject *self, PyObject *args);
PyObject *rs_pad_keys(PyObject *self, PyObject *args);
PyObject *rs_key_triples(PyObject *self, PyObject *args);
PyObject *rs_wal_record(PyObject *self, PyObject *args);
PyObject *rs_wal_columns(PyObject *self, PyObject *args);
PyObject *rs_dense_pivot(PyObject *self, PyObject *args);
PyObject *rs_wal_rows(PyObject *self, PyObject *args);
PyObject *rs_cell_columns(PyObject *self, PyObject *args);
PyObject *rs_decimal_words(PyObject *self, PyObject *args);
PyObject *rs_dict_gather(PyObject *self, PyObject *args);
PyObject *rs_dict_fixed(PyObject *self, PyObject *args);
PyObject *rs_dict_bytes(PyObject *self, PyObject *args);
PyObject *rs_dict_check(PyObject *self, PyObject *args);
PyObject *rs_lengths_offsets(PyObject *self, PyObject *args);
PyObject *rs_frame_values(PyObject *self, PyObject *args);
PyObject *rs_keys_delta(PyObject *self, PyObject *args);

#define RS_METHOD(name, doc) {#name, (PyCFunction)rs_##name, METH_VARARGS, doc},

#define RS_METHODS                                                                              \
    RS_METHOD(gather_binary,                                                                    \
              "gather_binary(stream, index, allocate) -> (validity, offsets, data, null_count): " \
              "rows of a binary column (an Arrow C stream capsule of its chunks laid end to " \
              "end), picked by an int64 index (-1: null), copied in runs of consecutive rows " \
              "into buffers from allocate(size) (pyarrow.allocate_buffer)")                         \
    RS_METHOD(point_row,                                                                        \
              "point_row(keys, width, count, key, columns) -> dict | None | False: the row "    \
              "{name: value} of a dense block (None: absent; False: the next block decides)")  \
    RS_METHOD(point_rows,                                                                       \
              "point_rows(keys, width, count, columns, wanted, start, stop, whole, out, spill) " \
              "-> int: point_row of the ascending keys wanted[start:stop] in one call: out[key] " \
              "= its dict; the keys point_row answers False (none if whole: the block's last " \
              "row ends in it) appended to spill; the rows found")                              \
    RS_METHOD(row_dicts,                                                                        \
              "row_dicts(key, columns, names[, start, stop]) -> [(key, {name: value})]: a "     \
              "dense row batch's rows [start, stop), nulls left out (each column: (validity, "  \
              "offsets, data, offset, length))")                                                 \
    RS_METHOD(wal_record,                                                                       \
              "wal_record(seq_id, cells, valid_types, limit, crc32) -> bytes | None: one WAL " \
              "record (frame and payload) of a list of cell 6-tuples; None: the reference decides") \
    RS_METHOD(wal_columns,                                                                      \
              "wal_columns(payloads, valid_types, allocate) -> (n, (offsets, data) x 4, timestamps, " \
              "types, flags) | None: checked WAL payloads as cell-table buffers (row, family, qualifier, " \
              "value); flags 1 sorted, 2 clean, 4 one family; None: the reference decides")      \
    RS_METHOD(dense_pivot,                                                                      \
              "dense_pivot(n, row_offsets, row_data, qual_offsets, qual_data, timestamps, types, " \
              "value_offsets, value_data, max_qualifiers, max_fill, min_rows, allocate[, cells, qualifiers]) -> (rows, " \
              "row_offsets, row_data, qualifiers, [(timestamps, validity, offsets, data, nulls)]) " \
              "| None | False | (): sorted cells of one family as a dense block; None: not dense; " \
              "False: not in cell order, the reference decides; (): no cell of the qualifiers")  \
    RS_METHOD(wal_rows,                                                                         \
              "wal_rows(payloads, max_qualifiers, max_fill, allocate[, any_order[, markers_aside]]) " \
              "-> (n, family, ascending, rows, row_offsets, row_data, qualifiers, columns, markers) " \
              "| None: checked WAL payloads of puts of whole rows of one family (in key order, or " \
              "with any_order in any) straight into dense_pivot's row form, in log order; with " \
              "markers_aside, DeleteFamily markers among them as (count, row_offsets, row_data, " \
              "timestamps), else None; None: decode the cells")                                 \
    RS_METHOD(cell_columns,                                                                     \
              "cell_columns(cells) -> (offsets, data) x 4 + (timestamps, types) | None: a list of " \
              "cell 6-tuples as Arrow cell-table buffers; None: the reference decides")          \
    RS_METHOD(decimal_words,                                                                    \
              "decimal_words(offsets, data, validity, offset, n, scale, precision, out) -> bool: " \
              "HBase BigDecimal bytes at one scale (1-8 unscaled bytes) as decimal128 words in out") \
    RS_METHOD(dict_gather,                                                                      \
              "dict_gather(entry_offsets, entries, codes, code_width, validity, offset, n, "   \
              "out_offsets, allocate) -> data: a dictionary chunk's values as binary offsets and data") \
    RS_METHOD(dict_fixed,                                                                       \
              "dict_fixed(entry_offsets, entries, codes, code_width, n, allocate) -> (data, width) " \
              "| None: a dictionary chunk's values when every entry is one width (row i at i * width); " \
              "None: the entries differ in width")                                                \
    RS_METHOD(dict_bytes,                                                                       \
              "dict_bytes(entry_offsets, codes, code_width, n) -> int: the bytes of a dictionary " \
              "chunk's n values once expanded")                                                  \
    RS_METHOD(dict_check,                                                                       \
              "dict_check(entry_offsets, data_size, codes, code_width, n) -> int: 0 when a " \
              "dictionary chunk's offsets rise from 0 to data_size and its codes lie within it, " \
              "1 (the offsets) or 2 (a code) when not")                                           \
    RS_METHOD(lengths_offsets,                                                                  \
              "lengths_offsets(lengths, width, n, out) -> int: a lengths chunk's n lengths summed " \
              "into n + 1 int32 offsets in out; their sum")                                       \
    RS_METHOD(frame_values,                                                                     \
              "frame_values(codes, code_width, n, width, base, divisor, validity, allocate) -> data: " \
              "a FRAME chunk's n values (base + code * divisor, big-endian, zeros under nulls) in " \
              "their FIXED form")                                                                 \
    RS_METHOD(keys_delta,                                                                       \
              "keys_delta(body, n, width, first_at, parts, out) -> None: a KEYS_DELTA key chunk's " \
              "n keys of width bytes rebuilt into out (n * width + 8 bytes) from the first key " \
              "and each part's deltas or codes (parts: p x 5 int64)")                           \
    RS_METHOD(key_codes,                                                                        \
              "key_codes(stream, out) -> int: the keys of a binary column (an Arrow C stream " \
              "capsule of its chunks) as native uint64 integers of their big-endian bytes into " \
              "out (8 bytes a key): keys of one width of 1, 2, 4 or 8 bytes, or of one width W " \
              "over 8 whose first W - 8 bytes are the first key's (their last 8 bytes read); " \
              "that width, or 0: neither, a null or no key")                                    \
    RS_METHOD(key_pairs,                                                                        \
              "key_pairs(stream, out) -> int: keys of one width of 9 to 16 bytes as 128-bit " \
              "integers of their big-endian bytes (zeros after the key) into out (16 bytes a key, " \
              "the low uint64 first); that width, or 0: not one such width, a null or no key") \
    RS_METHOD(pad_keys,                                                                         \
              "pad_keys(stream, out, longest, suffix) -> bool: keys of several widths as rows of " \
              "out: the key, zeros to longest bytes, its length in suffix bytes (0-2, big-endian), " \
              "zeros to the row's width; False: a key past longest, or a null")               \
    RS_METHOD(key_triples,                                                                      \
              "key_triples(stream, out) -> int: keys of several widths as three-word keys: the " \
              "bytes past the lead every key shares, zeros, the length past it; three uint64 a " \
              "key into out, the least significant first; the lead's length, or -1")          \
    RS_METHOD(resolve_merge,                                                                    \
              "resolve_merge(keys, width, bounds, ts, marker_keys, marker_ts, ranged, low, "   \
              "bounded, high, out) -> (rows, anchor, anchored, two_cursor): sorted pieces of "  \
              "encoded keys merged; per row its key's position and per column its winner's "   \
              "(-1: none) into out; two_cursor: the two-run merge resolved them, not the general loop") \
    RS_METHOD(join_sorted,                                                                      \
              "join_sorted(codes, bounds, picks, index) -> rows: the union of sorted runs of "  \
              "distinct uint64 codes; per union row its first code's position into picks and " \
              "its position in each run (-1: none) into index (runs x len(codes))")

#endif
