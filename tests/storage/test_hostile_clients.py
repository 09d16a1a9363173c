"""Both servers against hostile clients, as real processes on loopback.

Each server faces 200 idle connections held open, a client that sends half
a request and stalls, 1,000 random byte strings and a 100 MB length prefix
(for the region server also a 100 MB request actually sent), while a normal
client keeps reading.  The normal client's get latency is printed (``pytest
-s``) and put in the assertion messages; the server's resident memory
(VmRSS, and its peak VmHWM, from /proc) must stay within a bound.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time

import happybase
import pyarrow.flight as flight
import pytest

import storage
from storage.errors import InvalidArgument
from storage.server import ServerConfig
from storage.server.process import ServerProcess
from storage.server.remote_errors import LimitExceeded
from storage.thrift import GatewayConfig

IDLE = 200
RANDOM_STRINGS = int(os.environ.get("REGIONSCAN_HOSTILE_STRINGS", "1000"))
HUGE = 100 << 20
GROWTH_BOUND = 150 << 20  # bytes a server's peak resident memory may grow under the abuse
SLOW_GET = 5.0  # seconds: a normal get slower than this counts as locked out

GRPC_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty SETTINGS frame


def _status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM and RssAnon of ``pid`` in bytes, from /proc."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM", "RssAnon"):
                out[name] = int(value.split()[0]) * 1024
    return out


class _NormalClient:
    """Gets one row in a loop on its own thread, recording each get's latency and any failure."""

    def __init__(self, get):
        self._get = get
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self._get()
            except Exception as exc:  # recorded, and the test fails on it
                self.failures.append(f"{type(exc).__name__}: {exc}"[:200])
            self.latencies.append(time.monotonic() - started)
            time.sleep(0.01)

    def __enter__(self) -> "_NormalClient":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def report(self, what: str) -> str:
        ordered = sorted(self.latencies) or [float("nan")]
        line = (f"{what}: {len(self.latencies)} gets during the abuse, p50 {ordered[len(ordered) // 2] * 1000:.1f} ms,"
                f" max {ordered[-1] * 1000:.1f} ms, failures {len(self.failures)} {self.failures[:2]}")
        print(line)
        return line


