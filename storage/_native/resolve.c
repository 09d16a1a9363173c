/* resolve_merge: the row resolution of a live table's sorted runs in one pass.
 *
 * The pieces of a chunk (a base run and newer runs: a memstore, a second
 * file; newest first) each hold sorted row keys, encoded so that their order
 * is the keys' byte order (storage.kernels.row_merge.order_keys: one integer
 * per key, or fixed-width byte strings).  One pass merges the pieces by key,
 * and per merged row and column picks the winner: the visible entry with the
 * newest timestamp, the newest piece's on a tie.  An entry is visible when it
 * is present (its timestamp is not ABSENT, INT64_MIN), inside the time range
 * [low, high) when one is given, and newer than the row's newest DeleteFamily
 * marker.  A piece's column given as one timestamp (an 8-byte buffer: a stored block's
 * run-end timestamps of one run) holds it for every entry, read once per entry with a
 * step of 0 instead of expanded to one int64 per row by the caller.  Rows left with no
 * winner are dropped.  What comes out is what the
 * binary gather (gather.c) takes: per row, the position of its key and, per
 * column, the position of its winning value (-1: none) in the pieces laid end
 * to end.  A row's key is taken from the largest piece (the anchor: the base
 * run) where it holds the row, and the call says when the rows' keys are the
 * anchor's keys, every one in order (a re-put of some rows): the caller then
 * uses them as they are instead of gathering them.
 *
 * The reference and fallback is storage.kernels.resolve_rows.resolve_rows's
 * NumPy path (a stable sort of the keys, group starts, the winner search and
 * per-column masks), which also handles what this pass does not: timestamp
 * lists, DeleteColumn and Delete markers. */
#include "regionscan_native.h"
#include <string.h>

#define RS_ABSENT INT64_MIN
/* merge_two's loops: compiled once per constant argument (piece, markers, columns), which
 * inlining alone does not promise at every call */
#if defined(__GNUC__) || defined(__clang__)
#define RS_INLINE static inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define RS_INLINE static __forceinline
#else
#define RS_INLINE static inline
#endif
#define RS_MAX_PIECES 64

/* The keys' width argument for 128-bit keys: two uint64 a key, its low word first (key_pairs). */
#define RS_PAIRS (-1)
/* The keys' width argument for keys of three words: three uint64 a key, the least significant
 * first (storage.kernels.key_codes.word_codes: keys of several widths, the bytes every key
 * shares left out, padded with their length). */
#define RS_TRIPLES (-3)

/* A key of three words, w[0] the least significant: compared from w[2] down. */
typedef struct {
    uint64_t w[3];
} rs_k192;

static inline int rs_k192_lt(rs_k192 a, rs_k192 b) {
    if (a.w[2] != b.w[2]) return a.w[2] < b.w[2];
    if (a.w[1] != b.w[1]) return a.w[1] < b.w[1];
    return a.w[0] < b.w[0];
}

static inline int rs_k192_eq(rs_k192 a, rs_k192 b) {
    return a.w[2] == b.w[2] && a.w[1] == b.w[1] && a.w[0] == b.w[0];
}
/* merge_two_128 reads the pairs as unsigned __int128: a compiler that has one, on a
 * little-endian machine (where the low word first is the integer's own layout) */
#if defined(__SIZEOF_INT128__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RS_HAVE_128 1
#else
#define RS_HAVE_128 0
#endif

/* The encoded keys: `ints` (width 0: one uint64 a key; RS_PAIRS: two) or `width`-byte
 * strings in `bytes`. */
typedef struct {
    const uint64_t *ints;
    const char *bytes;
    Py_ssize_t width;
} rs_keys;


/* Take keys from a buffer: uint64 items (width 0), 16-byte pairs (RS_PAIRS) or `width`-byte
 * items; their count into *n. */
static int keys_view(rs_view *v, PyObject *obj, Py_ssize_t width, const char *what, rs_keys *k, Py_ssize_t *n) {
    if (rs_view_get(v, obj, what, 0) < 0) return -1;
    Py_ssize_t item = width > 0 ? width : width == RS_PAIRS ? 16 : width == RS_TRIPLES ? 24 : 8;
    if (v->view.len % item) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd-byte keys, got %zd bytes", what, item, v->view.len);
        return -1;
    }
    k->ints = width > 0 ? NULL : (const uint64_t *)v->view.buf;
    k->bytes = width > 0 ? (const char *)v->view.buf : NULL;
    k->width = width;
    *n = v->view.len / item;
    return 0;
}

/* Compare two 128-bit keys given as (low, high) uint64 pairs: the high words, then the low. */
#define RS_PAIR_CMP(x, y) \
    ((x)[1] != (y)[1] ? ((x)[1] < (y)[1] ? -1 : 1) : ((x)[0] < (y)[0] ? -1 : ((x)[0] > (y)[0])))

