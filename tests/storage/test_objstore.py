"""Tables on an S3-compatible object store (moto's server mode on 127.0.0.1).

The engine's durability paths run against a real S3 protocol server: the WAL
as segment objects, SIGKILL of a writer and reopen, flush, compaction,
split, bulk-load roll-forward, the writer lease between two processes,
conditional manifest commits, bounded failures on an unreachable endpoint,
and reads by byte range with the block cache.
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

import storage
from storage.errors import CorruptionError, InvalidArgument, StorageError, TableLocked
from storage.vfs.fs import FileSystem
from storage.vfs.objstore import PreconditionFailed, S3Settings, redact_uri
from storage.scanner import ScanMetrics
from storage.wal.open_writer import open_wal_writer
from storage.wal.replay import replay_wal
from storage.wal.segments import NONE_SEGMENT_BYTES, SegmentWalWriter
from storage.wal.reader import segment_names
from cut_short_load import committed_but_not_rolled_forward
from killed_writer import run_and_kill, write_number

REPO = paths.REPO


def _cells(row: bytes, value: bytes = b"v"):
    return [(row, b"cf", b"q", 1, 4, value)]


def _rows(table) -> dict[bytes, bytes]:
    return {row: data[b"cf:q"] for row, data in table.scan()}


# -- the WAL as segment objects ---------------------------------------------------------
def test_wal_policy_each_writes_one_segment_per_append_and_replays_in_order(s3_root):
    fs = FileSystem(s3_root)
    with open_wal_writer(fs, "wal/1.wal", sync="each") as wal:
        assert isinstance(wal, SegmentWalWriter)
        for seq in range(1, 6):
            wal.append(seq, _cells(b"r%d" % seq))
            assert wal.synced_size == wal.size  # acknowledged means stored
        assert segment_names(fs, "wal/1.wal") == [f"{s:020d}-{s:020d}.seg" for s in range(1, 6)]
    replay = replay_wal(fs, "wal/1.wal")
    assert [r.seq_id for r in replay.records] == [1, 2, 3, 4, 5]
    assert [r.cells[0][0] for r in replay.records] == [b"r1", b"r2", b"r3", b"r4", b"r5"]
    assert replay.torn_tail_bytes == 0


def test_wal_policy_none_gathers_records_until_sync_and_interval_writes_in_the_background(s3_root):
    fs = FileSystem(s3_root)
    wal = open_wal_writer(fs, "wal/2.wal", sync="none")
    for seq in range(1, 4):
        wal.append(seq, _cells(b"r%d" % seq))
    assert segment_names(fs, "wal/2.wal") == []  # nothing acknowledged as durable yet
    wal.sync()
    assert segment_names(fs, "wal/2.wal") == [f"{1:020d}-{3:020d}.seg"]
    wal.append(4, [(b"big", b"cf", b"q", 1, 4, b"x" * NONE_SEGMENT_BYTES)])
    assert segment_names(fs, "wal/2.wal")[-1] == f"{4:020d}-{4:020d}.seg"  # a full buffer is written
    wal.close()
    timed = open_wal_writer(fs, "wal/3.wal", sync="50ms")
    timed.append(1, _cells(b"a"))
    deadline = time.monotonic() + 10
    while not segment_names(fs, "wal/3.wal") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert segment_names(fs, "wal/3.wal") == [f"{1:020d}-{1:020d}.seg"]
    timed.close()
    assert [r.seq_id for r in replay_wal(fs, "wal/2.wal").records] == [1, 2, 3, 4]


def test_wal_segments_refuse_falling_sequence_ids_and_report_a_cut_segment(s3_root, s3_server):
    fs = FileSystem(s3_root)
    wal = open_wal_writer(fs, "wal/4.wal")
    wal.append(7, _cells(b"a"))
    with pytest.raises(InvalidArgument, match="not above the last one"):
        wal.append(7, _cells(b"b"))
    wal.append(8, _cells(b"c"))
    wal.close()
    reopened = open_wal_writer(fs, "wal/4.wal")  # continues after the last segment's sequence id
    with pytest.raises(InvalidArgument):
        reopened.append(8, _cells(b"d"))
    reopened.close()
    seg = f"wal/4.wal/{8:020d}-{8:020d}.seg"
    data = fs.read_bytes(seg)
    fs.write_bytes(seg, data[:-3])  # a segment is written whole, so a short one is damage
    with pytest.raises(CorruptionError, match="segment is incomplete"):
        replay_wal(fs, "wal/4.wal")
    fs.write_bytes(seg, data[:16])  # cut at a record boundary: its name says records are missing
    with pytest.raises(CorruptionError, match="its name promises 8"):
        replay_wal(fs, "wal/4.wal")


# -- the engine's durability on S3 ---------------------------------------------------
def test_unflushed_edits_survive_reopen_then_flush_compact_and_split(s3_root):
    model = {}
    with storage.connect(s3_root) as conn:
        table = conn.create_table("t", {"cf": {"max_versions": 1}}, settings={"memstore_flush_size": 1 << 30})
        for i in range(300):
            row = b"r%04d" % i
            table.put(row, {b"cf:q": b"a%d" % i})
            model[row] = b"a%d" % i
    with storage.connect(s3_root) as conn:  # everything is in WAL segments only
        table = conn.table("t")
        assert _rows(table) == model
        table.flush()
        for i in range(0, 300, 3):
            row = b"r%04d" % i
            table.put(row, {b"cf:q": b"b%d" % i})
            model[row] = b"b%d" % i
        table.flush()
        table.compact(major=True)
        table.split(b"r0150")
        assert len(table.region_infos()) == 2
        table.put(b"r0299", {b"cf:q": b"last"})
        model[b"r0299"] = b"last"
        table.check()
    with storage.connect(s3_root) as conn:
        table = conn.table("t")
        table.check()
        assert _rows(table) == model
        assert [r.start for r in table.region_infos()] == [b"", b"r0150"]


def _open_when_the_lease_expires(root: str, name: str, seconds: float = 30):
    """Open ``name`` for writing, waiting for a killed writer's lease to run out."""
    deadline = time.monotonic() + seconds
    while True:
        conn = storage.connect(root)
        try:
            return conn, conn.table(name)
        except TableLocked:
            conn.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_sigkill_of_a_writer_on_s3_loses_no_acknowledged_write(s3_server):
    # a lease long enough that its renewals (every third of it) survive a loaded machine:
    # at 3 s a starved renewal thread made the writer refuse to commit mid-test
    root = s3_server.root(lease_seconds=6)
    rng = random.Random(15)
    expected: dict[bytes, bytes] = {}
    for trial in range(3):
        acked = run_and_kill(root, seed=trial, kill_after=rng.uniform(1.0, 3.0))
        expected.update(acked)
        conn, table = _open_when_the_lease_expires(root, "crash")
        table.check()
        stored = {row: data[b"cf:v"] for row, data in table.scan()}
        conn.close()  # releases the lease: the next writer starts at once
        missing = [r for r in expected if r not in stored]
        assert not missing, f"trial {trial}: {len(missing)} acknowledged rows lost"
        assert all(write_number(stored[r]) >= write_number(v) for r, v in expected.items())
    assert len(expected) > 20


