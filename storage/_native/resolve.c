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

/* The encoded keys: `ints` (width 0) or `width`-byte strings in `bytes`. */
typedef struct {
    const uint64_t *ints;
    const char *bytes;
    Py_ssize_t width;
} rs_keys;


/* Take keys from a buffer: uint64 items (width 0) or `width`-byte items; their count into *n. */
static int keys_view(rs_view *v, PyObject *obj, Py_ssize_t width, const char *what, rs_keys *k, Py_ssize_t *n) {
    if (rs_view_get(v, obj, what, 0) < 0) return -1;
    Py_ssize_t item = width ? width : 8;
    if (v->view.len % item) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd-byte keys, got %zd bytes", what, item, v->view.len);
        return -1;
    }
    k->ints = width ? NULL : (const uint64_t *)v->view.buf;
    k->bytes = width ? (const char *)v->view.buf : NULL;
    k->width = width;
    *n = v->view.len / item;
    return 0;
}

/* Compare key i of `a` with key j of `b`: integers (W 0) or W-byte strings. */
#define KCMP(a, i, b, j) \
    (W ? memcmp((a).bytes + (i) * W, (b).bytes + (j) * W, (size_t)W) \
       : ((a).ints[(i)] < (b).ints[(j)] ? -1 : ((a).ints[(i)] > (b).ints[(j)])))

/* The merge itself over views already checked (see rs_resolve_merge); W: the key width,
 * a constant in each of its two calls so that the integer form compiles without memcmp.
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

/* merge_two's cursors and what it has written so far. */
typedef struct {
    Py_ssize_t i[2], end[2], b1, mi, rows, first;
    uint64_t prev;  /* the last merged row's key (none before the first: `started` 0) */
    int started, anchored;
} rs_two;

/* One merged row of merge_two: its key `key`, held by piece 0 at s->i[0] (IN0) and piece 1
 * at s->i[1] (IN1; constants at each call, so that a piece not holding the row is not read).
 * Checks that the key is past the row before (-2 if not: a piece repeats a key or goes
 * down), takes the row's newest DeleteFamily marker (MARKED), picks each column's winner,
 * writes the row (kept when any column has one) and moves the cursors past it. */
RS_INLINE int two_row(rs_two *s, uint64_t key, const int IN0, const int IN1, const uint64_t *MK, Py_ssize_t nm,
                      const int64_t *mts, const int MARKED, const rs_col *C, Py_ssize_t count,
                      int64_t *__restrict key_at, const int ANCHOR) {
    if ((key <= s->prev) & s->started) return -2;
    s->prev = key;
    s->started = 1;
    /* RS_ABSENT (below every timestamp) for no marker: an entry is visible when it is newer
     * than the marker, which also leaves out absent entries */
    int64_t family = RS_ABSENT;
    if (MARKED && s->mi < nm && MK[s->mi] <= key) {  /* most rows: the next marker is past them */
        while (s->mi < nm && MK[s->mi] < key) s->mi++;
        while (s->mi < nm && MK[s->mi] == key) {
            if (mts[s->mi] > family) family = mts[s->mi];
            s->mi++;
        }
    }
    Py_ssize_t i0 = s->i[0], i1 = s->i[1], rows = s->rows;
    int any = count == 0;
    for (Py_ssize_t u = 0; u < count; u++) {
        /* a piece not holding the row gives RS_ABSENT; the newer piece (0) wins a tie */
        int64_t v0 = IN0 ? C[u].t[0][i0 * C[u].step[0]] : RS_ABSENT;
        int64_t v1 = IN1 ? C[u].t[1][(i1 - s->b1) * C[u].step[1]] : RS_ABSENT;
        int64_t floor0 = v0 > family ? v0 : family;
        int64_t best = v1 > floor0 ? i1 : (v0 > family ? i0 : -1);
        C[u].out[rows] = best;
        any |= best >= 0;
    }
    /* the row's key: the anchor's entry where it holds the row */
    Py_ssize_t k = ANCHOR == 0 ? (IN0 ? i0 : i1) : (IN1 ? i1 : i0);
    key_at[rows] = k;
    s->anchored &= (k == s->first + rows) | !any;
    s->rows = rows + any;
    s->i[0] = i0 + IN0;
    s->i[1] = i1 + IN1;
    return 0;
}

