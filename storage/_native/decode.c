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
 * Both check their bounds once per call, before the work, and raise a one-line
 * ValueError naming what is wrong; neither keeps a pointer past its return. */
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
            for (Py_ssize_t i = 0; i < n; i++) {
                int32_t len = offs[i + 1] - offs[i];
                const uint8_t *from = table + RS_CODE(c8, width, i) * stride;
                uint8_t *at = to + offs[i];
                for (int32_t k = 0; k < len; k += 8) memcpy(at + k, from + k, 8);
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
