"""Golden files and corrupt-byte tests of the WAL (file and segment layouts), the
table and region manifests, the bulk-load journal and the wire protocol.

The files under tests/golden/formats/ were written once by
tests/golden/make_format_golden.py and are never regenerated.  Each test reads
a committed file byte for byte and checks it holds what the generator defines,
then writes the same content afresh and checks the bytes are the committed
ones.  The one exception is the Arrow IPC payload of a wire message: its bytes
are Arrow's format, written by pyarrow, so it is compared by content (the
message's own prelude and header are compared byte for byte).  Then every
byte of each file is damaged in turn, and every prefix tried: a reader
refuses the damage with one error, or (the wire header, which no checksum
covers) reads a prefix, never altered data; a WAL file cut short (a torn
tail) reads the records before the cut.
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import os
import re
import shutil
import sys

import pytest

from storage.region.load_journal import JOURNAL_DIR, Journal, read_journals
from storage.errors import CorruptionError
from storage.vfs.faultfs import FaultFileSystem
from storage.vfs.fs import FileSystem
from storage.region.manifest import RegionManifest, TableManifest
from storage.server.remote_errors import MalformedRequest
from storage.server.wire import ACTIONS, PRELUDE, batches_to_ipc, decode_message, encode_message
from storage.wal.arrow_decode import payloads_to_table
from storage.wal.reader import WalReader, segment_name
from storage.wal.replay import replay_wal
from storage.wal.segments import SegmentWalWriter
from storage.wal.writer import WalWriter

sys.path.insert(0, str(paths.GOLDEN))
import make_format_golden as golden  # noqa: E402 - the definitions live beside the files

HERE = golden.HERE
DOCS = str(paths.REPO / "docs" / "formats")


def _bytes(path: str) -> bytes:
    with open(os.path.join(HERE, path), "rb") as f:
        return f.read()


def _records(records) -> list[tuple[int, list[tuple]]]:
    return [(r.seq_id, [tuple(c) for c in r.cells]) for r in records]


def _doc(name: str) -> str:
    with open(os.path.join(DOCS, name), encoding="utf-8") as f:
        return f.read()


def _put(path: str, data: bytes) -> None:
    """Write a test file (no fsync: thousands of them, none of which must survive a crash)."""
    with open(path, "wb") as f:
        f.write(data)


def _flips(data: bytes):
    """(offset, data with that byte changed) for every byte."""
    for i in range(len(data)):
        yield i, data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:]


# -- WAL, one file -----------------------------------------------------------------------


def test_wal_file_golden_reads_and_writes_the_same_bytes(tmp_path):
    replay = replay_wal(FileSystem(HERE), "wal_file.wal")
    assert _records(replay.records) == golden.wal_records()
    assert replay.torn_tail_bytes == 0 and replay.valid_length == len(_bytes("wal_file.wal"))
    payloads = [r.cells for r in WalReader(FileSystem(HERE), "wal_file.wal", decode="payload")]
    table = payloads_to_table(payloads)  # the batch decode of replay agrees with the per-record one
    assert [tuple(r.values()) for r in table.to_pylist()] == [c for _, cells in golden.wal_records() for c in cells]
    fs = FileSystem(str(tmp_path))
    with WalWriter(fs, "w.wal", sync="none") as wal:
        for seq, cells in golden.wal_records():
            wal.append(seq, cells)
    assert fs.read_bytes("w.wal") == _bytes("wal_file.wal")


def test_every_damaged_byte_of_the_wal_file_is_refused(tmp_path):
    data = _bytes("wal_file.wal")
    records = golden.wal_records()
    fs = FileSystem(str(tmp_path))
    path = fs.local_path("w.wal")
    for offset, bad in _flips(data):
        _put(path, bad)
        # the final record too: its framing is complete, so damage there is not a torn write
        with pytest.raises(CorruptionError) as info:
            replay_wal(fs, "w.wal")
        assert info.value.path == fs.uri("w.wal") and 0 <= info.value.offset <= offset, (offset, info.value)
    for cut in range(len(data)):  # a crash cut anywhere leaves the records before the cut
        _put(path, data[:cut])
        replay = replay_wal(fs, "w.wal")
        assert _records(replay.records) == records[: len(replay.records)]
        assert replay.valid_length + replay.torn_tail_bytes == cut


# -- WAL, segment objects ----------------------------------------------------------------------


def _segments(root: str) -> dict[str, bytes]:
    names = sorted(os.listdir(os.path.join(root, "wal_segments.wal")))
    return {n: open(os.path.join(root, "wal_segments.wal", n), "rb").read() for n in names}


def test_wal_segments_golden_reads_and_writes_the_same_bytes(tmp_path):
    records = golden.wal_records()
    segments = _segments(HERE)
    first = golden.SEGMENT_SPLIT
    assert list(segments) == [segment_name(records[0][0], records[first - 1][0]),
                              segment_name(records[first][0], records[-1][0])]
    object_store = FaultFileSystem(HERE, can_append=False)  # a local directory under object-store rules
    assert _records(WalReader(object_store, "wal_segments.wal")) == records
    for name, data in segments.items():  # each segment is laid out as a WAL file
        assert data[:16] == _bytes("wal_file.wal")[:16]
    fs = FileSystem(str(tmp_path))
    seg = SegmentWalWriter(fs, "wal_segments.wal", sync="none")
    for i, (seq, cells) in enumerate(records):
        if i == first:
            seg.sync()
        seg.append(seq, cells)
    seg.close()
    assert _segments(str(tmp_path)) == segments


def test_every_damaged_byte_or_cut_of_a_segment_is_refused(tmp_path):
    root = str(tmp_path)
    for name, data in _segments(HERE).items():
        shutil.rmtree(os.path.join(root, "wal_segments.wal"), ignore_errors=True)
        shutil.copytree(os.path.join(HERE, "wal_segments.wal"), os.path.join(root, "wal_segments.wal"))
        fs = FaultFileSystem(root, can_append=False)
        path = os.path.join(root, "wal_segments.wal", name)
        damaged = list(_flips(data)) + [(cut, data[:cut]) for cut in range(len(data))]
        for offset, bad in damaged:
            _put(path, bad)
            # a segment is written whole: any damage, its end included, is corruption
            with pytest.raises(CorruptionError) as info:
                list(WalReader(fs, "wal_segments.wal"))
            assert info.value.path == path, offset
        with open(path, "wb") as f:
            f.write(data)
        assert _records(WalReader(fs, "wal_segments.wal")) == golden.wal_records()


# -- manifests and the bulk-load journal -------------------------------------------------------


def test_manifest_goldens_read_and_write_the_same_bytes():
    table = TableManifest.decode(_bytes("TABLE.manifest"), "TABLE.manifest")
    assert table == golden.table_manifest()
    assert table.encode() == _bytes("TABLE.manifest")
    region = RegionManifest.decode(_bytes("REGION.manifest"), "REGION.manifest")
    assert region == golden.region_manifest()
    assert region.encode() == _bytes("REGION.manifest")


def test_manifest_family_settings_of_the_golden_read_without_keep_deleted_cells():
    """The golden table manifest predates ``keep_deleted_cells``: its families read
    as FALSE, and a family written now names the field (manifest.md lists it)."""
    from storage.schema import FamilySettings

    table = TableManifest.decode(_bytes("TABLE.manifest"), "TABLE.manifest")
    for opts in table.families.values():
        assert "keep_deleted_cells" not in opts
        assert FamilySettings(**opts).keep_deleted_cells == "FALSE"
    fresh = FamilySettings.from_options({"keep_deleted_cells": "ttl", "ttl": 60}, "f").to_dict()
    again = TableManifest("t", {"f": fresh}, {}, table.regions, next_region_id=5)
    decoded = TableManifest.decode(again.encode(), "TABLE.manifest")
    assert FamilySettings(**decoded.families["f"]).keep_deleted_cells == "TTL"
    assert "`keep_deleted_cells`" in _doc("manifest.md")


def test_journal_goldens_read_and_write_the_same_bytes():
    found = read_journals(FileSystem(HERE))  # the golden directory laid out as a table's
    assert found == golden.journals()
    for journal in golden.journals():
        assert journal.path.startswith(JOURNAL_DIR + "/")
        assert journal.encode() == _bytes(journal.path)


DOCUMENTS = [
    ("TABLE.manifest", lambda d: TableManifest.decode(d, "TABLE.manifest")),
    ("REGION.manifest", lambda d: RegionManifest.decode(d, "REGION.manifest")),
    ("bulkload/20261201-000000-a1b2.commit", lambda d: Journal.decode(d, "journal")),
    ("bulkload/20261201-000500-c3d4.commit", lambda d: Journal.decode(d, "journal")),
]


@pytest.mark.parametrize("name, decode", DOCUMENTS, ids=[d[0] for d in DOCUMENTS])
def test_every_damaged_byte_or_cut_of_a_document_is_refused(name, decode):
    data = _bytes(name)
    damaged = list(_flips(data)) + [(cut, data[:cut]) for cut in range(len(data))] + [(len(data), data + b"\0")]
    for offset, bad in damaged:
        with pytest.raises(CorruptionError):  # the frame's CRC covers every byte
            decode(bad)


def _keys(value, out: set) -> set:
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(k)
            _keys(v, out)
    elif isinstance(value, list):
        for v in value:
            _keys(v, out)
    return out


def test_manifest_md_lists_every_payload_field():
    import json

    doc = _doc("manifest.md")
    for name, _ in DOCUMENTS:
        payload = json.loads(_bytes(name)[20:])
        names = set(payload.get("families", {})) | set(payload.get("files", {})) | {"owner"}
        if isinstance(payload.get("regions"), dict):  # a journal's regions are keyed by id
            names |= set(payload["regions"])
            names |= {f for e in payload["regions"].values() for f in e["files"]}
        fields = _keys(payload, set()) - names  # less family names, region ids, user settings
        missing = sorted(f for f in fields if f"`{f}`" not in doc)
        assert not missing, f"docs/formats/manifest.md does not list {missing} of {name}"


# -- the wire protocol ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(golden.wire_messages()))
def test_wire_goldens_read_and_write_the_same_bytes(name):
    data = _bytes(f"wire/{name}.msg")
    header, batches = golden.wire_messages()[name]
    message = decode_message(data, name)
    assert message.header == _listed(header)
    assert message.batches() == batches
    fresh = encode_message(header, batches_to_ipc(batches))
    head_len = PRELUDE.size + PRELUDE.unpack_from(data, 0)[3]
    assert fresh[:head_len] == data[:head_len]  # prelude and header: byte for byte
    assert decode_message(fresh).batches() == batches  # the Arrow IPC payload: by content
    if not batches:
        assert fresh == data


def _listed(value):
    """Tuples as they come back from JSON: lists."""
    if isinstance(value, (list, tuple)):
        return [_listed(v) for v in value]
    if isinstance(value, dict):
        return {k: _listed(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("name", sorted(golden.wire_messages()))
def test_every_damaged_byte_of_a_wire_message_is_refused_or_read_as_other_json(name):
    data = _bytes(f"wire/{name}.msg")
    head_len = PRELUDE.size + PRELUDE.unpack_from(data, 0)[3]
    original = decode_message(data).header
    for offset, bad in _flips(data[:head_len]):
        bad += data[head_len:]
        if offset < PRELUDE.size:  # magic, version, flags, length: each checked
            with pytest.raises(MalformedRequest):
                decode_message(bad, name)
            continue
        # The header has no checksum (the transport has one); damage gives
        # MalformedRequest or, where the JSON stays valid, another header.
        try:
            assert decode_message(bad, name).header != original, offset
        except MalformedRequest:
            pass
    for cut in range(head_len):
        with pytest.raises(MalformedRequest):
            decode_message(data[:cut], name)
    if head_len < len(data):  # a cut Arrow payload is refused by Arrow's reader
        for cut in range(head_len + 1, len(data), 7):
            with pytest.raises(MalformedRequest, match="Arrow IPC"):
                decode_message(data[:cut], name).batches()


def test_wire_md_lists_every_action_and_golden_header_field():
    doc = _doc("wire.md")
    missing = [a for a in ACTIONS if f"`{a}`" not in doc]
    assert not missing, f"docs/formats/wire.md does not list actions {missing}"
    for name, (header, _) in golden.wire_messages().items():
        fields = {f for f in _keys(header, set()) if isinstance(f, str)}  # not the row data's column keys
        missing = sorted(f for f in fields if f"`{f}`" not in doc)
        assert not missing, f"docs/formats/wire.md does not list {missing} ({name})"


def test_wal_md_lists_every_field_and_constant():
    doc = _doc("wal.md")
    for field in ("magic", "version", "flags", "header_crc", "payload_len", "payload_crc", "frame_crc", "seq_id",
                  "reserved", "timestamps", "row_len", "family_len", "qualifier_len", "value_len", "types", "rows",
                  "families", "qualifiers", "values"):
        assert re.search(rf"\|\s*{field}\s*\||`{field}`", doc), field
    assert "`RSCANWAL`" in doc and "20-digit zero-padded" in doc
