"""Server pieces in-process: the wire format, error mapping, and RPC scanners driven from many threads."""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import storage
from storage import clock
from storage.errors import CorruptionError, InvalidArgument, ScannerError, TableNotFound
from storage.server import LeaseExpired, LimitExceeded, OutOfOrderScannerNext, ServerConfig, Unauthenticated, UnknownScanner
from storage.server.cli import read_token_file, serve_main
from storage.server.remote_errors import RemoteError, from_flight_error, to_flight_error
from storage.server.scanners import ScannerRegistry
from storage.server.service import table_read_counters
from storage.server.wire import PRELUDE, batches_to_ipc, decode_message, encode_message, from_wire, ipc_to_batches, to_wire
from storage.storefile.reader import StoreFileReader

ROWS = 2000


# -- wire format ------------------------------------------------------------------
def test_tagged_json_round_trip():
    value = {
        "table": "t",
        "row": b"\x00\xffkey",
        "data": {b"cf:q": b"v", b"cf:r": [b"v2", 17]},
        "$odd": 1,
        "nested": [None, True, 1.5, (b"a", "b")],
    }
    back = from_wire(to_wire(value))
    assert back == {**value, "nested": [None, True, 1.5, [b"a", "b"]]}
    with pytest.raises(InvalidArgument, match="cannot send a set"):
        to_wire({"x": {1, 2}})


def test_message_framing_and_errors():
    batch = pa.record_batch([pa.array([b"a", b"b"]), pa.array([1, 2])], names=["key", "n"])
    raw = encode_message({"seq": 3, "k": b"\x01"}, batches_to_ipc([batch, batch]))
    msg = decode_message(raw)
    assert msg.header == {"seq": 3, "k": b"\x01"}
    assert [b.equals(batch) for b in msg.batches()] == [True, True]
    assert ipc_to_batches(b"") == [] and batches_to_ipc([]) == b""
    with pytest.raises(InvalidArgument, match="magic"):
        decode_message(b"XXXX" + raw[4:])
    with pytest.raises(InvalidArgument, match="protocol version 9"):
        decode_message(raw[:4] + b"\x00\x09" + raw[6:])
    with pytest.raises(InvalidArgument, match="runs past the end"):
        decode_message(raw[: PRELUDE.size + 3])
    with pytest.raises(InvalidArgument, match="shorter than"):
        decode_message(b"RSW")
    with pytest.raises(InvalidArgument, match="must be a JSON object"):
        decode_message(PRELUDE.pack(b"RSWP", 1, 0, 2) + b"[]")


@pytest.mark.parametrize("exc", [
    InvalidArgument("bad value 7"), TableNotFound("table x does not exist"), LeaseExpired("scanner 1 expired"),
    OutOfOrderScannerNext("seq 4"), UnknownScanner("no open scanner"), LimitExceeded("too big"),
    Unauthenticated("wrong token"),
])
def test_errors_cross_the_wire_as_their_class(exc):
    back = from_flight_error(to_flight_error(exc))
    assert type(back) is type(exc) and str(back) == str(exc)


def test_unregistered_errors_degrade_clearly():
    assert isinstance(from_flight_error(to_flight_error(CorruptionError("bad block", "f", 10))), CorruptionError)
    assert type(from_flight_error(to_flight_error(ValueError("v")))) is InvalidArgument
    back = from_flight_error(to_flight_error(RuntimeError("boom")))
    assert type(back) is RemoteError and "boom" in str(back)
    assert type(from_flight_error(flight.FlightUnavailableError("gone"))) is RemoteError
    assert isinstance(LeaseExpired("x"), ScannerError)


def test_config_and_cli_checks(tmp_path):
    with pytest.raises(InvalidArgument, match="lease_timeout"):
        ServerConfig(lease_timeout=0)
    with pytest.raises(InvalidArgument, match="max_scanners_per_client"):
        ServerConfig(max_scanners_per_client=0)
    assert ServerConfig().loopback and not ServerConfig(host="0.0.0.0", token="t").loopback
    empty = tmp_path / "empty"
    empty.write_text("  \n")
    with pytest.raises(InvalidArgument, match="is empty"):
        read_token_file(str(empty))
    assert serve_main(["--root", str(tmp_path / "r"), "--token-file", str(tmp_path / "missing")]) == 2


# -- RPC scanners across threads ----------------------------------------------------
@pytest.fixture(scope="module")
def table(tmp_path_factory):
    conn = storage.connect(str(tmp_path_factory.mktemp("scanners")), block_cache_size=0)
    t = conn.create_table("p", {"f": {"block_size": 1024}}, settings={"wal_sync": "none"})
    with t.batch() as b:
        for i in range(ROWS):
            b.put(b"row%05d" % i, {b"f:%d" % c: b"%08d" % i for c in range(10)})
    t.flush()
    yield t
    conn.close()


