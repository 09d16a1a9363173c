"""The per-value decode routes of a scan: each one held to its reference.

* ``decimal_words`` (storage/_native/decode.c), the one-pass decimal decode, against
  ``DecimalCodec._short_column_py`` (NumPy) and value-by-value ``decode``: nulls,
  negatives, scale edges, values past the precision, sliced columns.
* ``dict_gather``, a ``DICT`` chunk's values, against Arrow's ``take`` of the
  dictionary (``take_dict``), and a chunk written by ``encode_dict`` read back
  through ``decode_dict``; a code past the dictionary fails the read.
* ``dict_fixed`` (entries of one width, no offsets summed) against the NumPy and
  Arrow expansion, whole, sliced and filtered columns, nulls; ``dict_bytes`` (a
  coded column's expanded bytes) against ``coded_bytes``.
* ``lengths_offsets`` (a ``LENGTHS`` chunk's lengths summed into offsets) against
  NumPy's cumsum, and a chunk whose lengths do not add up failing on both.
* The string route's ASCII check (``utf8_view``) and the fixed-width route of
  columns with no nulls (``dense_fixed_rows``: dates before 1970, out-of-range
  dates and timestamps, wrong widths) against value-by-value ``decode``.

The kernel tests use the built module itself, so they also run when
``REGIONSCAN_NATIVE=0`` turns it off for the engine; without a compiler the
references alone are checked.
"""

from __future__ import annotations

import datetime as dt
import importlib
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serde.codecs.binary_arrays import dense_fixed_rows, utf8_view
from serde.codecs.hbase_bytes import DateCodec, DecimalCodec, StringCodec, TimestampCodec
from serde.types import parse_type
from storage import native
from storage.errors import CorruptionError
from storage.kernels.cell_columns import coded_bytes
from storage.storefile._chunk_encodings import (decode_dict, decode_lengths, encode_dict, encode_lengths, expand_dict,
                                               expanded_size, gather_dict, take_dict)
from test_decimal_columns import _reference, columns

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: only the references exist
    BUILT = None

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PATHS = [None] + ([BUILT] if BUILT is not None else [])


