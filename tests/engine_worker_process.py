"""The Python engine worker (connector.engine_worker) as a real child process
for the tests that speak its socket protocol."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from typing import Iterator

import pyarrow as pa


@contextlib.contextmanager
def python_worker(secret: str) -> Iterator[tuple[subprocess.Popen, int, str]]:
    """Start a worker that takes ``secret``; yields the process, its port and
    its announcement line; on exit closes its stdin (the worker exits when its
    parent's pipe closes) and checks that it exited cleanly."""
    # Arrow's pool as the JVM's WorkerProcess.java starts the worker with (unless set already)
    env = {"ARROW_DEFAULT_MEMORY_POOL": "system", **os.environ, "REGIONSCAN_WORKER_SECRET": secret}
    proc = subprocess.Popen([sys.executable, "-m", "connector.engine_worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        line = proc.stdout.readline().decode()
        if "port=" not in line:
            raise AssertionError(f"the engine worker did not announce a port: {line!r} {proc.stderr.read()!r}")
        yield proc, int(line.split("port=")[1].split()[0]), line
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=30)
    assert code == 0, f"the engine worker exited with {code}"


SAMPLE_MAPPING = "k INT :key, n INT cf:n, s STRING cf:s"
"""The mapping of :func:`sample_table`'s rows (binary SerDe)."""


def sample_table(path: str, rows: int, split_at: int, n_factor: int) -> str:
    """A table ``t`` under root ``path``: rows ``k`` in ``range(rows)`` with ``n = k * n_factor``
    and ``s = f"v{k}"`` in the binary SerDe, two regions split at ``split_at``, flushed."""
    import struct

    import storage
    from serde import create_serde

    serde = create_serde("binary", SAMPLE_MAPPING)
    with storage.connect(path) as conn:
        table = conn.create_table("t", {"cf": {}}, split_keys=[struct.pack(">i", split_at)],
                                  settings={"wal_sync": "none"})
        with table.batch() as b:
            for k in range(rows):
                key, cells = serde.serialize({"k": k, "n": k * n_factor, "s": f"v{k}"})
                b.put(key, cells)
        table.flush()
    return path


def exchange(port: int, secret: str, doc: dict) -> tuple[dict, pa.Table | None, dict | None]:
    """One request to a worker on ``port``: its reply frame, and for a read that began, its
    rows and its trailer."""
    from connector.worker.protocol import read_frame, request_bytes

    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request_bytes({"v": 1, "secret": secret, **doc}))
        sock.shutdown(socket.SHUT_WR)
        f = sock.makefile("rb")
        head = read_frame(f)
        if doc["op"] != "read" or not head.get("ok"):
            return head, None, None
        return head, pa.ipc.open_stream(f).read_all(), read_frame(f)
