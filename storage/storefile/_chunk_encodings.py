"""The narrow value-chunk encodings of version 3: ``DICT``, ``LENGTHS`` and ``FRAME``.

Both exist for size: a lineitem-shaped table kept a 4-byte Arrow offset per value
in every variable-width chunk, and strings or decimals of a few dozen distinct
values once per row.  Measured per chunk kind on 600,000 rows, zstd (bytes a row
stored): ``l_quantity`` 4.65 as IPC against 0.75 as ``DICT``, ``l_shipinstruct``
3.82 against 0.33, ``l_extendedprice`` 6.86 against 4.09 as ``LENGTHS``,
``l_comment`` 11.0 against 8.4.  The writer (:func:`choose`) compresses every
candidate and keeps the smallest, so an encoding appears only where it pays.

Layouts (all integers little-endian, every part padded with zeros to 8 bytes;
``n`` is the block's row count, from the key chunk):

* ``DICT``: head ``u32 entries d, u32 flags, u32 code width (1 or 2), u32 data
  bytes D``; the validity bitmap when flag bit 0 is set (Arrow's, least
  significant bit first); ``d + 1`` u32 dictionary offsets; the ``D`` dictionary
  bytes; ``n`` codes of the code width (0 for an absent row).  Row ``i``'s value
  is dictionary entry ``code[i]``.
* ``LENGTHS``: head ``u32 length width (1 or 2), u32 flags``; the validity bitmap
  when flag bit 0 is set; ``n`` lengths of the length width (0 for an absent
  row); the values back to back.  The offsets are the lengths' running sum.
* ``FRAME`` (2-, 4- or 8-byte big-endian integers: the binary SerDe's dates, ints,
  longs, timestamps): head ``u32 value width w, u32 flags, u32 code width c (1, 2
  or 4, < w), u32 0, u64 base, u64 divisor``; the validity bitmap when flag bit 0
  is set; ``n`` codes of width ``c``.  Row ``i`` is ``base + code[i] x divisor``
  modulo ``2 ** (8 w)``, big-endian: the very bytes of the ``FIXED`` chunk it
  replaces.  Exists for the bytes a read decompresses: lineitem's dates (8-byte
  milliseconds) decompress as 2 bytes a row (3.4-3.9 ns a row with the rebuild,
  against 9.1-9.4 for ``FIXED``) and store 1.64 bytes a row against 2.70.

Decoding is vectorized: one gather of the dictionary per chunk (the compiled
``dict_gather`` where built, Arrow's ``take`` as its reference: :func:`gather_dict`),
one cumulative sum of the lengths per chunk; every count, offset and code is
checked against the chunk's size before a value is built, so a damaged chunk is
a :class:`CorruptionError` and never data.
"""

from __future__ import annotations

import struct
import sys
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptionError
from ..kernels.cell_columns import coded_bytes
from ..native import NATIVE
from .format import ChunkEncoding, align8

__all__ = ["ENCODERS", "encode_dict", "encode_lengths", "encode_frame", "decode_dict", "decode_lengths", "decode_frame",
           "dict_codes", "expand_dict", "expanded_size",
           "choose", "bitmap_part",
           "fixed_offsets", "gather_dict", "take_dict"]

_DICT_HEAD = struct.Struct("<IIII")  # entries, flags, code width, dictionary data bytes
_LEN_HEAD = struct.Struct("<II")  # length width, flags
_HAS_VALIDITY = 1
_PAD = bytes(8)
_BINARY = pa.binary()
_WIDTH_TYPES = {1: np.dtype("<u1"), 2: np.dtype("<u2")}
_CODE_TYPES = {1: pa.uint8(), 2: pa.uint16()}  # made once: the type factories cost more than a small decode
_DICT_TYPES = {w: pa.dictionary(t, pa.binary()) for w, t in _CODE_TYPES.items()}
_MAX_ENTRIES = 1 << 16
# A candidate replaces a cheaper-to-decode one only when at least this much smaller:
# a DICT decode (a take) costs more CPU than an IPC one (zero copy), so a gain of a
# few bytes is not worth it.
_MIN_GAIN = 0.9
_SAMPLE = 2048
# Arrow's take without its per-code bounds check (decode_dict checks the codes' maximum
# once): 5-10% of a mixed-width dictionary's decode
_TAKE = pc.get_function("array_take")
_NO_BOUNDS_CHECK = pc.TakeOptions(boundscheck=False)


