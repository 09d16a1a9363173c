"""ParallelScanner against the plain scan, on the embedded store and through a region server."""

from __future__ import annotations

import struct
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import storage
from storage.table.parallel import ParallelScanner, parallel_scan, region_tasks
from storage.server.process import ServerProcess

ROWS = 4000
REGIONS = 5
COLUMNS = [b"cf:n", b"cf:s"]


def _split_keys():
    return [struct.pack(">I", ROWS * k // REGIONS) for k in range(1, REGIONS)]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("parallel") / "root")
    conn = storage.connect(path)
    table = conn.create_table("s", {"cf": {"block_size": 2048}}, split_keys=_split_keys(), settings={"wal_sync": "none"})
    with table.batch() as b:
        for i in range(ROWS):
            b.put(struct.pack(">I", i), {b"cf:n": struct.pack(">i", i * 7 - 1000), b"cf:s": b"s%06d" % i * 5})
    table.flush()
    with table.batch() as b:  # some rows of the first region only in the memstore
        for i in range(0, ROWS // REGIONS, 97):
            b.put(struct.pack(">I", i), {b"cf:n": struct.pack(">i", -i)})
    many = conn.create_table("many", {"cf": {}}, split_keys=[struct.pack(">I", k) for k in range(50, 2000, 50)],
                             settings={"wal_sync": "none"})
    with many.batch() as b:
        for i in range(2000):
            b.put(struct.pack(">I", i), {b"cf:n": struct.pack(">i", i)})
    many.flush()
    conn.close()
    return path


@pytest.fixture(scope="module")
def table(root):
    with storage.connect(root, read_only=True) as conn:
        yield conn.table("s")


def _decode(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Vectorized per-batch work: decode the 4-byte big-endian int column."""
    col = batch.column(batch.schema.get_field_index("cf:n"))
    data = np.frombuffer(col.buffers()[2], dtype=">i4", count=len(col) + col.offset)[col.offset:]
    return pa.record_batch([batch.column(0), pa.array(data.astype(np.int64))], names=["key", "n"])


def _even(batch: pa.RecordBatch):
    return pc.equal(pc.bit_wise_and(_decode(batch).column(1), 1), 0)


def _table(results) -> pa.Table:
    return pa.Table.from_batches(list(results))


def _expected(table, **options) -> pa.Table:
    batches = [_decode(b) for b in table.scan_batches(columns=COLUMNS, **options)]
    out = pa.Table.from_batches(batches)
    return out.filter(pc.equal(pc.bit_wise_and(out.column("n"), 1), 0))


def test_region_tasks_cut_the_range():
    regions = [{"start_key": b"", "end_key": b"c"}, {"start_key": b"c", "end_key": b"m"},
               {"start_key": b"m", "end_key": b""}]
    assert region_tasks(regions, b"", None) == [(b"", b"c"), (b"c", b"m"), (b"m", None)]
    assert region_tasks(regions, b"d", b"n") == [(b"d", b"m"), (b"m", b"n")]
    assert region_tasks(regions, b"c", b"m") == [(b"c", b"m")]


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("ordered", [True, False])
def test_rows_equal_plain_scan(table, threads, ordered):
    expected = pa.Table.from_batches(list(table.scan_batches()))
    scanner = ParallelScanner(table, threads, ordered=ordered, queue_size=2)
    got = _table(scanner.scan())
    if not ordered:
        got = got.sort_by("key")
    assert got.equals(expected)
    assert scanner.stats["regions"] == REGIONS and scanner.stats["rows"] == ROWS


@pytest.mark.parametrize("options", [
    {"reverse": True},
    {"row_start": struct.pack(">I", 700), "row_stop": struct.pack(">I", 3333)},
    {"row_start": struct.pack(">I", 3333), "row_stop": struct.pack(">I", 700), "reverse": True},
    {"row_prefix": b"\x00\x00\x0c"},
    {"filter": "ValueFilter (=, 'substring:s0001')", "columns": [b"cf:n", b"cf:s"]},
])
def test_ranges_reverse_and_filters_in_key_order(table, options):
    expected = pa.Table.from_batches(list(table.scan_batches(**options)))
    got = _table(ParallelScanner(table, 3).scan(**options))
    assert got.num_rows > 0 and got.equals(expected)


def test_work_runs_on_the_worker_threads(table):
    seen: set = set()

    class SerDe:
        def deserialize_batch(self, batch):
            seen.add(threading.current_thread().name)
            return _decode(batch)

    got = _table(parallel_scan(table, 3, transform=SerDe(), predicate=_even, batch_size=512,
                                     columns=COLUMNS))
    assert got.equals(_expected(table))
    assert seen and all(name.startswith("parallel-scan-") for name in seen)


def test_queues_bound_the_work_ahead_of_the_consumer(root):
    produced = [0]
    lock = threading.Lock()

    def count(batch):
        with lock:
            produced[0] += 1
        return batch

    threads, queue_size = 2, 1
    consumed = 0
    worst = 0
    many = storage.connect(root, read_only=True).table("many")  # 40 regions: 40 batches at least
    for _ in ParallelScanner(many, threads, queue_size=queue_size, transform=count).scan():
        consumed += 1
        time.sleep(0.002)
        with lock:
            worst = max(worst, produced[0] - consumed)
    assert consumed == produced[0] >= 40
    # Each busy worker holds at most queue_size queued results plus the one it is putting.
    assert worst <= threads * (queue_size + 1)


def test_errors_and_early_close_stop_the_workers(table):
    def boom(batch):
        if batch.column(0)[0].as_py() >= struct.pack(">I", 2000):
            raise ValueError("bad row")
        return batch

    with pytest.raises(ValueError, match="bad row"):
        list(ParallelScanner(table, 2, transform=boom).scan(batch_size=64))
    it = ParallelScanner(table, 4).scan(batch_size=64)
    next(it)
    it.close()
    deadline = time.monotonic() + 5
    while any(t.name.startswith("parallel-scan-") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "workers still running after close"
        time.sleep(0.01)
    with pytest.raises(storage.InvalidArgument, match="limit"):
        ParallelScanner(table).scan(limit=5)
    with pytest.raises(storage.InvalidArgument, match="threads"):
        ParallelScanner(table, 0)
    with pytest.raises(storage.InvalidArgument, match="deserialize_batch"):
        ParallelScanner(table, transform=object())


def test_through_a_region_server(root, table):
    expected = _expected(table)
    with ServerProcess(root) as proc, storage.connect(proc.location) as conn:
        remote = conn.table("s")
        for mode in ("stream", "rpc"):
            got = _table(parallel_scan(remote, 3, transform=_decode, predicate=_even, mode=mode, caching=300,
                                       columns=COLUMNS))
            assert got.equals(expected)
        reverse = _table(parallel_scan(remote, 2, ordered=True, reverse=True, mode="stream"))
        assert reverse.equals(pa.Table.from_batches(list(table.scan_batches(reverse=True))))
        assert conn.list_scanners() == {"scanners": [], "streams": [], "draining_streams": [], "expired_total": 0,
                                        "streams_expired_total": 0, "connections_cancelled_total": 0}
