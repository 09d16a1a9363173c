"""The ``KEYS_DELTA`` key chunk of version 3: row keys of one width cut into parts, each as
narrow deltas or codes (layout: docs/formats/storefile.md, "encoding 7 = KEYS_DELTA").

A ``KEYS_FIXED`` chunk of lineitem's 12-byte keys (``l_orderkey:l_linenumber``) decompresses
12 bytes a row; as two parts (the order key as a 1-byte delta from the row before, the line
number as a 1-byte code from a base) it decompresses 2, and stores 0.41 bytes a row against
1.51.  The writer chooses the split itself (:func:`plan_key_parts`: the storage layer does not
know a key's fields); the reader rebuilds the very bytes ``KEYS_FIXED`` holds in one compiled
pass (:func:`rebuild_key_delta`, ``keys_delta`` in storage/_native/decode.c), with
:func:`rebuild_key_delta_py` as the NumPy reference and fallback.  Every field is checked
before a key is built, every value against its part's bytes and every key against the one
before: a damaged chunk is an error, never a wrong key.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from ..native import NATIVE
from .format import align8

__all__ = ["KEY_PART_DELTA", "KEY_PART_FRAME", "plan_key_parts", "encode_key_delta", "key_delta_layout",
           "rebuild_key_delta", "rebuild_key_delta_py"]

_KEY_DELTA_HEAD = struct.Struct("<IIII")  # key width, flags, part count, reserved
_KEY_PART = struct.Struct("<BBBBIQ")  # part width, kind, code width, reserved u8, reserved u32, base
KEY_PART_DELTA = 0
"""A part whose row ``i`` is row ``i - 1``'s plus the code (non-decreasing over the block)."""
KEY_PART_FRAME = 1
"""A part whose row ``i`` is the part's base plus the code."""
_KEY_CODE_TYPES = {0: None, 1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}
_MAX_DELTA_KEY_WIDTH = 64  # the writer's split search grows with the width; wider keys stay KEYS_FIXED
_KEY_PLAN_SAMPLE = 512  # rows the split is chosen on; the codes of the chosen parts are sized on every row
_CODE_TOPS = np.array([0, (1 << 8) - 1, (1 << 16) - 1, (1 << 32) - 1], dtype=np.uint64)
_CODE_WIDTHS = np.array([0, 1, 2, 4, 8], dtype=np.int64)
_PART_COST = _KEY_PART.size  # a part's head entry, in the split search's byte count
_USE_MODULE = object()  # rebuild_key_delta's default: the module storage.native loaded, looked up at each call


def _padded(data: bytes) -> bytes:
    return data + bytes(align8(len(data)) - len(data))


def _code_width(top: int) -> int:
    """The narrowest code width (0, 1, 2, 4 or 8 bytes) that holds ``top``."""
    return next(c for c in (0, 1, 2, 4, 8) if top < 1 << (8 * c))


def _key_buffer(keys: np.ndarray) -> np.ndarray:
    """The keys' bytes (rows x width, uint8) back to back behind 8 zero bytes and before 8
    more: every part of every row is then the low bytes of one 8-byte word of it."""
    flat = np.zeros(keys.size + 16, dtype=np.uint8)
    flat[8 : 8 + keys.size] = keys.reshape(-1)
    return flat


def _words_at(flat: np.ndarray, n: int, w: int, k: int, starts: int) -> np.ndarray:
    """Of ``n`` keys of ``w`` bytes in ``flat`` (:func:`_key_buffer`), the parts of ``k``
    bytes from bytes ``0 .. starts - 1`` as big-endian unsigned integers (n x starts): a
    strided view of the 8-byte words ending at each part's last byte, masked to its bytes
    (two whole-array steps, where a copy of each part's bytes into words took four)."""
    view = np.ndarray((n, starts), dtype=">u8", buffer=flat, offset=k, strides=(w, 1))
    words = view.astype(np.uint64)
    if k < 8:
        words &= np.uint64((1 << (8 * k)) - 1)
    return words


def _part_words(keys: np.ndarray, a: int, b: int, flat: np.ndarray | None = None) -> np.ndarray:
    """Bytes ``a`` to ``b`` (at most 8) of each row of ``keys`` (rows x width, uint8) read
    as a big-endian unsigned integer (``flat``: the keys' :func:`_key_buffer`, if made)."""
    n, w = keys.shape
    if flat is None:
        flat = _key_buffer(keys)
    return _words_at(flat[a:], n, w, b - a, 1).reshape(n)


