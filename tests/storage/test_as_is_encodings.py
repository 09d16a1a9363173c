"""A narrower encoding stored as is against a wider one compressed (``_block_v3.AS_IS_WITHIN``).

* in a zstd or lz4 file, a value chunk whose narrowest form (here 8-byte integers as 2-byte
  FRAME codes) has at most ``AS_IS_WITHIN`` times the bytes the codec keeps of the form it
  stores smallest (the 8-byte FIXED values) is written in the narrow form, as is; one beyond
  the factor keeps the compressed wide form: checked chunk by chunk against the codec, on
  both sides of the factor;
* the rule is left out of files whose codec has no magic (none, snappy, gzip);
* every column reads back equal on the scan, column and point paths, mapped and read.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import storage.storefile._block_v3 as block_v3
from storage.storefile import StoreFileReader, StoreFileWriter
from storage.storefile._chunk_encodings import encode_frame
from storage.storefile.codecs import get_codec
from storage.storefile.format import ChunkEncoding
from storage.vfs.fs import MMAP_ENV, FileSystem

N = 5700
ROWS = [b"r%06d" % i for i in range(N)]
COLUMNS = {
    # step 3 from a base: 2-byte codes, 1.87 times what zstd keeps of the 8-byte values in a
    # block of 950 rows (within the factor: taken as is)
    b"near": [(i * 3 + (1 << 40)).to_bytes(8, "big") for i in range(N)],
    # each value twice: zstd keeps half as much of the 8-byte values, the codes are still 2
    # bytes (3.5 times: the values stay compressed)
    b"far": [(i // 2 * 3 + (1 << 40)).to_bytes(8, "big") for i in range(N)],
    # a scramble of multiples of 1013: 2-byte codes, narrower than zstd keeps of the values
    b"mixed": [((i * 2654435761 >> 7) % 10007 * 1013).to_bytes(8, "big") for i in range(N)],
}
GROUP_BYTES = 1 << 17  # row groups (and blocks) of this many bytes: six blocks of 950 rows


def _write(fs: FileSystem, name: str, compression) -> None:
    w = StoreFileWriter(fs, name, family=b"cf", compression=compression, block_size=GROUP_BYTES,
                        row_group_size=GROUP_BYTES)
    quals = sorted(COLUMNS)
    w.append_rows(pa.array(ROWS, pa.binary()), quals, [pa.array(COLUMNS[q], pa.binary()) for q in quals],
                  [pa.array([7] * N, pa.int64()) for _q in quals])
    w.finish()


def _value_chunks(r: StoreFileReader):
    """``(block, qualifier, directory entry, stored bytes)`` of every value chunk."""
    quals = sorted(COLUMNS)
    for i in range(r.block_count):
        for k, e in enumerate(r._index.chunks.entries(i)):
            if k:
                yield i, quals[k - 1], e, r._read(int(r._index.offsets[i]) + e[0], e[1]).to_pybytes()


def _block_values(r: StoreFileReader) -> list[dict]:
    """Each block's values of each column, in block order."""
    blocks = []
    for part in r.scan_parts():
        d = part.dense
        blocks.append({q: d.value(j) for j, q in enumerate(d.qualifiers)})
    assert len(blocks) == r.block_count
    return blocks


def _wide_and_narrow(values: pa.Array, codec) -> tuple[int, int]:
    """``(bytes the codec keeps of the FIXED form, raw bytes of the FRAME form)`` of a block's values."""
    fixed, enc, *_ = block_v3._encode_values(values)
    assert enc == ChunkEncoding.FIXED
    frame = encode_frame(np.frombuffer(fixed, dtype=np.uint8)[8:], 8, None, b"")
    return codec.compress(fixed).size, frame.size


def _reads_back(r: StoreFileReader) -> None:
    r.check()
    for q, vals in COLUMNS.items():
        got = {}
        for part in r.scan_parts(columns=[q]):
            d = part.dense
            got.update(zip(d.rows.to_pylist(), d.value(d.qualifiers.index(q)).to_pylist()))
        assert got == dict(zip(ROWS, vals)), q
    for i in (0, 1234, N - 1):
        assert {c.qualifier: c.value for c in r.row_cells(ROWS[i])} == {q: v[i] for q, v in COLUMNS.items()}