def test_committed_bulk_load_is_rolled_forward_on_s3(s3_root):
    from storage.region.load_journal import STAGING_DIR, read_journals

    expected = committed_but_not_rolled_forward(s3_root)
    with storage.connect(s3_root, read_only=True) as conn:
        assert {k: v[b"cf:q"] for k, v in conn.table("t").scan()} == expected
    with storage.connect(s3_root) as conn:
        table = conn.table("t")
        assert {k: v[b"cf:q"] for k, v in table.scan()} == expected
        assert read_journals(table.fs) == []
        assert not table.fs.exists(f"{STAGING_DIR}/job1")
        table.check()


# -- one writer ----------------------------------------------------------------------
_HOLDER = textwrap.dedent(
    """
    import sys, time, storage
    conn = storage.connect(sys.argv[1])
    table = conn.table("t")
    table.put(b"holder", {b"cf:q": b"1"})
    print("READY", flush=True)
    time.sleep(120)
    """
)


def test_two_writer_processes_get_table_locked_and_a_dead_writers_lease_expires(s3_server):
    root = s3_server.root(lease_seconds=4)
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {}})
    env = dict(os.environ, PYTHONPATH=str(REPO))
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, root], stdout=subprocess.PIPE, env=env)
    try:
        assert holder.stdout.readline() == b"READY\n"
        time.sleep(4.5)  # longer than the lease: only renewals keep it
        second = subprocess.run(
            [sys.executable, "-c", _HOLDER, root], capture_output=True, env=env, timeout=60
        )
        assert second.returncode != 0
        assert b"TableLocked" in second.stderr and b"locked by another writer" in second.stderr
        with pytest.raises(TableLocked, match="lease valid for"):
            storage.connect(root).table("t")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with pytest.raises(TableLocked):  # the dead writer's lease has not run out yet
        storage.connect(root).table("t")
    conn, table = _open_when_the_lease_expires(root, "t")  # taken over once expired
    assert _rows(table) == {b"holder": b"1"}
    conn.close()


