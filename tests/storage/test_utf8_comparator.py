"""``utf8:`` comparisons over whole arrays: the ASCII check settles most columns without Arrow's
UTF-8 validation, and the answer (mask, or the value that fails) is the per-value predicate's."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from storage.errors import InvalidArgument
from storage.filters import (BinaryComparator, BinaryPrefixComparator, RegexStringComparator, SingleColumnValueFilter,
                             SubstringComparator, Utf8Comparator)
from storage.filters._text import quote
from storage.filters.comparators import NotUtf8, check_utf8, comparator_from_string
from storage.filters.parser import parse_filter_string

_VALUES = st.one_of(
    st.none(),
    st.binary(max_size=6),  # mostly not UTF-8
    st.text(alphabet="abcXYZ -", max_size=6).map(str.encode),  # ASCII
    st.text(alphabet="aé中😀", max_size=4).map(str.encode),  # valid, not ASCII
)


def _first_bad(values: list) -> int | None:
    for i, v in enumerate(values):
        if v is not None:
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                return i
    return None


@settings(max_examples=300, deadline=None)
@given(st.lists(_VALUES, max_size=12), st.integers(0, 3), st.integers(0, 3), st.booleans(), st.sampled_from(
    ["=", "<", ">=", "!="]))
def test_mask_agrees_with_the_predicate_or_names_the_first_bad_value(values, lo, cut, large, op):
    array = pa.array(values, pa.large_binary() if large else pa.binary())
    lo = min(lo, len(values))
    part = array.slice(lo, max(len(values) - lo - cut, 0))  # the bytes around the slice must not count
    seen = values[lo: lo + len(part)]
    comparator = Utf8Comparator(BinaryComparator(b"abc"))
    bad = _first_bad(seen)
    if bad is None:
        test = comparator.predicate(op)
        assert comparator.mask(part, op).tolist() == [v is not None and test(v) for v in seen]
    else:
        with pytest.raises(NotUtf8) as caught:
            comparator.mask(part, op)
        assert caught.value.position == bad and caught.value.value == seen[bad]


def test_bytes_under_a_null_slot_are_not_checked():
    """A null slot may cover bytes (Arrow allows it); they are no value, so not refused."""
    offsets = np.array([0, 3, 5, 8], dtype=np.int32)
    data = b"abc\xff\xfexyz"
    validity = pa.array([True, False, True]).buffers()[1]
    array = pa.Array.from_buffers(pa.binary(), 3, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], 1)
    check_utf8(array)
    assert Utf8Comparator(BinaryComparator(b"xyz")).mask(array, "=").tolist() == [False, False, True]


def test_a_filtered_scan_of_text_with_and_without_ascii(tmp_path):
    """The dense scan path: rows of valid text (ASCII and not) filter as a read filtered
    afterwards would; a cell that is not UTF-8 fails the scan, naming its row and column."""
    words = ["AIR", "AIR REG", "MAIL", "café", "中文", "SHIP"]
    with storage.connect(str(tmp_path)) as conn:
        table = conn.create_table("t", {"cf": {}}, settings={"wal_sync": "none"})
        with table.batch() as batch:
            for j in range(400):
                cells = {b"cf:n": j.to_bytes(4, "big")}
                if j % 9:
                    cells[b"cf:mode"] = words[j % len(words)].encode()
                batch.put(f"r{j:04d}".encode(), cells)
        table.flush()
        for word in ("AIR", "café"):
            flt = SingleColumnValueFilter("cf", "mode", "=", Utf8Comparator(BinaryComparator(word.encode())),
                                          filter_if_missing=True)
            got = [r[0] for r in table.scan(filter=flt)]
            want = [f"r{j:04d}".encode() for j in range(400) if j % 9 and words[j % len(words)] == word]
            assert got == want and want
        table.put(b"r0100", {b"cf:mode": b"\xc3("})
        table.flush()
        flt = SingleColumnValueFilter("cf", "mode", "=", Utf8Comparator(BinaryComparator(b"AIR")),
                                      filter_if_missing=True)
        with pytest.raises(NotUtf8, match="r0100"):
            list(table.scan_batches(columns=[b"cf:n"], filter=flt))


@pytest.mark.parametrize("inner", [BinaryComparator(b"\xff"), BinaryComparator(b"caf\xc3"),
                                   BinaryPrefixComparator(b"a\xffb"), SubstringComparator(b"\xfe"),
                                   RegexStringComparator(b"A\xff?")])
def test_an_inner_value_that_is_not_utf8_compares_its_bytes(inner):
    """Only the tested values must be text: the comparator's own value is bytes, and its
    filter-language form carries the bytes that are not UTF-8 as ``_text`` does everywhere."""
    comparator = Utf8Comparator(inner)
    assert comparator.inner == inner and comparator.value == inner.to_string().encode("utf-8", "surrogateescape")
    assert comparator_from_string(comparator.to_string()) == comparator == Utf8Comparator(inner.to_string())
    text = f"ValueFilter(=, {quote(b'utf8:' + comparator.value)})"
    for text in (text, text.encode("utf-8", "surrogateescape")):  # the parser takes both
        parsed = parse_filter_string(text)
        assert parsed.comparator == comparator and parse_filter_string(repr(parsed)) == parsed
    values = [b"AIR", b"caf\xc3\xa9", b"", b"\xe4\xb8\xad"]
    for op in ("<", "=", ">="):
        test = inner.predicate(op)
        assert comparator.mask(pa.array(values, pa.binary()), op).tolist() == list(map(test, values))
        assert list(map(comparator.predicate(op), values)) == list(map(test, values))


@pytest.mark.parametrize("spec", ["\ud800", "binary:\ud800", "utf8:binary:a\udbff"])
def test_a_lone_surrogate_that_is_no_byte_is_refused_in_one_line(spec):
    with pytest.raises(InvalidArgument, match="lone surrogate") as caught:
        Utf8Comparator(spec) if not spec.startswith("utf8:") else comparator_from_string(spec)
    assert "\n" not in str(caught.value)
    with pytest.raises(InvalidArgument, match="lone surrogate"):
        parse_filter_string(f"ValueFilter(=, 'utf8:{spec}')")
