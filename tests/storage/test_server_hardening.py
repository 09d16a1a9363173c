"""The region server under bad input and stalling clients.

A real server on loopback (IPv4 and IPv6, so two client machines can be
told apart), driven with raw Flight calls where the client library would
refuse to send what is tested: deep JSON, wrong types, huge numbers, a
100 KB table name, streams that stop being read.
"""

from __future__ import annotations

import threading
import time

import pyarrow.flight as flight
import pytest

import storage
from storage.errors import InvalidArgument
from storage.server import (
    LimitExceeded,
    MalformedRequest,
    RegionServer,
    RequestFieldError,
    ServerConfig,
)
from storage.server.remote_errors import MAX_ERROR_CHARS, from_flight_error
from storage.server.scanners import peer_host
from storage.server.wire import PRELUDE, encode_message

LEASE = 1.0
PER_CLIENT = 3
ROWS = 12000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hard") / "root")
    with storage.connect(root) as conn:
        big = conn.create_table("big", {"f": {}}, settings={"wal_sync": "none"})
        # 48 MB: more than gRPC, the front door and the sockets between them buffer for a client
        # that stopped reading (16 MB was not, in 2 of 6 runs through the door)
        with big.batch() as b:
            for i in range(ROWS):
                b.put(b"row%05d" % i, {b"f:v": b"%04d" % i * 1000})
        big.flush()
        conn.create_table("small", {"f": {}}).put(b"r", {b"f:c": b"\x00" * 8})
    srv = RegionServer(root, ServerConfig(host="::", allow_remote=True, lease_timeout=LEASE, max_scanners_per_client=PER_CLIENT))
    thread = threading.Thread(target=srv.serve, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    thread.join(10)


def _v4(server) -> str:
    return f"grpc://127.0.0.1:{server.port}"


def _v6(server) -> str:
    return f"grpc://[::1]:{server.port}"


def _raw(server, action: str, body: bytes) -> BaseException:
    """The engine error a raw action body gets back."""
    client = flight.FlightClient(_v4(server))
    try:
        list(client.do_action(flight.Action(action, body)))
    except flight.FlightError as exc:
        return from_flight_error(exc)
    finally:
        client.close()
    raise AssertionError("the server accepted the request")


def _header(text: str) -> bytes:
    data = text.encode()
    return PRELUDE.pack(b"RSWP", 1, 0, len(data)) + data


# -- malformed requests ------------------------------------------------------------


def test_a_100kb_table_name_comes_back_as_a_short_error(server):
    conn = storage.connect(_v4(server))
    with pytest.raises(InvalidArgument) as info:
        conn.table("x" * 100_000).row(b"r")
    assert "invalid table name" in str(info.value) and len(str(info.value)) <= MAX_ERROR_CHARS
    with pytest.raises(InvalidArgument):
        conn.create_table("y" * 100_000, {"f": {}})
    conn.close()


@pytest.mark.parametrize(
    "body, cls, words",
    [
        ('{"table": "small", "row": ' + "[" * 5000 + "]" * 5000 + "}", MalformedRequest, "nested"),
        ('{"table": "small", "row": {"$b": "cg=="}, "x": ' + "9" * 5000 + "}", MalformedRequest, "digits"),
        ('{"table": "small", "row": {"$b": "cg=="}, "column": "f:c", "value": 99999999999999999999}',
         MalformedRequest, "64-bit"),
        ('{"table": "small", "row": {"$b": 17}}', MalformedRequest, "tagged JSON"),
        ('{"table": "small", "row": {"$m": [[{"a": 1}, 2]]}}', MalformedRequest, "tagged JSON"),
        ('{"table": "small", "row": "r"', MalformedRequest, "JSON"),
        ('{"table": ["small"], "row": {"$b": "cg=="}}', RequestFieldError, "'table'"),
        ('{"table": "small", "row": "r", "column": "f:c", "value": 1}', RequestFieldError, "'row' must be bytes"),
        ('{"table": "small", "row": {"$b": "cg=="}, "column": "f:c", "value": true}', RequestFieldError, "'value'"),
        ('{"table": "small", "row": {"$b": "cg=="}, "column": "f:c", "value": 1.5}', RequestFieldError, "'value'"),
    ],
)
def test_malformed_requests_get_their_own_error_class(server, body, cls, words):
    error = _raw(server, "counter_inc", _header(body))
    assert type(error) is cls and words in str(error), repr(error)
    assert len(str(error)) <= MAX_ERROR_CHARS


def test_bad_framing_is_a_malformed_request(server):
    for body in (b"XX", b"XXXX" + bytes(8), PRELUDE.pack(b"RSWP", 1, 0, 99) + b"{}"):
        assert type(_raw(server, "list_tables", body)) is MalformedRequest


def test_a_counter_past_int64_is_refused_by_the_engine(server):
    conn = storage.connect(_v4(server))
    table = conn.table("small")
    table.counter_set(b"c", b"f:c", 2**63 - 1)
    with pytest.raises(InvalidArgument, match="64-bit"):
        table.counter_inc(b"c", b"f:c", 1)
    assert table.counter_get(b"c", b"f:c") == 2**63 - 1
    conn.close()


@pytest.mark.parametrize(
    "scan, field",
    [
        ({"reverse": "maybe"}, "reverse"),
        ({"reverse": 1}, "reverse"),
        ({"include_timestamp": "yes"}, "include_timestamp"),
        ({"limit": True}, "limit"),
        ({"limit": "10"}, "limit"),
        ({"row_start": "r"}, "row_start"),
        ({"columns": "f:v"}, "columns"),
        ({"columns": [1]}, "columns"),
        ({"time_range": ["a", "b"]}, "time_range"),
        ({"filter": {"x": 1}}, "filter"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_wire_types_are_strict(server, scan, field):
    conn = storage.connect(_v4(server))
    with pytest.raises(RequestFieldError, match=field):
        conn._call("scan_open", {"table": "small", "scan": scan})
    client = flight.FlightClient(_v4(server))
    with pytest.raises(flight.FlightError) as info:
        client.do_get(flight.Ticket(encode_message({"table": "small", "scan": scan}))).read_all()
    assert isinstance(from_flight_error(info.value), RequestFieldError)
    client.close()
    with pytest.raises(RequestFieldError):
        conn._call("row", {"table": "small", "row": b"r", "include_timestamp": "maybe"})
    with pytest.raises(RequestFieldError):
        conn._call("compact", {"table": "small", "major": "no"})
    conn.close()


# -- client limits and stream leases --------------------------------------------------


def test_peer_host_drops_only_the_port():
    assert peer_host("ipv4:127.0.0.1:51234") == "ipv4:127.0.0.1"
    assert peer_host("ipv6:[::1]:51234") == "ipv6:[::1]"
    assert peer_host("ipv6:%5B::1%5D:51234") == "ipv6:%5B::1%5D"  # as gRPC spells it
    assert peer_host("unix:/tmp/s") == "unix:/tmp/s"


def _wait_for(predicate, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_connections_from_one_host_share_its_limit(server):
    conns = [storage.connect(_v4(server)) for _ in range(PER_CLIENT + 1)]
    scanners = [c.table("small").open_scanner() for c in conns[:PER_CLIENT]]  # one per connection
    with pytest.raises(LimitExceeded, match="over all its connections"):
        conns[PER_CLIENT].table("small").open_scanner()
    other = storage.connect(_v6(server))  # another machine, as the server sees it
    theirs = other.table("small").open_scanner()
    theirs.close()
    for s in scanners:
        s.close()
    for c in conns + [other]:
        c.close()


def _stalled_streams(location: str, n: int) -> list:
    """``n`` streams of the big table, each read for one batch and then left alone."""
    client = flight.FlightClient(location)
    readers = []
    for _ in range(n):
        reader = client.do_get(flight.Ticket(encode_message({"table": "big", "scan": {"batch_size": 64}})))
        reader.read_chunk()
        readers.append(reader)
    return [client, readers]


def test_a_stalled_stream_expires_and_frees_the_slot_for_others(server):
    admin = storage.connect(_v4(server))
    client, readers = _stalled_streams(_v6(server), PER_CLIENT)
    try:
        _stalled_for_a_lease(server, admin, readers)
    finally:
        for r in readers:
            r.cancel()
        client.close()
    admin.close()


def _stalled_for_a_lease(server, admin, readers) -> None:
    assert len(admin.list_scanners()["streams"]) == PER_CLIENT
    with pytest.raises(flight.FlightError) as info:
        _stalled_streams(_v6(server), 1)  # the staller is at its own limit ...
    assert isinstance(from_flight_error(info.value), LimitExceeded)
    rows = sum(1 for _ in storage.connect(_v4(server)).table("big").scan(mode="stream"))
    assert rows == ROWS  # ... while another client scans the whole table
    # Past the lease the stalled streams are expired and their blocked calls cancelled:
    # their scans and handler threads are freed, and the staller's host may open streams again.
    _wait_for(lambda: admin.list_scanners()["streams"] == [] and admin.list_scanners()["draining_streams"] == [])
    info = admin.list_scanners()
    assert info["streams_expired_total"] >= PER_CLIENT and info["connections_cancelled_total"] >= 1
    again = storage.connect(_v6(server))
    assert sum(b.num_rows for b in again.table("big").scan_batches(mode="stream")) == ROWS
    again.close()
    # The staller, reading again, gets an error rather than a short table.
    reader = readers[0]
    got = 64
    with pytest.raises(flight.FlightError):
        while True:
            got += reader.read_chunk().data.num_rows
    assert got < ROWS


def test_a_pause_shorter_than_the_lease_is_not_cut_off(server):
    conn = storage.connect(_v4(server))
    rows = 0
    # The lease measures how long the server waits for gRPC to take a batch,
    # which is as long as the client leaves its flow-control window full.
    for i, batch in enumerate(conn.table("big").scan_batches(mode="stream", batch_size=64)):
        rows += batch.num_rows
        if i == 0:
            time.sleep(LEASE * 0.5)
    assert rows == ROWS
    assert conn.list_scanners()["streams"] == []
    conn.close()
