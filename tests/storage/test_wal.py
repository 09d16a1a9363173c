"""Write-ahead log: round trips, sync policies, torn tails, corruption, crashes."""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import inspect
import os
import random
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.cells import LATEST_TIMESTAMP, Cell, CellType
from storage.errors import CorruptionError, InvalidArgument, StorageError
from storage.vfs.fs import FileSystem
from storage.wal.format import (
    FILE_HEADER_SIZE,
    HEADER_BYTES as FILE_HEADER_BYTES,
    MAX_RECORD_BYTES,
    RECORD_HEADER_SIZE,
    WAL_MAGIC,
    SyncPolicy,
    encode_record,
)
from storage.wal.reader import WalReader, read_wal
from storage.wal.writer import WalWriter
from storage.wal.replay import repair_wal, replay_wal

REPO = paths.REPO
ALL_TYPES = [int(t) for t in CellType]


def make_cells(seq: int) -> list:
    """Deterministic cells for record ``seq``: sizes cross the small/large decode paths."""
    n = 1 + (seq * 7) % 45
    types = (4, 8, 12, 14)
    return [
        (
            b"row-%06d-%03d" % (seq, i),
            b"cf" if i % 3 else b"f\x00\xff",
            b"q%d" % i if i % 5 else b"",
            (seq * 1000 + i) if i % 11 else LATEST_TIMESTAMP,
            types[(seq + i) % 4],
            bytes([(seq + i) % 256]) * ((seq * 13 + i) % 300),
        )
        for i in range(n)
    ]


def write_log(fs: FileSystem, path: str, records: list, sync="none") -> list[int]:
    """Write records; return the start offset of each record."""
    starts = []
    with WalWriter(fs, path, sync) as w:
        for seq, cells in records:
            starts.append(max(w.size, FILE_HEADER_SIZE))  # the first append writes the header too
            w.append(seq, cells)
        assert w.size == (fs.size(path) if records else 0)
    if not records:  # no record, no file: give the empty log its header
        fs.write_bytes(path, FILE_HEADER_BYTES)
    return starts


def flip(fs: FileSystem, path: str, offset: int, mask: int = 0x40) -> None:
    data = bytearray(fs.read_bytes(path))
    data[offset] ^= mask
    fs.write_bytes(path, bytes(data))


# -- round trips -------------------------------------------------------------


def test_round_trip_many_records_all_cell_types(fs):
    records = [(seq, make_cells(seq)) for seq in range(120)]
    records.append((120, []))  # a record without cells is legal
    records.append((121, [Cell(b"", b"", b"", -(1 << 63), t, b"") for t in ALL_TYPES]))
    records.append((122, [Cell(b"r" * 70000, b"cf", b"q" * 1000, 0, 4, os.urandom(200000))]))
    write_log(fs, "a.wal", records)

    replay = replay_wal(fs, "a.wal")
    assert [(r.seq_id, r.cells) for r in replay.records] == records
    assert replay.torn_tail_bytes == 0
    assert replay.valid_length == replay.file_size == fs.size("a.wal")
    assert replay.last_seq_id == 122
    assert all(type(c) is Cell for _, cells in replay.records for c in cells)
    assert {c.type for _, cells in replay.records for c in cells} == set(ALL_TYPES)
    # the streaming reader gives the same records
    assert [(seq, cells) for seq, cells in read_wal(fs, "a.wal")] == records


@pytest.mark.parametrize("policy", ["each", "20ms", "none"])
def test_a_writer_that_logs_nothing_leaves_no_file(fs, policy):
    w = WalWriter(fs, "quiet.wal", policy)
    w.sync()
    w.close()
    assert not fs.exists("quiet.wal") and w.sync_count == 0
    with WalWriter(fs, "used.wal", policy) as w:
        w.append(1, make_cells(1))
    assert [r.seq_id for r in replay_wal(fs, "used.wal").records] == [1]


def test_empty_log_and_empty_file(fs):
    fs.write_bytes("e.wal", FILE_HEADER_BYTES)  # a crash between a new file's header and its first record
    replay = replay_wal(fs, "e.wal")
    assert replay.records == [] and replay.valid_length == FILE_HEADER_SIZE and replay.torn_tail_bytes == 0
    assert replay.last_seq_id is None
    fs.write_bytes("zero.wal", b"")
    replay = replay_wal(fs, "zero.wal")
    assert replay.records == [] and replay.valid_length == 0 and replay.torn_tail_bytes == 0