def _padded(data: bytes) -> bytes:
    return data + _PAD[: align8(len(data)) - len(data)]


def bitmap_part(values: pa.Array) -> bytes:
    """The padded validity bitmap of ``values`` (b"" when every row has a value)."""
    if not values.null_count:
        return b""
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    return _padded(np.packbits(valid, bitorder="little").tobytes())


def encode_dict(values: pa.Array) -> pa.Buffer | None:
    """``values`` (binary, nulls where absent) as a ``DICT`` chunk, or None when they have
    too many distinct values for narrow codes (more than half the rows, or above 65,536)."""
    n = len(values)
    present = n - values.null_count
    if present == 0:
        return None
    if n > 2 * _SAMPLE:
        # a quarter of a leading sample distinct: the whole rarely pays (lineitem's dates, 1,400 of
        # 2,048, stored 3.4 bytes a row as DICT against 3.25 as FIXED), and hashing every value and
        # compressing the result was half of the writer's time on such columns
        sample = values.slice(0, _SAMPLE)
        if len(pc.unique(sample)) * 4 > _SAMPLE:
            return None
    encoded = pc.dictionary_encode(values)
    dictionary = encoded.dictionary
    d = len(dictionary)
    if d > _MAX_ENTRIES or d * 2 > present:
        return None
    width = 1 if d <= 256 else 2
    codes = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(_WIDTH_TYPES[width])
    offsets = np.frombuffer(dictionary.buffers()[1], dtype=np.int32, count=d + 1, offset=4 * dictionary.offset)
    start, end = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(dictionary.buffers()[2], dtype=np.uint8, count=end - start, offset=start) if end > start \
        else np.zeros(0, dtype=np.uint8)
    bitmap = bitmap_part(values)
    head = _DICT_HEAD.pack(d, _HAS_VALIDITY if bitmap else 0, width, end - start)
    return pa.py_buffer(b"".join([head, bitmap, _padded((offsets - start).astype("<u4").tobytes()),
                                  _padded(data.tobytes()), codes.tobytes()]))


def encode_lengths(values: pa.Array) -> pa.Buffer | None:
    """``values`` as a ``LENGTHS`` chunk, or None when a value is 65,536 bytes or longer."""
    n = len(values)
    if n - values.null_count == 0:
        return None
    lengths = pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False)
    longest = int(lengths.max())
    if longest >= 1 << 16:
        return None
    width = 1 if longest < 256 else 2
    packed = values.drop_null() if values.null_count else values  # no bytes under an absent row
    offsets = np.frombuffer(packed.buffers()[1], dtype=np.int32, count=len(packed) + 1, offset=4 * packed.offset)
    start, end = int(offsets[0]), int(offsets[-1])
    data = packed.buffers()[2]
    body = data.slice(start, end - start).to_pybytes() if data is not None and end > start else b""
    bitmap = bitmap_part(values)
    head = _LEN_HEAD.pack(width, _HAS_VALIDITY if bitmap else 0)
    return pa.py_buffer(b"".join([head, bitmap, _padded(lengths.astype(_WIDTH_TYPES[width]).tobytes()), body]))


def choose(candidates: list, codec, best: tuple | None = None) -> tuple:
    """The candidate to write among ``candidates`` (``(raw buffer, encoding, ...)`` tuples,
    cheapest to decode first), each compressed by ``codec``: a later one only when its
    stored size is under :data:`_MIN_GAIN` of the best so far (``best``, already
    compressed, when given).  Returns the candidate with its stored buffer appended (so
    the writer does not compress it twice)."""
    for cand in candidates:
        stored = codec.compress(cand[0])
        if best is None or stored.size < _MIN_GAIN * best[-1].size:
            best = (*cand, stored)
    return best


