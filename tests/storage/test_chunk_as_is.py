"""Version 3 value chunks stored as is (docs/formats/storefile.md, "Value chunks stored as is").

* the writer stores a value chunk as is exactly when its codec (zstd, lz4) does not at least
  halve it, never the key chunk, never in a file of none, snappy or gzip; every chunk reads
  back equal on the scan, column and point paths, mapped and read;
* a compressed chunk whose stored size equals its raw size (what an older writer may have
  written) begins with the codec's magic and is decompressed, not taken as is;
* a flipped byte in an as-is chunk is a checksum mismatch naming the file and the chunk; an
  as-is chunk that begins with the magic behind valid checksums (a writer's fault) does not
  decompress: a CorruptionError, never data; a reader that knows nothing of the rule fails
  the same way on an as-is chunk.
"""

from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest

import storage.storefile._block_v3 as block_v3
from storage.errors import CorruptionError
from storage.storefile import StoreFileReader, StoreFileWriter
from storage.storefile.codecs import BlockCodec, get_codec
from storage.storefile.format import BLOCK_V3_HEADER_SIZE, ChunkEncoding
from storage.vfs.fs import MMAP_ENV, FileSystem

N = 3000
MIX = [(i * 2654435761 >> 7) % 10007 for i in range(N)]  # a scramble: no period for a codec to find
ROWS = [b"r%06d" % i for i in range(N)]
COLUMNS = {
    b"dates": [((m * 7919) % 60000 * 86_400_000).to_bytes(8, "big") for m in MIX],  # FRAME codes, little to gain
    b"hash": [random.Random(i).randbytes(8) for i in range(N)],  # FIXED, incompressible
    b"mode": [(b"AIR", b"MAIL", b"SHIP", b"TRUCK", b"RAIL")[m % 5] for m in MIX],  # DICT: zstd shrinks it
    b"text": [b"note %d of the order" % (m * 31) for m in MIX],  # LENGTHS, repetitive: shrinks
    b"noise": [None if i % 7 == 2 else random.Random(-i).randbytes(5 + i % 20) for i in range(N)],
}


def _write(fs: FileSystem, name: str, compression) -> None:
    w = StoreFileWriter(fs, name, family=b"cf", compression=compression, row_group_size=200_000)
    quals = sorted(COLUMNS)
    w.append_rows(pa.array(ROWS, pa.binary()), quals, [pa.array(COLUMNS[q], pa.binary()) for q in quals],
                  [pa.array([None if v is None else 5 for v in COLUMNS[q]], pa.int64()) for q in quals])
    w.finish()


def _chunks(r: StoreFileReader):
    """``(block, chunk index, (offset, stored, raw, checksum, encoding, ...))`` of every chunk."""
    for i in range(r.block_count):
        for k, e in enumerate(r._index.chunks.entries(i)):
            yield i, k, e


def _stored_bytes(r: StoreFileReader, i: int, e) -> pa.Buffer:
    return r._read(int(r._index.offsets[i]) + e[0], e[1])


def _reads_back(r: StoreFileReader) -> None:
    r.check()
    got: dict = {}
    for part in r.scan_parts():
        d = part.dense
        for j, q in enumerate(d.qualifiers):
            got.setdefault(q, {}).update(zip(d.rows.to_pylist(), d.value(j).to_pylist()))
    for q, vals in COLUMNS.items():
        assert got[q] == dict(zip(ROWS, vals)), q
        one = {}
        for part in r.scan_parts(columns=[q]):
            d = part.dense
            one.update(zip(d.rows.to_pylist(), d.value(d.qualifiers.index(q)).to_pylist()))
        assert one == got[q], q
    assert {c.qualifier: c.value for c in r.row_cells(ROWS[1234])} == {
        q: v[1234] for q, v in COLUMNS.items() if v[1234] is not None}


@pytest.mark.parametrize("mapped", ["1", "0"])
@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_a_value_chunk_the_codec_does_not_halve_is_stored_as_is(tmp_path, monkeypatch, compression, mapped):
    monkeypatch.setenv(MMAP_ENV, mapped)
    fs = FileSystem(str(tmp_path))
    _write(fs, "f.sf", compression)
    codec = get_codec(compression)
    with StoreFileReader(fs, "f.sf") as r:
        assert r.block_count > 1
        as_is = set()
        for i, k, e in _chunks(r):
            stored = _stored_bytes(r, i, e).to_pybytes()
            if k == 0:  # the key chunk: always the codec's
                assert stored[:4] == codec.magic
                continue
            if e[1] == e[2] and stored[:4] != codec.magic:
                as_is.add(e[4])
                # the codec would have kept more than half of it
                assert codec.compress(pa.py_buffer(stored)).size > block_v3.AS_IS_ABOVE * e[2]
            else:
                assert stored[:4] == codec.magic and e[1] <= block_v3.AS_IS_ABOVE * e[2], (i, k, e[1], e[2])
        # the incompressible hashes and noise, the dates' narrow codes; zstd shrinks the rest
        want = {ChunkEncoding.FIXED, ChunkEncoding.FRAME, ChunkEncoding.LENGTHS}
        assert want <= as_is and (compression == "lz4" or ChunkEncoding.DICT not in as_is), as_is
        _reads_back(r)


