/* Per-value decoders of a column chunk: each one pass over a block's values.
 *
 * decimal_words: HBase BigDecimal bytes (4-byte big-endian scale, then the
 *   unscaled value in minimal big-endian two's complement) to the two int64
 *   words of a decimal128 per row.  The NumPy reference
 *   (serde.codecs.hbase_bytes.DecimalCodec._short_column_py) makes about a
 *   dozen whole-column passes (the scale windows, the 8-byte windows, the
 *   shifts, the bound checks, the words); this is one.
 * dict_gather: a DICT chunk's values (dictionary entries picked by narrow
 *   codes) as a binary column's offsets and data.  The reference is Arrow's
 *   take of the dictionary (storage.storefile._chunk_encodings.decode_dict),
 *   which copies value by value through its generic binary kernel.
 *
 * dict_fixed: the same when every entry is one width: no offsets summed, a row one
 *   copy of a constant size.
 * dict_bytes: the bytes a DICT chunk's values take once expanded (the block cache's
 *   charge), counted without expanding them.
 * dict_check: a DICT chunk's offsets and codes checked as it is read.
 * lengths_offsets: a LENGTHS chunk's lengths summed into its offsets.
 * frame_values: a FRAME chunk's values (a base plus narrow codes times a divisor) in
 *   their FIXED form, big-endian, in one pass.
 *
 * Each checks its bounds once per call, before the work, and raises a one-line
 * ValueError naming what is wrong; none keeps a pointer past its return. */
#include "regionscan_native.h"

/* Bit `i` of an Arrow validity bitmap (least significant bit first); no bitmap: every row valid. */
#define RS_VALID(bits, i) (!(bits) || (((const uint8_t *)(bits))[(i) >> 3] >> ((i) & 7)) & 1)

/* Row i's code of `width` (1 or 2) bytes, little-endian (read bytewise: the codes need not be aligned). */
#define RS_CODE(c, width, i) ((width) == 1 ? (Py_ssize_t)(c)[i] : (Py_ssize_t)((c)[2 * (i)] | ((c)[2 * (i) + 1] << 8)))

/* Dictionary entries up to this long are copied as whole 8-byte words. */
#define RS_SHORT_ENTRY 64

/* decimal_words(offsets, data, validity, offset, n, scale, precision, out) -> bool
 *
 * `offsets`: the int32 offsets buffer of a binary array (its first `offset`
 * entries skipped), `data` its value bytes (None: empty), `validity` its
 * bitmap (None: no nulls; bit `offset` is row 0's).  `out`: a writable buffer of
 * 16 * n bytes.  Row i's words are written when its value is stored at
 * `scale` in 1 to 8 unscaled bytes and lies strictly within +-10**precision
 * (precision <= 18); a null row gets zeros.  Returns False (out partly
 * written) at the first valid row that does not qualify: the caller's
 * general path decides then. */
PyObject *rs_decimal_words(PyObject *self, PyObject *args) {
    PyObject *o_off, *o_data, *o_valid, *o_out;
    Py_ssize_t offset, n;
    int scale, precision;
    if (!PyArg_ParseTuple(args, "OOOnniiO", &o_off, &o_data, &o_valid, &offset, &n, &scale, &precision, &o_out))
        return NULL;
    if (n < 0 || offset < 0) {
        PyErr_Format(PyExc_ValueError, "decimal_words: n (%zd) and offset (%zd) must not be negative", n, offset);
        return NULL;
    }
    if (precision < 1 || precision > 18) {
        PyErr_Format(PyExc_ValueError, "decimal_words: precision must be 1..18, got %d", precision);
        return NULL;
    }
    rs_view off = {0}, data = {0}, valid = {0}, out = {0};
    PyObject *result = NULL;
    if (rs_view_get(&off, o_off, "offsets", 0) < 0 || rs_view_get(&data, o_data, "data", 1) < 0 ||
        rs_view_get(&valid, o_valid, "validity", 1) < 0)
        goto done;
    if (PyObject_GetBuffer(o_out, &out.view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_Format(PyExc_ValueError, "out must be a writable contiguous buffer, got %.80s", Py_TYPE(o_out)->tp_name);
        goto done;
    }
    out.held = 1;
    if (off.view.len < (Py_ssize_t)sizeof(int32_t) * (offset + n + 1)) {
        PyErr_Format(PyExc_ValueError, "offsets: %zd bytes hold fewer than offset + n + 1 = %zd entries",
                     off.view.len, offset + n + 1);
        goto done;
    }
    if (out.view.len < 16 * n) {
        PyErr_Format(PyExc_ValueError, "out: %zd bytes, %zd rows need %zd", out.view.len, n, 16 * n);
        goto done;
    }
    if (valid.held && valid.view.len < (offset + n + 7) / 8) {
        PyErr_Format(PyExc_ValueError, "validity: %zd bytes, rows up to %zd need %zd", valid.view.len, offset + n,
                     (offset + n + 7) / 8);
        goto done;
    }
    const int32_t *offs = (const int32_t *)off.view.buf + offset;
    const uint8_t *bytes = data.held ? (const uint8_t *)data.view.buf : NULL;
    const Py_ssize_t size = data.held ? data.view.len : 0;
    /* every valid row's bytes lie in the data buffer: offsets checked against its size as read */
    int64_t bound = 1;
    for (int k = 0; k < precision; k++) bound *= 10;
    const uint8_t want[4] = {(uint8_t)((uint32_t)scale >> 24), (uint8_t)((uint32_t)scale >> 16),
                             (uint8_t)((uint32_t)scale >> 8), (uint8_t)scale};
    int64_t *words = (int64_t *)out.view.buf;
    const void *bits = valid.held ? valid.view.buf : NULL;
    int ok = 1;
    RS_RELEASE_GIL(n)
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!RS_VALID(bits, offset + i)) {
            words[2 * i] = 0;
            words[2 * i + 1] = 0;
            continue;
        }
        int64_t start = offs[i], end = offs[i + 1];
        int64_t len = end - start;
        if (start < 0 || end > size || len < 5 || len > 12 || memcmp(bytes + start, want, 4) != 0) {
            ok = 0;
            break;
        }
        const uint8_t *p = bytes + start + 4;
        /* sign-extend from the first byte, then shift in the rest, big-endian */
        int64_t v = (int8_t)p[0];
        for (int64_t k = 1; k < len - 4; k++) v = (int64_t)((uint64_t)v << 8) | p[k];
        if (v <= -bound || v >= bound) {
            ok = 0;
            break;
        }
        words[2 * i] = v;
        words[2 * i + 1] = v >> 63;
    }
    RS_ACQUIRE_GIL()
    result = PyBool_FromLong(ok);