/* A row of piece L alone, of piece S alone, of both (L: the anchor, the larger piece). */
#define RS_ROW_L(key) two_row(s, key, ANCHOR == 0, ANCHOR == 1, MK, nm, mts, MARKED, C, count, key_at, ANCHOR)
#define RS_ROW_S(key) two_row(s, key, ANCHOR == 1, ANCHOR == 0, MK, nm, mts, MARKED, C, count, key_at, ANCHOR)
#define RS_ROW_BOTH(key) two_row(s, key, 1, 1, MK, nm, mts, MARKED, C, count, key_at, ANCHOR)

/* merge_two's loop: per key of the smaller piece S, the rows of the anchor L before it (a
 * tight loop over runs of the larger piece's rows: three of every four in a re-put of a
 * quarter), then the row of that key; then L's rows left.  ANCHOR, MARKED (markers to merge)
 * and ND (a column count of 1 or 2, the common calls, so that the columns stay in registers;
 * 0: `nd` at run time) are constants in each call.  0, or -2 as two_row says. */
RS_INLINE Py_ssize_t two_rows(rs_two *io, const uint64_t *K, const uint64_t *MK, Py_ssize_t nm,
                              const int64_t *mts, const rs_col *cols, Py_ssize_t nd,
                              int64_t *__restrict key_at, const int ANCHOR, const int MARKED,
                              const Py_ssize_t ND) {
    rs_two state = *io, *s = &state;  /* a local copy: its fields stay in registers */
    rs_col local[2];
    for (Py_ssize_t u = 0; u < ND; u++) local[u] = cols[u];
    const rs_col *C = ND ? local : cols;
    const Py_ssize_t count = ND ? ND : nd;
    const int L = ANCHOR, S = 1 - ANCHOR;
    while (s->i[S] < s->end[S]) {
        uint64_t ks = K[s->i[S]];
        while (s->i[L] < s->end[L] && K[s->i[L]] < ks)
            if (RS_ROW_L(K[s->i[L]]) < 0) return -2;
        if (s->i[L] < s->end[L] && K[s->i[L]] == ks) {
            if (RS_ROW_BOTH(ks) < 0) return -2;
        } else if (RS_ROW_S(ks) < 0) return -2;
    }
    while (s->i[L] < s->end[L])
        if (RS_ROW_L(K[s->i[L]]) < 0) return -2;
    *io = state;
    return 0;
}
#undef RS_ROW_L
#undef RS_ROW_S
#undef RS_ROW_BOTH

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

/* two_rows compiled for each anchor, markers or none, and one, two or any count of columns. */
static Py_ssize_t two_rows_for(rs_two *s, const uint64_t *K, const uint64_t *MK, Py_ssize_t nm, const int64_t *mts,
                               const rs_col *cols, Py_ssize_t nd, int64_t *__restrict key_at, Py_ssize_t anchor) {
#define RS_TWO(A, M, N) two_rows(s, K, MK, nm, mts, cols, nd, key_at, A, M, N)
    int shape = (int)anchor * 6 + (nm > 0) * 3 + (nd == 1 ? 1 : nd == 2 ? 2 : 0);
    switch (shape) {
    case 0: return RS_TWO(0, 0, 0);
    case 1: return RS_TWO(0, 0, 1);
    case 2: return RS_TWO(0, 0, 2);
    case 3: return RS_TWO(0, 1, 0);
    case 4: return RS_TWO(0, 1, 1);
    case 5: return RS_TWO(0, 1, 2);
    case 6: return RS_TWO(1, 0, 0);
    case 7: return RS_TWO(1, 0, 1);
    case 8: return RS_TWO(1, 0, 2);
    case 9: return RS_TWO(1, 1, 0);
    case 10: return RS_TWO(1, 1, 1);
    default: return RS_TWO(1, 1, 2);
    }
#undef RS_TWO
}