@pytest.mark.parametrize("compression", [None, "snappy", "gzip"])
def test_files_of_other_codecs_keep_the_rule_out(tmp_path, compression):
    """No compression stores every chunk as is already; snappy and gzip chunks are compressed
    whatever they save (snappy has no magic, gzip's can begin a FIXED chunk)."""
    fs = FileSystem(str(tmp_path))
    _write(fs, "f.sf", compression)
    with StoreFileReader(fs, "f.sf") as r:
        for i, k, e in _chunks(r):
            assert (e[1] == e[2]) == (compression is None), (i, k, e[1], e[2])
        _reads_back(r)


def test_a_compressed_chunk_of_its_raw_size_is_decompressed(tmp_path, monkeypatch):
    """zstd output padded with a skippable frame to exactly the raw size (when smaller) and no
    chunk stored as is: compressed chunks of stored == raw, as an older writer could have
    written them by chance.  They begin with the magic: the reader decompresses them."""
    compress = BlockCodec.compress

    def padded(self, body, *, keys=False):
        out = compress(self, body, keys=keys)
        gap = body.size - out.size
        if self.name == "zstd" and gap >= 8:
            out = pa.py_buffer(out.to_pybytes() + struct.pack("<II", 0x184D2A50, gap - 8) + bytes(gap - 8))
        return out

    monkeypatch.setattr(BlockCodec, "compress", padded)
    monkeypatch.setattr(block_v3, "_store_as_is", lambda raw, stored, codec: False)
    fs = FileSystem(str(tmp_path))
    _write(fs, "f.sf", "zstd")
    monkeypatch.undo()
    with StoreFileReader(fs, "f.sf") as r:
        same = [(i, k) for i, k, e in _chunks(r) if k and e[1] == e[2]]
        assert len(same) >= r.block_count  # compressed chunks of their raw size, in every block
        _reads_back(r)


def _file_with_as_is(tmp_path) -> tuple[bytearray, list]:
    fs = FileSystem(str(tmp_path))
    _write(fs, "good.sf", "zstd")
    with StoreFileReader(fs, "good.sf") as r:
        magic = r._codec.magic
        found = [(int(r._index.offsets[i]), k, e) for i, k, e in _chunks(r)
                 if k and e[1] == e[2] and _stored_bytes(r, i, e).to_pybytes()[:4] != magic]
    return bytearray((tmp_path / "good.sf").read_bytes()), found


def _scan_all(tmp_path, data: bytes):
    (tmp_path / "bad.sf").write_bytes(bytes(data))
    with StoreFileReader(FileSystem(str(tmp_path)), "bad.sf") as r:
        for _ in r.scan_parts():
            pass


def test_a_flipped_byte_in_an_as_is_chunk_is_named(tmp_path):
    data, found = _file_with_as_is(tmp_path)
    offset, _k, e = found[0]
    data[offset + e[0] + e[1] // 2] ^= 0x10
    with pytest.raises(CorruptionError, match=rf"value chunk checksum mismatch in .*bad\.sf at offset {offset + e[0]}"):
        _scan_all(tmp_path, data)


def test_an_as_is_chunk_that_begins_with_the_magic_does_not_decompress(tmp_path, monkeypatch):
    """A writer's fault behind valid checksums: a FIXED chunk written as is but beginning with
    the magic (its width field overwritten).  Its stored size is its raw size, but it begins with
    the magic, so it reads as a compressed chunk, which it is not: the read fails naming it."""
    encode = block_v3._encode_values
    magic = get_codec("zstd").magic

    def faulty(values, codec=None):
        raw, enc, *rest = encode(values, codec)
        if enc == ChunkEncoding.FIXED and codec is not None:
            raw = pa.py_buffer(magic + raw.to_pybytes()[4:])
            return (raw, enc, *rest[:3], raw)
        return (raw, enc, *rest)

    monkeypatch.setattr(block_v3, "_encode_values", faulty)
    fs = FileSystem(str(tmp_path))
    _write(fs, "f.sf", "zstd")
    monkeypatch.undo()
    with StoreFileReader(fs, "f.sf") as r:
        at = [int(r._index.offsets[i]) + e[0] for i, k, e in _chunks(r) if e[4] == ChunkEncoding.FIXED]
        assert at
        with pytest.raises(CorruptionError, match=rf"value chunk does not decompress .*f\.sf at offset {at[0]}"):
            for _ in r.scan_parts(columns=[b"hash"]):
                pass


def test_a_reader_without_the_rule_fails_on_an_as_is_chunk_never_with_data(tmp_path, monkeypatch):
    _file_with_as_is(tmp_path)
    monkeypatch.setattr(block_v3, "_as_is", lambda stored, entry, codec: False)
    with StoreFileReader(FileSystem(str(tmp_path)), "good.sf") as r:
        with pytest.raises(CorruptionError, match=r"value chunk does not decompress"):
            for _ in r.scan_parts():
                pass


def test_the_header_is_not_an_as_is_chunk(tmp_path):
    """Sanity of the layout the tests above rely on: chunk 0 starts right after the header."""
    _data, found = _file_with_as_is(tmp_path)
    assert found and all(e[0] > BLOCK_V3_HEADER_SIZE for _o, _k, e in found)
