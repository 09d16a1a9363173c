"""Dictionary chunks carried as codes: filtered on their dictionary, expanded where rows pass.

A ``DICT`` value chunk is read into a :class:`~storage.storefile.dense.DenseBlock` as a
dictionary array (codes + entries).  Three things must hold:

* expanding it (whole, a slice, or the rows a filter keeps) gives the very values the
  plain decode gives;
* a comparator's answer computed on the dictionary's entries and taken by the codes
  equals its answer on the expanded values, for every comparator and operator, at every
  present row (a null row is an absent cell, which the dense path ignores);
* a filtered scan of a table holding such chunks returns what the memstore's cell
  kernels return, while the cached block keeps its codes and expands nothing whole.
"""

from __future__ import annotations

import importlib
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import storage
from storage.filters import (
    BinaryComparator,
    BinaryPrefixComparator,
    CompareOperator,
    FilterList,
    FilterListOperator,
    NullComparator,
    RegexStringComparator,
    SingleColumnValueFilter,
    SubstringComparator,
    Utf8Comparator,
)
from storage.filters.comparators import NotUtf8
from storage.errors import CorruptionError
from storage.storefile._chunk_encodings import _DICT_HEAD, decode_dict, dict_codes, encode_dict, expand_dict, expanded_size
from storage.storefile.dense_rows import dictionary_mask
from storage.storefile.format import ChunkEncoding

try:
    BUILT = importlib.import_module("storage._native_ext")
except ImportError:  # no C compiler at install: the reference alone
    BUILT = None
PATHS = [None] + ([BUILT] if BUILT is not None else [])

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def _coded(draw):
    """A binary column of few distinct values (fixed or mixed widths, maybe nulls) that the
    writer's ``DICT`` encoding takes, with its chunk body."""
    fixed = draw(st.booleans())
    width = draw(st.integers(1, 12))
    entry = st.binary(min_size=width, max_size=width) if fixed else st.binary(max_size=12)
    entries = draw(st.lists(entry, min_size=1, max_size=40, unique=True))
    n = draw(st.integers(2 * len(entries), 600))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    values = [entries[i] for i in rng.integers(0, len(entries), n)]
    if draw(st.booleans()):
        values = [None if rng.random() < 0.2 else v for v in values]
    column = pa.array(values, pa.binary())
    body = encode_dict(column)
    if body is None:  # too many distinct present values for the encoding
        body = encode_dict(pa.array([entries[0]] * n, pa.binary()))
        column = pa.array([entries[0]] * n, pa.binary())
    return column, body, rng


@SETTINGS
@given(_coded())
def test_codes_expand_to_the_plain_decode_whole_sliced_and_filtered(coded):
    column, body, rng = coded
    n = len(column)
    codes = dict_codes(body, n, "chunk", "f.sf", 0)
    assert isinstance(codes, pa.DictionaryArray) and len(codes.dictionary) <= n
    plain = decode_dict(body, n, "chunk", "f.sf", 0)
    assert plain.equals(column)
    assert expand_dict(codes).equals(plain)
    lo = int(rng.integers(0, n))
    hi = int(rng.integers(lo, n + 1))
    assert expand_dict(codes.slice(lo, hi - lo)).equals(plain.slice(lo, hi - lo))
    keep = pa.array(rng.random(n) < 0.3)
    assert expand_dict(codes.filter(keep)).equals(plain.filter(keep))
    assert expand_dict(codes.slice(lo, hi - lo).filter(keep.slice(lo, hi - lo))).equals(
        plain.slice(lo, hi - lo).filter(keep.slice(lo, hi - lo)))
    # what a block is charged for the plain column it may expand to: that column's buffers
    built = plain.get_total_buffer_size()
    assert abs(expanded_size(codes) - built) <= 64 + built // 10


_entries = st.sampled_from([b"", b"a", b"ab", b"AIR", b"AIR REG", b"MAIL", b"SHIP", b"TRUCK", b"\x00\xff", b"zz",
                            b"DELIVER IN PERSON", b"0.05", b"\x80\x00\x01"])
_patterns = st.sampled_from([b"a", b"AIR", b"", b"R", b"\xff", b"zz", b"MAIL"])
_comparators = st.one_of(
    _patterns.map(BinaryComparator),
    _patterns.map(BinaryPrefixComparator),
    _patterns.map(lambda p: SubstringComparator(p.decode("latin-1").lower())),
    st.sampled_from([rb"^AIR", rb"L$", rb"(?i)ship", rb"^$", rb"I.*R"]).map(RegexStringComparator),
    st.just(NullComparator(b"")),
    _patterns.filter(lambda p: p != b"\xff").map(lambda p: Utf8Comparator(BinaryComparator(p))),
)


@SETTINGS
@given(st.lists(_entries, min_size=1, max_size=8, unique=True), st.integers(0, 2**32 - 1), _comparators,
       st.sampled_from(list(CompareOperator)), st.booleans())