/* Compare two keys of three words given as uint64 triples, the least significant first. */
#define RS_TRIPLE_CMP(x, y) \
    ((x)[2] != (y)[2] ? ((x)[2] < (y)[2] ? -1 : 1) : RS_PAIR_CMP(x, y))

/* Compare key i of `a` with key j of `b`: integers (W 0), pairs (W RS_PAIRS), triples (W
 * RS_TRIPLES) or W-byte strings. */
#define KCMP(a, i, b, j) \
    (W > 0 ? memcmp((a).bytes + (i) * W, (b).bytes + (j) * W, (size_t)W) \
     : W == RS_PAIRS ? RS_PAIR_CMP((a).ints + 2 * (i), (b).ints + 2 * (j)) \
     : W == RS_TRIPLES ? RS_TRIPLE_CMP((a).ints + 3 * (i), (b).ints + 3 * (j)) \
     : ((a).ints[(i)] < (b).ints[(j)] ? -1 : ((a).ints[(i)] > (b).ints[(j)])))

/* The merge itself over views already checked (see rs_resolve_merge); W: the key width,
 * a constant in each of its integer calls so that those compile without memcmp.
 * Returns the rows, or -1 when a piece's keys go down; *anchored_out as described above. */
static inline Py_ssize_t merge_rows(const rs_keys keys, const rs_keys mkeys, Py_ssize_t nm, const int64_t *mts,
                                    const int64_t *bounds, Py_ssize_t pieces, const int64_t *const *ts,
                                    const Py_ssize_t *step, Py_ssize_t columns, int ranged, int64_t low, int bounded, int64_t high,
                                    int64_t *__restrict key_at, int64_t *__restrict *src, Py_ssize_t anchor,
                                    int *anchored_out, const Py_ssize_t W) {
    const rs_keys K = keys, MK = mkeys;
    Py_ssize_t pos[RS_MAX_PIECES], start[RS_MAX_PIECES], end[RS_MAX_PIECES];
    for (Py_ssize_t p = 0; p < pieces; p++) {
        pos[p] = (Py_ssize_t)bounds[p];
        end[p] = (Py_ssize_t)bounds[p + 1];
    }
    Py_ssize_t rows = 0, mi = 0;
    int unsorted = 0, anchored = 1;
    for (;;) {
        /* the smallest head key: the next merged row; `tied`: another piece's head holds it too */
        Py_ssize_t head = -1;
        int tied = 0;
        for (Py_ssize_t p = 0; p < pieces; p++) {
            if (pos[p] >= end[p]) continue;
            int c = head < 0 ? -1 : KCMP(K, pos[p], K, pos[head]);
            if (c < 0) { head = p; tied = 0; }
            else if (c == 0) tied = 1;
        }
        if (head < 0) break;
        Py_ssize_t at = pos[head];
        /* the row's entries in every piece, newest piece first (a piece may hold a row twice);
         * a row of one piece (most rows) touches that piece alone */
        Py_ssize_t lo = head, hi = tied ? pieces : head + 1;
        for (Py_ssize_t p = lo; p < hi; p++) {
            start[p] = pos[p];
            while (pos[p] < end[p] && KCMP(K, pos[p], K, at) == 0) pos[p]++;
            /* the piece's next key is past the row: else its keys went down */
            if (pos[p] < end[p] && KCMP(K, pos[p], K, at) < 0) unsorted = 1;
        }
        if (unsorted) break;
        int64_t family = RS_ABSENT;
        while (mi < nm && KCMP(MK, mi, K, at) < 0) mi++;
        while (mi < nm && KCMP(MK, mi, K, at) == 0) {
            if (mts[mi] > family) family = mts[mi];
            mi++;
        }
        int any = columns == 0;
        for (Py_ssize_t j = 0; j < columns; j++) {
            int64_t best = -1, best_ts = RS_ABSENT;
            for (Py_ssize_t p = lo; p < hi; p++) {
                const int64_t *t = ts[j * pieces + p];
                Py_ssize_t first = (Py_ssize_t)bounds[p], st = step[j * pieces + p];
                for (Py_ssize_t e = start[p]; e < pos[p]; e++) {
                    int64_t v = t[(e - first) * st];
                    if (v == RS_ABSENT) continue;
                    if (ranged && (v < low || (bounded && v >= high))) continue;
                    if (family != RS_ABSENT && v <= family) continue;
                    if (best < 0 || v > best_ts) { best = e; best_ts = v; }
                }
            }
            src[j][rows] = best;
            any |= best >= 0;
        }
        if (any) {
            /* any entry of the row holds its key: the anchor's where it has one, so that the
             * keys of a chunk whose every row is the anchor's are the anchor's keys as they are */
            Py_ssize_t k = at;
            if (anchor >= lo && anchor < hi && start[anchor] < pos[anchor]) k = start[anchor];
            key_at[rows] = k;
            if (k != (Py_ssize_t)bounds[anchor] + rows) anchored = 0;
            rows++;
        }
    }
    *anchored_out = anchored;
    return unsorted ? -1 : rows;
}