def _head(body: pa.Buffer, head: struct.Struct, what: str, path: str, at: int) -> tuple:
    try:
        return head.unpack_from(memoryview(body), 0)
    except struct.error:
        raise CorruptionError(f"{what} is truncated", path, at) from None


def _validity(body: pa.Buffer, flags: int, pos: int, n: int) -> tuple[pa.Buffer | None, int]:
    if not flags & _HAS_VALIDITY:
        return None, pos
    size = (n + 7) // 8
    return body.slice(pos, size), pos + align8(size)


@lru_cache(maxsize=64)
def _fixed_type(width: int) -> pa.DataType:
    return pa.binary(width)


_USE_MODULE = object()


@lru_cache(maxsize=256)
def fixed_offsets(n: int, width: int) -> pa.Buffer:
    """Offsets of ``n`` values of ``width`` bytes (shared by every chunk of that shape)."""
    return pa.py_buffer((np.arange(n + 1, dtype=np.int32) * width).tobytes())


def _gather_narrow(data: np.ndarray, d: int, width: int, codes: pa.Array) -> np.ndarray:
    """The ``d`` dictionary entries of ``width`` <= 8 bytes (``data``) gathered by ``codes``
    (an Arrow array of unsigned codes): each entry widened to one 8-byte word, one word
    take, then the words written at a stride of ``width`` bytes, in row order, so each
    word's spare bytes are overwritten by the next row's (4x faster than a take of
    ``width``-byte items).  The take is Arrow's, without its bounds check (the caller
    checked the codes): NumPy's take by narrow codes cost 5x more in a scan."""
    words = np.zeros((d, 8), dtype=np.uint8)
    words[:, :width] = data.reshape(d, width)
    n = len(codes)
    if n == 0:
        return np.zeros(0, dtype=np.uint8)
    taken = _TAKE.call([pa.array(words.view(np.uint64).ravel()), codes], _NO_BOUNDS_CHECK)
    gathered = np.frombuffer(taken.buffers()[1], dtype=np.uint64, count=n)
    out = np.empty(n * width + 8, dtype=np.uint8)
    if width == 8:
        out[: n * 8].view(np.uint64)[:] = gathered
    else:
        np.ndarray((n,), np.uint64, out, 0, (width,))[...] = gathered
    return out[: n * width]


def _writes_in_order() -> bool:
    """Whether an assignment into an overlapping strided view writes its elements in
    order (NumPy's copy loop does); checked once, else the take of items is used."""
    probe = np.arange(1, 65, dtype=np.uint8)
    codes = np.array([3, 1, 7, 0, 2, 7, 5], dtype=np.uint8)
    want = probe.reshape(16, 4)[codes].ravel()
    return bool(np.array_equal(_gather_narrow(probe, 16, 4, pa.array(codes)), want))


_OVERLAPPING_WRITES_IN_ORDER = _writes_in_order()