def _same(a: pa.Array | None, b: pa.Array | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.type == b.type and a.to_pylist() == b.to_pylist() and a.null_count == b.null_count


# --- decimals -------------------------------------------------------------------------------


@SETTINGS
@given(columns(), st.integers(0, 11))
def test_decimal_kernel_equals_its_numpy_reference(column, cut):
    """The compiled one-pass decode and the NumPy one agree on every column (None where either
    leaves it to the general path), whole and sliced at any bit of the validity bitmap."""
    type_name, cells = column
    codec = DecimalCodec(parse_type(type_name))
    if codec.precision > 18:
        return
    arr = pa.array(cells, pa.binary())
    for piece in (arr, arr.slice(min(cut, len(arr)))):
        if not len(piece):
            continue
        want = codec._short_column_py(piece)
        for path in PATHS:
            assert _same(codec._short_column(piece, native=path), want)


@pytest.mark.parametrize("type_name", ["decimal(15,2)", "decimal(18,0)", "decimal(1,0)", "decimal(18,18)"])
def test_decimal_edges_decode_as_reference(type_name):
    """Negative values, one-byte and eight-byte unscaled values, the precision's extremes and
    nulls at odd positions decode like ``decode`` on both paths; one value past the precision
    or at another scale hands the column to the general path (same answer, same bad rows)."""
    codec = DecimalCodec(parse_type(type_name))
    top = 10 ** codec.precision - 1
    unscaled = [u for u in (0, 1, -1, 127, -128, 128, -129, 255, -256, top, -top, top // 3, -(top // 7))
                if abs(u) <= top]
    values = [Decimal(u).scaleb(-codec.scale) for u in unscaled]
    cells = [codec.encode(v) for v in values]
    cells = cells[:3] + [None] + cells[3:6] + [None, None] + cells[6:]
    arr = pa.array(cells, pa.binary())
    want, _ = _reference(codec, cells)
    for path in PATHS:
        for piece, part in ((arr, want), (arr.slice(5), want[5:])):
            got = codec._short_column(piece, native=path)
            assert got is not None and got.to_pylist() == part and got.null_count == part.count(None)
    past = (codec.scale).to_bytes(4, "big", signed=True) + (top + 1).to_bytes(8, "big", signed=True)
    other_scale = (codec.scale + 1).to_bytes(4, "big", signed=True) + b"\x05"
    for odd in (past, other_scale):
        column = pa.array(cells + [odd], pa.binary())
        for path in PATHS:
            assert codec._short_column(column, native=path) is None
        got, bad = codec.decode_array(column)
        want_all, want_bad = _reference(codec, cells + [odd])
        assert got.to_pylist() == want_all
        assert (list(bad) if bad is not None else [False] * len(want_bad)) == want_bad


def test_decimal_kernel_rejects_bad_arguments_in_one_line():
    if BUILT is None:  # no compiler at install: the engine runs the reference, nothing to refuse
        assert native.NATIVE is None
        return
    offsets = np.zeros(3, np.int32)
    out = np.empty(4, np.int64)
    with pytest.raises(ValueError, match="offsets: .* fewer than offset"):
        BUILT.decimal_words(offsets, None, None, 1, 2, 2, 15, out)
    with pytest.raises(ValueError, match="out: 32 bytes, 3 rows need 48"):
        BUILT.decimal_words(np.zeros(4, np.int32), None, None, 0, 3, 2, 15, out)
    with pytest.raises(ValueError, match="precision must be 1..18, got 19"):
        BUILT.decimal_words(offsets, None, None, 0, 2, 2, 19, out)
    with pytest.raises(ValueError, match="out must be a writable"):
        BUILT.decimal_words(offsets, None, None, 0, 2, 2, 15, bytes(32))


# --- dictionary chunks ----------------------------------------------------------------------


@st.composite
def dictionaries(draw):
    entries = draw(st.lists(st.binary(max_size=90), min_size=1, max_size=300, unique=True))
    width = 1 if len(entries) <= 256 and draw(st.booleans()) else 2
    n = draw(st.integers(0, 200))
    codes = draw(st.lists(st.integers(0, len(entries) - 1), min_size=n, max_size=n))
    nulls = draw(st.lists(st.booleans(), min_size=n, max_size=n)) if draw(st.booleans()) else None
    return entries, width, codes, nulls


def _dict_parts(entries, width, codes, nulls):
    offsets = np.zeros(len(entries) + 1, np.uint32)
    np.cumsum([len(e) for e in entries], out=offsets[1:])
    code_buf = pa.py_buffer(np.array(codes, dtype=np.uint8 if width == 1 else "<u2").tobytes())
    validity = None
    if nulls is not None:
        validity = pa.py_buffer(np.packbits(~np.array(nulls, dtype=bool), bitorder="little").tobytes())
    return pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(entries)), code_buf, validity


@SETTINGS
@given(dictionaries())
def test_dict_gather_equals_arrows_take(case):
    """Short entries (copied as words), long ones (over 64 bytes), empty ones, one- and two-byte
    codes and nulls: the compiled gather builds the column Arrow's take builds."""
    entries, width, codes, nulls = case
    parts = _dict_parts(entries, width, codes, nulls)
    want = take_dict(parts[0], parts[1], parts[2], width, parts[3], len(codes))
    expect = [None if nulls is not None and nulls[i] else entries[c] for i, c in enumerate(codes)]
    assert want.to_pylist() == expect
    for path in PATHS:
        got = gather_dict(parts[0], parts[1], parts[2], width, parts[3], len(codes), native=path)
        got.validate(full=True)
        assert got.to_pylist() == expect and got.null_count == want.null_count


@SETTINGS
@given(st.lists(st.one_of(st.none(), st.sampled_from([b"AIR", b"REG AIR", b"MAIL", b"", b"DELIVER IN PERSON",
                                                     b"\xff" * 70, b"TAKE BACK RETURN"])), min_size=1, max_size=300))
def test_a_dict_chunk_reads_back_what_was_written(values):
    """``encode_dict`` then ``decode_dict`` (the scan's route) gives the column back, nulls included."""
    arr = pa.array(values, pa.binary())
    body = encode_dict(arr)
    if body is None:  # too many distinct values for a dictionary: the writer picks another encoding
        return
    got = decode_dict(body, len(values), "value chunk", "t.sf", 0)
    got.validate(full=True)
    assert got.to_pylist() == values


@st.composite
def fixed_dictionaries(draw):
    """A dictionary chunk whose entries are one width (1 to 40 bytes: a row copied as one word of
    8 or 16 bytes, or by a copy of its width), its codes of one or two bytes (a dictionary of
    more than 256 entries), maybe nulls whose codes are 0, as a block's coded column: the whole
    chunk, a slice or a filter of it."""
    w = draw(st.sampled_from([1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 24, 40]))
    count = draw(st.integers(1, 300 if w >= 2 else 256))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    entries = sorted({bytes(rng.integers(0, 256, w, dtype=np.uint8)) for _ in range(count)})
    n = draw(st.integers(0, 400))
    values = [entries[i] for i in rng.integers(0, len(entries), n)]
    if draw(st.booleans()):
        values = [None if rng.random() < 0.2 else v for v in values]
    column = pa.array(values, pa.binary())
    encoded = pa.chunked_array([column]).dictionary_encode().chunk(0) if n else None
    if encoded is None or len(encoded.dictionary) == 0:
        return column, None
    d = len(encoded.dictionary)
    codes = encoded.indices.cast(pa.uint8() if d <= 256 else pa.uint16()).fill_null(0)
    coded = pa.DictionaryArray.from_arrays(pa.array(codes.to_numpy(), mask=np.asarray(column.is_null())),
                                           encoded.dictionary)
    cut = draw(st.sampled_from(["whole", "slice", "filter"]))
    if cut == "slice":
        lo = int(rng.integers(0, n))
        column, coded = column.slice(lo), coded.slice(lo)
    elif cut == "filter":
        keep = pa.array(rng.random(n) < 0.5)
        column, coded = column.filter(keep), coded.filter(keep)
    return column, coded


@SETTINGS
@given(fixed_dictionaries())
def test_dict_fixed_expands_as_the_reference(case):
    """Entries of one width: the compiled ``dict_fixed`` (a row one copy of a constant size) and
    the reference (NumPy's and Arrow's takes) expand to the column that was encoded, and both
    count its bytes (``expanded_size``) as the plain column holds them."""
    column, coded = case
    if coded is None:
        return
    for path in PATHS:
        got = expand_dict(coded, native=path)
        got.validate(full=True)
        assert got.to_pylist() == column.to_pylist() and got.null_count == column.null_count
        assert expanded_size(coded, native=path) == got.get_total_buffer_size() - got.offset * 4


@SETTINGS
@given(dictionaries())
def test_dict_bytes_counts_what_the_reference_counts(case):
    """Entries of any widths, codes of one or two bytes: ``dict_bytes`` sums the entries' lengths
    over the rows as ``coded_bytes`` (a count of each code, weighed) does; ``dict_fixed``
    answers None unless every entry has one width."""
    entries, width, codes, _ = case
    parts = _dict_parts(entries, width, codes, None)
    lengths = np.array([len(e) for e in entries], np.int64)
    want = coded_bytes(np.array(codes, np.uint16), lengths)
    assert want == sum(len(entries[c]) for c in codes)
    if BUILT is None:  # no compiler at install: the reference alone
        assert native.NATIVE is None
        return
    assert BUILT.dict_bytes(parts[0], parts[2], width, len(codes)) == want
    fixed = BUILT.dict_fixed(parts[0], parts[1], parts[2], width, len(codes), pa.allocate_buffer)
    if len({len(e) for e in entries}) == 1 and len(entries[0]):
        data, w = fixed
        assert w == len(entries[0]) and data.to_pybytes()[: w * len(codes)] == b"".join(entries[c] for c in codes)
    else:
        assert fixed is None


def test_dict_fixed_and_dict_bytes_check_codes_and_offsets():
    if BUILT is None:  # no compiler at install: the engine runs the reference, nothing to refuse
        assert native.NATIVE is None
        return
    entries, offsets = pa.py_buffer(b"abcd"), pa.py_buffer(np.array([0, 2, 4], np.uint32).tobytes())
    with pytest.raises(ValueError, match="codes: row 1 has code 2, the dictionary has 2 entries"):
        BUILT.dict_fixed(offsets, entries, bytes([0, 2]), 1, 2, pa.allocate_buffer)
    with pytest.raises(ValueError, match="codes: row 2 has code 7, the dictionary has 2 entries"):
        BUILT.dict_bytes(offsets, bytes([1, 0, 7]), 1, 3)
    with pytest.raises(ValueError, match="codes: row 1 has code 300, the dictionary has 2 entries"):
        BUILT.dict_fixed(offsets, entries, np.array([1, 300], "<u2").tobytes(), 2, 2, pa.allocate_buffer)
    bad = pa.py_buffer(np.array([0, 3, 9], np.uint32).tobytes())
    with pytest.raises(ValueError, match=r"entries \[0, 9\) are not within the 4 entry bytes"):
        BUILT.dict_fixed(bad, entries, bytes([0, 1]), 1, 2, pa.allocate_buffer)
    backwards = pa.py_buffer(np.array([0, 3, 1], np.uint32).tobytes())
    with pytest.raises(ValueError, match=r"entry 1 \[3, 1\) goes backwards"):
        BUILT.dict_bytes(backwards, bytes([0, 1]), 1, 2)
    with pytest.raises(ValueError, match="codes: 1 bytes, 2 rows of 1 bytes need 2"):
        BUILT.dict_fixed(offsets, entries, bytes([0]), 1, 2, pa.allocate_buffer)
    with pytest.raises(ValueError, match="code_width must be 1 or 2, got 4"):
        BUILT.dict_bytes(offsets, bytes(8), 4, 2)
    mixed = pa.py_buffer(np.array([0, 1, 4], np.uint32).tobytes())
    assert BUILT.dict_fixed(mixed, entries, bytes([0, 1]), 1, 2, pa.allocate_buffer) is None


@SETTINGS
@given(st.lists(st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=250, max_size=400)), min_size=1,
                max_size=300), st.integers(-3, 3))