def test_a_writer_that_lost_its_lease_stops_committing(s3_server):
    root = s3_server.root(lease_seconds=3)
    conn = storage.connect(root)
    table = conn.create_table("t", {"cf": {}})
    table.put(b"a", {b"cf:q": b"1"})
    lock_key = table.fs.uri(".lock")[len("s3://"):].split("/", 1)[1]
    bucket = table.fs.uri("")[len("s3://"):].split("/", 1)[0]
    # another process takes the lease over (as it would after an expiry)
    s3_server.client().put_object(Bucket=bucket, Key=lock_key, Body=b'{"owner": "other", "token": "x", "expires_ms": 0}')
    deadline = time.monotonic() + 20
    with pytest.raises(TableLocked, match="lost its lease"):
        while time.monotonic() < deadline:  # the next renewal (every second) finds the lease changed
            table.put(b"b", {b"cf:q": b"2"})
            time.sleep(0.1)
    with pytest.raises((TableLocked, StorageError)):
        table.flush()


def test_manifest_commits_are_conditional_puts(s3_root):
    writer = FileSystem(s3_root)
    writer.write_atomic("M", b"one")  # absent: created
    assert writer.read_bytes("M") == b"one"
    other = FileSystem(s3_root)
    assert other.read_bytes("M") == b"one"
    other.write_atomic("M", b"two")  # other commits a newer version
    with pytest.raises(PreconditionFailed):
        writer.write_atomic("M", b"stale")  # writer's view is stale: no overwrite
    assert FileSystem(s3_root).read_bytes("M") == b"two"
    fresh = FileSystem(s3_root)
    with pytest.raises(PreconditionFailed):
        fresh.write_atomic("M", b"blind")  # never read: may only create
    with storage.connect(s3_root) as conn:
        conn.create_table("t", {"cf": {}})
    with pytest.raises(storage.errors.TableExists):
        storage.connect(s3_root).create_table("t", {"cf": {}})