done:
    rs_view_release(&off);
    rs_view_release(&data);
    rs_view_release(&valid);
    rs_view_release(&out);
    return result;
}

/* dict_gather(entry_offsets, entries, codes, code_width, validity, offset, n, out_offsets, allocate) -> data
 *
 * `entry_offsets`: the d + 1 uint32 offsets of the dictionary entries in
 * `entries`; `codes`: n codes of `code_width` (1 or 2) bytes, little-endian,
 * from row `offset` on; `validity`: the rows' bitmap (None: no nulls), a null
 * row taking no bytes whatever its code.  Fills `out_offsets` (a writable
 * buffer of n + 1 int32) and returns the values' bytes in a buffer from
 * `allocate(size)` (pyarrow.allocate_buffer: Arrow's memory pool). */
PyObject *rs_dict_gather(PyObject *self, PyObject *args) {
    PyObject *o_eoff, *o_entries, *o_codes, *o_valid, *o_out, *allocate;
    Py_ssize_t offset, n;
    int width;
    if (!PyArg_ParseTuple(args, "OOOiOnnOO", &o_eoff, &o_entries, &o_codes, &width, &o_valid, &offset, &n, &o_out,
                          &allocate))
        return NULL;
    if (width != 1 && width != 2) {
        PyErr_Format(PyExc_ValueError, "dict_gather: code_width must be 1 or 2, got %d", width);
        return NULL;
    }
    if (n < 0 || offset < 0) {
        PyErr_Format(PyExc_ValueError, "dict_gather: n (%zd) and offset (%zd) must not be negative", n, offset);
        return NULL;
    }
    rs_view eoff = {0}, entries = {0}, codes = {0}, valid = {0}, out = {0}, dst = {0};
    PyObject *result = NULL, *buffer = NULL;
    if (rs_view_get(&eoff, o_eoff, "entry_offsets", 0) < 0 || rs_view_get(&entries, o_entries, "entries", 1) < 0 ||
        rs_view_get(&codes, o_codes, "codes", 0) < 0 || rs_view_get(&valid, o_valid, "validity", 1) < 0)
        goto done;
    if (PyObject_GetBuffer(o_out, &out.view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_Format(PyExc_ValueError, "out_offsets must be a writable contiguous buffer, got %.80s",
                     Py_TYPE(o_out)->tp_name);
        goto done;
    }
    out.held = 1;
    Py_ssize_t d = eoff.view.len / 4 - 1;
    if (d < 1) {
        PyErr_SetString(PyExc_ValueError, "entry_offsets: a dictionary needs at least one entry (two offsets)");
        goto done;
    }
    const uint32_t *eo = (const uint32_t *)eoff.view.buf;
    const Py_ssize_t esize = entries.held ? entries.view.len : 0;
    for (Py_ssize_t k = 0; k < d; k++) {
        if (eo[k] > eo[k + 1] || (Py_ssize_t)eo[k + 1] > esize) {
            PyErr_Format(PyExc_ValueError, "entry_offsets: entry %zd [%u, %u) is not within the %zd entry bytes", k,
                         eo[k], eo[k + 1], esize);
            goto done;
        }
    }
    if (codes.view.len < (offset + n) * width) {
        PyErr_Format(PyExc_ValueError, "codes: %zd bytes, rows up to %zd of %d bytes need %zd", codes.view.len,
                     offset + n, width, (offset + n) * width);
        goto done;
    }
    if (valid.held && valid.view.len < (offset + n + 7) / 8) {
        PyErr_Format(PyExc_ValueError, "validity: %zd bytes, rows up to %zd need %zd", valid.view.len, offset + n,
                     (offset + n + 7) / 8);
        goto done;
    }
    if (out.view.len < (Py_ssize_t)sizeof(int32_t) * (n + 1)) {
        PyErr_Format(PyExc_ValueError, "out_offsets: %zd bytes hold fewer than n + 1 = %zd int32", out.view.len, n + 1);
        goto done;
    }
    const uint8_t *c8 = (const uint8_t *)codes.view.buf + offset * width;
    const void *bits = valid.held ? valid.view.buf : NULL;
    int32_t *offs = (int32_t *)out.view.buf;
    /* pass 1: the offsets (every code checked against the dictionary) */
    int64_t total = 0;
    offs[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (RS_VALID(bits, offset + i)) {
            Py_ssize_t code = RS_CODE(c8, width, i);
            if (code >= d) {
                PyErr_Format(PyExc_ValueError, "codes: row %zd has code %zd, the dictionary has %zd entries", i, code, d);
                goto done;
            }
            total += eo[code + 1] - eo[code];
            if (total > INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError, "dict_gather: the values exceed a binary array's 2 GiB");
                goto done;
            }
        }
        offs[i + 1] = (int32_t)total;
    }
    /* 8 bytes of slack past the values: short values are copied as whole 8-byte words */
    buffer = PyObject_CallFunction(allocate, "n", (Py_ssize_t)total + 8);
    if (!buffer) goto done;
    if (PyObject_GetBuffer(buffer, &dst.view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto done;
    dst.held = 1;
    if (dst.view.len < total + 8) {
        PyErr_Format(PyExc_ValueError, "allocate(%lld) gave %zd bytes", (long long)total + 8, dst.view.len);
        goto done;
    }
    /* pass 2: the bytes.  Entries of at most RS_SHORT_ENTRY bytes are first laid out at a
     * stride of 8-byte words (zero padded), then each value is copied as whole words: a
     * memcpy of a variable length per value cost twice as much on short strings. */
    {
        const uint8_t *src = entries.held ? (const uint8_t *)entries.view.buf : NULL;
        uint8_t *to = (uint8_t *)dst.view.buf;
        uint32_t longest = 0;
        for (Py_ssize_t k = 0; k < d; k++)
            if (eo[k + 1] - eo[k] > longest) longest = eo[k + 1] - eo[k];
        size_t stride = ((size_t)longest + 7) / 8 * 8;
        uint8_t *table = NULL;
        if (longest <= RS_SHORT_ENTRY && longest > 0) {
            table = PyMem_Calloc((size_t)d, stride);
            if (!table) { PyErr_NoMemory(); goto done; }
            for (Py_ssize_t k = 0; k < d; k++) memcpy(table + k * stride, src + eo[k], eo[k + 1] - eo[k]);
        }
        RS_RELEASE_GIL(n)
        if (table) {
            /* a row copies as many words as the longest entry takes, its spare ones overwritten
             * by the next row's: a count of words that varied with each row's length
             * mispredicted a branch a row (lineitem's l_shipinstruct, entries of 4 to 17 bytes:
             * 3.6 -> 1.2 ms for 570K rows, the count of words fixed per loop); the last rows,
             * whose spare words would pass the buffer's end, copy their own words only */
            const size_t words = stride / 8;
            Py_ssize_t whole = n;
            while (whole > 0 && (size_t)offs[whole - 1] + stride > (size_t)total + 8) whole--;
            /* a null row is skipped: its code was not checked (an empty entry's words are
             * zeros, overwritten as any spare word) */
#define RS_WORDS_LOOP(WORDS)                                                              \
            for (Py_ssize_t i = 0; i < whole; i++) {                                      \
                if (bits && !RS_VALID(bits, offset + i)) continue;                        \
                const uint8_t *from = table + RS_CODE(c8, width, i) * stride;             \
                uint8_t *at = to + offs[i];                                               \
                for (size_t k = 0; k < (WORDS); k++) memcpy(at + 8 * k, from + 8 * k, 8); \
            }
            if (words == 1) { RS_WORDS_LOOP(1) }
            else if (words == 2) { RS_WORDS_LOOP(2) }
            else if (words == 3) { RS_WORDS_LOOP(3) }
            else { RS_WORDS_LOOP(words) }
#undef RS_WORDS_LOOP
            for (Py_ssize_t i = whole; i < n; i++) {
                int32_t len = offs[i + 1] - offs[i];
                const uint8_t *from = table + RS_CODE(c8, width, i) * stride;
                for (int32_t k = 0; k < len; k += 8) memcpy(to + offs[i] + k, from + k, 8);
            }
        } else {
            for (Py_ssize_t i = 0; i < n; i++) {
                int32_t len = offs[i + 1] - offs[i];
                if (len) memcpy(to + offs[i], src + eo[RS_CODE(c8, width, i)], (size_t)len);
            }
        }
        RS_ACQUIRE_GIL()
        PyMem_Free(table);
    }
    result = buffer;
    buffer = NULL;
done:
    rs_view_release(&eoff);
    rs_view_release(&entries);
    rs_view_release(&codes);
    rs_view_release(&valid);
    rs_view_release(&out);
    rs_view_release(&dst);
    Py_XDECREF(buffer);
    return result;
}

/* The largest of n little-endian codes of `width` (1, 2 or 4) bytes, each loop's maximum kept
 * in the codes' own width so that it has no branch a code and vectorizes (a 64-bit maximum did
 * not: half of frame_values' time); 0 for no code. */
static uint64_t rs_max_code(const uint8_t *c8, int width, Py_ssize_t n) {
    if (width == 1) {
        uint8_t m = 0;
        for (Py_ssize_t i = 0; i < n; i++) m = c8[i] > m ? c8[i] : m;
        return m;
    }
    if (width == 2) {
        uint16_t m = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            uint16_t v = (uint16_t)(c8[2 * i] | (c8[2 * i + 1] << 8));
            m = v > m ? v : m;
        }
        return m;
    }
    uint32_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)c8[4 * i] | (uint32_t)c8[4 * i + 1] << 8 | (uint32_t)c8[4 * i + 2] << 16 |
                     (uint32_t)c8[4 * i + 3] << 24;
        m = v > m ? v : m;
    }
    return m;
}