def _part_form(v: np.ndarray) -> tuple[int, int, int]:
    """``(kind, code width, base)`` of one part's values (rows 1 on are coded): deltas
    from the row before where the part never decreases and that is narrower, else codes
    from the least value."""
    rest = v[1:]
    if rest.size == 0:
        return KEY_PART_DELTA, 0, 0
    steps = np.diff(v)
    lo = int(rest.min())
    frame = _code_width(int(rest.max()) - lo)
    if (v[1:] >= v[:-1]).all():
        delta = _code_width(int(steps.max()))
        if delta <= frame:
            return KEY_PART_DELTA, delta, 0
    return KEY_PART_FRAME, frame, lo


def plan_key_parts(keys: np.ndarray) -> list[tuple[int, int]] | None:
    """The split of fixed-width row keys (``keys``: rows x width, uint8, ascending) into
    parts of 1 to 8 bytes that needs the fewest code bytes, as ``(start, end)`` byte
    ranges; judged on the first :data:`_KEY_PLAN_SAMPLE` rows.  The storage layer does
    not know a key's fields: every split into parts of at most 8 bytes is weighed (one
    dynamic program over byte boundaries, the values of every part of one width taken
    as one matrix), each part costing its narrower form (deltas or codes from a base)
    plus its head entry.  None when the keys are too wide or too few to pay."""
    n, w = keys.shape
    if n < 2 or not 0 < w <= _MAX_DELTA_KEY_WIDTH:
        return None
    sample = keys[:_KEY_PLAN_SAMPLE]
    s = len(sample)
    rows = s - 1
    flat = _key_buffer(sample)
    cost = np.full((9, w + 1), np.inf)  # cost[k, a]: the part of k bytes from byte a
    for k in range(1, min(8, w) + 1):
        starts = w - k + 1
        words = _words_at(flat, s, w, k, starts)
        rest = words[1:]
        steps = rest - words[:-1]  # wraps where a part falls: those are not deltas
        rising = (rest >= words[:-1]).all(axis=0)
        spans = rest.max(axis=0) - rest.min(axis=0)
        tops = np.where(rising, np.minimum(steps.max(axis=0), spans), spans)
        cost[k, :starts] = _CODE_WIDTHS[np.searchsorted(_CODE_TOPS, tops)] * rows + _PART_COST
    best = np.full(w + 1, np.inf)
    best[0] = 0
    cut = np.zeros(w + 1, dtype=np.int64)
    for b in range(1, w + 1):
        for k in range(1, min(8, b) + 1):
            c = best[b - k] + cost[k, b - k]
            if c < best[b]:
                best[b], cut[b] = c, b - k
    if best[w] >= rows * w:  # no narrower than the keys themselves
        return None
    parts, b = [], w
    while b:
        parts.append((int(cut[b]), b))
        b = int(cut[b])
    return parts[::-1]


def encode_key_delta(keys: np.ndarray, parts: list[tuple[int, int]]) -> bytes | None:
    """The ``KEYS_DELTA`` key chunk's part after its qualifier table (head, part entries,
    first key, each part's codes; padded to 8 bytes) for ``keys`` (rows x width, uint8,
    strictly ascending) cut into ``parts`` (:func:`plan_key_parts`), or None when the
    codes would hold as many bytes as the keys (the block does not fit the form)."""
    n, w = keys.shape
    entries, codes = [], []
    flat = _key_buffer(keys)
    for a, b in parts:
        v = _part_words(keys, a, b, flat)
        kind, width, base = _part_form(v)
        entries.append(_KEY_PART.pack(b - a, kind, width, 0, 0, base))
        if width:
            code = np.diff(v) if kind == KEY_PART_DELTA else v[1:] - np.uint64(base)
            codes.append(_padded(code.astype(_KEY_CODE_TYPES[width]).tobytes()))
    body = b"".join([_KEY_DELTA_HEAD.pack(w, 0, len(parts), 0), *entries, _padded(keys[0].tobytes()), *codes])
    if len(body) >= 8 + align8(n * w):
        return None
    return body


