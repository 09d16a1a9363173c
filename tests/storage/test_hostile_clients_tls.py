"""The region server with TLS against hostile clients, as a real process on loopback.

With ``--tls-cert``/``--tls-key`` the front door ends TLS itself and meters
the decrypted HTTP/2 frames, so the probes of ``tests/storage/hostile_probes.py``
hold over TLS too: 200 idle connections (half of them through the TLS
handshake and the HTTP/2 preface), half a call that stalls, a 100 MB gRPC
length prefix, 1,000 random byte strings (none of them a TLS handshake) and a
100 MB request actually sent, while a normal ``grpc+tls`` client keeps
reading; then the connection and idle limits (a handshake that never ends,
or is trickled, included) and the cancelling of a stalled stream's
connection through the door.  The certificates are made by
``tests/storage/server_setup.py``, as for ``tests/storage/test_server_tls.py``.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time

import pyarrow.flight as flight
import pytest
from cryptography.hazmat.primitives import serialization

import storage
from storage.server.process import ServerProcess
from storage.server.wire import encode_message
from hostile_probes import closed_by_server, connect, region_server_abuse
from server_setup import run_server_command, self_signed_certificate


@pytest.fixture(scope="module")
def cert(tmp_path_factory) -> tuple[str, str]:
    return self_signed_certificate(str(tmp_path_factory.mktemp("tls-hostile")))


def _tls_connect(port: int, cert_path: str) -> ssl.SSLSocket:
    """A TLS connection to the server as a gRPC client makes it: the certificate checked, HTTP/2 agreed."""
    context = ssl.create_default_context(cafile=cert_path)
    context.set_alpn_protocols(["h2"])
    sock = context.wrap_socket(connect(port), server_hostname="localhost")
    assert sock.selected_alpn_protocol() == "h2"
    return sock


def _client_hello() -> bytes:
    """The first flight of a TLS client: its ClientHello records."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


def _trickle(sock: socket.socket, data: bytes, pause: float) -> None:
    """Send ``data`` one byte every ``pause`` seconds, until done or the server closes."""
    for i in range(len(data)):
        try:
            sock.sendall(data[i:i + 1])
        except OSError:
            return
        time.sleep(pause)


def _tls_closed_by_server(sock: socket.socket, within: float) -> bool:
    """:func:`closed_by_server` for a socket that may be TLS: a close without close_notify is a close."""
    try:
        return closed_by_server(sock, within)
    except ssl.SSLEOFError:
        return True


def test_tls_region_server_serves_a_normal_client_through_hostile_ones(one_row_root, cert):
    cert_path, key_path = cert
    with open(cert_path, "rb") as f:
        root_certs = f.read()
    with ServerProcess(one_row_root, "--tls-cert", cert_path, "--tls-key", key_path) as server:
        assert server.location.startswith("grpc+tls://")
        with storage.connect(server.location, tls_root_certs=cert_path) as normal:
            # half the idle connections, and the stalled and huge calls, inside TLS
            region_server_abuse(server, normal.table("t"), "TLS region server",
                                open_h2=lambda port: _tls_connect(port, cert_path),
                                flight_options={"tls_root_certs": root_certs})
        output = "".join(server.output)
        assert "max_request_bytes" in output, output[-2000:]  # the door, not gRPC, refused the 100 MB call