/* The checks the dictionary kernels make of their arguments, in one place: a code width of 1
 * or 2, n not negative, two entry offsets at least and n codes held.  The dictionary's
 * entries d, or -1 with a one-line ValueError (`name`: the kernel's). */
static Py_ssize_t rs_dict_args(const char *name, int width, Py_ssize_t n, const rs_view *eoff, const rs_view *codes) {
    if (width != 1 && width != 2) {
        PyErr_Format(PyExc_ValueError, "%s: code_width must be 1 or 2, got %d", name, width);
        return -1;
    }
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "%s: n (%zd) must not be negative", name, n);
        return -1;
    }
    Py_ssize_t d = eoff->view.len / 4 - 1;
    if (d < 1) {
        PyErr_SetString(PyExc_ValueError, "entry_offsets: a dictionary needs at least one entry (two offsets)");
        return -1;
    }
    if (codes->view.len < n * width) {
        PyErr_Format(PyExc_ValueError, "codes: %zd bytes, %zd rows of %d bytes need %zd", codes->view.len, n, width,
                     n * width);
        return -1;
    }
    return d;
}

/* dict_fixed(entry_offsets, entries, codes, code_width, n, allocate) -> (data, width) | None
 *
 * A DICT chunk's n values when every entry of its dictionary is one width w > 0 (a date,
 * a flag, a decimal of a few digits): row i's value is entry code[i]'s w bytes, written at
 * i * w, so no offsets are summed (a caller's offsets are multiples of w).  None when the
 * entries differ in width or are empty (dict_gather then).  Every row's code is read,
 * a null row's as stored (a caller makes such codes 0 when they lie outside the
 * dictionary) and checked against the dictionary in one pass before the copy.  data is
 * allocate(n * w + 16) (16 bytes of slack: values of at most 16 bytes are copied as whole
 * 8- or 16-byte words, each row's spare bytes overwritten by the next row's). */
#define RS_FIXED_LOOP(READ, STORE, STRIDE)                                              \
    for (Py_ssize_t i = 0; i < n; i++) memcpy(to + i * w, table + (size_t)(READ) * (STRIDE), STORE);

