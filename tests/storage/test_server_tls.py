"""The region server's bind rules and TLS, on loopback.

A non-loopback bind without a token is refused before anything is bound
(only the refusal is tested: no test listens beyond loopback).  With
``--tls-cert``/``--tls-key`` the server speaks ``grpc+tls`` with a
certificate the test makes; a recording relay between client and server
shows the token crossing in the clear without TLS and never with it.
"""

from __future__ import annotations

import socket
import threading

import pytest

import storage
from storage.errors import InvalidArgument, StorageError
from storage.server import ServerConfig, Unauthenticated
from storage.server.process import ServerProcess
from server_setup import run_server_command, self_signed_certificate

TOKEN = "tls-test-token-3b9d2c7e81f4"
SECRET = b"a-cell-value-6a1f0e93d2c4"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    base = tmp_path_factory.mktemp("tls")
    root = str(base / "root")
    with storage.connect(root) as conn:
        table = conn.create_table("t", {"f": {}})
        for i in range(50):
            table.put(b"r%03d" % i, {b"f:c": b"v%d" % i})
        conn.create_table("s", {"f": {}}).put(b"k", {b"f:c": SECRET})
    cert, key = self_signed_certificate(str(base))
    token_file = str(base / "token")
    with open(token_file, "w") as f:
        f.write(TOKEN)
    return {"root": root, "cert": cert, "key": key, "token_file": token_file, "base": str(base)}


class _Relay:
    """A loopback TCP relay to ``port`` that keeps every byte it passes, both ways."""

    def __init__(self, port: int):
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.seen = bytearray()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                with self.lock:
                    self.seen += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()


# -- bind rules --------------------------------------------------------------------


def test_a_non_loopback_bind_without_a_token_is_refused_before_binding(setup):
    done = run_server_command("--root", setup["root"], "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "regionscan serve: error: refusing to bind 0.0.0.0 without a token: anyone who can reach the port could"
        " read and write every table; bind loopback, give --token-file (with --tls-cert/--tls-key), or pass"
        " --allow-remote"
    ]


def test_the_bind_rules_in_the_config():
    with pytest.raises(InvalidArgument, match="refusing to bind ::"):
        ServerConfig(host="::")
    assert not ServerConfig(host="0.0.0.0", token="t").loopback  # a token makes it allowed ...
    assert ServerConfig(host="0.0.0.0", allow_remote=True).host == "0.0.0.0"  # ... as does saying so
    assert ServerConfig(host="127.0.0.2").loopback and ServerConfig(host="::1").loopback
    with pytest.raises(InvalidArgument, match="both a certificate and its key"):
        ServerConfig(tls_cert="c.pem")


@pytest.mark.parametrize("args, words", [
    (["--tls-cert", "{cert}"], "TLS needs both a certificate and its key"),
    (["--tls-cert", "{base}/missing.crt", "--tls-key", "{key}"], "cannot read --tls-cert {base}/missing.crt"),
    (["--tls-cert", "{token_file}", "--tls-key", "{key}"], "holds no PEM block"),
])
def test_tls_files_that_will_not_do_are_one_line(setup, args, words):
    done = run_server_command("--root", setup["root"], *[a.format(**setup) for a in args])
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words.format(**setup) in lines[0], done.stderr


# -- TLS ---------------------------------------------------------------------------


def test_grpc_tls_serves_reads_and_writes_with_the_roots_the_client_is_given(setup):
    with ServerProcess(setup["root"], "--tls-cert", setup["cert"], "--tls-key", setup["key"],
                       "--token-file", setup["token_file"]) as srv:
        assert srv.location.startswith("grpc+tls://127.0.0.1:")
        conn = storage.connect(srv.location, token=TOKEN, tls_root_certs=setup["cert"])
        table = conn.table("t")
        table.put(b"new", {b"f:c": b"x"})
        assert table.row(b"new") == {b"f:c": b"x"}
        assert len(list(table.scan(mode="stream"))) == 51 and len(list(table.scan(mode="rpc"))) == 51
        assert conn.server_info()["auth"] is True
        conn.close()
        # The roots as PEM bytes, or named on the URI, do the same.
        with open(setup["cert"], "rb") as f:
            pem = f.read()
        with storage.connect(srv.location, token=TOKEN, tls_root_certs=pem) as conn:
            assert conn.table("t").row(b"r001") == {b"f:c": b"v1"}
        with storage.connect(f"{srv.location}?tls_root_certs={setup['cert']}", token=TOKEN) as conn:
            assert conn.table("t").count() == 51
        # TLS does not replace the token.
        with pytest.raises(Unauthenticated):
            storage.connect(srv.location, tls_root_certs=pem).tables()
        # A certificate the client's roots do not vouch for, or no TLS at all, gets nowhere.
        other, _ = self_signed_certificate(setup["base"], "other")
        with pytest.raises(StorageError):
            storage.connect(srv.location, token=TOKEN, tls_root_certs=other, timeout=10).tables()
        with pytest.raises(StorageError):
            storage.connect(srv.location.replace("grpc+tls", "grpc"), token=TOKEN, timeout=10).tables()


def test_client_tls_options_are_checked_before_connecting(setup):
    with pytest.raises(InvalidArgument, match="needs a grpc\\+tls:// location"):
        storage.connect("grpc://127.0.0.1:1", tls_root_certs=setup["cert"])
    with pytest.raises(InvalidArgument, match="cannot read tls_root_certs"):
        storage.connect("grpc+tls://127.0.0.1:1", tls_root_certs=setup["base"] + "/none.pem")
    with pytest.raises(InvalidArgument, match="unknown options \\['ca'\\]"):
        storage.connect("grpc+tls://127.0.0.1:1?ca=x")


@pytest.mark.parametrize("tls", [False, True])
def test_the_token_crosses_the_network_in_the_clear_only_without_tls(setup, tls):
    args = ["--token-file", setup["token_file"]]
    if tls:
        args += ["--tls-cert", setup["cert"], "--tls-key", setup["key"]]
    with ServerProcess(setup["root"], *args) as srv:
        relay = _Relay(srv.port)
        scheme = "grpc+tls" if tls else "grpc"
        options = {"tls_root_certs": setup["cert"]} if tls else {}
        with storage.connect(f"{scheme}://127.0.0.1:{relay.port}", token=TOKEN, **options) as conn:
            assert list(conn.table("s").scan()) == [(b"k", {b"f:c": SECRET})]  # Arrow: the value's own bytes
        relay.close()
        with relay.lock:
            seen = bytes(relay.seen)
    assert seen, "nothing crossed the relay"
    assert (TOKEN.encode() in seen) is not tls
    assert (b"PRI * HTTP/2.0" in seen) is not tls and (SECRET in seen) is not tls
