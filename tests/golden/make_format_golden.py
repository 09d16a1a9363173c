"""Writes the golden files of the WAL (both layouts), the manifests, the bulk-load
journal and the wire protocol under tests/golden/formats/, with the code of the
checkout it runs in.

What each file holds is defined here (the test imports these definitions and
checks that the committed bytes decode to them and that writing them again
gives the committed bytes).  Every field that a writer would fill from a clock
or a random source (a journal's ``timestamp_ms``, a manifest's
``generation``) is given a fixed value, so every file is byte-stable.  Run
once per format version, from the repository root
(``PYTHONPATH=$PWD python3 tests/golden/make_format_golden.py``); the files
are committed and never regenerated, so a change that breaks reading them, or
writes other bytes, fails ``tests/storage/test_formats_golden.py``.
"""

from __future__ import annotations

import os

import pyarrow as pa

from storage.region.load_journal import Journal, RegionEntry
from storage.cells import CellType
from storage.vfs.fs import FileSystem
from storage.region.manifest import RegionInfo, RegionManifest, TableManifest
from storage.server.wire import batches_to_ipc, encode_message
from storage.wal.writer import WalWriter
from storage.wal.segments import SegmentWalWriter

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "formats")

PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY = (int(t) for t in (CellType.PUT, CellType.DELETE,
                                                                CellType.DELETE_COLUMN, CellType.DELETE_FAMILY))


def wal_records() -> list[tuple[int, list[tuple]]]:
    """(seq id, cells): one cell, none, a binary key, and 40 cells (the NumPy decode path)."""
    many = [(b"row-%03d" % i, b"cf", b"q%d" % (i % 3), 1_700_000_000_000 + i, PUT, b"v" * (i % 7)) for i in range(40)]
    many[5] = (b"row-005", b"cf", b"", 1_700_000_000_005, DELETE_FAMILY, b"")
    many[9] = (b"row-009", b"cf", b"q0", 1_700_000_000_009, DELETE_COLUMN, b"")
    return [
        (1, [(b"r1", b"cf", b"a", 1000, PUT, b"hello")]),
        (2, []),
        (3, [(b"\x00\xff\x80", b"meta", b"\x01", -1, DELETE, b""), (b"\x00\xff\x80", b"meta", b"b", 2**62, PUT, b"\x00" * 3)]),
        (7, many),
    ]


SEGMENT_SPLIT = 2
"""The segmented WAL holds the first two records in one segment, the rest in a second."""


def table_manifest() -> TableManifest:
    families = {
        "cf": {"block_size": 65536, "bloom_filter": True, "compression": None, "max_versions": 3,
               "min_versions": 0, "ttl": None},
        "meta": {"block_size": 4096, "bloom_filter": False, "compression": "zstd", "max_versions": 1,
                 "min_versions": 0, "ttl": 86400},
    }
    settings = {"compaction_max_files": 10, "compaction_threshold": 3, "extra": {"owner": "golden"},
                "max_filesize": 1073741824, "memstore_flush_size": 67108864, "wal_sync": "100ms"}
    regions = [RegionInfo("00000000", b"", b"g\x00"), RegionInfo("00000003", b"g\x00", b"\xff\x01"),
               RegionInfo("00000004", b"\xff\x01", None)]
    return TableManifest("golden", families, settings, regions, next_region_id=5, generation=7)


def region_manifest() -> RegionManifest:
    return RegionManifest("00000003", {"cf": ["000000000001.sf", "000000000004.sf"], "meta": []},
                          flushed_seq_id=41, next_file_id=5, generation=3)


def journals() -> list[Journal]:
    """An append load over two regions and an overwrite load (job ids sort by time)."""
    append = Journal("20261201-000000-a1b2", "append", {
        "00000000": RegionEntry({"cf": ("000000000010.sf", "000000000011.sf")}, 0,
                                (("cf", "000000000010.sf", ".staging/20261201-000000-a1b2/task0/00000000/cf/0.sf"),
                                 ("cf", "000000000011.sf", ".staging/20261201-000000-a1b2/task1/00000000/cf/0.sf"))),
        "00000003": RegionEntry({"cf": ("000000000012.sf",)}, 0, ()),
    }, timestamp_ms=1_764_547_200_000)
    overwrite = Journal("20261201-000500-c3d4", "overwrite", {
        "00000004": RegionEntry({"cf": ("000000000020.sf",), "meta": ()}, 99, ()),
    }, timestamp_ms=1_764_547_500_000)
    return [append, overwrite]


def wire_batch() -> pa.RecordBatch:
    return pa.record_batch({"key": pa.array([b"r1", b"\x00\xff"], pa.binary()),
                            "cf:q": pa.array([b"v", None], pa.binary())})


def wire_messages() -> dict[str, tuple[dict, list[pa.RecordBatch]]]:
    """Name -> (header, payload batches) of one message of each shape."""
    return {
        "mutate_request": ({"table": "t", "ops": [
            ["put", b"row\x00", {b"cf:q": b"v", b"cf:\xff": b""}, None],
            ["delete", b"r2", [b"cf:q"], 5],
            ["delete_version", b"r3", b"cf:q", 7],
        ]}, []),
        "scan_ticket": ({"table": "t", "scan": {"row_start": b"a", "row_stop": b"z\xff", "columns": ["cf:q"],
                                                "time_range": [0, 10], "reverse": True, "limit": 100,
                                                "filter": "PrefixFilter('a')"}}, []),
        # wire protocol version 2: a raw scan (markers, max_versions counting puts)
        "raw_scan_ticket": ({"table": "t", "scan": {"row_start": b"a", "columns": ["cf"], "max_versions": 2,
                                                    "output": "cells", "raw": True}}, []),
        "scan_next_answer": ({"seq": 0, "rows": 2, "more": False}, [wire_batch()]),
        "server_info_answer": ({"server": "regionscan", "protocol": 1, "read_only": False, "auth": True,
                                "peer": "ipv4:127.0.0.1:51234", "lease_timeout_ms": 60000}, []),
    }


def encode_wire(name: str) -> bytes:
    header, batches = wire_messages()[name]
    return encode_message(header, batches_to_ipc(batches))


def main() -> None:
    os.makedirs(HERE, exist_ok=True)
    fs = FileSystem(HERE)
    records = wal_records()
    with WalWriter(fs, "wal_file.wal", sync="none") as wal:
        for seq, cells in records:
            wal.append(seq, cells)
    seg = SegmentWalWriter(fs, "wal_segments.wal", sync="none")
    for i, (seq, cells) in enumerate(records):
        if i == SEGMENT_SPLIT:
            seg.sync()
        seg.append(seq, cells)
    seg.close()
    fs.write_bytes("TABLE.manifest", table_manifest().encode())
    fs.write_bytes("REGION.manifest", region_manifest().encode())
    fs.makedirs("bulkload")
    for journal in journals():
        fs.write_bytes(journal.path, journal.encode())
    fs.makedirs("wire")
    for name in wire_messages():
        fs.write_bytes(f"wire/{name}.msg", encode_wire(name))


if __name__ == "__main__":
    main()