def dict_codes(body: pa.Buffer, n: int, what: str, path: str, at: int, *,
               native=_USE_MODULE) -> pa.DictionaryArray:
    """The ``n`` rows of a ``DICT`` chunk's (decompressed) ``body`` as a dictionary array,
    not expanded: its indices are the chunk's codes (uint8 or uint16, null where the chunk's
    validity says so) and its dictionary the chunk's entries, both zero-copy slices of
    ``body``.  Every count, offset and code is checked here, so :func:`expand_dict` of the
    result (or of any slice or filter of it) cannot fail.  A filter tests the dictionary's
    few entries and maps the answers through the codes; only the rows that pass are
    expanded (``storage.storefile.dense.DenseBlock``).  The checks are one compiled call
    (``dict_check``) where the kernels are built; ``native``: the compiled module to use
    (None: the NumPy reference; by default :data:`storage.native.NATIVE`)."""
    d, flags, width, data_size = _head(body, _DICT_HEAD, what, path, at)
    if flags & ~_HAS_VALIDITY or width not in _WIDTH_TYPES or d == 0 or d > min(_MAX_ENTRIES, 1 << (8 * width)):
        raise CorruptionError(f"{what} has a bad dictionary head", path, at)
    validity, pos = _validity(body, flags, _DICT_HEAD.size, n)
    offsets_at = pos
    pos += align8(4 * (d + 1))
    data_at = pos
    pos += align8(data_size)
    if body.size != pos + n * width:
        raise CorruptionError(f"{what} holds {body.size} bytes, its dictionary of {d} entries and {n} codes "
                              f"of {width} bytes need {pos + n * width}", path, at)
    if native is _USE_MODULE:
        native = NATIVE
    if native is not None:
        # one call for both checks (a wide table's chunks are many and their dictionaries
        # small: the NumPy calls below cost 40 us a chunk, mostly their own overhead)
        verdict = native.dict_check(body.slice(offsets_at, 4 * (d + 1)), data_size, body.slice(pos, n * width),
                                    width, n)
    else:
        # signed steps: offsets that go down must not wrap around into large ones
        offsets = np.frombuffer(body, dtype="<u4", count=d + 1, offset=offsets_at).astype(np.int64)
        verdict = 1 if offsets[0] != 0 or offsets[-1] != data_size or data_size >= 1 << 31 \
            or (d > 1 and int(np.diff(offsets).min()) < 0) else 0
        if not verdict and n:
            verdict = 2 if int(np.frombuffer(body, dtype=_WIDTH_TYPES[width], count=n, offset=pos).max()) >= d else 0
    if verdict == 1:
        raise CorruptionError(f"{what} dictionary offsets do not add up to its {data_size} bytes", path, at)
    if verdict == 2:
        raise CorruptionError(f"{what} has a code out of range of its {d} dictionary entries", path, at)
    # the u32 offsets read as Arrow's int32 ones: checked above to stay under 2 GiB
    dictionary = pa.Array.from_buffers(_BINARY, d, [None, body.slice(offsets_at, 4 * (d + 1)),
                                                    body.slice(data_at, data_size)], 0)
    nulls = -1 if validity is not None else 0
    return pa.DictionaryArray.from_buffers(_DICT_TYPES[width], n, [validity, body.slice(pos, n * width)],
                                           dictionary, nulls)


def _entry_width(dictionary: pa.Array) -> int:
    """The one byte width of every entry of a (non-empty) binary ``dictionary``; 0 when
    they differ or are empty."""
    offsets = np.frombuffer(dictionary.buffers()[1], dtype=np.int32, count=len(dictionary) + 1,
                            offset=4 * dictionary.offset)
    steps = np.diff(offsets)
    entry = int(steps[0])
    return entry if entry > 0 and int(steps.min()) == int(steps.max()) else 0


def _plain_codes(indices: pa.Array, d: int) -> tuple[pa.Buffer, pa.Buffer | None]:
    """``(codes, validity)`` of dictionary ``indices`` (into ``d`` entries) as buffers that
    start at its first row; the validity None when no row is null.  The codes under null
    rows are kept as stored (a slice or filter keeps them), so the expanded bytes are those
    of the whole chunk's; should one lie outside the dictionary, every null row's code is
    made 0 (what the writer stores there), so no gather reads past the dictionary."""
    width = indices.type.bit_width // 8
    n = len(indices)
    codes = indices.buffers()[1].slice(indices.offset * width, n * width)
    if not indices.null_count:
        return codes, None  # every code was checked against the dictionary when the chunk was read
    if n and int(np.frombuffer(codes, dtype=_WIDTH_TYPES[width], count=n).max()) >= d:
        codes = pc.fill_null(indices, 0).buffers()[1].slice(0, n * width)
    validity = indices.buffers()[0] if indices.offset == 0 else pc.is_valid(indices).buffers()[1]
    return codes, validity