/* One column of merge_two: its timestamps in the two pieces (entry e of piece p, counted from
 * the piece's start, at t[p][e * step[p]]; step 0: one timestamp for the piece) and its output. */
typedef struct {
    const int64_t *t[2];
    Py_ssize_t step[2];
    int64_t *out;
} rs_col;

/* Is column j's answer column d's (d < j), every row: the same timestamps in each piece (one
 * value each, equal; or equal arrays, the same one or a memstore's copies)?  merge_two then
 * copies it instead of resolving it. */
static int same_column(const int64_t *const *ts, const Py_ssize_t *step, const int64_t *bounds, Py_ssize_t pieces,
                       Py_ssize_t j, Py_ssize_t d) {
    for (Py_ssize_t p = 0; p < pieces; p++) {
        const int64_t *a = ts[j * pieces + p], *b = ts[d * pieces + p];
        Py_ssize_t st = step[j * pieces + p];
        if (st != step[d * pieces + p]) return 0;
        if (st == 0 ? a[0] != b[0] : (a != b && memcmp(a, b, (size_t)(bounds[p + 1] - bounds[p]) * sizeof(int64_t))))
            return 0;
    }
    return 1;
}

/* The two-cursor merge for uint64 keys (width 0), for 128-bit keys (key_pairs: keys of one
 * width of 9 to 16 bytes) where the compiler has a 128-bit integer, and for keys of three
 * words (RS_TRIPLES): merge_two.h compiled once per key type. */
#define RS_LT(a, b) ((a) < (b))
#define RS_EQ(a, b) ((a) == (b))
#define RS_KEY uint64_t
#define RS_TWO_NAME(name) name##_64
#include "merge_two.h"
#undef RS_KEY
#undef RS_TWO_NAME
#if RS_HAVE_128
#define RS_KEY unsigned __int128
#define RS_TWO_NAME(name) name##_128
#include "merge_two.h"
#undef RS_KEY
#undef RS_TWO_NAME
#endif
#undef RS_LT
#undef RS_EQ
#define RS_LT(a, b) rs_k192_lt(a, b)
#define RS_EQ(a, b) rs_k192_eq(a, b)
#define RS_KEY rs_k192
#define RS_TWO_NAME(name) name##_192
#include "merge_two.h"
#undef RS_KEY
#undef RS_TWO_NAME
#undef RS_LT
#undef RS_EQ