def test_a_comparison_on_the_dictionary_equals_it_on_the_values(entries, seed, comparator, op, nulls):
    rng = np.random.default_rng(seed)
    n = 3 * len(entries) + int(rng.integers(0, 200))
    values = [entries[i] for i in rng.integers(0, len(entries), n)]
    if nulls:
        values = [None if rng.random() < 0.25 else v for v in values]
    body = encode_dict(pa.array(values, pa.binary()))
    if body is None:
        return
    codes = dict_codes(body, n, "chunk", "f.sf", 0)
    present = np.array([v is not None for v in values])
    plain = expand_dict(codes)
    try:
        want = comparator.mask(plain, op)
    except NotUtf8:  # a used entry that is not UTF-8: the dictionary is not trusted to say so
        assert dictionary_mask(codes, op, comparator) is None
        return
    got = dictionary_mask(codes, op, comparator)
    if got is None:  # only an entry no present row uses may make it step aside
        assert isinstance(comparator, Utf8Comparator)
        return
    assert got.dtype == bool and len(got) == n
    assert (got[present] == np.asarray(want, dtype=bool)[present]).all()


def _pair(tmp_path):
    """The same rows in two tables: one flushed (its low-cardinality columns stored as DICT
    chunks), one left in the memstore (the cell kernels: the reference)."""
    rng = np.random.default_rng(7)
    modes = [b"AIR", b"AIR REG", b"MAIL", b"SHIP", b"TRUCK", b"RAIL", b"FOB"]
    tables = []
    for name in ("flushed", "memory"):
        conn = storage.connect(str(tmp_path / name))
        tables.append(conn.create_table("t", {"cf": {}}, settings={"wal_sync": "none"}))
    batch = {}
    for r in range(3000):
        data = {b"cf:mode": modes[int(rng.integers(0, len(modes)))],
                b"cf:n": b"%04d" % int(rng.integers(0, 10000))}
        if rng.random() < 0.9:
            data[b"cf:how"] = [b"DELIVER IN PERSON", b"NONE", b"COLLECT COD"][int(rng.integers(0, 3))]
        batch[b"r%05d" % r] = data
    for table in tables:
        for row, data in batch.items():
            table.put(row, data, timestamp=1000)
    tables[0].flush()
    return tables


def _rows(table, **kw) -> pa.Table | None:
    batches = list(table.scan_batches(**kw))
    return pa.Table.from_batches(batches).combine_chunks() if batches else None


def test_a_filtered_scan_reads_codes_and_expands_only_the_rows_that_pass(tmp_path):
    flushed, memory = _pair(tmp_path)
    (reader,) = flushed.store_file_readers()
    chunks = reader._index.chunks
    qualifiers = sorted([b"how", b"mode", b"n"])
    dict_columns = {q for k, q in enumerate(qualifiers)
                    if all(chunks.encoding[chunks.starts[i] + 1 + k] == ChunkEncoding.DICT
                           for i in range(reader.block_count))}
    assert {b"how", b"mode"} <= dict_columns  # the case this test is about
    ship_modes = FilterList(FilterListOperator.MUST_PASS_ONE, [
        SingleColumnValueFilter(b"cf", b"mode", CompareOperator.EQUAL, BinaryComparator(b"AIR")),
        SingleColumnValueFilter(b"cf", b"mode", CompareOperator.EQUAL, BinaryComparator(b"AIR REG"))])
    person = SingleColumnValueFilter(b"cf", b"how", CompareOperator.EQUAL, Utf8Comparator(BinaryComparator(b"DELIVER IN PERSON")),
                                     True, True)
    both = FilterList(FilterListOperator.MUST_PASS_ALL, [ship_modes, person])
    for flt in (ship_modes, person, both, "SingleColumnValueFilter ('cf', 'mode', >=, 'binary:RAIL')",
                "ValueFilter (=, 'substring:ai')"):
        for columns in ([b"cf:mode", b"cf:n"], [b"cf:n"], [b"cf:how", b"cf:mode", b"cf:n"]):
            got, want = _rows(flushed, columns=columns, filter=flt), _rows(memory, columns=columns, filter=flt)
            assert got == want, (flt, columns)
            assert got is not None or flt == "ValueFilter (=, 'substring:ai')"
    # the blocks the scans cached hold the dictionary columns as codes, never expanded whole
    parts = list(reader.scan_parts(columns=[b"mode", b"how"]))
    assert parts and all(isinstance(p.dense.column(qualifiers.index(b"mode")), pa.DictionaryArray) for p in parts)
    assert all(p.dense._plain[qualifiers.index(b"mode")] is None for p in parts)
    # a reader that asks for the plain column gets it, and the block's charge does not change
    dense = parts[0].dense
    charge = dense.footprint()
    plain = dense.value(qualifiers.index(b"mode"))
    assert plain.type == pa.binary() and plain.equals(expand_dict(dense.column(qualifiers.index(b"mode"))))
    assert dense.footprint() == charge
    assert dense.values[qualifiers.index(b"how")].type == pa.binary()


