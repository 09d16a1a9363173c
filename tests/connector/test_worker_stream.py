"""A read's Arrow stream, written from the batches' own buffers to the socket (PROTOCOL.md, ``read``).

:class:`~connector.worker.protocol.SocketSink` gathers what the IPC writer hands it (small
pieces as bytes, each column buffer as it is) and sends them with ``sendmsg``.  The bytes on
the wire are exactly an Arrow IPC stream's: checked against pyarrow's own writer over real
sockets, with batches many times the socket's buffer (partial sends resumed) and batches of
more buffers than one ``sendmsg`` takes.  Against a real worker: a stream larger than any
socket buffer arrives whole, and a client that goes away mid-stream leaves the worker serving.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
from engine_worker_process import exchange, python_worker

import storage
from connector.worker.protocol import SocketSink, read_frame, request_bytes, send_parts
from serde import create_serde

SECRET = "stream-secret"
MAPPING = "k INT :key, n INT cf:n, s STRING cf:s"
ROWS = 3000
WIDE = 3000  # bytes of ``s`` per row: a region's stream is several MiB


def _drain(sock: socket.socket, out: bytearray, piece: int = 1 << 14) -> None:
    while True:
        data = sock.recv(piece)
        if not data:
            return
        out += data


class _CountingSocket(socket.socket):
    """A socket that counts its ``sendmsg`` calls and the calls that sent only part of what they were given."""

    calls = partial = 0

    def sendmsg(self, buffers, *args):
        buffers = list(buffers)
        sent = super().sendmsg(buffers, *args)
        self.calls += 1
        self.partial += sent < sum(memoryview(b).nbytes for b in buffers)
        return sent


def _pair(sndbuf: int) -> tuple[_CountingSocket, socket.socket]:
    """A connected pair whose first end has a ``sndbuf``-byte send buffer and a timeout (its
    descriptor is then non-blocking, so a send takes what fits and says how much)."""
    a, b = socket.socketpair()
    a = _CountingSocket(a.family, a.type, a.proto, fileno=a.detach())
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    a.settimeout(60)
    return a, b


def _late_reader(a: "_CountingSocket", b: socket.socket, out: bytearray,
                 piece: int = 1 << 14) -> tuple[threading.Thread, threading.Event]:
    """A started thread draining ``b`` into ``out`` from ``a``'s first short send on, or from when
    the returned event is set (the writer is done).  Reading only once the buffer has filled makes
    the partial sends certain: a reader that keeps up could otherwise take every send whole."""
    written = threading.Event()

    def run() -> None:
        deadline = time.monotonic() + 30
        while a.partial == 0 and not written.is_set() and time.monotonic() < deadline:
            time.sleep(0.001)
        _drain(b, out, piece)

    reader = threading.Thread(target=run)
    reader.start()
    return reader, written


def _sent_through_sink(batches: list[pa.RecordBatch], sndbuf: int) -> bytes:
    """The bytes a reader gets when ``batches`` go through a SocketSink whose socket has a
    ``sndbuf``-byte send buffer (the reader takes 16 KiB at a time, in its own thread, from the
    first short send on)."""
    a, b = _pair(sndbuf)
    got = bytearray()
    reader, written = _late_reader(a, b, got)
    try:
        sink = SocketSink(a)
        writer = pa.ipc.new_stream(sink, batches[0].schema)
        for batch in batches:
            writer.write_batch(batch)
            sink.flush()
        writer.close()
        sink.flush()
        a.shutdown(socket.SHUT_WR)
    finally:
        written.set()
        reader.join(60)
        a.close()
        b.close()
    assert sink.sent == len(got)
    assert a.partial > 0 or len(got) < sndbuf  # big streams went in partial sends, resumed
    return bytes(got)


def _reference(batches: list[pa.RecordBatch]) -> bytes:
    out = pa.BufferOutputStream()
    with pa.ipc.new_stream(out, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return out.getvalue().to_pybytes()


def test_the_sink_sends_exactly_pyarrows_stream_past_the_socket_buffer():
    rng = np.random.default_rng(7)
    big = pa.record_batch({"i": pa.array(rng.integers(0, 1 << 40, 400_000)),
                           "s": pa.array([("x" * (i % 50)) for i in range(400_000)]),
                           "n": pa.array([None if i % 7 == 0 else i for i in range(400_000)], pa.int32())})
    batches = [big, big.slice(3, 1001), big.slice(0, 0), big.slice(123_457)]  # sliced: offsets rebased
    assert big.nbytes > 16 * 65536
    got = _sent_through_sink(batches, 65536)
    assert got == _reference(batches)
    assert pa.ipc.open_stream(got).read_all().equals(pa.Table.from_batches(batches))


def test_a_batch_of_more_buffers_than_one_sendmsg_takes_goes_whole():
    # 700 columns with nulls: a validity bitmap, its padding and the values each, so a batch is
    # over 2,000 pieces, past the 1,024 vectors one sendmsg takes
    batch = pa.record_batch({f"c{i}": pa.array([None if j == i % 50 else j for j in range(50)], pa.int64())
                             for i in range(700)})
    pieces = []
    probe = SocketSink(None)
    probe.write = lambda data: pieces.append(data) or memoryview(data).nbytes
    with pa.ipc.new_stream(probe, batch.schema) as writer:
        writer.write_batch(batch)
    assert len(pieces) > 2000
    got = _sent_through_sink([batch, batch], 1 << 16)
    assert got == _reference([batch, batch])


def test_send_parts_resumes_after_partial_sends():
    a, b = _pair(4096)
    parts = [memoryview(bytes([i % 251]) * size) for i, size in enumerate([1, 70_000, 3, 0, 250_000, 17])]
    got = bytearray()
    reader, written = _late_reader(a, b, got, 1000)
    try:
        sent = send_parts(a, list(parts))
        a.shutdown(socket.SHUT_WR)
    finally:
        written.set()
        reader.join(60)
        a.close()
        b.close()
    assert sent == len(got) == sum(p.nbytes for p in parts)
    assert a.partial > 0
    assert bytes(got) == b"".join(bytes(p) for p in parts)


# -- against a real worker --------------------------------------------------------------------


@pytest.fixture(scope="module")
def wide_table(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("stream") / "root")
    serde = create_serde("binary", MAPPING)
    with storage.connect(root) as conn:
        table = conn.create_table("t", {"cf": {}}, split_keys=[struct.pack(">i", ROWS // 2)],
                                  settings={"wal_sync": "none"})
        with table.batch() as b:
            for k in range(ROWS):
                key, cells = serde.serialize({"k": k, "n": k * 3, "s": chr(97 + k % 26) * WIDE})
                b.put(key, cells)
        table.flush()
    return root


@pytest.fixture(scope="module")
def worker():
    with python_worker(SECRET) as (proc, port, _line):
        yield port


def _plan(port: int, root: str) -> tuple[dict, list]:
    options = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    schema = ('{"type":"struct","fields":[{"name":"k","type":"integer","nullable":true,"metadata":{}},'
              '{"name":"s","type":"string","nullable":true,"metadata":{}}]}')
    head, _, _ = exchange(port, SECRET, {"op": "plan", "options": options, "columns": ["k", "s"], "filters": [],
                                         "schema": schema, "parallelism": 1})
    assert head["ok"], head
    fields = {"options": options, "read_plan": head["read_plan"]}
    return fields, [s for t in head["tasks"] for s in t["splits"]]


def test_a_stream_larger_than_any_socket_buffer_arrives_whole(worker, wide_table):
    fields, splits = _plan(worker, wide_table)
    head, table, trailer = exchange(worker, SECRET, {"op": "read", **fields, "splits": splits})
    assert head == {"ok": True} and trailer == {"ok": True, "rows": ROWS}
    assert table.column("k").to_pylist() == list(range(ROWS))
    assert table.column("s").to_pylist() == [chr(97 + k % 26) * WIDE for k in range(ROWS)]
    assert table.nbytes > 2 * (4 << 20)  # past the kernel's largest send buffer (net.core.wmem_max)


def test_a_client_gone_mid_stream_leaves_the_worker_serving(worker, wide_table):
    fields, splits = _plan(worker, wide_table)
    before = exchange(worker, SECRET, {"op": "stats"})[0]["counters"]
    for linger in (False, True):  # closed plainly, and reset (SO_LINGER 0)
        sock = socket.create_connection(("127.0.0.1", worker), timeout=60)
        sock.sendall(request_bytes({"v": 1, "secret": SECRET, "op": "read", **fields, "splits": splits}))
        f = sock.makefile("rb")
        assert read_frame(f) == {"ok": True}
        assert len(f.read(1 << 16)) == 1 << 16  # the stream began
        if linger:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        f.close()
        sock.close()
    head, table, trailer = exchange(worker, SECRET, {"op": "read", **fields, "splits": splits})
    assert trailer == {"ok": True, "rows": ROWS} and table.num_rows == ROWS
    deadline = time.monotonic() + 60
    while True:  # the reads whose clients went away end too (each counts when its thread ends)
        after = exchange(worker, SECRET, {"op": "stats"})[0]["counters"]
        if after["read"] == before.get("read", 0) + 3 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert after["read"] == before.get("read", 0) + 3
    assert after.get("errors", 0) == before.get("errors", 0)  # a client closing early is no error
