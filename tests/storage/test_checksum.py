"""The formats' CRC-32 (storage/checksum.py) against zlib's, the definition.

The checksum of every block, WAL record and manifest frame is zlib's CRC-32;
:func:`storage.checksum.crc32` may come from ISA-L, which must give the very
same value for every input and starting value, for every buffer type the
readers pass (bytes, memoryview slices of a mapping, pyarrow buffers), so
that files written with one implementation read with the other.
"""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from storage import checksum
from storage.errors import CorruptionError


def test_the_installed_implementation_is_named():
    assert checksum.IMPLEMENTATION in ("isal", "zlib")
    if checksum.IMPLEMENTATION == "isal":
        # the dependency is declared for this platform: it must be the one in use
        from isal.isal_zlib import crc32 as isal_crc32

        assert checksum.crc32 is isal_crc32


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=70_000), start=st.integers(0, 2**32 - 1), cut=st.integers(0, 70_000))
def test_same_values_as_zlib(data, start, cut):
    assert checksum.crc32(data) == zlib.crc32(data)
    assert checksum.crc32(data, start) == zlib.crc32(data, start)
    # continued over two parts, as the block writer chains its sections
    cut = min(cut, len(data))
    assert checksum.crc32(data[cut:], checksum.crc32(data[:cut])) == zlib.crc32(data)


def test_every_buffer_type_the_readers_pass():
    raw = bytes(range(256)) * 400
    for buf in (raw, memoryview(raw)[7:90_001], pa.py_buffer(raw), pa.py_buffer(raw).slice(3, 5000),
                bytearray(raw[:100]), np.frombuffer(raw, dtype=np.uint8)[10:20], b""):
        assert checksum.crc32(buf) == zlib.crc32(buf)


_USERS = (
    "storage.storefile.format", "storage.storefile._block_v2", "storage.storefile._key_runs",
    "storage.wal.format", "storage.wal.reader", "storage.region.framing",
)


def _use(monkeypatch, fn) -> None:
    """Every module that checksums a format computes with ``fn``."""
    import importlib

    for name in _USERS:
        monkeypatch.setattr(importlib.import_module(name), "crc32", fn)


@pytest.mark.parametrize("writer, reader", [("zlib", "installed"), ("installed", "zlib")])
def test_a_table_written_with_one_implementation_reads_with_the_other(tmp_path, monkeypatch, writer, reader):
    """Store files (dense and cell blocks, flushed and compacted), the WAL and the
    manifests, written under one implementation, read back whole under the other;
    then a flipped byte is still refused."""
    impl = {"zlib": zlib.crc32, "installed": checksum.crc32}
    root = str(tmp_path / "data")
    _use(monkeypatch, impl[writer])
    with storage.connect(root) as conn:
        table = conn.create_table("t", {"cf": {"max_versions": 2}}, split_keys=[b"r01500"])
        with table.batch() as batch:
            for i in range(3000):
                batch.put(b"r%05d" % i, {b"cf:a": b"v%05d" % i * 10, b"cf:b": b"%d" % i})
        table.flush()
        table.delete(b"r00007")
        table.put(b"r00008", {b"cf:a": b"newer"})
        table.flush()
        table.put(b"r00009", {b"cf:a": b"in the wal"})  # unflushed: replayed from the log
    _use(monkeypatch, impl[reader])
    with storage.connect(root) as conn:
        table = conn.table("t")
        rows = dict(table.scan())
        assert len(rows) == 2999 and b"r00007" not in rows
        assert rows[b"r00008"][b"cf:a"] == b"newer" and rows[b"r00009"][b"cf:a"] == b"in the wal"
        assert sum(b.num_rows for b in table.scan_batches(columns=[b"cf:a"])) == 2999
        assert table.count() == 2999  # the keys-only run reader checks its headers in bulk
        table.compact(major=True)
    files = sorted(tmp_path.rglob("*.sf"))  # the live files and any not yet deleted: damage each
    assert files
    for path in files:
        data = bytearray(path.read_bytes())
        data[len(data) // 3] ^= 0x40
        path.write_bytes(bytes(data))
    with storage.connect(root) as conn:
        with pytest.raises(CorruptionError):
            list(conn.table("t").scan())