def _drain_on_fresh_threads(registry: ScannerRegistry, scanner_id: str, rows: int) -> tuple[list, int]:
    """Call next() until the scan ends, every call on a new thread (as pool threads hop).

    The threads stay alive until the end, so no two calls share a thread id.
    """
    out: list = []
    finished = threading.Event()
    threads = []
    seq = 0
    more = True
    while more:
        answer: list = []
        served = threading.Event()

        def call(seq=seq, answer=answer, served=served) -> None:
            answer.append(registry.next(scanner_id, seq, rows, 1 << 30))
            served.set()
            finished.wait()

        t = threading.Thread(target=call)
        t.start()
        threads.append(t)
        served.wait()
        header, payload = answer[0]
        out += ipc_to_batches(payload)
        more = header["more"]
        seq += 1
    finished.set()
    for t in threads:
        t.join()
    return out, seq


def test_rpc_scanner_hopping_threads_reads_each_block_once(table):
    registry = ScannerRegistry(lease_timeout=30, max_per_client=4, max_total=8)
    table_read_counters(table, reset=True)
    scanner = registry.open_scanner("peer", "p", lambda: table.scan_batches(batch_size=16), cells=False)
    batches, calls = _drain_on_fresh_threads(registry, scanner.scanner_id, rows=25)
    assert calls > 50 and scanner.describe()["handler_threads"] == calls
    stats = table_read_counters(table)
    assert stats["counters"]["blocks_read"] == stats["blocks"] > 50
    assert stats["counters"]["extra_header_reads"] == 0
    got = pa.Table.from_batches(batches)
    assert got.equals(pa.Table.from_batches(list(table.scan_batches())))
    registry.stop()


def test_thread_local_prefetch_would_reread_headers(table):
    """The same hopping scan over a reader keeping the prefetched header per thread (old HBase)."""
    shared = table._regions[0].stores["f"].files[0].reader
    results = {}
    for mode in ("shared", "thread_local"):
        reader = StoreFileReader(shared.fs, shared.path, prefetch=mode)
        registry = ScannerRegistry(lease_timeout=30, max_per_client=4, max_total=8)
        scanner = registry.open_scanner("peer", "p", lambda: reader.scan_batches(), cells=True)
        batches, calls = _drain_on_fresh_threads(registry, scanner.scanner_id, rows=10)
        assert sum(len(set(b.column(0).to_pylist())) for b in batches) == ROWS
        results[mode] = reader.counters.snapshot()
        registry.stop()
        reader.close()
    assert results["shared"]["extra_header_reads"] == 0
    # Per-thread prefetch: the first block each call reads on its new thread needs a header read.
    assert results["thread_local"]["extra_header_reads"] >= calls // 2 > 50
    assert results["shared"]["blocks_read"] == results["thread_local"]["blocks_read"] == reader.block_count


def test_registry_leases_sequence_and_limits(table):
    closed = []

    def batches():
        try:
            yield from table.scan_batches(batch_size=64)
        finally:
            closed.append(True)  # runs when the scanner's generator is closed

    with clock.use(clock.ManualClock()) as manual:  # leases run out when the test moves it: no sleeping
        registry = ScannerRegistry(lease_timeout=30, max_per_client=2, max_total=3)
        s1 = registry.open_scanner("a", "p", batches, cells=False)
        # the other scanners only fill the limits: an empty key range keeps their prefetch
        # from reading blocks while s1's lease runs
        def empty():
            return table.scan_batches(row_start=b"~")

        registry.open_scanner("a", "p", empty, cells=False)
        with pytest.raises(LimitExceeded, match="per-client"):
            registry.open_scanner("a", "p", empty, cells=False)
        registry.open_scanner("b", "p", empty, cells=False)
        with pytest.raises(LimitExceeded, match="max_scanners"):
            registry.add_stream("c", "p")
        header, _ = registry.next(s1.scanner_id, 0, 10, 1 << 20)
        assert header == {"seq": 0, "rows": 10, "more": True}
        assert registry.next(s1.scanner_id, 0, 10, 1 << 20)[0]["rows"] == 10  # retry
        with pytest.raises(OutOfOrderScannerNext):
            registry.next(s1.scanner_id, 2, 10, 1 << 20)
        header, payload = registry.next(s1.scanner_id, 1, 500, 2000)  # the byte cap wins over the row count
        assert 1 <= header["rows"] < 500
        manual.advance(29)
        assert registry.reap() == 0  # within the lease
        registry.renew(s1.scanner_id)
        manual.advance(2)
        assert registry.reap() == 2 and closed == []  # the other two; s1's lease was renewed
        manual.advance(29)
        assert registry.reap() == 1 and closed == [True]
        with pytest.raises(LeaseExpired):
            registry.next(s1.scanner_id, 2, 10, 1 << 20)
        with pytest.raises(UnknownScanner):
            registry.next("nope", 0, 10, 1 << 20)
        assert registry.describe()["scanners"] == [] and registry.describe()["expired_total"] == 3
        registry.stop()