def _entry_buffers(dictionary: pa.Array) -> tuple[pa.Buffer, pa.Buffer]:
    """A (non-empty) binary ``dictionary``'s ``d + 1`` offsets, from 0, and the entries' bytes
    they index: what the compiled kernels and :func:`gather_dict` read."""
    d = len(dictionary)
    if dictionary.offset:
        dictionary = pa.concat_arrays([dictionary])  # offsets from 0: what the gather reads
    offsets = dictionary.buffers()[1]
    first = int(np.frombuffer(offsets, dtype=np.int32, count=1)[0])
    entry_offsets = offsets.slice(0, 4 * (d + 1))
    if first:
        entry_offsets = pa.py_buffer(np.frombuffer(offsets, dtype=np.int32, count=d + 1) - first)
    entries = dictionary.buffers()[2]
    entries = pa.py_buffer(b"") if entries is None else entries.slice(first)
    return entry_offsets, entries


def expand_dict(column: pa.DictionaryArray, *, native=_USE_MODULE) -> pa.Array:
    """The plain binary values of a dictionary array of :func:`dict_codes` (or a slice or
    filter of one): dictionary entry ``code`` at each row, null where the row is null.
    The bytes are those a full decode of the chunk has always given: values of one width
    gathered without offsets (a null row then holds entry 0's bytes, as its stored code 0
    says), others by :func:`gather_dict` (a null row holds no bytes).

    Where the compiled kernels are built, values of one width are one ``dict_fixed`` call
    (``storage/_native/decode.c``): a row one copy of a constant size, 2.5-3x less CPU than
    the reference below on ``lineitem``'s one-width columns
    (docs/decisions/2026-12-07-chunk-decode-in-one-pass.md);
    ``native``: the compiled module to use (None: the reference, NumPy's and Arrow's
    takes; by default :data:`storage.native.NATIVE`, looked up at each call)."""
    if native is _USE_MODULE:
        native = NATIVE
    dictionary = column.dictionary
    n = len(column)
    d = len(dictionary)
    width = column.indices.type.bit_width // 8
    codes, validity = _plain_codes(column.indices, d)
    nulls = -1 if validity is not None else 0
    if native is not None:
        entry_offsets, entries = _entry_buffers(dictionary)
        fixed = native.dict_fixed(entry_offsets, entries, codes, width, n, pa.allocate_buffer)
        if fixed is not None:
            data, entry = fixed
            return pa.Array.from_buffers(_BINARY, n, [validity, fixed_offsets(n, entry), data.slice(0, n * entry)],
                                         nulls)
        return gather_dict(entry_offsets, entries, codes, width, validity, n, native=native)
    entry = _entry_width(dictionary)
    if entry:
        # one width: gather the entries without building offsets (every such chunk shares them)
        codes_array = pa.Array.from_buffers(_CODE_TYPES[width], n, [None, codes])
        entries = dictionary.buffers()[2]
        if entry <= 8 and _OVERLAPPING_WRITES_IN_ORDER:
            data = pa.py_buffer(_gather_narrow(np.frombuffer(entries, np.uint8, d * entry, dictionary.offset * entry),
                                               d, entry, codes_array))
        else:
            items = pa.Array.from_buffers(_fixed_type(entry), d, [None, entries], 0, dictionary.offset)
            data = _TAKE.call([items, codes_array], _NO_BOUNDS_CHECK).buffers()[1]
        return pa.Array.from_buffers(_BINARY, n, [validity, fixed_offsets(n, entry), data], nulls)
    entry_offsets, entries = _entry_buffers(dictionary)
    return gather_dict(entry_offsets, entries, codes, width, validity, n, native=None)