def key_delta_layout(body, at: int, n: int) -> tuple[int, np.ndarray, int, int]:
    """``(key width, parts, first key offset, end)`` of the ``KEYS_DELTA`` part of a key
    chunk's ``body`` that starts at ``at`` (after the qualifier table), for ``n`` rows.
    ``parts`` is an int64 array of one row per part: ``(width, kind, code width, base,
    codes offset)`` (the base's 64 bits as int64); ``end`` is where the codes end.  Every
    field is checked against the form and the body's size; a bad one raises ValueError
    naming it."""
    view = memoryview(body)
    try:
        w, flags, p, reserved = _KEY_DELTA_HEAD.unpack_from(view, at)
    except struct.error:
        raise ValueError("its head is truncated") from None
    if w == 0 or flags or reserved or not 0 < p <= w:
        raise ValueError(f"its head is bad (key width {w}, flags {flags}, {p} parts)")
    pos = at + _KEY_DELTA_HEAD.size
    if len(view) < pos + p * _KEY_PART.size:
        raise ValueError(f"its {p} part entries run past its {len(view)} bytes")
    first_at = pos + p * _KEY_PART.size
    pos = first_at + align8(w)
    parts = np.zeros((p, 5), dtype=np.int64)
    total = 0
    for k in range(p):
        width, kind, code, r8, r32, base = _KEY_PART.unpack_from(view, at + _KEY_DELTA_HEAD.size + k * _KEY_PART.size)
        if not 0 < width <= 8 or kind not in (KEY_PART_DELTA, KEY_PART_FRAME) or code not in _KEY_CODE_TYPES \
                or r8 or r32 or (kind == KEY_PART_DELTA and base) or base >= 1 << (8 * width):
            raise ValueError(f"part {k} is bad (width {width}, kind {kind}, code width {code}, base {base:#x})")
        parts[k] = (width, kind, code, base - (1 << 64) if base >= 1 << 63 else base, pos)
        pos += align8((n - 1) * code)
        total += width
    if total != w:
        raise ValueError(f"its parts' widths add up to {total}, its key width is {w}")
    if len(view) < pos:
        raise ValueError(f"its codes run past its {len(view)} bytes ({pos} needed for {n} rows)")
    return w, parts, first_at, pos


def rebuild_key_delta_py(body, n: int, width: int, first_at: int, parts: np.ndarray) -> pa.Buffer:
    """The reference of :func:`rebuild_key_delta`: the ``n`` keys of ``width`` bytes back to
    back, by whole-array NumPy steps (a running sum per delta part, an add per frame part,
    big-endian bytes written into the key matrix), then the order checked part by part."""
    view = np.frombuffer(body, dtype=np.uint8)
    out = np.empty((n, width), dtype=np.uint8)
    out[0] = view[first_at : first_at + width]
    greater = np.zeros(n - 1, dtype=bool)
    equal = np.ones(n - 1, dtype=bool)
    a = 0
    for k, (w, kind, code, base, codes_at) in enumerate(parts.tolist()):
        first = _part_words(out[:1], a, a + w)[0]
        limit = (1 << (8 * w)) - 1
        if code:
            c = np.frombuffer(body, dtype=_KEY_CODE_TYPES[code], count=n - 1, offset=codes_at).astype(np.uint64)
        else:
            c = np.zeros(n - 1, dtype=np.uint64)
        if kind == KEY_PART_DELTA:
            v = np.empty(n, dtype=np.uint64)
            v[0] = first
            np.cumsum(c, out=v[1:])
            v[1:] += first
            if n > 1 and ((v[1:] < v[:-1]).any() or int(v[-1]) > limit):  # a wrap past 64 bits, or past the part
                raise ValueError(f"part {k} (deltas) runs past its {w} bytes")
        else:
            base &= (1 << 64) - 1
            if n > 1 and int(c.max()) > limit - base:
                raise ValueError(f"part {k} (codes) runs past its {w} bytes")
            v = np.empty(n, dtype=np.uint64)
            v[0] = first
            v[1:] = c + np.uint64(base)
        out[1:, a : a + w] = v[1:].astype(">u8").view(np.uint8).reshape(-1, 8)[:, 8 - w :]
        greater |= equal & (v[1:] > v[:-1])
        equal &= v[1:] == v[:-1]
        a += w
    if not greater.all():
        raise ValueError(f"row {int(np.flatnonzero(~greater)[0]) + 1}'s rebuilt key is not above the one before")
    return pa.py_buffer(out)


def rebuild_key_delta(body, n: int, width: int, first_at: int, parts: np.ndarray, *, native=_USE_MODULE) -> pa.Buffer:
    """The ``n`` row keys of a ``KEYS_DELTA`` key chunk (``body``; its layout from
    :func:`key_delta_layout`), back to back, ``width`` bytes each: exactly what the
    ``KEYS_FIXED`` form of the block holds.  The compiled ``keys_delta``
    (``storage/_native/decode.c``: one pass, every part's value kept in a register and
    written as one 8-byte word) where built, :func:`rebuild_key_delta_py` as the reference
    and the fallback.  A part that runs past its bytes or a key not above the one before
    raises ValueError naming it.  ``native``: as :func:`._chunk_encodings.gather_dict`."""
    if native is _USE_MODULE:
        native = NATIVE
    if native is None or not hasattr(native, "keys_delta"):
        return rebuild_key_delta_py(body, n, width, first_at, parts)
    # Arrow's memory pool keeps freed blocks mapped (a fresh NumPy array of a block's keys took
    # page faults worth a quarter of the rebuild); 8 bytes of slack: each part is written as a word
    out = pa.allocate_buffer(n * width + 8)
    native.keys_delta(body, n, width, first_at, parts, out)
    return out.slice(0, n * width)