@pytest.mark.parametrize("mapped", ["1", "0"])
@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_a_narrow_form_within_the_factor_is_stored_as_is(tmp_path, monkeypatch, compression, mapped):
    monkeypatch.setenv(MMAP_ENV, mapped)
    fs = FileSystem(str(tmp_path))
    _write(fs, "f.sf", compression)
    codec = get_codec(compression)
    with StoreFileReader(fs, "f.sf") as r:
        blocks = _block_values(r)
        kinds = {q: set() for q in COLUMNS}
        for i, q, e, stored in _value_chunks(r):
            as_is = e[1] == e[2] and stored[:4] != codec.magic
            wide, narrow = _wide_and_narrow(blocks[i][q], codec)
            if e[4] == ChunkEncoding.FIXED:
                # kept wide: compressed, and the codes would have been more than the factor allows
                assert not as_is and narrow > block_v3.AS_IS_WITHIN * wide, (i, q, wide, narrow)
            else:
                assert e[4] == ChunkEncoding.FRAME and e[2] == narrow, (i, q, e)
                # codes the codec does not halve go as is; none compressed when the wide form was
                # worth it within the factor
                assert as_is == (codec.compress(pa.py_buffer(stored)).size > block_v3.AS_IS_ABOVE * narrow
                                 or narrow <= block_v3.AS_IS_WITHIN * wide), (i, q, e, wide, narrow)
            kinds[q].add((int(e[4]), as_is))
        frame_as_is, fixed_packed = (int(ChunkEncoding.FRAME), True), (int(ChunkEncoding.FIXED), False)
        if compression == "zstd":
            # zstd keeps the wide values smaller than the codes: the rule alone decides between them
            assert kinds[b"near"] == {frame_as_is} and kinds[b"far"] == {fixed_packed}, kinds
        else:
            # lz4 does not shrink the step-3 values as much: the codes are the smaller form there
            assert kinds[b"near"] == {frame_as_is}, kinds
        _reads_back(r)


def test_the_factor_decides_on_both_sides(tmp_path, monkeypatch):
    """The same zstd chunks, the factor set just under and just over their measured ratio of
    narrow raw bytes to wide stored ones: compressed wide under it, narrow as is over it."""
    codec = get_codec("zstd")
    fs = FileSystem(str(tmp_path))
    _write(fs, "base.sf", "zstd")
    with StoreFileReader(fs, "base.sf") as r:
        ratios = [narrow / wide for wide, narrow in (_wide_and_narrow(b[b"near"], codec) for b in _block_values(r))]
    assert 1 < min(ratios) and max(ratios) <= block_v3.AS_IS_WITHIN, ratios
    for factor, want in ((0.99 * min(ratios), ChunkEncoding.FIXED), (1.01 * max(ratios), ChunkEncoding.FRAME)):
        monkeypatch.setattr(block_v3, "AS_IS_WITHIN", factor)
        name = f"f{factor:.3f}.sf"
        _write(fs, name, "zstd")
        with StoreFileReader(fs, name) as r:
            near = [(e, stored) for _i, q, e, stored in _value_chunks(r) if q == b"near"]
            assert {int(e[4]) for e, _s in near} == {int(want)}, factor
            assert all((e[1] == e[2] and s[:4] != codec.magic) == (want == ChunkEncoding.FRAME) for e, s in near)
            _reads_back(r)


@pytest.mark.parametrize("compression", [None, "snappy", "gzip"])
def test_files_of_codecs_without_a_magic_keep_the_rule_out(tmp_path, monkeypatch, compression):
    """No chunk of these files is as is but in a file of none, where all are; each file is byte
    for byte the one written with the factor at zero (no narrow form ever within it)."""
    fs = FileSystem(str(tmp_path))
    _write(fs, "f.sf", compression)
    monkeypatch.setattr(block_v3, "AS_IS_WITHIN", 0.0)
    _write(fs, "off.sf", compression)
    assert (tmp_path / "f.sf").read_bytes() == (tmp_path / "off.sf").read_bytes()
    with StoreFileReader(fs, "f.sf") as r:
        for i, q, e, _stored in _value_chunks(r):
            assert (e[1] == e[2]) == (compression is None), (i, q, e)
        _reads_back(r)
