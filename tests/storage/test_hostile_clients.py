"""Both servers against hostile clients, as real processes on loopback.

Each server faces 200 idle connections held open, a client that sends half
a request and stalls, 1,000 random byte strings and a 100 MB length prefix
(for the region server also a 100 MB request actually sent), while a normal
client keeps reading.  The normal client's get latency is printed (``pytest
-s``) and put in the assertion messages; the server's resident memory
(VmRSS, and its peak VmHWM, from /proc) must stay within a bound.
"""

from __future__ import annotations

import socket
import struct
import time

import happybase
import pytest

import storage
from storage.errors import InvalidArgument
from storage.server import ServerConfig
from storage.server.process import ServerProcess
from storage.server.remote_errors import LimitExceeded
from storage.thrift import GatewayConfig
from hostile_probes import (
    GRPC_PREFACE,
    HUGE,
    IDLE,
    RANDOM_STRINGS,
    SETTINGS_FRAME,
    NormalClient,
    closed_by_server,
    connect,
    memory_status,
    random_strings,
    region_server_abuse,
    served_within_bounds,
)


# -- the region server ---------------------------------------------------------------------------
def test_region_server_serves_a_normal_client_through_hostile_ones(one_row_root):
    with ServerProcess(one_row_root) as server, storage.connect(server.location) as normal:
        region_server_abuse(server, normal.table("t"), "region server")


def test_region_server_connection_and_idle_limits(one_row_root):
    with ServerProcess(one_row_root, "--max-connections", "4", "--idle-timeout", "1") as server:
        normal = storage.connect(server.location)
        assert normal.table("t").row(b"row") == {b"cf:a": b"1"}  # one connection in use
        idle = [connect(server.port) for _ in range(3)]
        time.sleep(0.2)
        extra = connect(server.port)  # the fifth: closed as soon as it is accepted
        assert closed_by_server(extra, 2.0)
        assert all(closed_by_server(sock, 3.0) for sock in idle), "idle connections outlived --idle-timeout 1"
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


def test_region_server_without_its_front_door(one_row_root):
    """--no-front-door: gRPC holds the port itself, so the door's limits are gone (here three
    connections are served under --max-connections 1) and the handlers' checks remain."""
    with ServerProcess(one_row_root, "--no-front-door", "--max-connections", "1",
                       "--max-request-bytes", "1024") as server:
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


def test_thrift_gateway_serves_a_normal_client_through_hostile_ones(one_row_root):
    with ServerProcess(one_row_root, module="storage.thrift") as gateway:
        pid = gateway.proc.pid
        normal = happybase.Connection("127.0.0.1", gateway.port, timeout=30_000, autoconnect=True)
        table = normal.table("t")
        assert table.row(b"row") == {b"cf:a": b"1"}
        before = memory_status(pid)
        held: list[socket.socket] = []
        try:
            with NormalClient(lambda: table.row(b"row")) as client:
                for _ in range(IDLE):
                    held.append(connect(gateway.port))
                # half a getRow: the table name's length says 8, 3 bytes follow, then nothing
                stalled = connect(gateway.port)
                stalled.sendall(_thrift_call_head(b"getRow") + b"\x0b\x00\x01" + struct.pack(">i", 8) + b"abc")
                held.append(stalled)
                # a 100 MB length prefix: the method name's
                prefix_only = connect(gateway.port)
                prefix_only.sendall(struct.pack(">IH", 0x80010001, 0) + struct.pack(">H", 0) + struct.pack(">i", HUGE))
                held.append(prefix_only)
                random_strings(gateway.port, RANDOM_STRINGS)
                # and a 100 MB length prefix in a string field, then the bytes start to follow
                big = connect(gateway.port)
                big.sendall(_thrift_call_head(b"getRow") + b"\x0b\x00\x01" + struct.pack(">i", HUGE) + b"x" * 65536)
                assert closed_by_server(big, 5.0), "the gateway waited for a 100 MB field"
                big.close()
                time.sleep(0.5)
            served_within_bounds(client, "thrift gateway", pid, before)
            # a new client is served too while the idle ones stay open
            late = happybase.Connection("127.0.0.1", gateway.port, timeout=5_000)
            assert late.table("t").row(b"row") == {b"cf:a": b"1"}
            late.close()
        finally:
            for sock in held:
                sock.close()
            normal.close()


def test_thrift_connection_and_idle_limits(one_row_root):
    with ServerProcess(one_row_root, "--max-connections", "4", "--idle-timeout", "1",
                       module="storage.thrift") as gateway:
        idle = [connect(gateway.port) for _ in range(4)]
        time.sleep(0.2)
        extra = connect(gateway.port)
        assert closed_by_server(extra, 2.0)
        stalled = idle[0]
        stalled.sendall(_thrift_call_head(b"getRow"))  # part of a request, then silence
        assert all(closed_by_server(sock, 3.0) for sock in idle), "connections outlived --idle-timeout 1"
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
    done = (GRPC_PREFACE + SETTINGS_FRAME + _h2_frame(1, 4, 1, b"h" * 10) + _h2_frame(0, 0, 1, b"x" * 50)
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