PyObject *rs_resolve_merge(PyObject *self, PyObject *args) {
    PyObject *keys_obj, *bounds_obj, *ts_seq, *mkeys_obj, *mts_obj, *out_obj;
    Py_ssize_t width;
    int ranged, bounded;
    long long low, high;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnOOOOpLpLO", &keys_obj, &width, &bounds_obj, &ts_seq, &mkeys_obj, &mts_obj,
                          &ranged, &low, &bounded, &high, &out_obj))
        return NULL;
    if (width < 0 && width != RS_PAIRS && width != RS_TRIPLES) {
        PyErr_Format(PyExc_ValueError, "width must be 0 (uint64 keys), -1 (uint64 pairs), -3 (uint64 triples) "
                     "or a key width in bytes, got %zd", width);
        return NULL;
    }
    PyObject *ts_list = PySequence_Fast(ts_seq, "ts must be a sequence (one per column) of per-piece int64 buffers");
    if (!ts_list) return NULL;
    Py_ssize_t columns = PySequence_Fast_GET_SIZE(ts_list);
    rs_view kv, bv, mkv, mtv, ov;
    rs_view *tv = NULL;
    const int64_t **ts = NULL;  /* ts[j * pieces + p]: column j's timestamps of piece p */
    Py_ssize_t *step = NULL;  /* 1, or 0 for a column of a piece given as one timestamp */
    rs_col *cols = NULL;  /* merge_two's columns */
    Py_ssize_t *copy_of = NULL;  /* merge_two: per column, the earlier one it copies (itself: none) */
    int64_t **src = PyMem_Calloc(columns ? columns : 1, sizeof(int64_t *));
    memset(&kv, 0, sizeof(kv)); memset(&bv, 0, sizeof(bv)); memset(&mkv, 0, sizeof(mkv));
    memset(&mtv, 0, sizeof(mtv)); memset(&ov, 0, sizeof(ov));
    PyObject *result = NULL;
    rs_keys keys, mkeys;
    Py_ssize_t n = 0, nm = 0, pieces = 0, views = 0;
    memset(&mkeys, 0, sizeof(mkeys));
    if (!src) { PyErr_NoMemory(); goto done; }
    if (keys_view(&kv, keys_obj, width, "keys", &keys, &n) < 0) goto done;
    if (rs_view_get(&bv, bounds_obj, "bounds", 0) < 0) goto done;
    pieces = bv.view.len / 8 - 1;
    if (bv.view.len % 8 || pieces < 1 || pieces > RS_MAX_PIECES) {
        PyErr_Format(PyExc_ValueError, "bounds must be 2 to %d int64 piece starts, got %zd bytes", RS_MAX_PIECES + 1,
                     bv.view.len);
        goto done;
    }
    const int64_t *bounds = (const int64_t *)bv.view.buf;
    if (bounds[0] != 0 || bounds[pieces] != n) {
        PyErr_Format(PyExc_ValueError, "bounds must run from 0 to the %zd keys", n);
        goto done;
    }
    for (Py_ssize_t p = 0; p < pieces; p++) {
        if (bounds[p + 1] < bounds[p]) {
            PyErr_Format(PyExc_ValueError, "bounds must not decrease (piece %zd)", p);
            goto done;
        }
    }
    tv = PyMem_Calloc(columns * pieces + 1, sizeof(rs_view));
    ts = PyMem_Calloc(columns * pieces + 1, sizeof(int64_t *));
    step = PyMem_Calloc(columns * pieces + 1, sizeof(Py_ssize_t));
    cols = PyMem_Calloc(columns + 1, sizeof(rs_col));
    copy_of = PyMem_Calloc(columns + 1, sizeof(Py_ssize_t));
    if (!tv || !ts || !step || !cols || !copy_of) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t j = 0; j < columns; j++) {
        PyObject *per_piece = PySequence_Fast(PySequence_Fast_GET_ITEM(ts_list, j), "ts[j] must be a sequence");
        if (!per_piece) goto done;
        if (PySequence_Fast_GET_SIZE(per_piece) != pieces) {
            PyErr_Format(PyExc_ValueError, "ts[%zd] must hold %zd pieces' timestamps, got %zd", j, pieces,
                         PySequence_Fast_GET_SIZE(per_piece));
            Py_DECREF(per_piece);
            goto done;
        }
        for (Py_ssize_t p = 0; p < pieces; p++) {
            rs_view *v = &tv[j * pieces + p];
            int bad = rs_view_get(v, PySequence_Fast_GET_ITEM(per_piece, p), "ts[j][p]", 0) < 0;
            views = j * pieces + p + 1;
            /* one timestamp per entry, or one for the whole (non-empty) piece */
            int one = !bad && v->view.len == 8 && bounds[p + 1] > bounds[p];
            if (!bad && !one && v->view.len != (bounds[p + 1] - bounds[p]) * 8) {
                PyErr_Format(PyExc_ValueError, "ts[%zd][%zd] must hold %lld int64 timestamps (or one for them all), got %zd bytes",
                             j, p, (long long)(bounds[p + 1] - bounds[p]), v->view.len);
                bad = 1;
            }
            step[j * pieces + p] = one ? 0 : 1;
            if (bad) { Py_DECREF(per_piece); goto done; }
            ts[j * pieces + p] = (const int64_t *)v->view.buf;
        }
        Py_DECREF(per_piece);
    }
    if (mkeys_obj != Py_None) {
        if (keys_view(&mkv, mkeys_obj, width, "marker keys", &mkeys, &nm) < 0) goto done;
        if (rs_view_get(&mtv, mts_obj, "marker timestamps", 0) < 0) goto done;
        if (mtv.view.len != nm * 8) {
            PyErr_Format(PyExc_ValueError, "marker timestamps must hold %zd int64 values, got %zd bytes", nm,
                         mtv.view.len);
            goto done;
        }
    }
    const int64_t *mts = nm ? (const int64_t *)mtv.view.buf : NULL;
    if (PyObject_GetBuffer(out_obj, &ov.view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "out must be a writable contiguous int64 buffer");
        goto done;
    }
    ov.held = 1;
    if (ov.view.len < (columns + 1) * n * 8) {
        PyErr_Format(PyExc_ValueError, "out must hold (columns + 1) * %zd int64 values, got %zd bytes", n, ov.view.len);
        goto done;
    }
    int64_t *key_at = (int64_t *)ov.view.buf;
    for (Py_ssize_t j = 0; j < columns; j++) src[j] = key_at + (j + 1) * n;

    Py_ssize_t rows, anchor = 0;
    int unsorted, anchored = 1, two;  /* two: the two-cursor merge resolved the chunk (not the general loop) */
    for (Py_ssize_t p = 1; p < pieces; p++) {
        if (bounds[p + 1] - bounds[p] > bounds[anchor + 1] - bounds[anchor]) anchor = p;  /* the largest piece */
    }
    RS_RELEASE_GIL(n)
    rows = -2;
    if (width == 0 && pieces <= 2 && !ranged)
        rows = merge_two_64(keys.ints, mkeys.ints, nm, mts, bounds, pieces, ts, step, columns, key_at, src, anchor,
                            cols, copy_of, &anchored);