def expanded_size(column: pa.DictionaryArray, *, native=_USE_MODULE) -> int:
    """Bytes of the buffers :func:`expand_dict` of ``column`` builds, counted without building
    them (what a block holding the plain column is charged).  The entries' bytes per row
    are summed by the compiled ``dict_bytes`` where it is built (one pass over the codes;
    its reference, :func:`coded_bytes`, counts each code, then weighs the counts)."""
    if native is _USE_MODULE:
        native = NATIVE
    n = len(column)
    validity = (n + 7) // 8 if column.null_count else 0
    dictionary = column.dictionary
    indices = column.indices
    width = indices.type.bit_width // 8
    if native is not None and not column.null_count and dictionary.offset == 0:
        codes = indices.buffers()[1].slice(indices.offset * width, n * width)
        entry_offsets = dictionary.buffers()[1].slice(0, 4 * (len(dictionary) + 1))
        return validity + 4 * (n + 1) + native.dict_bytes(entry_offsets, codes, width, n)
    entry = _entry_width(dictionary)
    if entry:
        return validity + 4 * (n + 1) + n * entry
    lengths = np.diff(np.frombuffer(dictionary.buffers()[1], dtype=np.int32, count=len(dictionary) + 1,
                                    offset=4 * dictionary.offset))
    codes = np.frombuffer(indices.buffers()[1], dtype=_WIDTH_TYPES[width], count=n,
                          offset=indices.offset * width)
    if column.null_count:  # a null row holds no bytes in a gathered column
        codes = codes[column.indices.is_valid().to_numpy(zero_copy_only=False)]
    return validity + 4 * (n + 1) + coded_bytes(codes, lengths)


def decode_dict(body: pa.Buffer, n: int, what: str, path: str, at: int) -> pa.Array:
    """The ``n`` values of a ``DICT`` chunk's (decompressed) ``body``, expanded."""
    column = dict_codes(body, n, what, path, at)
    try:
        return expand_dict(column)
    except ValueError as exc:  # the kernel's own bounds check (the offsets and codes were checked above)
        raise CorruptionError(f"{what} does not decode ({exc})", path, at) from None


def take_dict(entry_offsets: pa.Buffer, entries: pa.Buffer, codes: pa.Buffer, width: int,
              validity: pa.Buffer | None, n: int) -> pa.Array:
    """The reference of :func:`gather_dict`: Arrow's ``take`` of the dictionary (its
    ``d + 1`` uint32 ``entry_offsets`` into ``entries``) by the ``n`` codes of ``width``
    bytes, null where ``validity`` (None: no nulls) says so."""
    d = entry_offsets.size // 4 - 1
    dictionary = pa.Array.from_buffers(_BINARY, d, [None, entry_offsets, entries])
    indices = pa.Array.from_buffers(_CODE_TYPES[width], n, [validity, codes], -1 if validity is not None else 0)
    return _TAKE.call([dictionary, indices], _NO_BOUNDS_CHECK)


def gather_dict(entry_offsets: pa.Buffer, entries: pa.Buffer, codes: pa.Buffer, width: int,
                validity: pa.Buffer | None, n: int, *, native=_USE_MODULE) -> pa.Array:
    """A ``DICT`` chunk's ``n`` values as a binary array: dictionary entry ``code[i]``
    for row ``i`` (codes of ``width`` bytes; a null row where ``validity`` says so).
    The compiled ``dict_gather`` (``storage/_native/decode.c``) sums the entries'
    lengths into offsets and copies each value as whole 8-byte words: 2-3x less CPU than
    Arrow's ``take`` of a binary dictionary (docs/decisions/2026-12-05-worker-decode.md);
    :func:`take_dict` is the reference and the fallback.  ``native``: the compiled
    module to use (None: the reference; by default :data:`storage.native.NATIVE`,
    looked up at each call so one process can run both)."""
    if native is _USE_MODULE:
        native = NATIVE
    if native is None:
        return take_dict(entry_offsets, entries, codes, width, validity, n)
    offsets = np.empty(n + 1, dtype=np.int32)
    try:
        data = native.dict_gather(entry_offsets, entries, codes, width, validity, 0, n, offsets, pa.allocate_buffer)
    except OverflowError:  # past a binary array's 2 GiB: the reference gives Arrow's answer
        return take_dict(entry_offsets, entries, codes, width, validity, n)
    return pa.Array.from_buffers(_BINARY, n, [validity, pa.py_buffer(offsets), data],
                                 -1 if validity is not None else 0)