def _served_within_bounds(client: "_NormalClient", server: str, pid: int, before: dict[str, int]) -> None:
    """The normal client's gets were all served, none slower than SLOW_GET, and the server's
    peak resident memory grew less than GROWTH_BOUND from ``before``: both printed."""
    after = _status(pid)
    report = client.report(server)
    assert not client.failures, report
    assert len(client.latencies) >= 10, report
    assert max(client.latencies) < SLOW_GET, report
    growth = after["VmHWM"] - before["VmRSS"]
    print(f"peak resident growth {growth / 2**20:.1f} MiB (VmRSS {before['VmRSS'] >> 20} -> {after['VmRSS'] >> 20}"
          f" MiB, VmHWM {after['VmHWM'] >> 20} MiB)")
    assert growth < GROWTH_BOUND, f"peak resident memory grew {growth >> 20} MiB; {before} -> {after}; {report}"


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _random_strings(port: int, count: int) -> None:
    """``count`` connections, each sending one random byte string (1 B to 4 KiB) and closing."""
    rng = random.Random(7)
    for _ in range(count):
        with _connect(port) as sock:
            try:
                sock.sendall(rng.randbytes(rng.randint(1, 4096)))
            except OSError:
                pass  # the server may close first: that is an answer too


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """True when the server closes ``sock`` within ``within`` seconds."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("hostile") / "root")
    with storage.connect(path) as conn:
        conn.create_table("t", {"cf": {}}).put(b"row", {b"cf:a": b"1"})
    return path


# -- the region server ---------------------------------------------------------------------------
def _hpack_literal(name: bytes, value: bytes) -> bytes:
    """One HPACK header field, literal and never indexed, with short (< 127 byte) name and value."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def _grpc_call_head(stream: int, message_length: int, sent: bytes = b"") -> bytes:
    """An HTTP/2 HEADERS frame opening a DoAction call on ``stream``, then a DATA frame holding the
    5-byte gRPC prefix that announces a message of ``message_length`` bytes, and ``sent`` of them."""
    block = b"".join(_hpack_literal(n, v) for n, v in (
        (b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/arrow.flight.protocol.FlightService/DoAction"),
        (b":authority", b"localhost"), (b"content-type", b"application/grpc"), (b"te", b"trailers")))
    headers = struct.pack(">I", len(block))[1:] + b"\x01\x04" + struct.pack(">I", stream) + block  # END_HEADERS
    payload = b"\x00" + struct.pack(">I", message_length) + sent
    data = struct.pack(">I", len(payload))[1:] + b"\x00\x00" + struct.pack(">I", stream) + payload
    return headers + data


def test_region_server_serves_a_normal_client_through_hostile_ones(root):
    with ServerProcess(root) as server:
        pid = server.proc.pid
        normal = storage.connect(server.location)
        table = normal.table("t")
        assert table.row(b"row") == {b"cf:a": b"1"}
        before = _status(pid)
        held: list[socket.socket] = []
        try:
            with _NormalClient(lambda: table.row(b"row")) as client:
                for i in range(IDLE):  # idle connections, half of them past the HTTP/2 handshake
                    sock = _connect(server.port)
                    if i % 2:
                        sock.sendall(GRPC_PREFACE + _SETTINGS)
                    held.append(sock)
                # half a request: a call announcing a 4 KiB message, 100 bytes of it sent, then nothing
                stalled = _connect(server.port)
                stalled.sendall(GRPC_PREFACE + _SETTINGS + _grpc_call_head(1, 4096, b"x" * 100))
                held.append(stalled)
                # a 100 MB length prefix with nothing behind it
                prefix_only = _connect(server.port)
                prefix_only.sendall(GRPC_PREFACE + _SETTINGS + _grpc_call_head(3, HUGE))
                held.append(prefix_only)
                _random_strings(server.port, RANDOM_STRINGS)
                # a 100 MB request actually sent: refused as it arrives, never buffered whole
                raw = flight.FlightClient(server.location)
                with pytest.raises(flight.FlightError):
                    list(raw.do_action(flight.Action("row", b"\x00" * HUGE)))
                raw.close()
                time.sleep(0.5)
            _served_within_bounds(client, "region server", pid, before)
            assert table.row(b"row") == {b"cf:a": b"1"}
        finally:
            for sock in held:
                sock.close()
            normal.close()


def test_region_server_connection_and_idle_limits(root):
    with ServerProcess(root, "--max-connections", "4", "--idle-timeout", "1") as server:
        normal = storage.connect(server.location)
        assert normal.table("t").row(b"row") == {b"cf:a": b"1"}  # one connection in use
        idle = [_connect(server.port) for _ in range(3)]
        time.sleep(0.2)
        extra = _connect(server.port)  # the fifth: closed as soon as it is accepted
        assert _closed_by_server(extra, 2.0)
        assert all(_closed_by_server(sock, 3.0) for sock in idle), "idle connections outlived --idle-timeout 1"
        # the normal client's channel reconnects after its own idle close
        time.sleep(1.5)
        assert normal.table("t").row(b"row") == {b"cf:a": b"1"}
        normal.close()
        for sock in idle + [extra]:
            sock.close()
        assert "max_connections" in "".join(server.output)


def test_region_server_limit_settings():
    assert ServerConfig().idle_timeout == 60.0
    assert ServerConfig().limits()["max_connections"] == 1024
    with pytest.raises(InvalidArgument, match=r"^idle_timeout must be a non-negative number of seconds \(0: never\), got -1$"):
        ServerConfig(idle_timeout=-1)
    with pytest.raises(InvalidArgument, match="^max_connections must be a positive int, got 0$"):
        ServerConfig(max_connections=0)


def test_region_server_without_its_front_door(root):
    """--no-front-door: gRPC holds the port itself, so the door's limits are gone (here three
    connections are served under --max-connections 1) and the handlers' checks remain."""
    with ServerProcess(root, "--no-front-door", "--max-connections", "1", "--max-request-bytes", "1024") as server:
        clients = [storage.connect(server.location) for _ in range(3)]
        try:
            assert [c.table("t").row(b"row") for c in clients] == [{b"cf:a": b"1"}] * 3
            refused = r"^request of \d+ bytes is over the server's limit of 1024 bytes \(max_request_bytes\)$"
            with pytest.raises(LimitExceeded, match=refused):  # by the handler, once gRPC has it all
                clients[0].table("t").put(b"big", {b"cf:a": b"x" * 4096})
        finally:
            for client in clients:
                client.close()
    assert ServerConfig().front_door is True
    with pytest.raises(InvalidArgument, match="^front_door must be True or False, got 'no'$"):
        ServerConfig(front_door="no")


# -- the Thrift gateway --------------------------------------------------------------------------
def _thrift_call_head(name: bytes) -> bytes:
    """The start of a strict binary-protocol CALL message named ``name`` (seqid 1)."""
    return struct.pack(">IH", 0x80010001, 0) + struct.pack(">H", len(name)) + name + struct.pack(">i", 1)


def test_thrift_gateway_serves_a_normal_client_through_hostile_ones(root):
    with ServerProcess(root, module="storage.thrift") as gateway:
        pid = gateway.proc.pid
        normal = happybase.Connection("127.0.0.1", gateway.port, timeout=30_000, autoconnect=True)
        table = normal.table("t")
        assert table.row(b"row") == {b"cf:a": b"1"}
        before = _status(pid)
        held: list[socket.socket] = []
        try:
            with _NormalClient(lambda: table.row(b"row")) as client:
                for _ in range(IDLE):
                    held.append(_connect(gateway.port))
                # half a getRow: the table name's length says 8, 3 bytes follow, then nothing
                stalled = _connect(gateway.port)
                stalled.sendall(_thrift_call_head(b"getRow") + b"\x0b\x00\x01" + struct.pack(">i", 8) + b"abc")
                held.append(stalled)
                # a 100 MB length prefix: the method name's
                prefix_only = _connect(gateway.port)
                prefix_only.sendall(struct.pack(">IH", 0x80010001, 0) + struct.pack(">H", 0) + struct.pack(">i", HUGE))
                held.append(prefix_only)
                _random_strings(gateway.port, RANDOM_STRINGS)
                # and a 100 MB length prefix in a string field, then the bytes start to follow
                big = _connect(gateway.port)
                big.sendall(_thrift_call_head(b"getRow") + b"\x0b\x00\x01" + struct.pack(">i", HUGE) + b"x" * 65536)
                assert _closed_by_server(big, 5.0), "the gateway waited for a 100 MB field"
                big.close()
                time.sleep(0.5)
            _served_within_bounds(client, "thrift gateway", pid, before)
            # a new client is served too while the idle ones stay open
            late = happybase.Connection("127.0.0.1", gateway.port, timeout=5_000)
            assert late.table("t").row(b"row") == {b"cf:a": b"1"}
            late.close()
        finally:
            for sock in held:
                sock.close()
            normal.close()


def test_thrift_connection_and_idle_limits(root):
    with ServerProcess(root, "--max-connections", "4", "--idle-timeout", "1", module="storage.thrift") as gateway:
        idle = [_connect(gateway.port) for _ in range(4)]
        time.sleep(0.2)
        extra = _connect(gateway.port)
        assert _closed_by_server(extra, 2.0)
        stalled = idle[0]
        stalled.sendall(_thrift_call_head(b"getRow"))  # part of a request, then silence
        assert all(_closed_by_server(sock, 3.0) for sock in idle), "connections outlived --idle-timeout 1"
        client = happybase.Connection("127.0.0.1", gateway.port, timeout=5_000)
        assert client.table("t").row(b"row") == {b"cf:a": b"1"}
        client.close()
        for sock in idle + [extra]:
            sock.close()
        output = "".join(gateway.output)
        assert "max_connections" in output and "idle_timeout" in output, output[-2000:]


def test_thrift_limit_settings():
    assert GatewayConfig().idle_timeout == 60.0  # HBase's hbase.thrift.server.socket.read.timeout
    assert GatewayConfig().max_connections == 1024
    assert GatewayConfig(max_connections=10).max_connections_per_host == 10
    with pytest.raises(InvalidArgument, match=r"^idle_timeout must be a non-negative number of seconds \(0: never\), got -1$"):
        GatewayConfig(idle_timeout=-1)


def _h2_frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def test_front_door_meter_charges_a_frame_from_its_header():
    """The relay's frame reader, byte by byte: a finished call frees its charge, a frame whose
    declared length takes its call past the limit is refused before its payload is passed on."""
    from storage.server.front_door import HTTP2_PREFACE, _FrameMeter, _RequestTooLarge

    meter = _FrameMeter(per_call=100, per_connection=150)
    done = (GRPC_PREFACE + _SETTINGS + _h2_frame(1, 4, 1, b"h" * 10) + _h2_frame(0, 0, 1, b"x" * 50)
            + _h2_frame(0, 1, 1, b"y" * 30))
    for i in range(len(done)):
        meter.feed(done[i:i + 1])
    assert HTTP2_PREFACE == GRPC_PREFACE
    meter.feed(_h2_frame(1, 4, 3, b"h" * 10) + _h2_frame(0, 0, 3, b"x" * 60))  # a call still being sent: 70
    with pytest.raises(_RequestTooLarge, match="^160 bytes of requests not finished at once"):
        meter.feed(_h2_frame(1, 4, 5, b"h" * 10) + _h2_frame(0, 0, 5, b"x" * 80))
    # a data frame's header alone, declaring 95 bytes after 10 of headers: refused before any payload
    declared = struct.pack(">I", 95)[1:] + b"\x00\x00" + struct.pack(">I", 1)
    with pytest.raises(_RequestTooLarge, match="^a request of more than 105 bytes"):
        _FrameMeter(100, 1000).feed(GRPC_PREFACE + _h2_frame(1, 4, 1, b"h" * 10) + declared)
    with pytest.raises(ValueError, match="did not open with the HTTP/2 preface"):
        _FrameMeter(100, 1000).feed(b"GET / HTTP/1.1\r\n\r\n")