#if RS_HAVE_128
    else if (width == RS_PAIRS && pieces <= 2 && !ranged && (uintptr_t)keys.ints % 16 == 0 &&
             (uintptr_t)mkeys.ints % 16 == 0)  /* read as __int128: 16-byte aligned (Arrow's pool is) */
        rows = merge_two_128((const unsigned __int128 *)(const void *)keys.ints,
                             (const unsigned __int128 *)(const void *)mkeys.ints, nm, mts, bounds, pieces, ts, step,
                             columns, key_at, src, anchor, cols, copy_of, &anchored);
#endif
    else if (width == RS_TRIPLES && pieces <= 2 && !ranged)
        rows = merge_two_192((const rs_k192 *)(const void *)keys.ints, (const rs_k192 *)(const void *)mkeys.ints, nm,
                             mts, bounds, pieces, ts, step, columns, key_at, src, anchor, cols, copy_of, &anchored);
    two = rows != -2;
    if (two) {
        /* merge_two resolved the chunk */
    } else if (width == 0)
        rows = merge_rows(keys, mkeys, nm, mts, bounds, pieces, ts, step, columns, ranged, low, bounded, high, key_at,
                          src, anchor, &anchored, 0);
    else if (width == RS_PAIRS)
        rows = merge_rows(keys, mkeys, nm, mts, bounds, pieces, ts, step, columns, ranged, low, bounded, high, key_at,
                          src, anchor, &anchored, RS_PAIRS);
    else if (width == RS_TRIPLES)
        rows = merge_rows(keys, mkeys, nm, mts, bounds, pieces, ts, step, columns, ranged, low, bounded, high, key_at,
                          src, anchor, &anchored, RS_TRIPLES);
    else
        rows = merge_rows(keys, mkeys, nm, mts, bounds, pieces, ts, step, columns, ranged, low, bounded, high, key_at,
                          src, anchor, &anchored, width);
    unsorted = rows < 0;
    RS_ACQUIRE_GIL()
    if (unsorted) {
        PyErr_SetString(PyExc_ValueError, "keys must be ascending within each piece");
        goto done;
    }
    /* anchored: the rows' keys are the anchor piece's keys, every one, in order */
    anchored = anchored && rows == bounds[anchor + 1] - bounds[anchor];
    result = Py_BuildValue("nnOO", rows, anchor, anchored ? Py_True : Py_False, two ? Py_True : Py_False);
done:
    for (Py_ssize_t i = 0; tv && i < views; i++) rs_view_release(&tv[i]);
    rs_view_release(&kv); rs_view_release(&bv); rs_view_release(&mkv); rs_view_release(&mtv);
    rs_view_release(&ov);
    PyMem_Free(tv); PyMem_Free(ts); PyMem_Free(step); PyMem_Free(cols); PyMem_Free(copy_of); PyMem_Free(src);
    Py_DECREF(ts_list);
    return result;
}

/* key_codes(stream, out) -> int: the merge's uint64 keys (its `width` 0 form) straight from
 * the keys' bytes.  Keys of one width of 1, 2, 4 or 8 bytes (a counter, an id) read as
 * big-endian integers order as their bytes do, so the merge takes them as they are: one pass
 * here instead of NumPy's three (a check of every key's width, a read as big-endian integers
 * of that width, a widening into the uint64 buffer).  Keys of one width W over 8 bytes whose
 * first W - 8 bytes are all the first key's (a string id under a common prefix, a composite
 * key whose leading part is the same across a region: "user000012345678", a long id and a
 * short one) order as their last 8 bytes do: those, read as a big-endian integer, are the
 * code.  Returns the width, 0 when the keys take neither form.  The reference is
 * storage.kernels.key_codes._one_code_width and _int_codes. */