def test_lengths_offsets_read_a_lengths_chunk_as_the_reference(values, damage):
    """Lengths of one byte and of two (a value past 255 bytes), absent rows (no bytes): the
    compiled sum into offsets and NumPy's cumsum read the column back alike; a chunk whose
    lengths do not add up to its bytes fails on both paths naming it."""
    column = pa.array(values, pa.binary())
    body = encode_lengths(column)
    if body is None:  # no present value: the writer stores another encoding
        return
    for path in PATHS:
        got = decode_lengths(body, len(values), "value chunk", "t.sf", 0, native=path)
        got.validate(full=True)
        assert got.to_pylist() == values
    if damage:
        raw = bytearray(body.to_pybytes())
        first = 8 + (-(-((len(values) + 7) // 8) // 8) * 8 if column.null_count else 0)  # past head and bitmap
        raw[first] = (raw[first] + damage) % 256  # the first row's length (its low byte)
        for path in PATHS:
            with pytest.raises(CorruptionError, match="value chunk lengths add up to .* bytes, it holds"):
                decode_lengths(pa.py_buffer(bytes(raw)), len(values), "value chunk", "t.sf", 0, native=path)


def test_lengths_offsets_refuses_bad_arguments_in_one_line():
    if BUILT is None:  # no compiler at install: the engine runs the reference, nothing to refuse
        assert native.NATIVE is None
        return
    out = np.zeros(4, np.int32)
    assert BUILT.lengths_offsets(bytes([3, 0, 255]), 1, 3, out) == 258 and out.tolist() == [0, 3, 3, 258]
    with pytest.raises(ValueError, match="lengths: 2 bytes, 3 rows of 1 bytes need 3"):
        BUILT.lengths_offsets(bytes([3, 0]), 1, 3, out)
    with pytest.raises(ValueError, match="width must be 1 or 2, got 4"):
        BUILT.lengths_offsets(bytes(12), 4, 3, out)
    with pytest.raises(ValueError, match="out: 8 bytes hold fewer than n \\+ 1 = 4 int32"):
        BUILT.lengths_offsets(bytes([1, 2, 3]), 1, 3, np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="out must be a writable contiguous buffer, got bytes"):
        BUILT.lengths_offsets(bytes([1, 2, 3]), 1, 3, bytes(16))


def test_dict_gather_checks_codes_and_offsets():
    if BUILT is None:  # no compiler at install: the engine runs the reference, nothing to refuse
        assert native.NATIVE is None
        return
    entries, offsets = pa.py_buffer(b"abcd"), pa.py_buffer(np.array([0, 2, 4], np.uint32).tobytes())
    out = np.empty(3, np.int32)
    with pytest.raises(ValueError, match="codes: row 1 has code 2, the dictionary has 2 entries"):
        BUILT.dict_gather(offsets, entries, bytes([0, 2]), 1, None, 0, 2, out, pa.allocate_buffer)
    bad = pa.py_buffer(np.array([0, 3, 9], np.uint32).tobytes())
    with pytest.raises(ValueError, match="entry 1 .* not within the 4 entry bytes"):
        BUILT.dict_gather(bad, entries, bytes([0, 1]), 1, None, 0, 2, out, pa.allocate_buffer)
    with pytest.raises(ValueError, match="code_width must be 1 or 2, got 4"):
        BUILT.dict_gather(offsets, entries, bytes(8), 4, None, 0, 2, out, pa.allocate_buffer)


def test_a_dict_chunk_with_a_code_past_its_dictionary_fails_the_read():
    """A damaged code is a CorruptionError naming the file, never a value."""
    body = bytearray(encode_dict(pa.array([b"AIR", b"MAIL", b"AIR", b"RAIL"] * 4, pa.binary())).to_pybytes())
    body[-1] = 200  # the last code, past the 3 entries
    with pytest.raises(CorruptionError, match="code out of range.*t.sf"):
        decode_dict(pa.py_buffer(bytes(body)), 16, "value chunk", "t.sf", 0)


# --- strings and fixed-width values ---------------------------------------------------------


def test_ascii_strings_are_viewed_and_others_validated():
    """ASCII columns are viewed as strings without a copy; UTF-8 beyond ASCII and invalid bytes
    take the validating cast, invalid rows come back bad; a slice is judged by its own bytes."""
    codec = StringCodec(parse_type("string"))
    ascii_col = pa.array([b"AIR", None, b"", b"TAKE BACK RETURN"], pa.binary())
    view = utf8_view(ascii_col)
    assert view is not None and view.buffers()[2].address == ascii_col.buffers()[2].address
    assert codec.decode_array(ascii_col)[0].to_pylist() == ["AIR", None, "", "TAKE BACK RETURN"]
    accented = pa.array(["caf\u00e9".encode(), b"ok"], pa.binary())
    assert utf8_view(accented) is None
    assert codec.decode_array(accented)[0].to_pylist() == ["caf\u00e9", "ok"]
    invalid = pa.array([b"ok", b"\xff\xfe", b"fine"], pa.binary())
    got, bad = codec.decode_array(invalid)
    assert got.to_pylist() == ["ok", None, "fine"] and list(bad) == [False, True, False]
    mixed = pa.array(["\u00e9t\u00e9".encode(), b"plain", b"text"], pa.binary()).slice(1)
    assert utf8_view(mixed) is not None and codec.decode_array(mixed)[0].to_pylist() == ["plain", "text"]


@pytest.mark.parametrize("ordered", [False, True])
def test_dates_and_timestamps_decode_as_reference(ordered):
    """Dates before 1970 (floor division of negative milliseconds), the calendar's ends, a value
    past them (the general path marks it bad), nulls and a wrong width, each like ``decode``."""
    dates = DateCodec(parse_type("date"), ordered)
    stamps = TimestampCodec(parse_type("timestamp"), ordered)
    days = [dt.date(1969, 12, 31), dt.date(1900, 2, 28), dt.date(1, 1, 1), dt.date(9999, 12, 31),
            dt.date(1970, 1, 1), dt.date(1998, 12, 1)]
    times = [dt.datetime(1969, 12, 31, 23, 59, 59, 999000), dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59),
             dt.datetime(2000, 2, 29, 12, 30, 1, 5000)]
    for codec, values in ((dates, days), (stamps, times)):
        cells = [codec.encode(v) for v in values]
        dense = pa.array(cells, pa.binary())
        assert dense_fixed_rows(dense, 8) is not None
        got, bad = codec.decode_array(dense)
        assert bad is None and got.to_pylist() == values
        far = codec._long.encode(2 ** 62)  # an 8-byte value past year 9999
        for odd in ([*cells, far], [*cells, None], [*cells, b"\x00\x01"]):
            column = pa.array(odd, pa.binary())
            got, bad = codec.decode_array(column)
            want, want_bad = _reference(codec, odd)
            assert got.to_pylist() == want
            assert (list(bad) if bad is not None else [False] * len(odd)) == want_bad
        assert dense_fixed_rows(pa.array([*cells, None], pa.binary()), 8) is None
        assert dense_fixed_rows(pa.array([b"\x00" * 7, b"\x00" * 9], pa.binary()), 8) is None


@SETTINGS
@given(st.sampled_from([[8, 4], [3, 9], [5, 7], [1, 2, 4]]), st.lists(st.binary(min_size=0, max_size=1), max_size=80),
       st.randoms(use_true_random=False))
def test_a_full_width_composite_key_splits_as_the_general_path(widths, extra, rnd):
    """Keys that all have the full width are split by strided copies; the same keys with a key of
    another width beside them go the general way, and both give the same parts for the keys in
    common (a short key is marked as not fitting)."""
    from serde.rowkey import CompositeKey

    key = CompositeKey([f"p{i}" for i in range(len(widths))], widths)
    total = sum(widths)
    keys = [bytes(rnd.getrandbits(8) for _ in range(total)) for _ in range(len(extra) + 1)]
    fast, bad = key.split_array(pa.array(keys, pa.binary()))
    assert not bad.any()
    general, general_bad = key.split_array(pa.array(keys + [b"\x01"], pa.binary()))
    assert list(general_bad) == [False] * len(keys) + [True]
    for part, whole, width, start in zip(fast, general, widths, np.cumsum([0] + widths)):
        assert part.to_pylist() == whole.to_pylist()[: len(keys)] == [k[start:start + width] for k in keys]