/* merge_rows for the common shape of a live chunk: one or two pieces (a base run and a
 * memstore or second file, or a base run and DeleteFamily markers), integer keys, no time
 * range, every key once in its piece.  The same answer as merge_rows, in two cursors
 * without its per-row piece scans (two_rows), a column whose timestamps are an earlier
 * column's (the common case: one value a piece, or a memstore's equal stamps) copied from
 * it.  `cols`, `copy_of`: room for `columns` entries.  Returns -2 as soon as a piece repeats
 * a key or goes down (the caller then runs merge_rows, which resolves repeats and reports
 * keys that go down). */
static Py_ssize_t merge_two(const uint64_t *K, const uint64_t *MK, Py_ssize_t nm, const int64_t *mts,
                            const int64_t *bounds, Py_ssize_t pieces, const int64_t *const *ts,
                            const Py_ssize_t *step, Py_ssize_t columns, int64_t *__restrict key_at, int64_t *__restrict *src,
                            Py_ssize_t anchor, rs_col *cols, Py_ssize_t *copy_of, int *anchored_out) {
    static const int64_t none = RS_ABSENT;  /* the timestamps of a second piece there is not */
    rs_two s;
    memset(&s, 0, sizeof(s));
    s.end[0] = (Py_ssize_t)bounds[1];
    s.b1 = s.i[1] = s.end[0];
    s.end[1] = pieces > 1 ? (Py_ssize_t)bounds[2] : s.end[0];
    s.first = (Py_ssize_t)bounds[anchor];
    s.anchored = 1;
    Py_ssize_t nd = 0;
    for (Py_ssize_t j = 0; j < columns; j++) {
        Py_ssize_t d = 0;
        while (d < j && (copy_of[d] != d || !same_column(ts, step, bounds, pieces, j, d))) d++;
        copy_of[j] = d;
        if (d < j) continue;
        rs_col *c = &cols[nd++];
        for (Py_ssize_t p = 0; p < 2; p++) {
            c->t[p] = p < pieces ? ts[j * pieces + p] : &none;
            c->step[p] = p < pieces ? step[j * pieces + p] : 0;
        }
        c->out = src[j];
    }
    if (two_rows_for(&s, K, MK, nm, mts, cols, nd, key_at, anchor) < 0) return -2;
    for (Py_ssize_t j = 0; j < columns; j++) {
        if (copy_of[j] != j) memcpy(src[j], src[copy_of[j]], (size_t)s.rows * sizeof(int64_t));
    }
    *anchored_out = s.anchored;
    return s.rows;
}