#define RS_CODES_LOOP(W, LOAD)                                                       \
    for (Py_ssize_t r = 0; r < len; r++) {                                           \
        LOAD;                                                                        \
        call.out[at + r] = v;                                                        \
    }

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define RS_FROM_BE16(x) (x)
#define RS_FROM_BE32(x) (x)
#define RS_FROM_BE64(x) (x)
#else
#define RS_FROM_BE16(x) __builtin_bswap16(x)
#define RS_FROM_BE32(x) __builtin_bswap32(x)
#define RS_FROM_BE64(x) __builtin_bswap64(x)
#endif

static int key_width_ok(const rs_chunk *c, int32_t w) {
    const int32_t *off = c->off;
    for (Py_ssize_t r = 0; r < c->length; r++)
        if (off[r + 1] - off[r] != w) return 0;
    return 1;
}

/* A key_codes or key_pairs call: its keys' chunks (from an Arrow C stream) and its output of
 * `words` uint64 a key, taken and checked by code_call_open; code_call_close releases them. */
typedef struct {
    rs_view ov;
    rs_chunk *c;
    int64_t *starts;
    struct ArrowArray *arrays;
    Py_ssize_t nchunks, n;
    uint64_t *out;
    const unsigned char *first;  /* the first key's bytes (NULL: no key) */
} rs_code_call;

static int code_call_open(PyObject *args, const char *format, Py_ssize_t words, rs_code_call *k) {
    PyObject *capsule, *out_obj;
    memset(k, 0, sizeof(*k));
    if (!PyArg_ParseTuple(args, format, &capsule, &out_obj)) return -1;
    if (rs_read_chunks(capsule, &k->arrays, &k->c, &k->starts, &k->nchunks) < 0) return -1;
    k->n = (Py_ssize_t)k->starts[k->nchunks];
    if (rs_view_out(&k->ov, out_obj, k->n * words * (Py_ssize_t)sizeof(uint64_t)) < 0) return -1;
    k->out = (uint64_t *)k->ov.view.buf;
    return 0;
}

static void code_call_close(rs_code_call *k) {
    rs_view_release(&k->ov);
    rs_release_chunks(k->arrays, k->nchunks, k->starts, k->c);
}

/* The one width of the call's keys, from each chunk's first key and span (every key is checked
 * by key_width_ok as it is read), when `taken` takes it; 0: none such, a null or no key. */
static int32_t code_call_width(rs_code_call *k, int (*taken)(int32_t)) {
    int32_t width = 0;
    for (Py_ssize_t i = 0; i < k->nchunks; i++) {
        const rs_chunk *c = &k->c[i];
        Py_ssize_t len = c->length;
        if (!len) continue;
        int32_t w = c->off[1] - c->off[0];
        if (c->valid || !taken(w) || (width && w != width) || (int64_t)c->off[len] - c->off[0] != (int64_t)w * len)
            return 0;
        if (!k->first) k->first = (const unsigned char *)c->data + c->off[0];
        width = w;
    }
    return width;
}

static int code_width_taken(int32_t w) { return w == 1 || w == 2 || w == 4 || w >= 8; }
static int pair_width_taken(int32_t w) { return w >= 9 && w <= 16; }

PyObject *rs_key_codes(PyObject *self, PyObject *args) {
    rs_code_call call;
    PyObject *result = NULL;
    (void)self;
    if (code_call_open(args, "OO:key_codes", 1, &call) < 0) goto done;
    int32_t width = code_call_width(&call, code_width_taken);
    const unsigned char *prefix = call.first;  /* its first width - 8 bytes are every key's (width > 8) */
    int ok = width != 0;
    if (ok) {
        RS_RELEASE_GIL(call.n)
        const Py_ssize_t lead = width > 8 ? width - 8 : 0;  /* the shared leading bytes */
        /* a lead of at most 8 bytes compared as one masked 8-byte load (the key holds 9 or more) */
        uint64_t mask = 0, head = 0;
        if (lead && lead <= 8) {
            mask = lead == 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * lead)) - 1);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
            mask = lead == 8 ? mask : mask << (8 * (8 - lead));
