"""Hostile clients of the servers, and the normal client that must be served through them.

The probes open raw sockets to a server on loopback: idle connections, calls cut short,
huge length prefixes, random bytes; a normal client reads all the while on its own thread,
and the server's resident memory (VmRSS, and its peak VmHWM, from /proc) must stay bounded.
Used by tests/storage/test_hostile_clients.py and test_hostile_clients_tls.py.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time

import pyarrow.flight as flight
import pytest

IDLE = 200
RANDOM_STRINGS = int(os.environ.get("REGIONSCAN_HOSTILE_STRINGS", "1000"))
HUGE = 100 << 20
GROWTH_BOUND = 150 << 20  # bytes a server's peak resident memory may grow under the abuse
SLOW_GET = 5.0  # seconds: a normal get slower than this counts as locked out

GRPC_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS_FRAME = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty SETTINGS frame


def memory_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM and RssAnon of ``pid`` in bytes, from /proc."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM", "RssAnon"):
                out[name] = int(value.split()[0]) * 1024
    return out


class NormalClient:
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

    def __enter__(self) -> "NormalClient":
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


def served_within_bounds(client: "NormalClient", server: str, pid: int, before: dict[str, int]) -> None:
    """The normal client's gets were all served, none slower than SLOW_GET, and the server's
    peak resident memory grew less than GROWTH_BOUND from ``before``: both printed."""
    after = memory_status(pid)
    report = client.report(server)
    assert not client.failures, report
    assert len(client.latencies) >= 10, report
    assert max(client.latencies) < SLOW_GET, report
    growth = after["VmHWM"] - before["VmRSS"]
    print(f"peak resident growth {growth / 2**20:.1f} MiB (VmRSS {before['VmRSS'] >> 20} -> {after['VmRSS'] >> 20}"
          f" MiB, VmHWM {after['VmHWM'] >> 20} MiB)")
    assert growth < GROWTH_BOUND, f"peak resident memory grew {growth >> 20} MiB; {before} -> {after}; {report}"


def connect(port: int) -> socket.socket:
    """A plain TCP connection to ``port`` on loopback."""
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def random_strings(port: int, count: int) -> None:
    """``count`` connections, each sending one random byte string (1 B to 4 KiB) and closing."""
    rng = random.Random(7)
    for _ in range(count):
        with connect(port) as sock:
            try:
                sock.sendall(rng.randbytes(rng.randint(1, 4096)))
            except OSError:
                pass  # the server may close first: that is an answer too


def closed_by_server(sock: socket.socket, within: float) -> bool:
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


def _hpack_literal(name: bytes, value: bytes) -> bytes:
    """One HPACK header field, literal and never indexed, with short (< 127 byte) name and value."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def grpc_call_head(stream: int, message_length: int, sent: bytes = b"") -> bytes:
    """An HTTP/2 HEADERS frame opening a DoAction call on ``stream``, then a DATA frame holding the
    5-byte gRPC prefix that announces a message of ``message_length`` bytes, and ``sent`` of them."""
    block = b"".join(_hpack_literal(n, v) for n, v in (
        (b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/arrow.flight.protocol.FlightService/DoAction"),
        (b":authority", b"localhost"), (b"content-type", b"application/grpc"), (b"te", b"trailers")))
    headers = struct.pack(">I", len(block))[1:] + b"\x01\x04" + struct.pack(">I", stream) + block  # END_HEADERS
    payload = b"\x00" + struct.pack(">I", message_length) + sent
    data = struct.pack(">I", len(payload))[1:] + b"\x00\x00" + struct.pack(">I", stream) + payload
    return headers + data


def region_server_abuse(server, table, what: str, open_h2=connect, flight_options: dict | None = None) -> None:
    """The region server's abuse, while a normal client gets ``table``'s one row through it.

    IDLE idle connections (half of them opened with ``open_h2``, the client side of the
    server's transport, and past the HTTP/2 preface), a call announcing 4 KiB that sends 100
    bytes and stalls, a 100 MB gRPC length prefix with nothing behind it, RANDOM_STRINGS random
    byte strings and a 100 MB request actually sent (``flight_options`` open its Flight client).
    Then every get was served in time, the server's memory stayed bounded and the row is intact.
    """
    pid = server.proc.pid
    assert table.row(b"row") == {b"cf:a": b"1"}
    before = memory_status(pid)
    held: list[socket.socket] = []
    try:
        with NormalClient(lambda: table.row(b"row")) as client:
            for i in range(IDLE):
                if i % 2:
                    sock = open_h2(server.port)
                    sock.sendall(GRPC_PREFACE + SETTINGS_FRAME)
                else:
                    sock = connect(server.port)
                held.append(sock)
            # half a request: a call announcing a 4 KiB message, 100 bytes of it sent, then nothing
            stalled = open_h2(server.port)
            stalled.sendall(GRPC_PREFACE + SETTINGS_FRAME + grpc_call_head(1, 4096, b"x" * 100))
            held.append(stalled)
            # a 100 MB length prefix with nothing behind it
            prefix_only = open_h2(server.port)
            prefix_only.sendall(GRPC_PREFACE + SETTINGS_FRAME + grpc_call_head(3, HUGE))
            held.append(prefix_only)
            random_strings(server.port, RANDOM_STRINGS)
            # a 100 MB request actually sent: refused as it arrives, never buffered whole
            raw = flight.FlightClient(server.location, **(flight_options or {}))
            with pytest.raises(flight.FlightError):
                list(raw.do_action(flight.Action("row", b"\x00" * HUGE)))
            raw.close()
            time.sleep(0.5)
        served_within_bounds(client, what, pid, before)
        assert table.row(b"row") == {b"cf:a": b"1"}
    finally:
        for sock in held:
            sock.close()
