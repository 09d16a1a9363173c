"""The region server in a child process against the embedded store: scans, writes, errors, limits."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest

import storage
from storage.filters import BinaryComparator, CompareOperator, PrefixFilter, SingleColumnValueFilter
from storage.server import LeaseExpired, LimitExceeded, OutOfOrderScannerNext, Unauthenticated, UnknownScanner
from storage.server.process import ServerProcess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(storage.__file__)))
ROWS = 3000
SPLITS = [b"row01000", b"row02000"]
TOKEN = "s3cret-token"


def _key(i: int) -> bytes:
    return b"row%05d" % i


def build_table(root: str) -> None:
    """3 regions; flushed data plus memstore-only overwrites, deletes and extra versions (WAL replay)."""
    conn = storage.connect(root)
    table = conn.create_table("t", {"cf": {"max_versions": 3}, "meta": {}}, split_keys=SPLITS,
                              settings={"wal_sync": "none"})
    with table.batch(timestamp=1000) as b:
        for i in range(ROWS):
            data = {b"cf:a": b"a%d" % i, b"cf:b": b"%d" % (i * 7 % 13)}
            if i % 3 == 0:
                data[b"meta:x"] = b"x" * (i % 17)
            b.put(_key(i), data)
    table.flush()
    with table.batch(timestamp=2000) as b:
        for i in range(0, ROWS, 10):
            b.put(_key(i), {b"cf:a": b"new%d" % i})
        for i in range(1, ROWS, 50):
            b.delete(_key(i))
    # One region holding more cells than one engine batch, so an RPC scan pulls several batches.
    plain = conn.create_table("p", {"f": {"block_size": 2048}}, settings={"wal_sync": "none"})
    with plain.batch() as b:
        for i in range(ROWS):
            b.put(_key(i), {b"f:%d" % c: b"%08d" % i for c in range(6)})
    plain.flush()
    # Big enough (16 MB, 8 regions) that gRPC cannot buffer a whole stream of it for a client
    # that stopped reading.
    big = conn.create_table("big", {"f": {}}, split_keys=[_key(i) for i in range(500, 4000, 500)],
                            settings={"wal_sync": "none"})
    with big.batch() as b:
        for i in range(4000):
            b.put(_key(i), {b"f:v": b"%04d" % i * 1000})
    big.flush()
    conn.close()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("server") / "root")
    build_table(path)
    return path


@pytest.fixture(scope="module")
def server(root):
    with ServerProcess(root, "--lease-timeout", "1.5", "--block-cache-size", "0") as proc:
        yield proc


@pytest.fixture(scope="module")
def embedded(root, server):
    # Read-only connections take no lock, so they can read beside the server.
    with storage.connect(root, read_only=True) as conn:
        yield conn.table("t")


SCANS = [
    {},
    {"reverse": True},
    {"row_start": b"row00500", "row_stop": b"row02500"},
    {"row_start": b"row02500", "row_stop": b"row00500", "reverse": True},
    {"row_prefix": b"row012"},
    {"columns": [b"cf:a", b"meta"]},
    {"filter": "SingleColumnValueFilter ('cf', 'b', =, 'binary:3')"},
    {"filter": PrefixFilter(b"row01") , "reverse": True},
    {"filter": SingleColumnValueFilter(b"cf", b"b", CompareOperator.EQUAL, BinaryComparator(b"5")), "reverse": True},
    {"max_versions": 3, "include_timestamp": True},
    {"time_range": (0, 1500)},
    {"limit": 17},
]


@pytest.mark.parametrize("mode", ["stream", "rpc"])
@pytest.mark.parametrize("options", SCANS, ids=lambda o: ",".join(sorted(o)) or "all")
def test_scan_rows_equal_embedded(remote, embedded, mode, options):
    expected = list(embedded.scan(**options))
    assert expected, "every scan of the fixture returns rows"
    got = list(remote.table("t").scan(mode=mode, caching=7, **options))
    assert got == expected


@pytest.mark.parametrize("mode", ["stream", "rpc"])
@pytest.mark.parametrize("options", [{}, {"reverse": True, "columns": [b"cf:a", b"meta:x"]},
                                     {"filter": "PrefixFilter ('row02')", "output": "cells"}])
def test_scan_batches_equal_embedded(remote, embedded, mode, options):
    expected = pa.Table.from_batches(list(embedded.scan_batches(**options)))
    batches = list(remote.table("t").scan_batches(mode=mode, caching=333, batch_size=500, **options))
    got = pa.Table.from_batches(batches, schema=expected.schema)
    assert got.equals(expected)
    if mode == "rpc":  # each next() answer holds at most `caching` whole rows
        assert max(len(set(b.column(0).to_pylist())) for b in batches) <= 333


def test_point_reads_equal_embedded(remote, embedded):
    table = remote.table("t")
    for i in (0, 1, 10, 999, 1000, 2999):
        assert table.row(_key(i)) == embedded.row(_key(i))
        assert table.row(_key(i), include_timestamp=True) == embedded.row(_key(i), include_timestamp=True)
    keys = [_key(i) for i in (5, 1, 20, 7777)]
    assert table.rows(keys, columns=[b"cf:a"]) == embedded.rows(keys, columns=[b"cf:a"])
    assert table.cells(_key(10), b"cf:a", versions=3, include_timestamp=True) == \
        embedded.cells(_key(10), b"cf:a", versions=3, include_timestamp=True)
    assert table.regions() == embedded.regions()
    assert [r.start for r in table.region_infos()] == [b""] + SPLITS
    assert table.families() == embedded.families()


def test_writes_admin_and_errors(remote):
    created = remote.create_table("w", {"f": {}}, num_regions=2)
    assert b"w" in remote.tables() and remote.is_table_available("w")
    created.put(b"k1", {b"f:q": b"v1"}, timestamp=5)
    with created.batch(timestamp=7) as b:
        b.put(b"k2", {b"f:q": b"v2", b"f:r": b"r2"})
        b.put(b"k3", {b"f:q": b"v3"})
        b.delete(b"k1")
    created.delete(b"k2", columns=[b"f:r"])
    assert list(created.scan()) == [(b"k2", {b"f:q": b"v2"}), (b"k3", {b"f:q": b"v3"})]
    assert created.counter_inc(b"c", b"f:n", 5) == 5
    assert created.counter_dec(b"c", b"f:n") == 4
    assert created.counter_get(b"c", b"f:n") == 4
    created.flush()
    assert [r[0] for r in created.scan(mode="rpc")] == [b"c", b"k2", b"k3"]
    with pytest.raises(storage.InvalidArgument, match="no column family"):
        created.put(b"k", {b"nope:q": b"v"})
    with pytest.raises(storage.TableNotFound):
        remote.table("missing")
    with pytest.raises(storage.InvalidArgument, match="invalid table name"):
        remote.table("../escape")
    with pytest.raises(storage.TableNotFound):  # the server checks names too
        remote._call("table_regions", {"table": "missing"})
    with pytest.raises(storage.InvalidArgument, match="invalid table name"):
        remote._call("table_regions", {"table": "../../etc"})
    with pytest.raises(storage.TableExists):
        remote.create_table("w", {"f": {}})
    with pytest.raises(storage.InvalidArgument):
        list(created.scan(filter="NoSuchFilter ()"))
    remote.delete_table("w")
    assert not remote.is_table_available("w")


COUNTS = [{}, {"row_start": b"row00500", "row_stop": b"row02500"}, {"row_prefix": b"row012"}, {"row_stop": b"row00001"},
          {"row_start": b"row09"}]


def test_count_equals_embedded(remote, embedded):
    table = remote.table("t")
    for kw in COUNTS:
        rows = sum(b.num_rows for b in embedded.scan_batches(filter="FirstKeyOnlyFilter() AND KeyOnlyFilter()",
                                                              output="cells", **kw))
        assert table.count(**kw) == embedded.count(**kw) == rows, kw
    assert table.count() == ROWS - len(range(1, ROWS, 50))
    # a flushed table of one clean file: the server counts from the block index, reading no block
    remote.read_counters("p", reset=True)
    assert remote.table("p").count() == ROWS
    assert remote.read_counters("p")["counters"]["blocks_read"] == 0
    with pytest.raises(storage.InvalidArgument, match="request field 'row_start' must be bytes, got str"):
        table.count(row_start="row1")
    with pytest.raises(storage.InvalidArgument, match="row_prefix cannot be combined with row_start or row_stop"):
        table.count(row_start=b"a", row_prefix=b"b")
    with pytest.raises(storage.TableNotFound):
        remote._call("count", {"table": "missing"})


def test_sequence_numbers(remote, embedded):
    table = remote.table("t")
    expected = pa.Table.from_batches(list(embedded.scan_batches(columns=[b"cf:a"])))
    with table.open_scanner(columns=[b"cf:a"], caching=100) as scanner:
        first = scanner.next()
        again = scanner.next(seq=0)  # a retry of the last call: the same rows, nothing skipped
        assert pa.Table.from_batches(again).equals(pa.Table.from_batches(first))
        with pytest.raises(OutOfOrderScannerNext, match="expected 1"):
            scanner.next(seq=3)
        second = scanner.next()
        with pytest.raises(OutOfOrderScannerNext):
            scanner.next(seq=0)  # older than the last call
        got = first + second
        while scanner.more:
            got += scanner.next()
        listed = {s["id"]: s for s in remote.list_scanners()["scanners"]}
        assert listed[scanner.scanner_id]["retries"] == 1
    assert pa.Table.from_batches(got).equals(expected)
    with pytest.raises(UnknownScanner):
        scanner.next()


def test_lease_expiry_frees_the_scanner(remote):
    table = remote.table("t")
    scanner = table.open_scanner(caching=10)
    scanner.next()
    assert scanner.scanner_id in {s["id"] for s in remote.list_scanners()["scanners"]}
    deadline = time.monotonic() + 10
    while scanner.scanner_id in {s["id"] for s in remote.list_scanners()["scanners"]}:
        assert time.monotonic() < deadline, "the reaper never closed the idle scanner"
        time.sleep(0.2)
    with pytest.raises(LeaseExpired, match="expired after 1.5 s"):
        scanner.next()
    with pytest.raises(UnknownScanner):
        table.connection._call("scan_next", {"scanner_id": "f" * 32, "seq": 0, "rows": 1})
    renewed = table.open_scanner(caching=10)
    for _ in range(5):  # renewing keeps it alive past the lease
        time.sleep(0.5)
        renewed.renew()
    assert len(renewed.next()[0]) == 10
    renewed.close()


def test_rpc_scan_reads_each_block_once_across_handler_threads(remote, embedded):
    """Successive next() calls are served by pool threads; the shared prefetched header keeps reads sequential."""
    remote.read_counters("p", reset=True)
    scanner = remote.table("p").open_scanner(batch_size=64, caching=20)
    assert sum(b.num_rows for b in scanner) == ROWS
    assert scanner.seq > 100
    stats = remote.read_counters("p")
    # Every block is read exactly once (this server has no block cache) and never needs a
    # separate header read, whichever pool thread served each next() call.
    assert stats["blocks"] > 50
    assert stats["counters"]["blocks_read"] == stats["blocks"]
    assert stats["counters"]["extra_header_reads"] == 0


def test_many_threads_scanning_at_once(remote, embedded):
    expected = {True: list(embedded.scan(reverse=True)), False: list(embedded.scan())}
    errors: list = []
    results: dict = {}

    def work(n: int) -> None:
        try:
            mode = "rpc" if n % 2 else "stream"
            reverse = n % 3 == 0
            results[n] = list(remote.table("t").scan(mode=mode, reverse=reverse, caching=250)) == expected[reverse]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == {n: True for n in range(8)}
    assert remote.list_scanners()["scanners"] == []


_CHILD = """
import sys, time
import storage
t = storage.connect(sys.argv[1]).table("big")
it = t.scan_batches(batch_size=64, output="cells")
next(it)
print("started", flush=True)
time.sleep(60)
"""


def test_killed_client_frees_its_stream(server, remote):
    env = dict(os.environ, PYTHONPATH=REPO)
    child = subprocess.Popen([sys.executable, "-c", _CHILD, server.location], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "started"
        time.sleep(0.3)
        streams = remote.list_scanners()["streams"]
        assert len(streams) == 1 and streams[0]["table"] == "big"
        assert streams[0]["rows"] < 4000  # the server is held back mid-table, not done
    finally:
        child.kill()
        child.wait()
    deadline = time.monotonic() + 10
    while remote.list_scanners()["streams"]:
        assert time.monotonic() < deadline, "the server kept the dead client's stream"
        time.sleep(0.1)


def test_token_and_limits(tmp_path, root):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with ServerProcess(str(tmp_path / "other"), "--token-file", str(token_file), "--max-scanners-per-client", "2",
                       "--max-request-bytes", "4096", "--max-next-rows", "50") as proc:
        with pytest.raises(Unauthenticated, match="no token"):
            storage.connect(proc.location).tables()
        with pytest.raises(PermissionError, match="wrong token"):
            storage.connect(proc.location, token="guess").tables()
        conn = storage.connect(proc.location, token=TOKEN)
        table = conn.create_table("l", {"f": {}})
        with pytest.raises(LimitExceeded, match="max_request_bytes"):
            conn._call("mutate", {"table": "l", "ops": [["put", b"k", {b"f:q": b"v" * 8000}, None]]})
        with table.batch() as b:  # the client cuts big batches under the limit
            for i in range(200):
                b.put(b"k%03d" % i, {b"f:q": b"v" * 40})
        assert sum(1 for _ in table.scan()) == 200
        first, second = table.open_scanner(caching=10), table.open_scanner(caching=10)
        with pytest.raises(LimitExceeded, match="per-client limit"):
            table.open_scanner()
        with pytest.raises(LimitExceeded, match="max_next_rows"):
            first.next(51)
        first.close()
        assert sum(b.num_rows for b in table.scan_batches(mode="stream")) == 200
        second.close()
        conn.close()
        assert proc.stop() == 0  # SIGTERM: a clean shutdown
        assert "region server stopped" in "".join(proc.output)
