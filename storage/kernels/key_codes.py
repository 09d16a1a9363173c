"""Row keys read as integers that order as the keys do: the form the compiled merge takes.

A live chunk's keys reach ``resolve_merge`` (storage/_native/resolve.c) as uint64 integers
when every key of the chunk (its pieces' and its markers') is of one width of 1, 2, 4 or 8
bytes (the key's big-endian bytes), or of one width over 8 bytes under one lead (the first
width - 8 bytes the same in every key: the last 8 bytes), and as 128-bit integers (two uint64,
the low word first) when they are of one width of 9 to 16 bytes under no lead.
:func:`int_key_codes` reads them (the compiled ``key_codes`` and ``key_pairs``, or the NumPy
reference), :func:`keys_from_codes` turns chosen integers back into the keys.  Keys of several
widths (YCSB's ``user`` and a hash) read as three words when at most 23 bytes follow the lead
they share (:func:`word_codes`, the compiled ``key_triples``), and are padded to one width
for the NumPy merge and sort (:func:`padded_values`, the compiled ``pad_keys``).  The same
codes, or the padded keys' words (:func:`word_keys`), sort a log of cells
(:func:`storage.kernels.merge.sort_sources`) and of rows (:mod:`storage.memstore.row_runs`)
written in no key order (:func:`row_sort_keys`, :func:`lex_order`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import native as native_module
from .cell_columns import pool_empty, value_offsets

__all__ = ["int_key_codes", "keys_from_codes", "code_keys", "word_keys", "word_codes", "row_sort_keys", "lex_order", "padded_values"]


def int_key_codes(native, keys: list[pa.Array], marker_keys: pa.Array | None
                  ) -> tuple[int, np.ndarray, np.ndarray | None, bytes] | None:
    """``(width, codes, marker_codes, lead)`` when the keys of ``keys`` and ``marker_keys``
    all read as order-keeping uint64 integers, each laid end to end (memory from Arrow's
    pool), the form the compiled merge takes; None otherwise.  They do when every key is one
    ``width`` of 1, 2, 4 or 8 bytes (``lead`` empty: a key's integer is its big-endian bytes),
    or one ``width`` over 8 bytes whose first ``width - 8`` bytes are the same in every key
    (``lead``: those bytes; a key's integer is its last 8 bytes, big-endian: keys under one
    prefix order as their tails do).  Else, keys of one ``width`` of 9 to 16 bytes read as
    128-bit integers (the key's bytes, zeros after it): ``codes`` and ``marker_codes`` are then
    (keys, 2) arrays of uint64 pairs, the low word first (:func:`_pair_codes`), the compiled
    merge's ``-1`` key form.  ``native``: the compiled kernels (their ``key_codes`` and
    ``key_pairs``), or None for the NumPy reference (:func:`_one_code_width`, :func:`_int_codes`,
    :func:`_one_pair_width` and :func:`_pair_codes`)."""
    if native is None:
        every = keys + ([marker_keys] if marker_keys is not None else [])
        shape = _one_code_width(every)
        if shape is not None:
            width, lead = shape
            return (width, _int_codes(keys, width),
                    _int_codes([marker_keys], width) if marker_keys is not None else None, lead)
        width = _one_pair_width(every)
        if width is None:
            return None
        marker_codes = _pair_codes([marker_keys], width) if marker_keys is not None else None
        return width, _pair_codes(keys, width), marker_codes, b""
    try:
        stream = pa.chunked_array(keys, pa.binary())
        marker_stream = pa.chunked_array([marker_keys], pa.binary()) if marker_keys is not None else None
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):  # keys of another type: the general path
        return None
    # each stream's one width (0: none such), None where it holds no key (as the reference, which skips those)
    codes = pool_empty(len(stream), np.uint64)
    widths = [native.key_codes(stream.__arrow_c_stream__(), codes) if len(stream) else None]
    marker_codes = None
    if marker_stream is not None:
        marker_codes = pool_empty(len(marker_stream), np.uint64)
        widths.append(native.key_codes(marker_stream.__arrow_c_stream__(), marker_codes) if len(marker_stream) else None)
    known = {w for w in widths if w is not None}
    width = known.pop() if len(known) == 1 else 0
    if width > 8:
        # each stream's keys share their first key's lead: the streams must share one too
        firsts = {_first_lead(s, width - 8) for s in (stream, marker_stream) if s is not None and len(s)}
        if len(firsts) == 1:
            return width, codes, marker_codes, firsts.pop()
    elif width:
        return width, codes, marker_codes, b""
    # keys of one width of 9 to 16 bytes under no one lead (a UUID, a hash before an id): pairs
    streams = [s for s in (stream, marker_stream) if s is not None]
    if not _PAIR_WIDTHS[0] <= _first_width(streams) <= _PAIR_WIDTHS[1]:
        return None
    codes = pool_empty((len(stream), 2), np.uint64)
    widths = [native.key_pairs(stream.__arrow_c_stream__(), codes) if len(stream) else None]
    if marker_stream is not None:
        marker_codes = pool_empty((len(marker_stream), 2), np.uint64)
        widths.append(native.key_pairs(marker_stream.__arrow_c_stream__(), marker_codes)
                      if len(marker_stream) else None)
    known = {w for w in widths if w is not None}
    if len(known) != 1 or 0 in known:
        return None
    return known.pop(), codes, marker_codes, b""


_PAIR_WIDTHS = (9, 16)
"""Keys of one width in this range read as 128-bit integers (:func:`_pair_codes`)."""


def _first_width(streams: list[pa.ChunkedArray]) -> int:
    """The width of the first key of ``streams`` (0: none holds a key, or it is null)."""
    for keys in streams:
        for chunk in keys.chunks:
            if len(chunk):
                first = chunk[0].as_py()
                return len(first) if first is not None else 0
    return 0


def _first_lead(keys: pa.ChunkedArray, size: int) -> bytes:
    """The first ``size`` bytes of the first key of ``keys`` (which holds one)."""
    chunk = next(c for c in keys.chunks if len(c))
    return chunk[0].as_py()[:size]


def _one_code_width(keys: list[pa.Array]) -> tuple[int, bytes] | None:
    """``(width, lead)`` when every key of ``keys`` (binary arrays) reads as an order-keeping
    integer (see :func:`int_key_codes`): one width of 1, 2, 4 or 8 bytes (``lead`` empty), or
    one width over 8 bytes whose first ``width - 8`` bytes are ``lead`` in every key; else None."""
    width = _one_width(keys, lambda w: w in _INT_WIDTHS or w > 8)
    if width is None or width <= 8:
        return None if width is None else (width, b"")
    lead = None
    for array in keys:
        if len(array):
            rows = _key_matrix(array, width)
            if lead is None:
                lead = rows[0, : width - 8].tobytes()
            if not bool((rows[:, : width - 8] == np.frombuffer(lead, np.uint8)).all()):
                return None
    return width, lead


def _one_width(keys: list[pa.Array], taken) -> int | None:
    """The one width of every key of ``keys`` (binary arrays, no nulls) when ``taken(width)``,
    else None (also with no key)."""
    width = None
    for array in keys:
        if not len(array):
            continue
        if not isinstance(array, pa.Array) or array.type != pa.binary() or array.null_count:
            return None
        offsets = value_offsets(array)
        w = int(offsets[1] - offsets[0])
        # the first key and the span first (keys of other widths mostly stop here), then every key
        if not taken(w) or (width is not None and w != width) or int(offsets[-1] - offsets[0]) != w * len(array) \
                or not bool((np.diff(offsets) == w).all()):
            return None
        width = w
    return width


_INT_WIDTHS = (1, 2, 4, 8)


def _key_matrix(array: pa.Array, width: int) -> np.ndarray:
    """The keys of ``array`` (all ``width`` bytes) as a (keys, width) uint8 view of its data."""
    first = int(value_offsets(array)[0])
    return np.frombuffer(array.buffers()[2], dtype=np.uint8, count=len(array) * width, offset=first).reshape(-1, width)


def _int_codes(keys: list[pa.Array], width: int) -> np.ndarray:
    """Keys of one ``width`` (see :func:`_one_code_width`) as native uint64 integers in their
    byte order, laid end to end: each array's bytes (over 8 bytes: its last 8) read as
    big-endian integers and widened in one pass into memory from Arrow's pool (:func:`pool_empty`)."""
    out = pool_empty(sum(len(a) for a in keys), np.uint64)
    at = 0
    for array in keys:
        n = len(array)
        if n and width > 8:
            out[at : at + n] = np.ascontiguousarray(_key_matrix(array, width)[:, width - 8 :]).view(">u8").ravel()
        elif n:
            first = int(value_offsets(array)[0])
            out[at : at + n] = np.frombuffer(array.buffers()[2], dtype=f">u{width}", count=n, offset=first)
        at += n
    return out


def _one_pair_width(keys: list[pa.Array]) -> int | None:
    """The one width of every key of ``keys`` (binary arrays) when it is 9 to 16 bytes, else None."""
    return _one_width(keys, lambda w: _PAIR_WIDTHS[0] <= w <= _PAIR_WIDTHS[1])


def _pair_codes(keys: list[pa.Array], width: int) -> np.ndarray:
    """Keys of one ``width`` of 9 to 16 bytes as 128-bit integers of their bytes (zeros after
    each key to 16), laid end to end as a (keys, 2) uint64 array, the low word first."""
    out = pool_empty((sum(len(a) for a in keys), 2), np.uint64)
    at = 0
    for array in keys:
        n = len(array)
        if n:
            padded = np.zeros((n, 16), np.uint8)
            padded[:, :width] = _key_matrix(array, width)
            words = padded.view(">u8")  # (n, 2): the high word, then the low
            out[at : at + n, 0] = words[:, 1]
            out[at : at + n, 1] = words[:, 0]
        at += n
    return out


def keys_from_codes(codes: np.ndarray, width: int | None = None, lead: bytes = b"") -> pa.Array:
    """The binary keys whose big-endian integers are ``codes`` (see :func:`int_key_codes`), each
    ``width`` bytes (by default the codes' own width); over 8 bytes, ``lead`` and then the
    code's 8 bytes (see :func:`int_key_codes`); from (keys, 2) pairs, the 128-bit integer's
    first ``width`` bytes."""
    width = codes.dtype.itemsize if width is None else width
    # keys are written as records of one field or two (a (n, width) byte array assigned by
    # columns copies a few bytes a row per step: 8.5 against 2.3 ms for 570K 12-byte keys)
    if codes.ndim == 2:
        words = np.empty((len(codes), 2), ">u8")
        words[:, 0] = codes[:, 1]
        words[:, 1] = codes[:, 0]
        first = np.dtype({"names": ["key"], "formats": [f"V{width}"], "offsets": [0], "itemsize": 16})
        data = np.ascontiguousarray(words.view(first)["key"].reshape(-1))
    elif width > 8:
        rows = np.empty(len(codes), np.dtype([("lead", f"V{width - 8}"), ("code", ">u8")]))
        rows["lead"] = np.void(lead)
        rows["code"] = codes
        data = rows
    else:
        data = codes.astype(f">u{width}")  # Arrow takes NumPy's buffers as they are: no bytes copies
    offsets = np.arange(0, (len(codes) + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), len(codes), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def code_keys(codes: np.ndarray) -> list[np.ndarray]:
    """``codes`` (of :func:`int_key_codes` or :func:`word_codes`) as NumPy sort keys, the most
    significant last (``lexsort``'s order): the integers, or the words of pairs and triples
    (the least significant first)."""
    return [codes] if codes.ndim == 1 else [codes[:, w] for w in range(codes.shape[1])]


def lex_order(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The stable order of ``keys`` (sort keys, the most significant last) and, in that order,
    where an entry differs from the one before in any key (the first always does).

    The order is NumPy's stable ``lexsort``'s, found faster where the most significant key
    alone tells most entries apart (row keys' codes, a hash's words): that key sorted by
    NumPy's quicksort (vectorized: a fifth of a stable sort's time on 16K uint64), then only
    the entries whose value there is shared put in order by ``lexsort``, taken in their
    original order so that equal entries keep it."""
    n = len(keys[0])
    first = keys[-1]
    if n < 2:
        return np.arange(n), np.ones(n, dtype=bool)
    packed = _packed_order(keys)
    if packed is not None:
        return packed
    order = np.argsort(first, kind="quicksort")
    ordered = first[order]
    tied = ordered[1:] == ordered[:-1]
    if tied.any():
        shared = np.zeros(n, dtype=bool)  # entries whose first key another entry has too
        shared[1:] = tied
        shared[:-1] |= tied
        if np.count_nonzero(shared) * 2 > n:  # mostly shared: one lexsort of all is cheaper
            order = np.argsort(first, kind="stable") if len(keys) == 1 else np.lexsort(keys)
        else:
            at = np.sort(order[shared])  # the original order, so that lexsort keeps equal entries in it
            order[shared] = at[np.lexsort([key[at] for key in keys])]
    differs = np.ones(n, dtype=bool)
    differs[1:] = False
    for key in keys:
        ordered = key[order]
        differs[1:] |= ordered[1:] != ordered[:-1]
    return order, differs


def _packed_order(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`lex_order`'s answer by one sort of unsigned integers, where the keys' spans and
    the entries' positions fit in 64 bits together: each key less its least value, laid side
    by side (the most significant highest), the position lowest, so that every value is
    distinct and their plain sort is the stable order; None where they do not fit or a key
    is not one column of integers.  NumPy sorts integers without an index faster than it
    sorts an index by them: a decoded log of re-puts and deletes (37,500 cells: kinds,
    qualifier ranks, 4-byte row codes) 0.33 ms against ``lexsort``'s 0.51."""
    if not all(key.ndim == 1 and key.dtype.kind in "iu" for key in keys):
        return None  # (byte strings, words as columns: the sorts below)
    n = len(keys[0])
    position_bits = (n - 1).bit_length()
    spans, bits = [], position_bits
    for key in keys:
        low = key.min()
        width = (int(key.max()) - int(low)).bit_length()
        spans.append((key, low, width))
        bits += width
    if bits > 64:
        return None
    packed = np.arange(n, dtype=np.uint64)
    shift = position_bits
    for key, low, width in spans:
        if width:  # a key of one value orders nothing
            # the span fits in 64 - position_bits bits: ``key - low`` does not wrap in its type
            packed |= (key - low).astype(np.uint64) << np.uint64(shift)
            shift += width
    packed.sort()
    order = (packed & np.uint64((1 << position_bits) - 1)).astype(np.int64)
    ranked = packed >> np.uint64(position_bits)
    differs = np.ones(n, dtype=bool)
    np.not_equal(ranked[1:], ranked[:-1], out=differs[1:])
    return order, differs


def word_keys(native, keys: pa.Array) -> list[np.ndarray] | None:
    """Binary keys of any widths (``keys``, no nulls) as NumPy sort keys, the most significant
    last (:func:`lex_order`'s form), where :func:`int_key_codes` reads no integers from them
    (keys of several widths, or of one past 16 bytes under no lead: YCSB's ``user`` and a
    hash): :func:`_key_words`.  None past :data:`_MAX_WORD_KEY_BYTES` or with a null."""
    words = _key_words(native, keys, _MAX_WORD_KEY_BYTES)
    if words is None:
        return None
    return [np.ascontiguousarray(words[:, w]) for w in range(words.shape[1] - 1, -1, -1)]


def word_codes(native, keys: list[pa.Array], marker_keys: pa.Array | None
               ) -> tuple[np.ndarray, np.ndarray | None] | None:
    """The keys of ``keys`` and ``marker_keys`` (binary, no nulls) as the compiled merge's
    three-word codes (its ``-3`` key form), each laid end to end as a (keys, 3) uint64 array,
    the least significant word first: the bytes after the lead every key shares, zeros to the
    longest key's end, then the key's length past the lead in one byte (a key sorts before
    the longer keys it begins), read as three big-endian words.  For keys of several widths
    that differ in at most 23 bytes past their lead (YCSB's ``user`` and up to 19 digits);
    None otherwise.  ``native``: the compiled ``key_triples``, or None for this NumPy form
    (the reference)."""
    arrays = keys + ([marker_keys] if marker_keys is not None else [])
    n = sum(len(a) for a in arrays)
    if not n or any(a.null_count for a in arrays):
        return None
    codes = pool_empty((n, 3), np.uint64)
    if native is not None:
        if native.key_triples(pa.chunked_array(arrays, pa.binary()).__arrow_c_stream__(), codes) < 0:
            return None
    elif not _triple_codes(arrays, codes):
        return None
    count = sum(len(a) for a in keys)
    return codes[:count], (codes[count:] if marker_keys is not None else None)


def _triple_codes(arrays: list[pa.Array], out: np.ndarray) -> bool:
    """:func:`word_codes`' NumPy form: the codes of the keys of ``arrays`` into ``out``; False
    past 23 bytes after the lead."""
    lengths = np.concatenate([np.diff(value_offsets(a)) for a in arrays if len(a)])
    longest = int(lengths.max())
    if longest > _MAX_PADDED_KEY_BYTES:
        return False
    rows = np.concatenate([padded_values(a, longest, native=None) for a in arrays if len(a)])
    shared = (rows == rows[0]).all(axis=0)[: int(lengths.min())]
    lead = int(np.argmin(shared)) if not shared.all() else len(shared)
    width = longest - lead
    if width > 23:
        return False
    laid = np.zeros((len(rows), 24), np.uint8)
    laid[:, :width] = rows[:, lead:]
    laid[:, width] = lengths - lead
    words = laid.view(">u8")
    for w in range(3):
        out[:, w] = words[:, 2 - w]
    return True


def _key_words(native, keys: pa.Array, most: int) -> np.ndarray | None:
    """The keys of ``keys`` as a (keys, words) native uint64 array, the most significant word
    first, whose rows order and compare as the keys do: each key zero-padded with its length
    after it (:func:`padded_values`, the form :func:`storage.kernels.row_merge.order_keys`
    compares), less the bytes that are the same in every key (``user``), read as big-endian
    8-byte words.  None past ``most`` such bytes (or a key past
    :data:`_MAX_PADDED_KEY_BYTES`), with a null, or with no key."""
    n = len(keys)
    if not n or keys.null_count:
        return None
    longest = int(np.diff(value_offsets(keys)).max())
    if longest > _MAX_PADDED_KEY_BYTES:
        return None
    suffix = 1 if longest < 256 else 2
    span = -(-(longest + suffix) // 8) * 8
    rows = padded_values(keys, longest, suffix=suffix, row_width=span, native=native)
    # a byte every key shares orders nothing: told a word column at a time (a reduction
    # across the rows' axis, or a byte-wise any(), costs 8x)
    words = rows.view(np.uint64)
    apart = np.array([np.bitwise_or.reduce(words[:, w] ^ words[0, w]) for w in range(span // 8)], np.uint64)
    varies = np.flatnonzero(apart.view(np.uint8))
    if len(varies) > most:
        return None
    if len(varies) and varies[-1] - varies[0] + 1 == len(varies):
        rows = rows[:, varies[0] : varies[-1] + 1]  # one run of bytes (a lead left out): a view
    else:
        rows = rows[:, varies]
    laid = np.zeros((n, max(-(-rows.shape[1] // 8), 1) * 8), np.uint8)
    laid[:, : rows.shape[1]] = rows
    return laid.view(">u8").astype(np.uint64)


def row_sort_keys(native, rows: pa.Array) -> list[np.ndarray] | None:
    """Row keys (binary, no nulls) as :func:`lex_order`'s sort keys: their integer codes
    (:func:`int_key_codes`), else their padded words (:func:`word_keys`) where the compiled
    module pads them; None: Arrow sorts them (NumPy's padding of 16,667 YCSB keys costs more
    than Arrow's sort, 5.0 against 3.4 ms; the compiled one 0.1)."""
    coded = int_key_codes(native, [rows], None)
    if coded is not None:
        return code_keys(coded[1])
    return word_keys(native, rows) if native is not None else None


_MAX_WORD_KEY_BYTES = 256
"""Keys that differ in more bytes than this are sorted by Arrow (:func:`word_keys` gives None):
a word a sort key, and :func:`lex_order` slows with each."""
_MAX_PADDED_KEY_BYTES = 1024
"""Keys past this many bytes are not padded (:func:`_key_words` gives None): every key of a
call is padded to the longest, so one long key would cost a row that long for each."""


_USE_MODULE = object()  # padded_values' default: the engine's compiled module, looked up at each call


def padded_values(values: pa.Array, width: int, *, suffix: int = 0, row_width: int | None = None,
                  native=_USE_MODULE) -> np.ndarray:
    """A binary array as an (n, ``row_width``) uint8 matrix: each value zero-padded on the right
    to ``width`` bytes, then its length in ``suffix`` bytes (0, 1 or 2, big-endian), then zeros
    to ``row_width`` (by default ``width + suffix``).  Values of several widths are laid out by
    the compiled ``pad_keys`` (one pass: 1.8 ms for 250K 23-byte keys, where NumPy's scatter of
    every byte cost 76); ``native``: the compiled module (None: this NumPy form, the reference)."""
    if native is _USE_MODULE:
        native = native_module.NATIVE
    n = len(values)
    row_width = width + suffix if row_width is None else row_width
    offsets = value_offsets(values)
    first = int(offsets[0])
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8)[first : int(offsets[-1])] if n else np.zeros(0, np.uint8)
    if len(data) == n * width and not suffix and row_width == width:
        return data.reshape(n, width)
    if native is not None and n and not values.null_count:
        out = np.empty((n, row_width), dtype=np.uint8)
        if native.pad_keys(pa.chunked_array([values]).__arrow_c_stream__(), out, width, suffix):
            return out
    out = np.zeros((n, row_width), dtype=np.uint8)
    lengths = np.diff(offsets)
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(len(data)) - np.repeat(offsets[:-1] - first, lengths)
    out[rows, cols] = data
    if suffix:
        out[:, width : width + suffix] = lengths.astype(">u2" if suffix == 2 else "u1").view(np.uint8).reshape(-1, suffix)
    return out