def decode_lengths(body: pa.Buffer, n: int, what: str, path: str, at: int, *, native=_USE_MODULE) -> pa.Array:
    """The ``n`` values of a ``LENGTHS`` chunk's (decompressed) ``body``: its lengths summed
    into offsets by the compiled ``lengths_offsets`` where it is built (NumPy's cumsum, the
    reference, converts each narrow length as it goes: 3x the time).  ``native``: the compiled
    module to use (None: the reference; by default :data:`storage.native.NATIVE`)."""
    if native is _USE_MODULE:
        native = NATIVE
    width, flags = _head(body, _LEN_HEAD, what, path, at)
    if flags & ~_HAS_VALIDITY or width not in _WIDTH_TYPES:
        raise CorruptionError(f"{what} has a bad lengths head", path, at)
    validity, pos = _validity(body, flags, _LEN_HEAD.size, n)
    lengths_at = pos
    pos += align8(n * width)
    if body.size < pos:
        raise CorruptionError(f"{what} is truncated ({body.size} bytes, its {n} lengths need {pos})", path, at)
    nulls = -1 if validity is not None else 0
    if native is not None:
        offsets = pa.allocate_buffer(4 * (n + 1))
        total = native.lengths_offsets(body.slice(lengths_at, n * width), width, n, offsets)
        if total != body.size - pos:
            raise CorruptionError(f"{what} lengths add up to {total} bytes, it holds {body.size - pos}", path, at)
        return pa.Array.from_buffers(_BINARY, n, [validity, offsets, body.slice(pos)], nulls)
    lengths = np.frombuffer(body, dtype=_WIDTH_TYPES[width], count=n, offset=lengths_at)
    # int32 sums cannot overflow below 2 GiB of lengths; a larger chunk sums in int64 and is cut back
    wide = n * ((1 << (8 * width)) - 1) >= 1 << 31
    offsets = np.empty(n + 1, dtype=np.int64 if wide else np.int32)
    offsets[0] = 0
    np.cumsum(lengths, out=offsets[1:])
    if int(offsets[-1]) != body.size - pos:
        raise CorruptionError(f"{what} lengths add up to {int(offsets[-1])} bytes, it holds {body.size - pos}",
                              path, at)
    if wide:
        offsets = offsets.astype(np.int32)  # the sum is the chunk's size, under 2 GiB
    return pa.Array.from_buffers(_BINARY, n, [validity, pa.py_buffer(offsets), body.slice(pos)], nulls)


_FRAME_HEAD = struct.Struct("<IIIIQQ")  # value width, flags, code width, reserved, base, divisor
_FRAME_WIDTHS = (2, 4, 8)
_FRAME_CODES = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")}
_FRAME_SAMPLE = 1024
_LITTLE_HOST = sys.byteorder == "little"


def encode_frame(data: np.ndarray, width: int, valid: np.ndarray | None, bitmap: bytes) -> pa.Buffer | None:
    """A ``FRAME`` chunk of ``data`` (a ``FIXED`` chunk's ``rows x width`` value bytes,
    zeros under absent rows; ``valid``: the rows with a value, None for all; ``bitmap``:
    their padded validity bitmap), or None when the values are not 2, 4 or 8 bytes wide
    or their codes would not be narrower.  The values are read as big-endian integers
    (what the binary SerDe writes for SHORT, INT, DATE, LONG, TIMESTAMP); the frame is
    their least value read signed or unsigned, whichever spans less, and the divisor the
    greatest common divisor of their distances from it (dates in milliseconds: 86,400,000)."""
    if width not in _FRAME_WIDTHS or len(data) == 0:
        return None
    utype = np.dtype(f"u{width}")
    words = data.view(f">u{width}").astype(utype)
    present = words[valid] if valid is not None else words
    if present.size == 0:
        return None
    signed = present.view(f"i{width}")
    ulo, uhi = int(present.min()), int(present.max())
    slo, shi = int(signed.min()), int(signed.max())
    if shi - slo < uhi - ulo:
        base, span = slo & ((1 << (8 * width)) - 1), shi - slo
    else:
        base, span = ulo, uhi - ulo
    deltas = present - utype.type(base)  # modulo 2 ** (8 x width): exact within the span
    divisor = 1
    if span:
        divisor = int(np.gcd.reduce(deltas[:_FRAME_SAMPLE]))
        if divisor == 0 or (divisor > 1 and (deltas % utype.type(divisor)).any()):
            divisor = int(np.gcd.reduce(deltas))  # the sample's divisor does not hold for every value
    top = span // divisor
    code = next((b for b in (1, 2, 4) if top < 1 << (8 * b)), None)
    if code is None or code >= width or _FRAME_HEAD.size + len(words) * code >= 8 + len(words) * width:
        return None  # no narrower than the FIXED form (a few rows do not pay for the longer head)
    quotients = deltas // utype.type(divisor) if divisor > 1 else deltas
    if valid is not None:
        full = np.zeros(len(words), dtype=utype)
        full[valid] = quotients
        quotients = full
    head = _FRAME_HEAD.pack(width, _HAS_VALIDITY if bitmap else 0, code, 0, base, divisor)
    return pa.py_buffer(b"".join([head, bitmap, quotients.astype(_FRAME_CODES[code]).tobytes()]))