PyObject *rs_dict_fixed(PyObject *self, PyObject *args) {
    PyObject *o_eoff, *o_entries, *o_codes, *allocate;
    Py_ssize_t n;
    int width;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOinO", &o_eoff, &o_entries, &o_codes, &width, &n, &allocate)) return NULL;
    rs_view eoff = {0}, entries = {0}, codes = {0}, dst = {0};
    PyObject *result = NULL, *buffer = NULL;
    uint8_t *table = NULL;
    if (rs_view_get(&eoff, o_eoff, "entry_offsets", 0) < 0 || rs_view_get(&entries, o_entries, "entries", 1) < 0 ||
        rs_view_get(&codes, o_codes, "codes", 0) < 0)
        goto done;
    Py_ssize_t d = rs_dict_args("dict_fixed", width, n, &eoff, &codes);
    if (d < 0) goto done;
    const uint32_t *eo = (const uint32_t *)eoff.view.buf;
    const Py_ssize_t esize = entries.held ? entries.view.len : 0;
    if ((Py_ssize_t)eo[d] > esize || eo[0] > eo[d]) {
        PyErr_Format(PyExc_ValueError, "entry_offsets: entries [%u, %u) are not within the %zd entry bytes", eo[0],
                     eo[d], esize);
        goto done;
    }
    const uint32_t w = eo[1] - eo[0];
    int one = eo[1] > eo[0];
    for (Py_ssize_t k = 1; k < d; k++) one &= eo[k + 1] - eo[k] == w;
    if (!one || (uint64_t)w * (uint64_t)d != (uint64_t)(eo[d] - eo[0])) {  /* (no wrap past eo[d]) */
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    const uint8_t *c8 = (const uint8_t *)codes.view.buf;
    /* none can be out of a dictionary of 256 (65,536) entries */
    if (d < (width == 1 ? 256 : 65536)) {
        Py_ssize_t top = (Py_ssize_t)rs_max_code(c8, width, n);
        if (top >= d) {
            Py_ssize_t at = 0;
            while (RS_CODE(c8, width, at) < d) at++;
            PyErr_Format(PyExc_ValueError, "codes: row %zd has code %zd, the dictionary has %zd entries", at,
                         RS_CODE(c8, width, at), d);
            goto done;
        }
    }
    if ((uint64_t)n * w > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "dict_fixed: the values exceed a binary array's 2 GiB");
        goto done;
    }
    size_t total = (size_t)n * w;
    buffer = PyObject_CallFunction(allocate, "n", (Py_ssize_t)total + 16);
    if (!buffer || rs_view_out(&dst, buffer, (Py_ssize_t)total + 16) < 0) goto done;
    uint8_t *to = (uint8_t *)dst.view.buf;
    const uint8_t *src = (const uint8_t *)entries.view.buf + eo[0];
    /* entries of at most 16 bytes laid out at a stride of 8 or 16 (zero padded): a row is then
     * one word copy of a constant size */
    size_t stride = w <= 8 ? 8 : w <= 16 ? 16 : w;
    if (w <= 16) {
        table = PyMem_Calloc((size_t)d, stride);
        if (!table) { PyErr_NoMemory(); goto done; }
        for (Py_ssize_t k = 0; k < d; k++) memcpy(table + k * stride, src + (size_t)k * w, w);
    }
    {
        RS_RELEASE_GIL(n)
        if (w > 16) {
            for (Py_ssize_t i = 0; i < n; i++) memcpy(to + i * w, src + (size_t)RS_CODE(c8, width, i) * w, w);
        } else if (width == 1) {
            if (w == 1) { RS_FIXED_LOOP(c8[i], 1, 8) }
            else if (w == 2) { RS_FIXED_LOOP(c8[i], 2, 8) }
            else if (w == 4) { RS_FIXED_LOOP(c8[i], 4, 8) }
            else if (w <= 8) { RS_FIXED_LOOP(c8[i], 8, 8) }
            else { RS_FIXED_LOOP(c8[i], 16, 16) }
        } else {
            if (w == 1) { RS_FIXED_LOOP(c8[2 * i] | (c8[2 * i + 1] << 8), 1, 8) }
            else if (w == 2) { RS_FIXED_LOOP(c8[2 * i] | (c8[2 * i + 1] << 8), 2, 8) }
            else if (w == 4) { RS_FIXED_LOOP(c8[2 * i] | (c8[2 * i + 1] << 8), 4, 8) }
            else if (w <= 8) { RS_FIXED_LOOP(c8[2 * i] | (c8[2 * i + 1] << 8), 8, 8) }
            else { RS_FIXED_LOOP(c8[2 * i] | (c8[2 * i + 1] << 8), 16, 16) }
        }
#undef RS_FIXED_LOOP
        RS_ACQUIRE_GIL()
    }
    result = Py_BuildValue("(On)", buffer, (Py_ssize_t)w);
done:
    PyMem_Free(table);
    rs_view_release(&eoff);
    rs_view_release(&entries);
    rs_view_release(&codes);
    rs_view_release(&dst);
    Py_XDECREF(buffer);
    return result;
}

/* dict_bytes(entry_offsets, codes, code_width, n) -> int
 *
 * The bytes of a DICT chunk's n values once expanded: the length of entry code[i] summed
 * over the rows (every row counted: the caller leaves out null rows' codes).  What the
 * block cache charges for a coded column's plain form, counted without building it; the
 * reference is storage.kernels.cell_columns.coded_bytes (a count of each code, then the
 * counts times the entries' lengths).  ValueError for a code outside the dictionary. */
PyObject *rs_dict_bytes(PyObject *self, PyObject *args) {
    PyObject *o_eoff, *o_codes;
    Py_ssize_t n;
    int width;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOin", &o_eoff, &o_codes, &width, &n)) return NULL;
    rs_view eoff = {0}, codes = {0};
    PyObject *result = NULL;
    uint32_t *lengths = NULL;
    if (rs_view_get(&eoff, o_eoff, "entry_offsets", 0) < 0 || rs_view_get(&codes, o_codes, "codes", 0) < 0) goto done;
    Py_ssize_t d = rs_dict_args("dict_bytes", width, n, &eoff, &codes);
    if (d < 0) goto done;
    const uint32_t *eo = (const uint32_t *)eoff.view.buf;
    /* a table as long as any code can be (256 or 65,536 entries), lengths past the dictionary
     * marked: the sum then needs no check a row, and a marked entry met fails the call */
    Py_ssize_t span = width == 1 ? 256 : 65536;
    lengths = PyMem_Malloc((size_t)span * sizeof(uint32_t));
    if (!lengths) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < span; k++)
        lengths[k] = k < d ? (eo[k + 1] >= eo[k] ? eo[k + 1] - eo[k] : UINT32_MAX) : UINT32_MAX;
    const uint8_t *c8 = (const uint8_t *)codes.view.buf;
    uint64_t total = 0, marked = 0;
    {
        RS_RELEASE_GIL(n)
        if (width == 1) {
            for (Py_ssize_t i = 0; i < n; i++) {
                uint32_t len = lengths[c8[i]];
                marked |= len == UINT32_MAX;
                total += len;
            }
        } else {
            for (Py_ssize_t i = 0; i < n; i++) {
                uint32_t len = lengths[c8[2 * i] | (c8[2 * i + 1] << 8)];
                marked |= len == UINT32_MAX;
                total += len;
            }
        }
        RS_ACQUIRE_GIL()
    }
    if (marked) {
        Py_ssize_t at = 0;
        while (lengths[RS_CODE(c8, width, at)] != UINT32_MAX) at++;
        Py_ssize_t code = RS_CODE(c8, width, at);
        if (code < d)
            PyErr_Format(PyExc_ValueError, "entry_offsets: entry %zd [%u, %u) goes backwards", code, eo[code], eo[code + 1]);
        else
            PyErr_Format(PyExc_ValueError, "codes: row %zd has code %zd, the dictionary has %zd entries", at, code, d);
        goto done;
    }
    result = PyLong_FromUnsignedLongLong(total);