PyObject *rs_resolve_merge(PyObject *self, PyObject *args) {
    PyObject *keys_obj, *bounds_obj, *ts_seq, *mkeys_obj, *mts_obj, *out_obj;
    Py_ssize_t width;
    int ranged, bounded;
    long long low, high;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnOOOOpLpLO", &keys_obj, &width, &bounds_obj, &ts_seq, &mkeys_obj, &mts_obj,
                          &ranged, &low, &bounded, &high, &out_obj))
        return NULL;
    if (width < 0) {
        PyErr_Format(PyExc_ValueError, "width must be 0 (uint64 keys) or a key width in bytes, got %zd", width);
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
    int unsorted, anchored = 1;
    for (Py_ssize_t p = 1; p < pieces; p++) {
        if (bounds[p + 1] - bounds[p] > bounds[anchor + 1] - bounds[anchor]) anchor = p;  /* the largest piece */
    }
    RS_RELEASE_GIL(n)
    rows = -2;
    if (width == 0 && pieces <= 2 && !ranged)
        rows = merge_two(keys.ints, mkeys.ints, nm, mts, bounds, pieces, ts, step, columns, key_at, src, anchor,
                         cols, copy_of, &anchored);
    if (rows != -2) {
        /* merge_two resolved the chunk */
    } else if (width == 0)
        rows = merge_rows(keys, mkeys, nm, mts, bounds, pieces, ts, step, columns, ranged, low, bounded, high, key_at,
                          src, anchor, &anchored, 0);
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
    result = Py_BuildValue("nnO", rows, anchor, anchored ? Py_True : Py_False);
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
 * storage.kernels.resolve_rows._one_code_width and _int_codes. */
#define RS_CODES_LOOP(W, LOAD)                                                       \
    for (Py_ssize_t r = 0; r < len; r++) {                                           \
        LOAD;                                                                        \
        out[at + r] = v;                                                             \
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

PyObject *rs_key_codes(PyObject *self, PyObject *args) {
    PyObject *capsule, *out_obj;
    rs_view ov = {0};
    rs_chunk *c = NULL;
    int64_t *starts = NULL;
    struct ArrowArray *arrays = NULL;
    Py_ssize_t nchunks = 0;
    PyObject *result = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO:key_codes", &capsule, &out_obj)) return NULL;
    if (rs_read_chunks(capsule, &arrays, &c, &starts, &nchunks) < 0) goto done;
    Py_ssize_t n = (Py_ssize_t)starts[nchunks];
    if (rs_view_out(&ov, out_obj, n * (Py_ssize_t)sizeof(uint64_t)) < 0) goto done;
    uint64_t *out = (uint64_t *)ov.view.buf;
    int32_t width = 0;
    const unsigned char *prefix = NULL;  /* the first key: its first width - 8 bytes are every key's (width > 8) */
    for (Py_ssize_t k = 0; k < nchunks; k++) {  /* the one width, checked before any work */
        Py_ssize_t len = c[k].length;
        if (!len) continue;
        int32_t w = c[k].off[1] - c[k].off[0];
        if (c[k].valid || (w != 1 && w != 2 && w != 4 && w < 8) || (width && w != width) ||
            (int64_t)c[k].off[len] - c[k].off[0] != (int64_t)w * len) {
            width = 0;
            break;
        }
        if (!prefix) prefix = (const unsigned char *)c[k].data + c[k].off[0];
        width = w;
    }
    int ok = width != 0;
    if (ok) {
        RS_RELEASE_GIL(n)
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
        for (Py_ssize_t k = 0; k < nchunks && ok; k++) {
            Py_ssize_t len = c[k].length, at = (Py_ssize_t)starts[k];
            if (!len) continue;
            if (!key_width_ok(&c[k], width)) { ok = 0; break; }
            const unsigned char *p = (const unsigned char *)c[k].data + c[k].off[0];
            if (lead && lead <= 8) {
                for (Py_ssize_t r = 0; r < len && ok; r++) {
                    uint64_t x, tail;
                    memcpy(&x, p + r * width, 8);
                    memcpy(&tail, p + r * width + lead, 8);
                    ok = (x & mask) == head;
                    out[at + r] = RS_FROM_BE64(tail);
                }
                continue;
            }
            if (lead) {
                for (Py_ssize_t r = 0; r < len && ok; r++) {
                    uint64_t tail;
                    ok = memcmp(p + r * width, prefix, (size_t)lead) == 0;
                    memcpy(&tail, p + r * width + lead, 8);
                    out[at + r] = RS_FROM_BE64(tail);
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
    rs_view_release(&ov);
    for (Py_ssize_t i = 0; arrays && i < nchunks; i++) arrays[i].release(&arrays[i]);
    PyMem_Free(arrays);
    PyMem_Free(starts);
    PyMem_Free(c);
    return result;
}