cell_strategy = st.tuples(
    st.binary(max_size=20),
    st.binary(max_size=5),
    st.binary(max_size=20),
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.sampled_from(ALL_TYPES),
    st.binary(max_size=50),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, (1 << 63) - 1), st.lists(cell_strategy, max_size=60)), max_size=6))
def test_round_trip_arbitrary_cells(tmp_path_factory, records):
    fs = FileSystem(str(tmp_path_factory.mktemp("wal")))
    write_log(fs, "h.wal", records)
    assert [(r.seq_id, r.cells) for r in replay_wal(fs, "h.wal").records] == records


def test_reopen_appends_after_existing_records(fs):
    write_log(fs, "r.wal", [(1, make_cells(1))])
    with WalWriter(fs, "r.wal") as w:
        assert w.size == fs.size("r.wal")
        w.append(2, make_cells(2))
    assert [r.seq_id for r in replay_wal(fs, "r.wal").records] == [1, 2]


def test_concurrent_appends_keep_records_whole(fs):
    w = WalWriter(fs, "c.wal", "each")

    def worker(base: int) -> None:
        for i in range(40):
            w.append(base + i, make_cells(base + i))

    threads = [threading.Thread(target=worker, args=(k * 1000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    replay = replay_wal(fs, "c.wal")
    assert sorted(r.seq_id for r in replay.records) == sorted(k * 1000 + i for k in range(4) for i in range(40))
    assert all(r.cells == make_cells(r.seq_id) for r in replay.records)


# -- arguments ---------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("each", SyncPolicy("each")),
        ("none", SyncPolicy("none")),
        ("100ms", SyncPolicy("interval", 100)),
        (" 250MS ", SyncPolicy("interval", 250)),
        (7, SyncPolicy("interval", 7)),
        (SyncPolicy("none"), SyncPolicy("none")),
    ],
)
def test_sync_policy_parse(value, expected):
    assert SyncPolicy.parse(value) == expected


@pytest.mark.parametrize("value", ["fast", "0ms", "10s", "", 0, -5, True, None, 1.5, "ms"])
def test_sync_policy_rejects_bad_values(value):
    with pytest.raises(InvalidArgument) as err:
        SyncPolicy.parse(value)
    assert repr(value) in str(err.value)


def test_writer_rejects_bad_policy_naming_it(fs):
    with pytest.raises(InvalidArgument, match="'sometimes'"):
        WalWriter(fs, "p.wal", "sometimes")


@pytest.mark.parametrize(
    "seq_id, cells, message",
    [
        (-1, [], "seq_id"),
        (1 << 63, [], "seq_id"),
        (True, [], "seq_id"),
        ("1", [], "seq_id"),
        (1, [(b"r", b"f", b"q", 1, 4)], "6-field"),
        (1, [(b"r", b"f", b"q", 1, 4, b"v"), (b"r", b"f", b"q", 1, 4, b"v", b"x")], "6-field"),
        (1, [(b"r", b"f", b"q", 1, 5, b"v")], "cell type"),
        (1, [(b"r", b"f", b"q", 1, 4.0, b"v")], "cell type"),
        (1, [(b"r", b"f", b"q", 1 << 63, 4, b"v")], "timestamp"),
        (1, [(b"r", b"f", b"q", 1.5, 4, b"v")], "timestamp"),
        (1, [("r", b"f", b"q", 1, 4, b"v")], "bytes"),
        (1, [(b"r", b"f", b"q", 1, 4, None)], "bytes"),
    ],
)
def test_append_rejects_bad_input_and_stays_usable(fs, seq_id, cells, message):
    with WalWriter(fs, "bad.wal") as w:
        w.append(2, make_cells(2))
        before = w.size
        with pytest.raises(InvalidArgument, match=message):
            w.append(seq_id, cells)
        assert w.size == before == fs.size("bad.wal")
        w.append(3, make_cells(3))
    assert [r.seq_id for r in replay_wal(fs, "bad.wal").records] == [2, 3]


def test_closed_writer_refuses_appends(fs):
    w = WalWriter(fs, "x.wal")
    w.close()
    w.close()  # a second close is harmless
    with pytest.raises(StorageError, match="closed"):
        w.append(1, make_cells(1))


# -- sync policies -----------------------------------------------------------


def flusher_threads(path: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"wal-flusher:{path}"]


def test_policy_each_syncs_before_append_returns(fs):
    with WalWriter(fs, "each.wal", "each") as w:
        for seq in range(5):
            w.append(seq, make_cells(seq))
            assert w.synced_size == w.size
        assert w.sync_count >= 5  # every record (a new file's header goes with its first one)
        assert not flusher_threads("each.wal")
    assert len(replay_wal(fs, "each.wal").records) == 5


def test_policy_none_never_syncs_until_close(fs):
    w = WalWriter(fs, "none.wal", "none")
    for seq in range(5):
        w.append(seq, make_cells(seq))
    assert w.sync_count == 0 and w.synced_size == 0
    w.sync()  # an explicit sync works whatever the policy
    assert w.synced_size == w.size and w.sync_count == 1
    w.append(5, make_cells(5))
    w.close()
    assert w.synced_size == w.size and w.sync_count == 2
    assert len(replay_wal(fs, "none.wal").records) == 6


def test_policy_interval_background_flusher_syncs_and_stops(fs):
    w = WalWriter(fs, "int.wal", "20ms")
    assert w.policy == SyncPolicy("interval", 20)
    assert len(flusher_threads("int.wal")) == 1
    for seq in range(3):
        w.append(seq, make_cells(seq))
    # No sync() call: the flusher must make the data durable on its own.
    deadline = time.monotonic() + 10
    while w.synced_size < w.size and time.monotonic() < deadline:
        time.sleep(0.005)
    assert w.synced_size == w.size
    assert w.sync_count >= 1
    synced_once = w.sync_count
    w.append(3, make_cells(3))
    w.close()
    assert not flusher_threads("int.wal")
    assert w.synced_size == w.size and w.sync_count > synced_once
    assert [r.seq_id for r in replay_wal(fs, "int.wal").records] == [0, 1, 2, 3]


# -- torn tails --------------------------------------------------------------


def test_torn_last_record_at_every_byte_offset(fs):
    records = [(seq, make_cells(seq)) for seq in range(4)]
    last = (4, make_cells(4)[:3])  # a small record: every offset is cheap to try
    starts = write_log(fs, "full.wal", records + [last])
    data = fs.read_bytes("full.wal")
    start = starts[-1]
    for cut in range(start, len(data)):
        fs.write_bytes("torn.wal", data[:cut])
        replay = replay_wal(fs, "torn.wal")
        assert [(r.seq_id, r.cells) for r in replay.records] == records, cut
        assert replay.valid_length == start
        assert replay.torn_tail_bytes == cut - start


def test_torn_large_last_record(fs):
    records = [(seq, make_cells(seq)) for seq in range(3)]
    last = (3, make_cells(6))  # 43 cells: the Arrow decode path
    assert len(last[1]) >= 32
    starts = write_log(fs, "full.wal", records + [last])
    data = fs.read_bytes("full.wal")
    start = starts[-1]
    for cut in sorted({start + 1, start + RECORD_HEADER_SIZE, len(data) - 1, *range(start, len(data), 97)}):
        fs.write_bytes("torn.wal", data[:cut])
        assert [(r.seq_id, r.cells) for r in replay_wal(fs, "torn.wal").records] == records


def test_torn_file_header_at_every_offset(fs):
    write_log(fs, "full.wal", [(1, make_cells(1))])
    data = fs.read_bytes("full.wal")
    for cut in range(0, FILE_HEADER_SIZE + 1):
        fs.write_bytes("torn.wal", data[:cut])
        replay = replay_wal(fs, "torn.wal")
        assert replay.records == []
        assert replay.torn_tail_bytes == (cut if cut < FILE_HEADER_SIZE else 0)


def test_checksum_mismatch_in_a_complete_last_record_is_corruption_not_a_torn_tail(fs):
    """The record's length and framing were written whole, so a failing payload
    checksum is damage: dropping it as a torn write could lose an acknowledged write."""
    starts = write_log(fs, "l.wal", [(seq, make_cells(seq)) for seq in range(3)])
    flip(fs, "l.wal", fs.size("l.wal") - 1)
    with pytest.raises(CorruptionError, match="checksum mismatch") as err:
        replay_wal(fs, "l.wal")
    assert err.value.offset == starts[-1] and "l.wal" in str(err.value) and "\n" not in str(err.value)


def test_a_last_record_whose_payload_never_reached_the_disk_is_torn(fs):
    """A header that made it and a payload of zeros behind it (the page a crash
    left unwritten) is the one complete record still read as a torn tail."""
    starts = write_log(fs, "l.wal", [(seq, make_cells(seq)) for seq in range(3)])
    data = fs.read_bytes("l.wal")
    body = starts[-1] + RECORD_HEADER_SIZE
    fs.write_bytes("l.wal", data[:body] + b"\0" * (len(data) - body) + b"\0" * 100)
    replay = replay_wal(fs, "l.wal")
    assert [r.seq_id for r in replay.records] == [0, 1] and replay.valid_length == starts[-1]


def test_writer_refuses_torn_file_until_repaired(fs):
    write_log(fs, "t.wal", [(seq, make_cells(seq)) for seq in range(3)])
    data = fs.read_bytes("t.wal")
    fs.write_bytes("t.wal", data[:-5])
    with pytest.raises(CorruptionError, match="torn") as err:
        WalWriter(fs, "t.wal")
    assert err.value.offset == replay_wal(fs, "t.wal").valid_length
    torn_size = fs.size("t.wal")
    assert repair_wal(fs, "t.wal") == torn_size - err.value.offset
    assert fs.size("t.wal") == err.value.offset
    assert repair_wal(fs, "t.wal") == 0
    with WalWriter(fs, "t.wal") as w:
        w.append(9, make_cells(9))
    replay = replay_wal(fs, "t.wal")
    assert [r.seq_id for r in replay.records] == [0, 1, 9] and replay.torn_tail_bytes == 0


def test_repair_of_headerless_file_gives_empty_log(fs):
    fs.write_bytes("h.wal", WAL_MAGIC[:5])
    assert repair_wal(fs, "h.wal") == 5
    with WalWriter(fs, "h.wal") as w:
        w.append(1, make_cells(1))
    assert [r.seq_id for r in replay_wal(fs, "h.wal").records] == [1]


# -- zero fill ---------------------------------------------------------------


@pytest.mark.parametrize("zeros", [1, 11, 12, 13, 4096, 70000])
def test_zero_filled_tail_is_torn(fs, zeros):
    records = [(seq, make_cells(seq)) for seq in range(3)]
    write_log(fs, "z.wal", records)
    size = fs.size("z.wal")
    fs.write_bytes("z.wal", fs.read_bytes("z.wal") + b"\0" * zeros)
    replay = replay_wal(fs, "z.wal")
    assert [(r.seq_id, r.cells) for r in replay.records] == records
    assert replay.valid_length == size and replay.torn_tail_bytes == zeros


def test_partial_record_followed_by_zero_fill_is_refused(fs):
    """Half a payload and zeros after it: complete framing, so it is not read
    as a torn tail (a bit flip would look the same to a checksum)."""
    starts = write_log(fs, "p.wal", [(seq, make_cells(seq)) for seq in range(3)])
    data = fs.read_bytes("p.wal")
    half = starts[-1] + (len(data) - starts[-1]) // 2
    fs.write_bytes("p.wal", data[:half] + b"\0" * (len(data) - half + 4096))
    with pytest.raises(CorruptionError) as err:
        replay_wal(fs, "p.wal")
    assert err.value.offset == starts[-1]


def test_all_zero_file_is_an_empty_torn_log(fs):
    fs.write_bytes("z.wal", b"\0" * 8192)
    replay = replay_wal(fs, "z.wal")
    assert replay.records == [] and replay.valid_length == 0 and replay.torn_tail_bytes == 8192


def test_zeros_before_a_good_record_are_corruption(fs):
    starts = write_log(fs, "m.wal", [(seq, make_cells(seq)) for seq in range(3)])
    data = fs.read_bytes("m.wal")
    middle = slice(starts[1], starts[2])
    fs.write_bytes("m.wal", data[: middle.start] + b"\0" * (middle.stop - middle.start) + data[middle.stop :])
    with pytest.raises(CorruptionError) as err:
        replay_wal(fs, "m.wal")
    assert err.value.offset == starts[1]


# -- corruption --------------------------------------------------------------


def test_flipped_byte_in_middle_record_names_file_and_offset(fs):
    starts = write_log(fs, "good.wal", [(seq, make_cells(seq)[:4]) for seq in range(4)])
    data = fs.read_bytes("good.wal")
    for pos in range(starts[2], starts[3]):
        bad = bytearray(data)
        bad[pos] ^= 0x01
        fs.write_bytes("bad.wal", bytes(bad))
        with pytest.raises(CorruptionError) as err:
            list(read_wal(fs, "bad.wal"))
        assert err.value.offset == starts[2], pos
        assert err.value.path == fs.uri("bad.wal")
        assert "bad.wal" in str(err.value) and f"offset {starts[2]}" in str(err.value)


def test_flipped_byte_in_large_middle_record(fs):
    starts = write_log(fs, "good.wal", [(seq, make_cells(seq)) for seq in (1, 6, 2)])
    flip(fs, "good.wal", (starts[1] + starts[2]) // 2)
    with pytest.raises(CorruptionError) as err:
        replay_wal(fs, "good.wal")
    assert err.value.offset == starts[1]


def test_records_before_the_bad_one_are_still_streamed(fs):
    starts = write_log(fs, "s.wal", [(seq, make_cells(seq)) for seq in range(4)])
    flip(fs, "s.wal", starts[2] + RECORD_HEADER_SIZE + 3)
    seen = []
    with pytest.raises(CorruptionError):
        for seq, _cells in read_wal(fs, "s.wal"):
            seen.append(seq)
    assert seen == [0, 1]


@pytest.mark.parametrize("pos", range(FILE_HEADER_SIZE))
def test_flipped_byte_in_file_header(fs, pos):
    write_log(fs, "h.wal", [(seq, make_cells(seq)) for seq in range(2)])
    flip(fs, "h.wal", pos)
    with pytest.raises(CorruptionError) as err:
        replay_wal(fs, "h.wal")
    assert err.value.offset == 0 and "h.wal" in str(err.value)


def test_unsupported_version_with_valid_header_checksum(fs):
    write_log(fs, "v.wal", [(1, make_cells(1))])
    data = fs.read_bytes("v.wal")
    head = struct.pack("<8sHH", WAL_MAGIC, 99, 0)
    fs.write_bytes("v.wal", head + struct.pack("<I", zlib.crc32(head)) + data[FILE_HEADER_SIZE:])
    with pytest.raises(CorruptionError, match="version 99") as err:
        replay_wal(fs, "v.wal")
    assert err.value.offset == 8


def test_short_file_that_is_not_a_header_prefix(fs):
    fs.write_bytes("s.wal", b"NOTAWAL")
    with pytest.raises(CorruptionError) as err:
        replay_wal(fs, "s.wal")
    assert err.value.offset == 0


def _frame(payload: bytes, length: int | None = None) -> bytes:
    head = struct.pack("<II", len(payload) if length is None else length, zlib.crc32(payload))
    return head + struct.pack("<I", zlib.crc32(head)) + payload


def test_impossible_length_is_corruption(fs):
    starts = write_log(fs, "l.wal", [(1, make_cells(1))])
    data = fs.read_bytes("l.wal")
    fs.write_bytes("l.wal", data + _frame(b"", length=MAX_RECORD_BYTES + 1) + b"x" * 64)
    with pytest.raises(CorruptionError, match="length") as err:
        replay_wal(fs, "l.wal")
    assert err.value.offset == len(data) and starts == [FILE_HEADER_SIZE]


@pytest.mark.parametrize(
    "payload",
    [
        b"\x01\x00",  # shorter than the payload header
        struct.pack("<qII", 1, 1000, 0),  # claims more cells than it holds
        struct.pack("<qII", 1, 0, 0) + b"extra",  # bytes after the last cell
        struct.pack("<qII", 1, 1, 0) + struct.pack("<q4I", 5, 1, 1, 1, 1) + b"\x04" + b"abc",  # short data
        struct.pack("<qII", 1, 1, 0) + struct.pack("<q4I", 5, 1, 1, 1, 1) + b"\x05" + b"abcd",  # bad type
    ],
)
def test_checksummed_but_malformed_payload_is_corruption(fs, payload):
    write_log(fs, "m.wal", [(1, make_cells(1))])
    data = fs.read_bytes("m.wal")
    fs.write_bytes("m.wal", data + _frame(payload))
    with pytest.raises(CorruptionError) as err:
        replay_wal(fs, "m.wal")
    assert err.value.offset == len(data)


def test_encode_record_matches_the_documented_layout():
    record = encode_record(7, [Cell(b"ab", b"f", b"q", 5, 4, b"xyz")])
    length, payload_crc, frame_crc = struct.unpack_from("<III", record)
    payload = record[RECORD_HEADER_SIZE:]
    assert length == len(payload) and payload_crc == zlib.crc32(payload)
    assert frame_crc == zlib.crc32(record[:8])
    assert payload == (
        struct.pack("<qII", 7, 1, 0) + struct.pack("<q", 5) + struct.pack("<4I", 2, 1, 1, 3) + b"\x04" + b"abfqxyz"
    )


def test_reader_without_decoding_reports_sequence_ids(fs):
    write_log(fs, "d.wal", [(seq, make_cells(seq)) for seq in (3, 4)])
    reader = WalReader(fs, "d.wal", decode=False)
    assert reader.valid_length is None
    assert [r.seq_id for r in reader] == [3, 4]
    assert reader.torn_tail_bytes == 0 and reader.valid_length == fs.size("d.wal")


# -- crash -------------------------------------------------------------------


CHILD = """
import sys
sys.path.insert(0, {repo!r})
from storage.vfs.fs import FileSystem
from storage.cells import LATEST_TIMESTAMP
from storage.wal.writer import WalWriter
{make_cells}
w = WalWriter(FileSystem(sys.argv[1]), "crash.wal", "each")
print("ready", flush=True)
seq = 0
while True:
    w.append(seq, make_cells(seq))
    sys.stdout.write(f"{{seq}}\\n")
    sys.stdout.flush()
    seq += 1
"""


def test_killed_writer_keeps_every_acknowledged_record(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO), make_cells=inspect.getsource(make_cells)))
    rng = random.Random(20240611)
    for trial in range(4):
        root = tmp_path / f"trial{trial}"
        root.mkdir()
        child = subprocess.Popen([sys.executable, str(script), str(root)], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline() == "ready\n"
            time.sleep(rng.uniform(0.01, 0.3))
        finally:
            os.kill(child.pid, signal.SIGKILL)
            out, _ = child.communicate()
        assert child.returncode == -signal.SIGKILL
        acked = [int(line) for line in out.splitlines() if line.strip()]
        replay = replay_wal(FileSystem(str(root)), "crash.wal")
        seqs = [r.seq_id for r in replay.records]
        assert seqs == list(range(len(seqs))), "records must form an unbroken prefix"
        assert set(acked) <= set(seqs)
        assert len(seqs) <= len(acked) + 1  # at most the append that was not yet acknowledged
        for record in replay.records:
            assert record.cells == make_cells(record.seq_id)


# -- decoding straight into Arrow -----------------------------------------------------------


def test_payloads_decode_into_the_same_cells_as_records(fs):
    from storage.wal.arrow_decode import payloads_to_table

    small = [(seq, make_cells(seq)[:2]) for seq in range(1, 200)]  # many small records
    big = [(seq, make_cells(seq) * 3) for seq in range(200, 220)]  # records of many cells
    for name, records in (("small.wal", small), ("big.wal", big + [(220, [])])):
        write_log(fs, name, records)
        payloads = list(WalReader(fs, name, decode="payload"))
        assert [r.seq_id for r in payloads] == [seq for seq, _ in records]
        table = payloads_to_table([r.cells for r in payloads])
        assert [Cell(*c.values()) for c in table.to_pylist()] == [c for _, cells in records for c in cells]


def test_payloads_with_bad_structure_are_corruption(fs):
    from storage.wal.format import encode_record
    from storage.wal.arrow_decode import payloads_to_table

    for cells in (make_cells(3)[:2], make_cells(4) * 3):  # both decode paths
        payload = bytearray(encode_record(7, cells)[RECORD_HEADER_SIZE:])
        n = len(cells)
        bad_length = bytearray(payload)
        bad_length[16 + 8 * n] ^= 0x01  # the first row length
        with pytest.raises(CorruptionError, match="do not add up"):
            payloads_to_table([bytes(bad_length)])
        bad_type = bytearray(payload)
        bad_type[16 + 24 * n] = 99
        with pytest.raises(CorruptionError, match="unknown cell type"):
            payloads_to_table([bytes(bad_type)])
        too_many = bytearray(payload)
        too_many[8:12] = (10**6).to_bytes(4, "little")
        with pytest.raises(CorruptionError, match="more cells"):
            payloads_to_table([bytes(too_many)])