def test_tls_region_server_connection_and_idle_limits(one_row_root, cert):
    cert_path, key_path = cert
    with ServerProcess(one_row_root, "--tls-cert", cert_path, "--tls-key", key_path,
                       "--max-connections", "4", "--idle-timeout", "1") as server:
        normal = storage.connect(server.location, tls_root_certs=cert_path)
        assert normal.table("t").row(b"row") == {b"cf:a": b"1"}  # one connection in use
        silent = connect(server.port)  # no handshake at all
        started = connect(server.port)  # the first bytes of a TLS record, then nothing
        started.sendall(b"\x16\x03\x01")
        shook = _tls_connect(server.port, cert_path)  # through the handshake, then nothing
        idle = [silent, started, shook]
        time.sleep(0.2)
        extra = connect(server.port)  # the fifth: closed as soon as it is accepted
        assert closed_by_server(extra, 2.0)
        assert all(_tls_closed_by_server(sock, 3.0) for sock in idle), "connections outlived --idle-timeout 1"
        # a handshake trickled a byte at a time is never idle, but gets no more time than a silent one
        trickled = connect(server.port)
        threading.Thread(target=_trickle, args=(trickled, _client_hello(), 0.2), daemon=True).start()
        started_at = time.monotonic()
        assert closed_by_server(trickled, 5.0), "a trickled handshake outlived --idle-timeout 1"
        assert time.monotonic() - started_at < 2.5
        trickled.close()
        time.sleep(1.5)  # the normal client's channel reconnects after its own idle close
        assert normal.table("t").row(b"row") == {b"cf:a": b"1"}
        normal.close()
        for sock in idle + [extra]:
            sock.close()
        output = "".join(server.output)
        assert "max_connections" in output, output[-2000:]


def test_a_key_that_does_not_fit_the_certificate_is_one_line(one_row_root, cert, tmp_path):
    cert_path, key_path = cert
    _, other_key = self_signed_certificate(str(tmp_path), "other")
    done = run_server_command("--root", one_row_root, "--tls-cert", cert_path, "--tls-key", other_key)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"--tls-cert {cert_path} and --tls-key {other_key} are not a certificate and its key" in lines[0]
    # an encrypted key is refused in one line too, instead of a passphrase prompt
    with open(key_path, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    locked = str(tmp_path / "locked.key")
    with open(locked, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"secret")))
    done = run_server_command("--root", one_row_root, "--tls-cert", cert_path, "--tls-key", locked)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"regionscan serve: error: --tls-key {locked} is encrypted; the server needs an unencrypted key"]


def test_a_stalled_tls_stream_is_cancelled_through_the_door(tmp_path, cert):
    """A client that stops reading a stream: the lease expires it and the server cancels its
    connection, which through the TLS door is the door's own socket to the client."""
    cert_path, key_path = cert
    root = str(tmp_path / "root")
    rows = 30_000
    with storage.connect(root) as conn:
        big = conn.create_table("big", {"f": {}}, settings={"wal_sync": "none"})
        # 120 MB: far more than gRPC's windows, the door and the sockets between them buffer for a
        # client that stopped reading (48 MB was not, once, on a loaded machine)
        with big.batch() as b:
            for i in range(rows):
                b.put(b"row%05d" % i, {b"f:v": b"%04d" % i * 1000})
        big.flush()
    with ServerProcess(root, "--tls-cert", cert_path, "--tls-key", key_path, "--lease-timeout", "1") as server:
        with open(cert_path, "rb") as f:
            staller = flight.FlightClient(server.location, tls_root_certs=f.read())
        reader = staller.do_get(flight.Ticket(encode_message({"table": "big", "scan": {"batch_size": 64}})))
        got = reader.read_chunk().data.num_rows
        with storage.connect(server.location, tls_root_certs=cert_path) as admin:
            assert len(admin.list_scanners()["streams"]) == 1
            deadline = time.monotonic() + 15
            while admin.list_scanners()["streams"] or admin.list_scanners()["draining_streams"]:
                assert time.monotonic() < deadline, str(admin.list_scanners())
                time.sleep(0.05)
            info = admin.list_scanners()
            assert info["streams_expired_total"] == 1 and info["connections_cancelled_total"] == 1, str(info)
            assert sum(b.num_rows for b in admin.table("big").scan_batches(mode="stream")) == rows
        with pytest.raises(flight.FlightError):  # the staller, reading again, gets an error, not a short table
            while True:
                got += reader.read_chunk().data.num_rows
        assert got < rows
        staller.close()