done:
    PyMem_Free(lengths);
    rs_view_release(&eoff);
    rs_view_release(&codes);
    return result;
}

/* dict_check(entry_offsets, data_size, codes, code_width, n) -> int
 *
 * A DICT chunk read from a file, checked before any of it is used: 0 when its d + 1 uint32
 * entry offsets go from 0 up to `data_size` (below 2 GiB) without going down and each of
 * its n codes of `code_width` (1 or 2) bytes is below d; 1 when the offsets do not, 2 when
 * a code does not (the caller names the chunk).  Both in passes without a branch a value.
 * The reference is the NumPy check of storage.storefile._chunk_encodings.dict_codes. */
PyObject *rs_dict_check(PyObject *self, PyObject *args) {
    PyObject *o_eoff, *o_codes;
    Py_ssize_t n;
    long long data_size;
    int width;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLOin", &o_eoff, &data_size, &o_codes, &width, &n)) return NULL;
    rs_view eoff = {0}, codes = {0};
    PyObject *result = NULL;
    if (rs_view_get(&eoff, o_eoff, "entry_offsets", 0) < 0 || rs_view_get(&codes, o_codes, "codes", 0) < 0) goto done;
    Py_ssize_t d = rs_dict_args("dict_check", width, n, &eoff, &codes);
    if (d < 0) goto done;
    const uint32_t *eo = (const uint32_t *)eoff.view.buf;
    int bad = eo[0] != 0 || (long long)eo[d] != data_size || data_size >= ((long long)1 << 31);
    uint32_t down = 0;
    for (Py_ssize_t k = 0; k < d; k++) down |= eo[k + 1] < eo[k];
    long verdict = bad || down ? 1 : 0;
    if (!verdict && d < (width == 1 ? 256 : 65536))
        verdict = n && (Py_ssize_t)rs_max_code((const uint8_t *)codes.view.buf, width, n) >= d ? 2 : 0;
    result = PyLong_FromLong(verdict);
done:
    rs_view_release(&eoff);
    rs_view_release(&codes);
    return result;
}

/* keys_delta(body, n, width, first_at, parts, out) -> None
 *
 * The n row keys of a KEYS_DELTA key chunk, `width` bytes each, back to back in
 * `out` (a writable buffer of at least n * width bytes).  Row 0 is the `width`
 * bytes at `first_at` in `body`.  `parts`: p rows of five int64 (part width 1..8,
 * kind 0 = deltas / 1 = codes from a base, code width 0, 1, 2, 4 or 8, base (its
 * 64 bits), offset in `body` of the part's n - 1 little-endian codes), the parts'
 * widths adding up to `width`.  A part of row i >= 1 is the row before's plus its
 * code (deltas) or the base plus its code, read as a big-endian unsigned integer
 * of the part's bytes.  Part by part, one tight pass each over the rows (the
 * running value in a register, the code width fixed per loop, the checks without
 * branches); the order of the keys is kept per row as the parts go (equal so far,
 * above, below) and checked in one last pass.  The reference is
 * storage.storefile._key_delta.rebuild_key_delta_py.  Raises ValueError
 * (one line) for a bad argument, a value past its part's bytes and a rebuilt key
 * not above the one before. */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define RS_BE64(v) (v)
#define RS_BE32(v) (v)
#define RS_BE16(v) (v)
#define RS_LE16(v) __builtin_bswap16(v)
#define RS_LE32(v) __builtin_bswap32(v)
#define RS_LE64(v) __builtin_bswap64(v)
#else
#define RS_BE64(v) __builtin_bswap64(v)
#define RS_BE32(v) __builtin_bswap32(v)
#define RS_BE16(v) __builtin_bswap16(v)
#define RS_LE16(v) (v)
#define RS_LE32(v) (v)
#define RS_LE64(v) (v)
#endif

static inline uint64_t rs_key_code(const uint8_t *c, int width, Py_ssize_t i) {
    switch (width) {
    case 1: return c[i];
    case 2: { uint16_t v; memcpy(&v, c + 2 * i, 2); return RS_LE16(v); }
    case 4: { uint32_t v; memcpy(&v, c + 4 * i, 4); return RS_LE32(v); }
    case 8: { uint64_t v; memcpy(&v, c + 8 * i, 8); return RS_LE64(v); }
    default: return 0;
    }
}

/* frame_values(codes, code_width, n, width, base, divisor, validity, allocate) -> data
 *
 * A FRAME chunk's n values in their FIXED form: row i's value is base + code[i] * divisor
 * modulo 2 ** (8 * width), written big-endian in `width` (2, 4 or 8) bytes, zeros under a
 * null row (`validity`: the rows' bitmap from bit 0; None: no nulls).  `codes`: n
 * little-endian codes of `code_width` (1, 2 or 4) bytes.  The largest code is found first
 * (a pass without a branch a row) and code * divisor must stay below 2 ** (8 * width), as
 * the writer's frame does: past it the chunk is damaged (ValueError naming the row).  One
 * pass where the NumPy reference (storage.storefile._chunk_encodings.decode_frame) makes
 * five or six: the bound, the widening, the multiply, the add, the nulls, the byte swap.
 * data comes from allocate(n * width). */
