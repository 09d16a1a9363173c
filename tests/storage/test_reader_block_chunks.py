"""A store file reader's per-block chunk facts: the value bounds its block index records
(``block_value_bounds``) and the qualifiers its key chunk names (``block_qualifiers``).

A compacted version 3 file of rows with a fixed-width column (bounds recorded) and, in some
rows only, a string column: the two methods together give, per block, the bounds of the chunk
that holds each qualifier, which must be what the reader's own ``chunk_stats`` reports; the
qualifier table alone is read and nothing is cached unless the keys are asked to be decoded.
"""

from __future__ import annotations

import struct

import pytest

import storage
from storage.errors import InvalidArgument

N = 1500


@pytest.fixture
def reader(tmp_path):
    with storage.connect(str(tmp_path / "root")) as conn:
        table = conn.create_table("t", {"cf": {"block_size": 2048}}, settings={"wal_sync": "none"})
        with table.batch() as b:
            for i in range(N):
                data = {b"cf:d": struct.pack(">Q", i)}
                if 500 <= i < 900:
                    data[b"cf:s"] = b"s%d" % (i % 7)
                b.put(b"r%05d" % i, data)
        table.flush()
        table.compact(major=True)
        (only,) = table.store_file_readers()
        assert only.format_version >= 3 and only.block_count > 4
        yield only


def test_bounds_of_the_chunk_each_qualifier_names_are_chunk_stats(reader):
    cache = reader.block_cache
    cache.evict_file(reader.file_id)  # the blocks the compaction left cached
    n = reader.block_count
    lows = {q: [] for q in (b"d", b"s", b"absent")}
    highs = {q: [] for q in lows}
    for i in range(n):
        bounds = reader.block_value_bounds(i)
        assert bounds is not None  # every block holds the fixed-width column
        quals = reader.block_qualifiers(i, decode_keys=False)
        assert len(quals) == len(bounds) and list(quals) == sorted(quals)
        for q in lows:
            lo, hi = bounds[quals.index(q)] if q in quals else (None, None)
            lows[q].append(lo)
            highs[q].append(hi)
    assert len(cache) == 0  # only qualifier tables read, nothing cached
    assert lows[b"d"][0] == struct.pack(">Q", 0) and highs[b"d"][-1] == struct.pack(">Q", N - 1)
    assert any(q is None for q in lows[b"s"]) and any(q is not None for q in lows[b"s"])
    for q in lows:
        assert (lows[q], highs[q]) == reader.chunk_stats(q), q  # chunk_stats decodes the key chunks


def test_decoded_keys_are_cached_and_then_answer(reader):
    cache = reader.block_cache
    cache.evict_file(reader.file_id)
    skipped = [reader.block_qualifiers(i, decode_keys=False) for i in range(reader.block_count)]
    assert len(cache) == 0
    decoded = [reader.block_qualifiers(i, decode_keys=True) for i in range(reader.block_count)]
    assert decoded == skipped and len(cache) == reader.block_count
    assert [reader.block_qualifiers(i, decode_keys=False) for i in range(reader.block_count)] == skipped


@pytest.mark.parametrize("i", [-1, "end"])
def test_a_block_out_of_range_is_a_one_line_error(reader, i):
    i = reader.block_count if i == "end" else i
    for call in (lambda: reader.block_value_bounds(i), lambda: reader.block_qualifiers(i, decode_keys=False)):
        with pytest.raises(InvalidArgument, match="out of range") as err:
            call()
        assert "\n" not in str(err.value)
