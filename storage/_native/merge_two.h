/* merge_two.h: resolve.c's two-cursor merge of a base run and one newer run (or DeleteFamily
 * markers), written once for a key type and included by resolve.c once per type: RS_KEY (a
 * type whose order is the keys' byte order: uint64_t for keys of up to 8 bytes or read as
 * their last 8, unsigned __int128 for keys of 9 to 16 bytes, rs_k192 for three words),
 * RS_LT(a, b) and RS_EQ(a, b) (its order and equality) and RS_TWO_NAME(name) (the name with
 * the type's suffix).  No include guard: included once per type. */

/* RS_TWO_NAME(merge_two)'s cursors and what it has written so far. */
typedef struct {
    Py_ssize_t i[2], end[2], b1, mi, rows, first;
    RS_KEY prev;  /* the last merged row's key (none before the first: `started` 0) */
    int started, anchored;
} RS_TWO_NAME(rs_two);

/* One merged row of merge_two: its key `key`, held by piece 0 at s->i[0] (IN0) and piece 1
 * at s->i[1] (IN1; constants at each call, so that a piece not holding the row is not read).
 * Checks that the key is past the row before (-2 if not: a piece repeats a key or goes
 * down), takes the row's newest DeleteFamily marker (MARKED), picks each column's winner,
 * writes the row (kept when any column has one) and moves the cursors past it. */
RS_INLINE int RS_TWO_NAME(two_row)(RS_TWO_NAME(rs_two) *s, RS_KEY key, const int IN0, const int IN1, const RS_KEY *MK, Py_ssize_t nm,
                      const int64_t *mts, const int MARKED, const rs_col *C, Py_ssize_t count,
                      int64_t *__restrict key_at, const int ANCHOR) {
    if ((!RS_LT(s->prev, key)) & s->started) return -2;
    s->prev = key;
    s->started = 1;
    /* RS_ABSENT (below every timestamp) for no marker: an entry is visible when it is newer
     * than the marker, which also leaves out absent entries */
    int64_t family = RS_ABSENT;
    if (MARKED && s->mi < nm && !RS_LT(key, MK[s->mi])) {  /* most rows: the next marker is past them */
        while (s->mi < nm && RS_LT(MK[s->mi], key)) s->mi++;
        while (s->mi < nm && RS_EQ(MK[s->mi], key)) {
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
#define RS_ROW_L(key) RS_TWO_NAME(two_row)(s, key, ANCHOR == 0, ANCHOR == 1, MK, nm, mts, MARKED, C, count, key_at, ANCHOR)
#define RS_ROW_S(key) RS_TWO_NAME(two_row)(s, key, ANCHOR == 1, ANCHOR == 0, MK, nm, mts, MARKED, C, count, key_at, ANCHOR)
#define RS_ROW_BOTH(key) RS_TWO_NAME(two_row)(s, key, 1, 1, MK, nm, mts, MARKED, C, count, key_at, ANCHOR)

/* merge_two's loop: per key of the smaller piece S, the rows of the anchor L before it (a
 * tight loop over runs of the larger piece's rows: three of every four in a re-put of a
 * quarter), then the row of that key; then L's rows left.  ANCHOR, MARKED (markers to merge)
 * and ND (a column count of 1 or 2, the common calls, so that the columns stay in registers;
 * 0: `nd` at run time) are constants in each call.  0, or -2 as two_row says. */
RS_INLINE Py_ssize_t RS_TWO_NAME(two_rows)(RS_TWO_NAME(rs_two) *io, const RS_KEY *K, const RS_KEY *MK, Py_ssize_t nm,
                              const int64_t *mts, const rs_col *cols, Py_ssize_t nd,
                              int64_t *__restrict key_at, const int ANCHOR, const int MARKED,
                              const Py_ssize_t ND) {
    RS_TWO_NAME(rs_two) state = *io, *s = &state;  /* a local copy: its fields stay in registers */
    rs_col local[2];
    for (Py_ssize_t u = 0; u < ND; u++) local[u] = cols[u];
    const rs_col *C = ND ? local : cols;
    const Py_ssize_t count = ND ? ND : nd;
    const int L = ANCHOR, S = 1 - ANCHOR;
    while (s->i[S] < s->end[S]) {
        RS_KEY ks = K[s->i[S]];
        while (s->i[L] < s->end[L] && RS_LT(K[s->i[L]], ks))
            if (RS_ROW_L(K[s->i[L]]) < 0) return -2;
        if (s->i[L] < s->end[L] && RS_EQ(K[s->i[L]], ks)) {
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



/* two_rows compiled for each anchor, markers or none, and one, two or any count of columns. */
static Py_ssize_t RS_TWO_NAME(two_rows_for)(RS_TWO_NAME(rs_two) *s, const RS_KEY *K, const RS_KEY *MK, Py_ssize_t nm, const int64_t *mts,
                               const rs_col *cols, Py_ssize_t nd, int64_t *__restrict key_at, Py_ssize_t anchor) {
#define RS_TWO(A, M, N) RS_TWO_NAME(two_rows)(s, K, MK, nm, mts, cols, nd, key_at, A, M, N)
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
 * range, every key once in its piece (keys as RS_KEY values).  The same answer as merge_rows, in two cursors
 * without its per-row piece scans (two_rows), a column whose timestamps are an earlier
 * column's (the common case: one value a piece, or a memstore's equal stamps) copied from
 * it.  `cols`, `copy_of`: room for `columns` entries.  Returns -2 as soon as a piece repeats
 * a key or goes down (the caller then runs merge_rows, which resolves repeats and reports
 * keys that go down). */
static Py_ssize_t RS_TWO_NAME(merge_two)(const RS_KEY *K, const RS_KEY *MK, Py_ssize_t nm, const int64_t *mts,
                            const int64_t *bounds, Py_ssize_t pieces, const int64_t *const *ts,
                            const Py_ssize_t *step, Py_ssize_t columns, int64_t *__restrict key_at, int64_t *__restrict *src,
                            Py_ssize_t anchor, rs_col *cols, Py_ssize_t *copy_of, int *anchored_out) {
    static const int64_t none = RS_ABSENT;  /* the timestamps of a second piece there is not */
    RS_TWO_NAME(rs_two) s;
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
    if (RS_TWO_NAME(two_rows_for)(&s, K, MK, nm, mts, cols, nd, key_at, anchor) < 0) return -2;
    for (Py_ssize_t j = 0; j < columns; j++) {
        if (copy_of[j] != j) memcpy(src[j], src[copy_of[j]], (size_t)s.rows * sizeof(int64_t));
    }
    *anchored_out = s.anchored;
    return s.rows;
}