# -- configuration and failures --------------------------------------------------------
def test_uri_parameters_and_redaction(monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    settings, path = S3Settings.from_uri("s3://bkt/a/b?region=eu-west-1&connect_timeout=2&max_attempts=1")
    assert path == "bkt/a/b"
    assert (settings.region, settings.connect_timeout, settings.max_attempts) == ("eu-west-1", 2.0, 1)
    assert (settings.endpoint_override, settings.scheme) == ("127.0.0.1:9", "http")
    with pytest.raises(InvalidArgument, match="unknown s3 root parameter 'colour'"):
        S3Settings.from_uri("s3://bkt/a?colour=red")
    with pytest.raises(InvalidArgument, match="must be positive"):
        S3Settings.from_uri("s3://bkt/a?lease_seconds=0")
    assert redact_uri("s3://AKIA:secret@bkt/t?region=x") == "s3://***@bkt/t?region=x"
    fs = FileSystem("s3://AKIA:secret@bkt/t?endpoint_override=127.0.0.1:9&scheme=http")
    assert "secret" not in fs.uri("x") and "AKIA" not in fs.uri("x")


def test_endpoints_are_taken_with_or_without_their_scheme(s3_server, monkeypatch):
    """``endpoint_override=http%3A%2F%2Fhost%3Aport`` (pyarrow's and AWS_ENDPOINT_URL's form) reads and writes."""
    from urllib.parse import quote

    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    bucket = s3_server.new_bucket()
    spelled = [quote(f"http://{s3_server.endpoint}", safe=""), f"http://{s3_server.endpoint}/", s3_server.endpoint + "&scheme=http"]
    for i, endpoint in enumerate(spelled):
        root = f"s3://{bucket}/p{i}?endpoint_override={endpoint}&region=us-east-1"
        settings, _ = S3Settings.from_uri(root)
        assert (settings.endpoint_override, settings.scheme) == (s3_server.endpoint, "http")
        with storage.connect(root) as conn:
            conn.create_table("t", {"cf": {}}).put(b"r", {b"cf:a": b"%d" % i})
        with storage.connect(root, read_only=True) as conn:
            assert conn.table("t").row(b"r") == {b"cf:a": b"%d" % i}
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{s3_server.endpoint}")
    with storage.connect(f"s3://{bucket}/p0?region=us-east-1", read_only=True) as conn:
        assert conn.table("t").row(b"r") == {b"cf:a": b"0"}
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)  # scheme-less: https by default
    assert S3Settings.from_uri(f"s3://{bucket}/p")[0].scheme == "https"
    # what cannot be an endpoint is refused at connect, in one line naming it
    for bad, message in [
        ("ftp%3A%2F%2F127.0.0.1%3A9", "scheme must be http or https"),
        ("http%3A%2F%2F127.0.0.1%3A9%2Fpath", r"must be host:port or http\(s\)://host:port"),
        ("http%3A%2F%2F127.0.0.1%3A9&scheme=https", "says http but the scheme parameter says https"),
    ]:
        with pytest.raises(InvalidArgument, match=message) as info:
            storage.connect(f"s3://{bucket}/p?endpoint_override={bad}")
        assert "\n" not in str(info.value)


def test_a_silent_endpoint_fails_promptly_instead_of_hanging():
    import socket

    silent = socket.socket()  # accepts connections, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    port = silent.getsockname()[1]
    root = f"s3://bkt/t?endpoint_override=127.0.0.1:{port}&scheme=http&request_timeout=1&connect_timeout=1&max_attempts=1"
    try:
        start = time.monotonic()
        with pytest.raises((StorageError, OSError)):
            storage.connect(root).create_table("t", {"cf": {}})
        assert time.monotonic() - start < 15
    finally:
        silent.close()


# -- reads by byte range ---------------------------------------------------------------
def test_scans_read_byte_ranges_count_requests_and_reuse_the_block_cache(s3_root):
    with storage.connect(s3_root) as conn:
        table = conn.create_table("t", {"cf": {"block_size": 4096}})
        with table.batch() as b:
            for i in range(5000):
                b.put(b"r%05d" % i, {b"cf:q": b"x" * 20})
        table.flush()
    with storage.connect(s3_root, read_only=True) as conn:
        table = conn.table("t")
        first = ScanMetrics()
        rows = sum(b.num_rows for b in table.scan_batches(metrics=first))
        assert rows == 5000
        size = table.fs.size(f"regions/{table.region_infos()[0].region_id}/cf/000000000001.sf")
        # blocks were read by range, one request each, and nothing twice
        assert first.blocks_read_from_disk > 10
        assert first.read_requests == first.blocks_read_from_disk
        assert first.bytes_read_from_disk <= size
        again = ScanMetrics()
        assert sum(b.num_rows for b in table.scan_batches(metrics=again)) == 5000
        assert again.read_requests == 0 and again.bytes_read_from_disk == 0
        assert again.blocks_read_from_cache == first.blocks_read_from_disk
        ranged = ScanMetrics()
        assert sum(b.num_rows for b in table.scan_batches(row_start=b"r02000", row_stop=b"r02100", metrics=ranged)) == 100
        assert ranged.read_requests == 0  # those blocks are cached

def test_a_forward_scan_of_a_remote_file_reads_the_next_block_while_the_caller_works(s3_root):
    from storage.storefile import StoreFileReader, StoreFileWriter
    from storage.cells import CellType, cells_to_batch

    fs = FileSystem(s3_root)
    writer = StoreFileWriter(fs, "f.sf", family=b"cf", block_size=1024)
    writer.append_batch(cells_to_batch([(b"r%05d" % i, b"cf", b"q", 1, CellType.PUT, b"x" * 30) for i in range(2000)]))
    writer.finish()
    reader = StoreFileReader(fs, "f.sf")
    assert reader.block_count > 20
    scan = reader.scan_batches()
    next(scan)  # the caller now holds block 0
    deadline = time.monotonic() + 10
    while reader.counters.blocks_read < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reader.counters.blocks_read == 2  # block 1 arrived meanwhile, and no further
    total = 1 + sum(1 for _ in scan)
    assert total == reader.block_count
    snap = reader.counters.snapshot()
    assert snap["blocks_read"] == reader.block_count and snap["extra_header_reads"] == 0
    assert snap["reads"] == 2 + reader.block_count  # trailer, meta sections, then one ranged read per block
    reader.close()