#define RS_FRAME_LOOP(CW, W, UT, SWAP)                                                                \
    for (Py_ssize_t i = 0; i < n; i++) {                                                             \
        UT v = (UT)(base + rs_key_code(c8, (CW), i) * divisor);                                       \
        if (bits) v &= (UT)0 - (UT)((bits[i >> 3] >> (i & 7)) & 1);                                 \
        v = SWAP(v);                                                                                 \
        memcpy(to + (size_t)i * (W), &v, (W));                                                       \
    }

#define RS_FRAME_WIDTHS(CW)                                                                          \
    if (width == 2) { RS_FRAME_LOOP(CW, 2, uint16_t, RS_BE16) }                                      \
    else if (width == 4) { RS_FRAME_LOOP(CW, 4, uint32_t, RS_BE32) }                                 \
    else { RS_FRAME_LOOP(CW, 8, uint64_t, RS_BE64) }

PyObject *rs_frame_values(PyObject *self, PyObject *args) {
    PyObject *o_codes, *o_valid, *allocate;
    Py_ssize_t n;
    int cw, width;
    unsigned long long base_arg, divisor_arg;
    (void)self;
    if (!PyArg_ParseTuple(args, "OiniKKOO", &o_codes, &cw, &n, &width, &base_arg, &divisor_arg, &o_valid, &allocate))
        return NULL;
    if (cw != 1 && cw != 2 && cw != 4) {
        PyErr_Format(PyExc_ValueError, "frame_values: code_width must be 1, 2 or 4, got %d", cw);
        return NULL;
    }
    if (width != 2 && width != 4 && width != 8) {
        PyErr_Format(PyExc_ValueError, "frame_values: width must be 2, 4 or 8, got %d", width);
        return NULL;
    }
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "frame_values: n (%zd) must not be negative", n);
        return NULL;
    }
    const uint64_t base = base_arg, divisor = divisor_arg;
    const unsigned __int128 limit = (unsigned __int128)1 << (8 * width);
    if (base >= limit || divisor == 0 || divisor >= limit) {
        PyErr_Format(PyExc_ValueError, "frame_values: base %llu and divisor %llu must lie within %d-byte values "
                     "(the divisor above 0)", base_arg, divisor_arg, width);
        return NULL;
    }
    rs_view codes = {0}, valid = {0}, dst = {0};
    PyObject *result = NULL, *buffer = NULL;
    if (rs_view_get(&codes, o_codes, "codes", 0) < 0 || rs_view_get(&valid, o_valid, "validity", 1) < 0) goto done;
    if (codes.view.len < n * cw) {
        PyErr_Format(PyExc_ValueError, "codes: %zd bytes, %zd rows of %d bytes need %zd", codes.view.len, n, cw, n * cw);
        goto done;
    }
    if (valid.held && valid.view.len < (n + 7) / 8) {
        PyErr_Format(PyExc_ValueError, "validity: %zd bytes, %zd rows need %zd", valid.view.len, n, (n + 7) / 8);
        goto done;
    }
    const uint8_t *c8 = (const uint8_t *)codes.view.buf;
    const uint8_t *bits = valid.held ? (const uint8_t *)valid.view.buf : NULL;
    uint64_t top = rs_max_code(c8, cw, n);
    if ((unsigned __int128)top * divisor >= limit) {
        Py_ssize_t at = 0;
        while (rs_key_code(c8, cw, at) != top) at++;
        PyErr_Format(PyExc_ValueError, "codes: row %zd has code %llu, times the divisor %llu past %d-byte values", at,
                     (unsigned long long)top, divisor_arg, width);
        goto done;
    }
    buffer = PyObject_CallFunction(allocate, "n", n * width);
    if (!buffer || rs_view_out(&dst, buffer, n * width) < 0) goto done;
    uint8_t *to = (uint8_t *)dst.view.buf;
    {
        RS_RELEASE_GIL(n)
        if (cw == 1) { RS_FRAME_WIDTHS(1) }
        else if (cw == 2) { RS_FRAME_WIDTHS(2) }
        else { RS_FRAME_WIDTHS(4) }
        RS_ACQUIRE_GIL()
    }
    result = buffer;
    buffer = NULL;
done:
    rs_view_release(&codes);
    rs_view_release(&valid);
    rs_view_release(&dst);
    Py_XDECREF(buffer);
    return result;
}

/* lengths_offsets(lengths, width, n, out) -> int
 *
 * A LENGTHS chunk's n value lengths (little-endian, `width` 1 or 2 bytes each) summed into
 * the n + 1 int32 offsets of its binary column (`out`, writable), and the sum returned (an
 * int64 sum: the caller checks it against the chunk's bytes; past 2 GiB the offsets
 * written are not used).  The reference is NumPy's cumsum in
 * storage.storefile._chunk_encodings.decode_lengths. */
PyObject *rs_lengths_offsets(PyObject *self, PyObject *args) {
    PyObject *o_len, *o_out;
    Py_ssize_t n;
    int width;
    (void)self;
    if (!PyArg_ParseTuple(args, "OinO", &o_len, &width, &n, &o_out)) return NULL;
    if (width != 1 && width != 2) {
        PyErr_Format(PyExc_ValueError, "lengths_offsets: width must be 1 or 2, got %d", width);
        return NULL;
    }
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "lengths_offsets: n (%zd) must not be negative", n);
        return NULL;
    }
    rs_view len = {0}, out = {0};
    PyObject *result = NULL;
    if (rs_view_get(&len, o_len, "lengths", 0) < 0) goto done;
    if (PyObject_GetBuffer(o_out, &out.view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_Format(PyExc_ValueError, "out must be a writable contiguous buffer, got %.80s", Py_TYPE(o_out)->tp_name);
        goto done;
    }
    out.held = 1;
    if (out.view.len < (Py_ssize_t)sizeof(int32_t) * (n + 1)) {
        PyErr_Format(PyExc_ValueError, "out: %zd bytes hold fewer than n + 1 = %zd int32", out.view.len, n + 1);
        goto done;
    }
    if (len.view.len < n * width) {
        PyErr_Format(PyExc_ValueError, "lengths: %zd bytes, %zd rows of %d bytes need %zd", len.view.len, n, width,
                     n * width);
        goto done;
    }
    const uint8_t *l8 = (const uint8_t *)len.view.buf;
    int32_t *offs = (int32_t *)out.view.buf;
    uint64_t total = 0;
    {
        RS_RELEASE_GIL(n)
        offs[0] = 0;
        if (width == 1) {
            for (Py_ssize_t i = 0; i < n; i++) { total += l8[i]; offs[i + 1] = (int32_t)(uint32_t)total; }
        } else {
            for (Py_ssize_t i = 0; i < n; i++) { total += rs_key_code(l8, 2, i); offs[i + 1] = (int32_t)(uint32_t)total; }
        }
        RS_ACQUIRE_GIL()
    }
    result = PyLong_FromUnsignedLongLong(total);
done:
    rs_view_release(&len);
    rs_view_release(&out);
    return result;
}



