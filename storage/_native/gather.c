/* gather_binary: the rows of binary chunks picked by an index, copied in runs.
 *
 * Arrow's `take` on a binary column copies value by value; the picks of a
 * merge (a live table's rows: most from the base run, in order, a few from
 * newer runs) are runs of consecutive rows of one chunk, and one memcpy per
 * run costs about half as much on wide values.  The reference and fallback is
 * storage.kernels.gather.take_binary (Arrow's take).  The column comes in as an
 * Arrow C stream of its chunks: no Python object per chunk (a block-sized
 * chunk each, hundreds per column). */
#include "regionscan_native.h"

/* The chunk holding row `idx` of the chunks laid end to end (`starts`: n + 1 row starts). */
static inline Py_ssize_t find_chunk(const int64_t *starts, Py_ssize_t n, int64_t idx) {
    Py_ssize_t lo = 0, hi = n;  /* starts[lo] <= idx < starts[hi] */
    while (hi - lo > 1) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (starts[mid] <= idx) lo = mid; else hi = mid;
    }
    return lo;
}

#define IN_CHUNK(k, at) (starts[(k)] <= (at) && (at) < starts[(k) + 1])

/* Move the cursor `*k` to the chunk of row `at`.  A merge's picks alternate
 * between two places that each move forward (the base run's chunk and a newer
 * run's): `*other` remembers the last place, and each is tried, then its next
 * chunk, before a binary search. */
static inline void locate(const int64_t *starts, Py_ssize_t n, int64_t at, Py_ssize_t *k, Py_ssize_t *other) {
    if (IN_CHUNK(*k, at)) return;
    Py_ssize_t was = *k;
    if (IN_CHUNK(*other, at)) *k = *other;
    else if (*k + 1 < n && IN_CHUNK(*k + 1, at)) *k = *k + 1;
    else if (*other + 1 < n && IN_CHUNK(*other + 1, at)) *k = *other + 1;
    else *k = find_chunk(starts, n, at);
    *other = was;
}

/* Declared in regionscan_native.h. */
void rs_release_chunks(struct ArrowArray *arrays, Py_ssize_t count, int64_t *starts, rs_chunk *c) {
    for (Py_ssize_t i = 0; arrays && i < count; i++) arrays[i].release(&arrays[i]);
    PyMem_Free(arrays);
    PyMem_Free(starts);
    PyMem_Free(c);
}

/* Declared in regionscan_native.h (key_codes, resolve.c, reads its streams too). */
int rs_read_chunks(PyObject *capsule, struct ArrowArray **arrays_out, rs_chunk **out, int64_t **starts_out,
                       Py_ssize_t *count) {
    struct ArrowArrayStream *stream = PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (!stream) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "stream must be an Arrow C stream capsule (__arrow_c_stream__()), got %.80s",
                     Py_TYPE(capsule)->tp_name);
        return -1;
    }
    if (!stream->release) {
        PyErr_SetString(PyExc_ValueError, "stream was already consumed");
        return -1;
    }
    struct ArrowSchema schema;
    if (stream->get_schema(stream, &schema) != 0) {
        PyErr_Format(PyExc_ValueError, "stream: no schema (%s)", stream->get_last_error(stream));
        return -1;
    }
    int binary = schema.format && strcmp(schema.format, "z") == 0;
    char format[16] = {0};
    if (schema.format) strncpy(format, schema.format, sizeof(format) - 1);
    schema.release(&schema);
    if (!binary) {
        PyErr_Format(PyExc_ValueError, "stream must hold a binary column (format 'z'), got format '%s'", format);
        return -1;
    }
    Py_ssize_t cap = 16, n = 0;
    struct ArrowArray *arrays = PyMem_Malloc(cap * sizeof(struct ArrowArray));
    if (!arrays) { PyErr_NoMemory(); return -1; }
    *arrays_out = arrays;
    *count = 0;
    for (;;) {
        if (n == cap) {
            struct ArrowArray *grown = PyMem_Realloc(arrays, 2 * cap * sizeof(struct ArrowArray));
            if (!grown) { PyErr_NoMemory(); return -1; }
            arrays = *arrays_out = grown;
            cap *= 2;
        }
        if (stream->get_next(stream, &arrays[n]) != 0) {
            PyErr_Format(PyExc_ValueError, "stream: chunk %zd unreadable (%s)", n, stream->get_last_error(stream));
            return -1;
        }
        if (!arrays[n].release) break;  /* the end of the stream */
        *count = ++n;
    }
    rs_chunk *c = PyMem_Calloc(n ? n : 1, sizeof(rs_chunk));
    int64_t *starts = PyMem_Calloc(n + 1, sizeof(int64_t));
    *out = c; *starts_out = starts;
    if (!c || !starts) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < n; i++) {
        const struct ArrowArray *a = &arrays[i];
        if (a->n_buffers != 3 || a->offset < 0 || a->length < 0 || (a->length && !a->buffers[1])) {
            PyErr_Format(PyExc_ValueError, "stream: chunk %zd is not a binary array", i);
            return -1;
        }
        c[i].length = (Py_ssize_t)a->length;
        starts[i + 1] = starts[i] + a->length;
        if (a->length == 0) continue;
        c[i].off = (const int32_t *)a->buffers[1] + a->offset;
        c[i].data = (const char *)a->buffers[2];
        c[i].valid = a->null_count != 0 ? (const uint8_t *)a->buffers[0] : NULL;
        c[i].valid_bit = (Py_ssize_t)a->offset;
        /* the data buffer's size is the last offset (the C data interface gives no sizes): the
         * offsets used are checked against the chunk's first and last one */
        if (c[i].off[0] < 0 || c[i].off[0] > c[i].off[a->length] || (c[i].off[a->length] > c[i].off[0] && !c[i].data)) {
            PyErr_Format(PyExc_ValueError, "stream: chunk %zd has damaged offsets %d..%d", i, (int)c[i].off[0],
                         (int)c[i].off[a->length]);
            return -1;
        }
    }
    return 0;
}