#endif
            memcpy(&head, prefix, 8);
            head &= mask;
        }
        for (Py_ssize_t k = 0; k < call.nchunks && ok; k++) {
            Py_ssize_t len = call.c[k].length, at = (Py_ssize_t)call.starts[k];
            if (!len) continue;
            if (!key_width_ok(&call.c[k], width)) { ok = 0; break; }
            const unsigned char *p = (const unsigned char *)call.c[k].data + call.c[k].off[0];
            if (lead && lead <= 8) {
                for (Py_ssize_t r = 0; r < len && ok; r++) {
                    uint64_t x, tail;
                    memcpy(&x, p + r * width, 8);
                    memcpy(&tail, p + r * width + lead, 8);
                    ok = (x & mask) == head;
                    call.out[at + r] = RS_FROM_BE64(tail);
                }
                continue;
            }
            if (lead) {
                for (Py_ssize_t r = 0; r < len && ok; r++) {
                    uint64_t tail;
                    ok = memcmp(p + r * width, prefix, (size_t)lead) == 0;
                    memcpy(&tail, p + r * width + lead, 8);
                    call.out[at + r] = RS_FROM_BE64(tail);
                }
                continue;
            }
            switch (width) {  /* memcpy of a constant size: one unaligned load */
            case 1: RS_CODES_LOOP(1, uint64_t v = p[r]) break;
            case 2: RS_CODES_LOOP(2, uint16_t x; memcpy(&x, p + 2 * r, 2); uint64_t v = RS_FROM_BE16(x)) break;
            case 4: RS_CODES_LOOP(4, uint32_t x; memcpy(&x, p + 4 * r, 4); uint64_t v = RS_FROM_BE32(x)) break;
            default: RS_CODES_LOOP(8, uint64_t x; memcpy(&x, p + 8 * r, 8); uint64_t v = RS_FROM_BE64(x)) break;
            }
        }
        RS_ACQUIRE_GIL()
    }
    result = PyLong_FromLong(ok ? width : 0);
done:
    code_call_close(&call);
    return result;
}

/* key_pairs(stream, out) -> int: keys of one width W of 9 to 16 bytes (a UUID, a hash or salt
 * before an id) as the merge's 128-bit keys (its RS_PAIRS form): the key's bytes, zeros after
 * it to 16, read as a big-endian integer, which orders as the bytes of keys of one width do;
 * written as two uint64, the low one first.  Keys over 8 bytes under one lead take key_codes
 * instead (one word a key).  The reference is storage.kernels.key_codes._pair_codes. */
PyObject *rs_key_pairs(PyObject *self, PyObject *args) {
    rs_code_call call;
    PyObject *result = NULL;
    (void)self;
    if (code_call_open(args, "OO:key_pairs", 2, &call) < 0) goto done;
    int32_t width = code_call_width(&call, pair_width_taken);
    int ok = width != 0;
    if (ok) {
        RS_RELEASE_GIL(call.n)
        const size_t rest = (size_t)width - 8;
        for (Py_ssize_t k = 0; k < call.nchunks && ok; k++) {
            Py_ssize_t len = call.c[k].length, at = (Py_ssize_t)call.starts[k];
            if (!len) continue;
            if (!key_width_ok(&call.c[k], width)) { ok = 0; break; }
            const unsigned char *p = (const unsigned char *)call.c[k].data + call.c[k].off[0];
            for (Py_ssize_t r = 0; r < len; r++) {
                uint64_t hi, lo = 0;
                memcpy(&hi, p + r * width, 8);
                memcpy(&lo, p + r * width + 8, rest);  /* the key's last bytes, then zeros */
                call.out[2 * (at + r)] = RS_FROM_BE64(lo);
                call.out[2 * (at + r) + 1] = RS_FROM_BE64(hi);
            }
        }
        RS_ACQUIRE_GIL()
    }
    result = PyLong_FromLong(ok ? width : 0);
done:
    code_call_close(&call);
    return result;
}

/* pad_keys(stream, out, longest, suffix) -> bool: keys of several widths (a name and an unpadded
 * number, YCSB's `user` and a hash) as the fixed-width byte strings the merge and the sort compare
 * (storage.kernels.row_merge.order_keys, whose NumPy form is the reference): each key, zeros to
 * `longest` bytes, then its length in `suffix` bytes (0, 1 or 2, big-endian), then zeros to the
 * row's width (out's size / keys).  A row of out is written whole, so out needs no clearing.
 * False: a key longer than `longest`, or a null (the caller takes the reference, which says so). */