/* The `w` low bytes of v, big-endian, at `to`. */
static inline void rs_put_be(uint8_t *to, uint64_t v, int w) {
    switch (w) {
    case 8: { uint64_t x = RS_BE64(v); memcpy(to, &x, 8); return; }
    case 4: { uint32_t x = RS_BE32((uint32_t)v); memcpy(to, &x, 4); return; }
    case 2: { uint16_t x = RS_BE16((uint16_t)v); memcpy(to, &x, 2); return; }
    case 1: *to = (uint8_t)v; return;
    default: { uint64_t x = RS_BE64(v << (64 - 8 * w)); memcpy(to, &x, (size_t)w); }
    }
}

/* One part's pass over rows 1..n-1 with codes of CW bytes: returns nonzero when a value runs
 * past the part's bytes.  state[i]: bit 0 = row i's key is above row i-1's by an earlier part,
 * bit 1 = below it. */
#define RS_PART_PASS(CW)                                                                          \
    for (Py_ssize_t i = 1; i < n; i++) {                                                        \
        uint64_t c = rs_key_code(codes, CW, i - 1);                                             \
        uint64_t v = kind ? base + c : prev + c;                                                \
        over |= kind ? (c > room) : ((v < prev) | (v > limit));                                 \
        uint8_t s = state[i];                                                                   \
        state[i] = (uint8_t)(s | (v > prev) | ((!s & (v < prev)) << 1));                        \
        prev = v;                                                                               \
        rs_put_be(to + i * width, v, w);                                                        \
    }

static int rs_key_part_pass(const uint8_t *codes, int cw, int kind, uint64_t base, uint64_t first, int w,
                            uint8_t *to, Py_ssize_t width, Py_ssize_t n, uint8_t *state) {
    const uint64_t limit = w == 8 ? UINT64_MAX : (((uint64_t)1 << (8 * w)) - 1);
    const uint64_t room = limit - base;
    uint64_t prev = first;
    int over = 0;
    switch (cw) {
    case 0: RS_PART_PASS(0) break;
    case 1: RS_PART_PASS(1) break;
    case 2: RS_PART_PASS(2) break;
    case 4: RS_PART_PASS(4) break;
    default: RS_PART_PASS(8) break;
    }
    return over;
}

/* One part as the row-wise pass holds it (passed by value: its fields stay in registers).
 * Without branches: code = the 8 bytes at the row's code & cmask (cmask 0 for a part of no
 * codes, whose codes point at a fixed word), value = code + base + (prev & mprev) (a delta
 * part has base 0 and mprev all ones, a frame part mprev 0), past its bytes when code > room
 * (frame), value < prev (a delta that wrapped) or value > limit. */
typedef struct {
    const uint8_t *codes;
    uint64_t cmask, mprev, base, limit, room, prev;
    Py_ssize_t cw, at;
    int shift;
} rs_key_part;

static inline uint64_t rs_key_next(const rs_key_part *P, Py_ssize_t i, uint64_t *over) {
    uint64_t c;
    memcpy(&c, P->codes + (i - 1) * P->cw, 8);
    c = RS_LE64(c) & P->cmask;
    uint64_t from = P->prev & P->mprev;
    uint64_t v = c + P->base + from;
    *over |= (uint64_t)((c > P->room) | (v < from) | (v > P->limit));
    return v;
}

/* Row i's part as one 8-byte big-endian word at its place: the word's spare bytes fall on the
 * next part, or on the next row, written after it (the output has 8 bytes of slack). */
static inline void rs_key_put(uint8_t *row, const rs_key_part *P, uint64_t v) {
    uint64_t x = RS_BE64(v << P->shift);
    memcpy(row + P->at, &x, 8);
}

/* Keys of one part (TWO = 0) or two (TWO = 1), row by row: the running values stay in registers
 * and the order is one comparison of the pair.  Returns the part whose value runs past its
 * bytes, else -1; *bad_row: the first row whose key is not above the one before. */
#define RS_KEY_ROWS(NAME, TWO)                                                                  \
    static int NAME(rs_key_part a, rs_key_part b, uint8_t *dst, Py_ssize_t width, Py_ssize_t n, \
                    Py_ssize_t *bad_row) {                                                      \
        uint64_t over_a = 0, over_b = 0;                                                        \
        Py_ssize_t bad = 0;                                                                     \
        for (Py_ssize_t i = 1; i < n; i++) {                                                    \
            uint64_t va = rs_key_next(&a, i, &over_a), vb = TWO ? rs_key_next(&b, i, &over_b) : 0; \
            int above = (va > a.prev) | ((va == a.prev) & (vb > b.prev));                       \
            bad = (!above & !bad) ? i : bad;                                                    \
            a.prev = va;                                                                        \
            b.prev = vb;                                                                        \
            uint8_t *row = dst + i * width;                                                     \
            rs_key_put(row, &a, va);                                                            \
            if (TWO) rs_key_put(row, &b, vb);                                                   \
        }                                                                                       \
        *bad_row = bad;                                                                         \
        return over_a ? 0 : over_b ? 1 : -1;                                                    \
    }
RS_KEY_ROWS(rs_key_rows_1, 0)
RS_KEY_ROWS(rs_key_rows_2, 1)

static const uint8_t rs_no_codes[8] = {0};

static rs_key_part rs_key_part_of(const int64_t *pt, const uint8_t *src, Py_ssize_t first_at, Py_ssize_t at) {
    rs_key_part P;
    int w = (int)pt[0];
    P.cw = pt[2];
    P.codes = P.cw ? src + pt[4] : rs_no_codes;
    P.cmask = P.cw == 8 ? UINT64_MAX : (((uint64_t)1 << (8 * P.cw)) - 1);
    P.mprev = pt[1] ? 0 : UINT64_MAX;
    P.base = (uint64_t)pt[3];
    P.limit = w == 8 ? UINT64_MAX : (((uint64_t)1 << (8 * w)) - 1);
    P.room = pt[1] ? P.limit - P.base : UINT64_MAX;
    P.at = at;
    P.shift = 64 - 8 * w;
    P.prev = 0;
    for (int b = 0; b < w; b++) P.prev = (P.prev << 8) | src[first_at + at + b];
    return P;
}