def decode_frame(body: pa.Buffer, n: int, what: str, path: str, at: int, *, native=_USE_MODULE) -> pa.Array:
    """The ``n`` values of a ``FRAME`` chunk's (decompressed) ``body``: exactly the bytes
    its ``FIXED`` form holds (``base + code x divisor`` modulo ``2 ** (8 x width)``,
    big-endian; zeros under absent rows).  Where the compiled kernels are built, one pass
    (``frame_values``, storage/_native/decode.c); the reference, whole-array NumPy steps
    (the bound, widen, multiply, add, the nulls, byte swap), where they are not.
    ``native``: the compiled module to use (None: the reference; by default
    :data:`storage.native.NATIVE`, looked up at each call)."""
    if native is _USE_MODULE:
        native = NATIVE
    width, flags, code, reserved, base, divisor = _head(body, _FRAME_HEAD, what, path, at)
    if flags & ~_HAS_VALIDITY or reserved or width not in _FRAME_WIDTHS:
        raise CorruptionError(f"{what} has a bad frame head (value width {width}, flags {flags})", path, at)
    if code not in _FRAME_CODES or code >= width:
        raise CorruptionError(f"{what} has codes of {code} bytes for values of {width}", path, at)
    if divisor == 0:
        raise CorruptionError(f"{what} has a divisor of 0", path, at)
    limit = 1 << (8 * width)
    if base >= limit or divisor >= limit:
        raise CorruptionError(f"{what} has a frame out of range of {width}-byte values", path, at)
    validity, pos = _validity(body, flags, _FRAME_HEAD.size, n)
    if body.size != pos + n * code:
        raise CorruptionError(f"{what} holds {body.size} bytes, {n} codes of {code} bytes need {pos + n * code}",
                              path, at)
    nulls = -1 if validity is not None else 0
    if native is not None:
        try:
            data = native.frame_values(body.slice(pos, n * code), code, n, width, base, divisor, validity,
                                       pa.allocate_buffer)
        except ValueError:  # the head was checked above: only a code past the frame is left to find
            raise CorruptionError(f"{what} has a code past the range of {width}-byte values", path, at) from None
        return pa.Array.from_buffers(_BINARY, n, [validity, fixed_offsets(n, width), data], nulls)
    codes = np.frombuffer(body, dtype=_FRAME_CODES[code], count=n, offset=pos)
    if n and int(codes.max()) * divisor >= limit:
        raise CorruptionError(f"{what} has a code past the range of {width}-byte values", path, at)
    utype = np.dtype(f"u{width}")
    out = codes.astype(utype)
    if divisor != 1:
        out *= utype.type(divisor)
    if base:
        out += utype.type(base)
    if validity is not None:  # FIXED holds zeros under absent rows
        out *= np.unpackbits(np.frombuffer(validity, np.uint8), count=n, bitorder="little")
    if _LITTLE_HOST:
        out.byteswap(inplace=True)
    return pa.Array.from_buffers(_BINARY, n, [validity, fixed_offsets(n, width), pa.py_buffer(out)], nulls)


ENCODERS = ((ChunkEncoding.LENGTHS, encode_lengths), (ChunkEncoding.DICT, encode_dict))
"""Candidates beyond the base encoding, in order of decode cost."""