/* Declared in regionscan_native.h. */
int rs_view_out(rs_view *v, PyObject *obj, Py_ssize_t size) {
    if (PyObject_GetBuffer(obj, &v->view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_Format(PyExc_ValueError, "allocate must return a writable buffer, got %.80s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    v->held = 1;
    if (v->view.len < size) {
        PyErr_Format(PyExc_ValueError, "allocate(%zd) returned %zd bytes", size, v->view.len);
        return -1;
    }
    return 0;
}

/* Pass 1 of a gather whose chunks have no nulls: the output offsets and their total in *bytes,
 * each pick's offsets checked against its chunk's first and last.  Returns 0 (nothing to use)
 * at the first pick of -1: the caller then runs the general pass, which makes nulls of them;
 * 1 otherwise, with *bad (the first pick outside the rows or on damaged offsets) and
 * *overflow (past 2 GiB) set as the general pass sets them. */
static int gather_plain_offsets(const rs_chunk *c, const int64_t *starts, Py_ssize_t nchunks, const int64_t *idx,
                                Py_ssize_t n, int32_t *out_off, int64_t *bytes_out, Py_ssize_t *bad,
                                int *overflow) {
    int64_t total = starts[nchunks], bytes = 0, lo = 0, hi = 0;
    const int32_t *off = NULL;
    int32_t first = 0, last = 0;
    Py_ssize_t k = 0, k_other = 0;
    out_off[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t at = idx[i];
        if (at < lo || at >= hi) {  /* another chunk (a merge alternates between two) */
            if (at < 0) return 0;
            if (at >= total) { *bad = i; return 1; }
            locate(starts, nchunks, at, &k, &k_other);
            lo = starts[k]; hi = starts[k + 1];
            off = c[k].off;
            first = off[0]; last = off[c[k].length];
        }
        int32_t a = off[at - lo], b = off[at - lo + 1];
        if (a < first || b < a || b > last) { *bad = i; return 1; }
        bytes += b - a;
        if (bytes > INT32_MAX) { *overflow = 1; return 1; }
        out_off[i + 1] = (int32_t)bytes;
    }
    *bytes_out = bytes;
    return 1;
}

/* A copy of `size` bytes between buffers that do not overlap, inline: a run of a merge or a
 * reverse scan is one to a few values (a live table's runs of one and three 104-byte rows, a
 * reverse scan's one row at a time), where a call of memcpy costs more than its bytes.  Words of
 * 16 bytes, the last one overlapping the one before so that nothing past `size` is read or
 * written; memcpy for larger runs. */
static inline void copy_small(char *dst, const char *src, size_t size) {
    if (size > 256) {
        memcpy(dst, src, size);
    } else if (size >= 16) {
        size_t at = 0;
        for (; at + 16 < size; at += 16) memcpy(dst + at, src + at, 16);
        memcpy(dst + size - 16, src + size - 16, 16);
    } else if (size >= 8) {
        memcpy(dst, src, 8);
        memcpy(dst + size - 8, src + size - 8, 8);
    } else if (size >= 4) {
        memcpy(dst, src, 4);
        memcpy(dst + size - 4, src + size - 4, 4);
    } else {
        for (size_t k = 0; k < size; k++) dst[k] = src[k];
    }
}

/* Pass 2 of a gather checked by gather_plain_offsets: one copy per run of consecutive rows of one chunk. */
static void gather_plain_copy(const rs_chunk *c, const int64_t *starts, Py_ssize_t nchunks, const int64_t *idx,
                              Py_ssize_t n, const int32_t *out_off, char *out) {
    Py_ssize_t i = 0, k = 0, k_other = 0;
    size_t asked = 0, limit = (size_t)out_off[n];
    while (i < n) {
        int64_t at = idx[i];
        locate(starts, nchunks, at, &k, &k_other);
        int64_t end_row = starts[k + 1];
        Py_ssize_t j = i + 1;
        while (j < n && idx[j] == idx[j - 1] + 1 && idx[j] < end_row) j++;
        size_t size = (size_t)(out_off[j] - out_off[i]);
        rs_prefetch_out(out, &asked, (size_t)out_off[j], limit);
        copy_small(out + out_off[i], c[k].data + c[k].off[at - starts[k]], size);
        i = j;
    }
}

/* The one width of every value of every chunk, else 0: told from a chunk's first and last
 * offsets when they disagree, else every offset checked (sequential reads of the offsets, far
 * cheaper than a pick's two random ones).  Values of one width (a fixed-width encoding's
 * 4-byte counter or 100-byte record, a code) are gathered without reading a pick's offsets:
 * its bytes are at (row * width), its output at (pick * width).  At most RS_NARROW bytes, a
 * pick is copied with a fixed-size copy (gather_narrow_copy): a run's memcpy call costs more
 * than its few bytes (a live table's runs of three 4-byte values: 0.40 ms a region by runs);
 * wider, one copy per run (gather_uniform_copy). */
#define RS_NARROW 16
static int32_t uniform_width(const rs_chunk *c, Py_ssize_t nchunks) {
    int32_t w = -1;
    for (Py_ssize_t k = 0; k < nchunks; k++) {
        Py_ssize_t len = c[k].length;
        if (len == 0) continue;
        const int32_t *off = c[k].off;
        int64_t span = (int64_t)off[len] - off[0];
        if (span % len) return 0;
        int64_t cw = span / len;
        if (cw == 0 || cw > INT32_MAX || (w >= 0 && cw != w)) return 0;
        for (Py_ssize_t r0 = 0; r0 < len; r0 += 1024) {  /* blocks without a branch: vectorized */
            Py_ssize_t r1 = r0 + 1024 < len ? r0 + 1024 : len;
            int bad = 0;
            for (Py_ssize_t r = r0; r < r1; r++) bad |= off[r + 1] - off[r] != cw;
            if (bad) return 0;
        }
        w = (int32_t)cw;
    }
    return w > 0 ? w : 0;
}

/* Each pick's W bytes; after a pick, the picks that go on down its chunk row by row (a reverse
 * scan's) are copied with no check of their chunk or of where their rows are. */
#define RS_NARROW_LOOP(W)                                                          \
    for (Py_ssize_t i = 0; i < n;) {                                               \
        int64_t at = idx[i];                                                       \
        if (at < lo || at >= hi) {                                                 \
            locate(starts, nchunks, at, &k, &k_other);                             \
            lo = starts[k]; hi = starts[k + 1];                                    \
            base = c[k].data + c[k].off[0];                                        \
        }                                                                          \
        memcpy(out + (size_t)i * (W), base + (size_t)(at - lo) * (W), (W));        \
        for (i++; i < n && idx[i] == at - 1 && at > lo; i++) {                     \
            at--;                                                                  \
            memcpy(out + (size_t)i * (W), base + (size_t)(at - lo) * (W), (W));    \
        }                                                                          \
    }

/* Pass 1 of a gather without nulls whose values are all `w` bytes (uniform_width): the output
 * offsets are multiples of `w`, and only the picks are checked (every offset of the chunks
 * was); returns and sets as gather_plain_offsets does. */
static int gather_uniform_offsets(const int64_t *idx, Py_ssize_t n, int64_t total, int32_t w, int32_t *out_off,
                                 int64_t *bytes_out, Py_ssize_t *bad, int *overflow) {
    if ((int64_t)n * w > INT32_MAX) {
        for (Py_ssize_t i = 0; i < n; i++) if (idx[i] < 0) return 0;
        *overflow = 1;
        return 1;
    }
    out_off[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t at = idx[i];
        if (at < 0) return 0;
        if (at >= total) { *bad = i; return 1; }
        out_off[i + 1] = (int32_t)((int64_t)(i + 1) * w);
    }
    *bytes_out = (int64_t)n * w;
    return 1;
}

/* Pass 2 of a gather checked by gather_uniform_offsets, values wider than RS_NARROW: one copy per
 * run of consecutive rows of one chunk, its bytes found by row number alone. */
static void gather_uniform_copy(const rs_chunk *c, const int64_t *starts, Py_ssize_t nchunks, const int64_t *idx,
                                Py_ssize_t n, int32_t w, char *out) {
    Py_ssize_t i = 0, k = 0, k_other = 0;
    size_t asked = 0, limit = (size_t)n * (size_t)w;
    while (i < n) {
        int64_t at = idx[i];
        locate(starts, nchunks, at, &k, &k_other);
        int64_t end_row = starts[k + 1];
        const char *base = c[k].data + c[k].off[0];  /* the chunk's row r at base + (r - first) * w */
        int64_t first = starts[k];
        Py_ssize_t j = i + 1;
        while (j < n && idx[j] == idx[j - 1] + 1 && idx[j] < end_row) j++;
        if (j == i + 1) {  /* a run down the chunk (a reverse scan's): a value at a time, no check a pick */
            while (j < n && idx[j] == idx[j - 1] - 1 && idx[j] >= first) j++;
            for (Py_ssize_t t = i; t < j; t++, at--)
                copy_small(out + (size_t)t * (size_t)w, base + (size_t)(at - first) * (size_t)w, (size_t)w);
            i = j;
            continue;
        }
        rs_prefetch_out(out, &asked, (size_t)j * (size_t)w, limit);
        copy_small(out + (size_t)i * (size_t)w, base + (size_t)(at - first) * (size_t)w, (size_t)(j - i) * (size_t)w);
        i = j;
    }
}

/* Pass 2 of a gather checked by gather_uniform_offsets, values of at most RS_NARROW bytes: each pick's `w` bytes. */
static void gather_narrow_copy(const rs_chunk *c, const int64_t *starts, Py_ssize_t nchunks, const int64_t *idx,
                               Py_ssize_t n, int32_t w, char *out) {
    Py_ssize_t k = 0, k_other = 0;
    int64_t lo = 0, hi = 0;
    const char *base = NULL;
    switch (w) {  /* a copy of a constant size compiles to one load and store */
    case 1: RS_NARROW_LOOP(1) break;
    case 2: RS_NARROW_LOOP(2) break;
    case 4: RS_NARROW_LOOP(4) break;
    case 8: RS_NARROW_LOOP(8) break;
    case 16: RS_NARROW_LOOP(16) break;
    default: RS_NARROW_LOOP((size_t)w) break;
    }
}

PyObject *rs_gather_binary(PyObject *self, PyObject *args) {
    PyObject *capsule, *index_obj, *allocate, *result = NULL, *validity = NULL, *offsets = NULL, *data = NULL;
    rs_view vo = {0}, vv = {0}, vd = {0};
    rs_chunk *c = NULL;
    int64_t *starts = NULL;
    struct ArrowArray *arrays = NULL;
    rs_view index = {0};
    Py_ssize_t nchunks = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO:gather_binary", &capsule, &index_obj, &allocate)) return NULL;
    if (rs_read_chunks(capsule, &arrays, &c, &starts, &nchunks) < 0) goto done;
    if (rs_view_get(&index, index_obj, "index", 0) < 0) goto done;
    if (index.view.len % sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "index must be an int64 array");
        goto done;
    }
    Py_ssize_t n = index.view.len / sizeof(int64_t);
    const int64_t *idx = (const int64_t *)index.view.buf;
    int64_t total = starts[nchunks];
    offsets = PyObject_CallFunction(allocate, "n", (Py_ssize_t)((n + 1) * sizeof(int32_t)));
    validity = offsets ? PyObject_CallFunction(allocate, "n", (Py_ssize_t)((n + 7) / 8)) : NULL;
    if (!offsets || !validity || rs_view_out(&vo, offsets, (n + 1) * sizeof(int32_t)) < 0 ||
        rs_view_out(&vv, validity, (n + 7) / 8) < 0)
        goto done;
    int32_t *out_off = (int32_t *)vo.view.buf;
    uint8_t *out_valid = (uint8_t *)vv.view.buf;
    Py_ssize_t nulls = 0, bad = -1;
    int64_t bytes = 0;
    int overflow = 0;
    /* no chunk has nulls and (as the fast pass finds out) no pick is -1: every row is valid,
     * so neither pass reads or writes a validity bit (a live table's usual gather) */
    int plain = 1;
    for (Py_ssize_t i = 0; i < nchunks; i++) plain &= c[i].valid == NULL;
    int32_t width = 0;
    if (plain) {
        RS_RELEASE_GIL(n)
        /* a few picks from many rows: the check of every offset would cost more than the picks */
        width = n * 8 >= total ? uniform_width(c, nchunks) : 0;
        if (width) plain = gather_uniform_offsets(idx, n, total, width, out_off, &bytes, &bad, &overflow);
        else plain = gather_plain_offsets(c, starts, nchunks, idx, n, out_off, &bytes, &bad, &overflow);
        RS_ACQUIRE_GIL()
    }
    if (!plain) {
    bytes = 0; bad = -1; overflow = 0;
    memset(out_valid, 0, (n + 7) / 8);

    /* pass 1: lengths, validity, bounds (the GIL released: only our views and buffers) */
    {
    RS_RELEASE_GIL(n)
    Py_ssize_t k = 0, k_other = 0;
    out_off[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t at = idx[i];
        if (at >= 0) {
            if (at >= total) { bad = i; break; }
            locate(starts, nchunks, at, &k, &k_other);
            int64_t r = at - starts[k];
            const rs_chunk *ch = &c[k];
            Py_ssize_t bit = ch->valid_bit + r;
            if (!ch->valid || (ch->valid[bit >> 3] >> (bit & 7)) & 1) {
                int32_t a = ch->off[r], b = ch->off[r + 1];
                if (a < ch->off[0] || b < a || b > ch->off[ch->length]) { bad = i; break; }
                bytes += b - a;
                if (bytes > INT32_MAX) { overflow = 1; break; }
                out_valid[i >> 3] |= (uint8_t)(1u << (i & 7));
            } else {
                nulls++;
            }
        } else {
            nulls++;
        }
        out_off[i + 1] = (int32_t)bytes;
    }
    RS_ACQUIRE_GIL()
    }
    }
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "index[%zd] = %lld is outside the %lld rows of the chunks (or their offsets are damaged)",
                     bad, (long long)idx[bad], (long long)total);
        goto done;
    }
    if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "gather_binary: the gathered values pass 2 GiB (a binary array's limit)");
        goto done;
    }
    data = PyObject_CallFunction(allocate, "n", (Py_ssize_t)bytes);
    if (!data || rs_view_out(&vd, data, (Py_ssize_t)bytes) < 0) goto done;
    char *out = (char *)vd.view.buf;

    /* pass 2: one memcpy per run of consecutive valid rows of one chunk */
    if (plain) {
        RS_RELEASE_GIL(n)
        if (width && width <= RS_NARROW) gather_narrow_copy(c, starts, nchunks, idx, n, width, out);
        else if (width) gather_uniform_copy(c, starts, nchunks, idx, n, width, out);
        else gather_plain_copy(c, starts, nchunks, idx, n, out_off, out);
        RS_ACQUIRE_GIL()
    } else {
    RS_RELEASE_GIL(n)
    Py_ssize_t i = 0, kk = 0, kk_other = 0;
    size_t asked = 0;
    while (i < n) {
        if (!((out_valid[i >> 3] >> (i & 7)) & 1)) { i++; continue; }
        int64_t at = idx[i];
        locate(starts, nchunks, at, &kk, &kk_other);
        int64_t end_row = starts[kk + 1];
        Py_ssize_t j = i + 1;
        while (j < n && idx[j] == idx[j - 1] + 1 && idx[j] < end_row && ((out_valid[j >> 3] >> (j & 7)) & 1)) j++;
        const int32_t *off = c[kk].off;
        int64_t r0 = at - starts[kk], r1 = idx[j - 1] - starts[kk];
        rs_prefetch_out(out, &asked, (size_t)out_off[j], (size_t)bytes);
        memcpy(out + out_off[i], c[kk].data + off[r0], (size_t)(off[r1 + 1] - off[r0]));
        i = j;
    }
    RS_ACQUIRE_GIL()
    }

    if (nulls == 0) {  /* (plain: always) */
        Py_DECREF(validity);
        validity = Py_None;
        Py_INCREF(Py_None);
    }
    result = Py_BuildValue("(OOOn)", validity, offsets, data, nulls);
done:
    Py_XDECREF(validity);
    Py_XDECREF(offsets);
    Py_XDECREF(data);
    rs_view_release(&index);
    rs_view_release(&vo);
    rs_view_release(&vv);
    rs_view_release(&vd);
    rs_release_chunks(arrays, nchunks, starts, c);
    return result;
}