def test_a_value_that_is_not_utf8_still_fails_the_scan_naming_its_row(tmp_path):
    conn = storage.connect(str(tmp_path / "bad"))
    table = conn.create_table("t", {"cf": {}}, settings={"wal_sync": "none"})
    for r in range(400):
        table.put(b"r%04d" % r, {b"cf:m": b"\xffbad" if r == 321 else [b"AIR", b"SHIP"][r % 2]}, timestamp=5)
    table.flush()
    flt = SingleColumnValueFilter(b"cf", b"m", CompareOperator.EQUAL, Utf8Comparator(BinaryComparator(b"AIR")))
    with pytest.raises(NotUtf8, match="r0321"):
        _rows(table, columns=[b"cf:m"], filter=flt)


@SETTINGS
@given(_coded(), st.sampled_from([np.uint8, np.uint16, np.int32, np.uint64]))
def test_counted_bytes_of_codes_are_the_plain_values_bytes(coded, width):
    """``BYTES_IN_RESULTS`` and a block's charge count a coded column's bytes from its codes
    (:func:`coded_bytes`): exactly the bytes of its plain values, whole and sliced, whatever
    the codes' width."""
    from storage.read.scan_counting import _value_bytes
    from storage.kernels.cell_columns import coded_bytes

    column, body, rng = coded
    n = len(column)
    codes = dict_codes(body, n, "chunk", "f.sf", 0)
    plain = decode_dict(body, n, "chunk", "f.sf", 0)
    present = [v for v in plain.to_pylist() if v is not None]
    assert _value_bytes(codes) == _value_bytes(plain) == sum(map(len, present))
    lo = int(rng.integers(0, n))
    piece, plain_piece = codes.slice(lo, n - lo), plain.slice(lo, n - lo)
    assert _value_bytes(piece) == sum(len(v) for v in plain_piece.to_pylist() if v is not None)
    # a plain column of variable widths: its offsets, its validity and every present value's bytes
    lengths = np.array([len(e) for e in codes.dictionary.to_pylist()], np.int32)
    picked = np.array([i for i in codes.indices.to_pylist() if i is not None], width)
    assert coded_bytes(picked, lengths) == sum(map(len, present))
    if len(set(lengths)) > 1:
        validity = (n + 7) // 8 if plain.null_count else 0
        assert expanded_size(codes) == validity + 4 * (n + 1) + sum(map(len, present))


def _damaged_dict(change) -> pa.Buffer:
    """A DICT chunk of five entries of several widths, 40 rows, with ``change(offsets, codes)``
    applied to its dictionary offsets and codes (lists, written back in place)."""
    body = bytearray(encode_dict(pa.array([b"AIR", b"SHIP", b"MAIL", b"REG AIR", b"FOB"] * 8, pa.binary())).to_pybytes())
    d, flags, width, _ = _DICT_HEAD.unpack_from(body, 0)
    assert (d, flags, width) == (5, 0, 1)
    at = _DICT_HEAD.size
    offsets = list(struct.unpack_from("<6I", body, at))
    codes = list(body[-40:])
    change(offsets, codes)
    struct.pack_into("<6I", body, at, *offsets)
    body[-40:] = bytes(codes)
    return pa.py_buffer(bytes(body))


def _swap(offsets, codes):
    offsets[2], offsets[3] = offsets[3], offsets[2]


def _last_off(offsets, codes):
    offsets[-1] += 1


def _first_off(offsets, codes):
    offsets[0] = 1


def _code_past(offsets, codes):
    codes[17] = 5


@pytest.mark.parametrize("change,message", [
    (_swap, "dictionary offsets do not add up to its"),  # read as unsigned steps, these passed once
    (_last_off, "dictionary offsets do not add up to its"),
    (_first_off, "dictionary offsets do not add up to its"),
    (_code_past, "has a code out of range of its 5 dictionary entries"),
])
@pytest.mark.parametrize("path", PATHS, ids=lambda p: "reference" if p is None else "compiled")
def test_a_damaged_dictionary_fails_as_it_is_read_naming_the_chunk(change, message, path):
    """Offsets that go down, a first or last offset off, a code past the dictionary: the chunk
    fails when it is read (before any expansion could copy past its entries), in one line
    naming it, on both paths; the undamaged chunk reads back."""
    with pytest.raises(CorruptionError) as err:
        dict_codes(_damaged_dict(change), 40, "value chunk", "t/f.sf", 64, native=path)
    assert message in str(err.value) and "t/f.sf" in str(err.value) and "\n" not in str(err.value)
    whole = dict_codes(_damaged_dict(lambda o, c: None), 40, "value chunk", "t/f.sf", 64, native=path)
    assert expand_dict(whole).to_pylist() == [b"AIR", b"SHIP", b"MAIL", b"REG AIR", b"FOB"] * 8