PyObject *rs_keys_delta(PyObject *self, PyObject *args) {
    PyObject *o_body, *o_parts, *o_out;
    Py_ssize_t n, width, first_at;
    if (!PyArg_ParseTuple(args, "OnnnOO", &o_body, &n, &width, &first_at, &o_parts, &o_out))
        return NULL;
    if (n < 1 || width < 1 || first_at < 0) {
        PyErr_Format(PyExc_ValueError, "keys_delta: n (%zd) and width (%zd) must be positive, first_at (%zd) not negative",
                     n, width, first_at);
        return NULL;
    }
    rs_view body = {0}, parts = {0}, out = {0};
    uint8_t *state = NULL;
    PyObject *result = NULL;
    if (rs_view_get(&body, o_body, "body", 0) < 0 || rs_view_get(&parts, o_parts, "parts", 0) < 0)
        goto done;
    if (PyObject_GetBuffer(o_out, &out.view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyErr_Format(PyExc_ValueError, "out must be a writable contiguous buffer, got %.80s", Py_TYPE(o_out)->tp_name);
        goto done;
    }
    out.held = 1;
    if (width > PY_SSIZE_T_MAX / n || out.view.len < n * width) {
        PyErr_Format(PyExc_ValueError, "out: %zd bytes, %zd keys of %zd bytes need more", out.view.len, n, width);
        goto done;
    }
    Py_ssize_t p = parts.view.len / (5 * (Py_ssize_t)sizeof(int64_t));
    if (parts.view.len != p * 5 * (Py_ssize_t)sizeof(int64_t) || p < 1 || p > width) {
        PyErr_Format(PyExc_ValueError, "parts: %zd bytes are not 1 to %zd rows of five int64", parts.view.len, width);
        goto done;
    }
    if (first_at > body.view.len - width) {
        PyErr_Format(PyExc_ValueError, "the first key (%zd bytes at %zd) runs past the %zd body bytes", width, first_at,
                     body.view.len);
        goto done;
    }
    const int64_t *pt = (const int64_t *)parts.view.buf;
    const uint8_t *src = (const uint8_t *)body.view.buf;
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < p; k++) {  /* every part checked before any work */
        int64_t w = pt[5 * k], kind = pt[5 * k + 1], code = pt[5 * k + 2], codes_at = pt[5 * k + 4];
        if (w < 1 || w > 8 || at + w > width || (kind != 0 && kind != 1) ||
            (code != 0 && code != 1 && code != 2 && code != 4 && code != 8)) {
            PyErr_Format(PyExc_ValueError, "part %zd is bad (width %lld, kind %lld, code width %lld)", k, (long long)w,
                         (long long)kind, (long long)code);
            goto done;
        }
        if (code && (codes_at < 0 || codes_at > body.view.len || (body.view.len - codes_at) / code < n - 1)) {
            PyErr_Format(PyExc_ValueError, "part %zd: %zd codes of %lld bytes at %lld run past the %zd body bytes", k,
                         n - 1, (long long)code, (long long)codes_at, body.view.len);
            goto done;
        }
        if (kind == 1 && w < 8 && (uint64_t)pt[5 * k + 3] >> (8 * w)) {
            PyErr_Format(PyExc_ValueError, "part %zd: its base runs past its %lld bytes", k, (long long)w);
            goto done;
        }
        at += w;
    }
    if (at != width) {
        PyErr_Format(PyExc_ValueError, "the parts' widths add up to %zd, the key width is %zd", at, width);
        goto done;
    }
    uint8_t *dst = (uint8_t *)out.view.buf;
    memcpy(dst, src + first_at, (size_t)width);
    Py_ssize_t bad_part = -1, bad_row = 0;
    /* one or two parts, 8 bytes readable past every part's codes and 8 spare bytes out: row by row */
    int fast = p <= 2 && out.view.len >= n * width + 8;
    for (Py_ssize_t k = 0; k < p && fast; k++)
        fast = !pt[5 * k + 2] || pt[5 * k + 4] + (n - 1) * pt[5 * k + 2] + 8 <= body.view.len;
    if (fast) {
        rs_key_part a = rs_key_part_of(pt, src, first_at, 0), b = a;
        if (p == 2) b = rs_key_part_of(pt + 5, src, first_at, pt[0]);
        RS_RELEASE_GIL(n)
        bad_part = (p == 2 ? rs_key_rows_2 : rs_key_rows_1)(a, b, dst, width, n, &bad_row);
        RS_ACQUIRE_GIL()
        goto checked;
    }
    state = PyMem_Calloc((size_t)n, 1);
    if (!state) { PyErr_NoMemory(); goto done; }
    RS_RELEASE_GIL(n)
    at = 0;
    for (Py_ssize_t k = 0; k < p && bad_part < 0; k++) {
        int w = (int)pt[5 * k], code = (int)pt[5 * k + 2];
        uint64_t first = 0;
        for (int b = 0; b < w; b++) first = (first << 8) | src[first_at + at + b];
        if (rs_key_part_pass(code ? src + pt[5 * k + 4] : NULL, code, (int)pt[5 * k + 1], (uint64_t)pt[5 * k + 3],
                             first, w, dst + at, width, n, state))
            bad_part = k;
        at += w;
    }
    if (bad_part < 0)
        for (Py_ssize_t i = 1; i < n; i++)
            if (state[i] != 1) { bad_row = i; break; }
    RS_ACQUIRE_GIL()
checked:
    if (bad_part >= 0) {
        PyErr_Format(PyExc_ValueError, "part %zd (%s) runs past its %lld bytes", bad_part,
                     pt[5 * bad_part + 1] == 0 ? "deltas" : "codes", (long long)pt[5 * bad_part]);
        goto done;
    }
    if (bad_row) {
        PyErr_Format(PyExc_ValueError, "row %zd's rebuilt key is not above the one before", bad_row);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(state);
    rs_view_release(&body);
    rs_view_release(&parts);
    rs_view_release(&out);
    return result;
}