PyObject *rs_pad_keys(PyObject *self, PyObject *args) {
    PyObject *capsule, *out_obj;
    Py_ssize_t longest, suffix;
    struct ArrowArray *arrays = NULL;
    rs_chunk *c = NULL;
    int64_t *starts = NULL;
    Py_ssize_t nchunks = 0;
    rs_view ov = {0};
    PyObject *result = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOnn:pad_keys", &capsule, &out_obj, &longest, &suffix)) return NULL;
    if (longest < 0 || longest > 65535 || (suffix != 0 && suffix != 1 && suffix != 2) ||
        (suffix == 1 && longest > 255)) {
        PyErr_Format(PyExc_ValueError, "pad_keys: longest %zd with a suffix of %zd bytes is not a key form",
                     longest, suffix);
        return NULL;
    }
    if (rs_read_chunks(capsule, &arrays, &c, &starts, &nchunks) < 0) goto done;
    Py_ssize_t n = (Py_ssize_t)starts[nchunks];
    if (rs_view_out(&ov, out_obj, 0) < 0) goto done;
    Py_ssize_t width = n ? ov.view.len / n : 0;
    if (n && (ov.view.len % n || width < longest + suffix)) {
        PyErr_Format(PyExc_ValueError, "pad_keys: out holds %zd bytes, not %zd keys of at least %zd",
                     (Py_ssize_t)ov.view.len, n, longest + suffix);
        goto done;
    }
    int ok = 1;
    {
        RS_RELEASE_GIL(n)
        unsigned char *out = (unsigned char *)ov.view.buf;
        for (Py_ssize_t k = 0; k < nchunks && ok; k++) {
            const rs_chunk *ch = &c[k];
            if (ch->valid) { ok = 0; break; }  /* keys are never null: the reference names it */
            unsigned char *row = out + (Py_ssize_t)starts[k] * width;
            for (Py_ssize_t r = 0; r < ch->length; r++, row += width) {
                int32_t len = ch->off[r + 1] - ch->off[r];
                if (len < 0 || len > longest) { ok = 0; break; }
                memcpy(row, ch->data + ch->off[r], (size_t)len);
                memset(row + len, 0, (size_t)(width - len));
                if (suffix == 1) row[longest] = (unsigned char)len;
                else if (suffix == 2) { row[longest] = (unsigned char)(len >> 8); row[longest + 1] = (unsigned char)len; }
            }
        }
        RS_ACQUIRE_GIL()
    }
    result = PyBool_FromLong(ok);
done:
    rs_view_release(&ov);
    rs_release_chunks(arrays, nchunks, starts, c);
    return result;
}

/* key_triples(stream, out) -> int: keys of several widths (YCSB's `user` and a hash's digits)
 * as the merge's three-word keys (RS_TRIPLES): the bytes after the lead every key shares,
 * zeros to the longest key's end, then the key's length past the lead in one byte (so that a
 * key sorts before the longer keys it begins, trailing zero bytes included), read as three
 * big-endian words; out: three uint64 a key, the least significant first.  The lead's length,
 * or -1: a null, no key, or more than 23 bytes past the lead (the caller takes the byte
 * strings).  The reference is storage.kernels.key_codes.word_codes(None, ...). */
PyObject *rs_key_triples(PyObject *self, PyObject *args) {
    rs_code_call call;
    PyObject *result = NULL;
    (void)self;
    if (code_call_open(args, "OO:key_triples", 3, &call) < 0) goto done;
    Py_ssize_t lead = 0, longest = 0;
    int ok = call.n > 0;
    for (Py_ssize_t k = 0; k < call.nchunks; k++) ok &= call.c[k].valid == NULL;
    if (ok) {
        RS_RELEASE_GIL(call.n)
        /* pass 1: the bytes every key shares with the first (the lead), the longest key */
        const unsigned char *first = NULL;
        for (Py_ssize_t k = 0; k < call.nchunks && ok; k++) {
            const rs_chunk *ch = &call.c[k];
            for (Py_ssize_t r = 0; r < ch->length; r++) {
                const unsigned char *p = (const unsigned char *)ch->data + ch->off[r];
                Py_ssize_t len = ch->off[r + 1] - ch->off[r];
                if (len < 0) { ok = 0; break; }
                if (!first) { first = p; lead = len; }
                if (len < lead) lead = len;
                Py_ssize_t i = 0;
                while (i < lead && p[i] == first[i]) i++;
                lead = i;
                if (len > longest) longest = len;
            }
        }
        const Py_ssize_t width = longest - lead;  /* the bytes past the lead, the length after them */
        ok &= width <= 23;
        /* pass 2: each key's bytes past the lead, zeros, its length; as three words */
        for (Py_ssize_t k = 0; k < call.nchunks && ok; k++) {
            const rs_chunk *ch = &call.c[k];
            uint64_t *out = call.out + 3 * (Py_ssize_t)call.starts[k];
            for (Py_ssize_t r = 0; r < ch->length; r++, out += 3) {
                Py_ssize_t len = ch->off[r + 1] - ch->off[r];
                unsigned char b[24] = {0};
                memcpy(b, ch->data + ch->off[r] + lead, (size_t)(len - lead));
                b[width] = (unsigned char)(len - lead);
                uint64_t hi, mid, lo;
                memcpy(&hi, b, 8);
                memcpy(&mid, b + 8, 8);
                memcpy(&lo, b + 16, 8);
                out[0] = RS_FROM_BE64(lo);
                out[1] = RS_FROM_BE64(mid);
                out[2] = RS_FROM_BE64(hi);
            }
        }
        RS_ACQUIRE_GIL()
    }
    result = PyLong_FromSsize_t(ok ? lead : -1);
done:
    code_call_close(&call);
    return result;
}