def test_jobs_forward_the_aws_environment_as_redacted_executor_settings(monkeypatch):
    import re

    from connector.session import forwarded_environment

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "shh")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    conf = forwarded_environment({"spark.executorEnv.AWS_ACCESS_KEY_ID": "mine"})
    assert conf["spark.executorEnv.AWS_SECRET_ACCESS_KEY"] == "shh"
    assert "spark.executorEnv.AWS_ACCESS_KEY_ID" not in conf  # the user's own setting wins
    assert "spark.executorEnv.AWS_SESSION_TOKEN" not in conf
    pattern = re.compile(conf["spark.redaction.regex"])
    assert all(pattern.search(k) for k in ("spark.executorEnv.AWS_SECRET_ACCESS_KEY",
                                           "spark.executorEnv.AWS_ACCESS_KEY_ID",
                                           "spark.executorEnv.AWS_SESSION_TOKEN"))
    assert forwarded_environment({"spark.redaction.regex": "x"}).get("spark.redaction.regex") is None


def test_a_users_spark_session_forwards_the_aws_environment_to_executors(monkeypatch):
    from connector.session import PUSHDOWN_CONF, session_conf

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "shh")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    conf = session_conf("spark://127.0.0.1:7077", {"spark.executorEnv.AWS_ENDPOINT_URL": "http://s3.internal"})
    assert conf["spark.executorEnv.AWS_SECRET_ACCESS_KEY"] == "shh"
    assert conf["spark.executorEnv.AWS_ENDPOINT_URL"] == "http://s3.internal"  # the caller's setting wins
    assert "spark.executorEnv.AWS_SESSION_TOKEN" not in conf
    assert "secret" in conf["spark.redaction.regex"] and conf[PUSHDOWN_CONF] == "true"
    assert "spark.ui.enabled" not in conf  # a cluster master keeps its web UI
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    local = session_conf("local[2]")
    assert not any(key.startswith("spark.executorEnv.") for key in local) and "spark.redaction.regex" not in local
    assert local["spark.ui.enabled"] == "false"


def test_table_input_format_splits_and_reads_an_s3_table(s3_root):
    import pickle

    from connector.input_format import TableInputFormat

    with storage.connect(s3_root) as conn:
        table = conn.create_table("t", {"cf": {}}, split_keys=[b"h", b"p"])
        for row in (b"a", b"i", b"q", b"z"):
            table.put(row, {b"cf:q": row * 2})
        table.flush()
        table.put(b"b", {b"cf:q": b"wal-only"})  # in a WAL segment, not in a store file
    fmt = TableInputFormat({"regionscan.root": s3_root, "hbase.mapreduce.inputtable": "t"})
    splits = [pickle.loads(pickle.dumps(s)) for s in fmt.get_splits()]  # as executors get them
    assert len(splits) == 3
    rows = {}
    for split in splits:
        reader = fmt.create_record_reader(split)
        while reader.next_key_value():
            rows[reader.get_current_key()] = reader.get_current_value()
        reader.close()
    assert {k: v[b"cf:q"] for k, v in rows.items()} == {
        b"a": b"aa", b"b": b"wal-only", b"i": b"ii", b"q": b"qq", b"z": b"zz"}


def test_a_damaged_lease_object_counts_as_expired(s3_root):
    with storage.connect(s3_root) as conn:
        conn.create_table("t", {"cf": {}})
    fs = FileSystem(s3_root)
    fs.write_bytes("t/.lock", b"\x00garbage")
    with storage.connect(s3_root) as conn:
        conn.table("t").put(b"a", {b"cf:q": b"1"})
        assert b"garbage" not in fs.read_bytes("t/.lock")  # taken over: now our lease
