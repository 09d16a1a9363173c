"""The engine worker's write ops over its real socket, as the JVM's tasks use them: write_begin,
write (an Arrow stream after the request), write_commit, write_abort; refused rows come back as
one line, and a task whose stream breaks leaves no staged files."""

from __future__ import annotations

import json
import os
import socket

import pyarrow as pa
import pytest
from engine_worker_process import python_worker

import storage
from connector import stored_mapping
from connector.worker.protocol import read_frame, request_bytes

SECRET = "write-test-secret"
MAPPING = "k STRING :key, a STRING c:a, b INT c:b"
SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "k", "type": "string", "nullable": True, "metadata": {}},
    {"name": "a", "type": "string", "nullable": True, "metadata": {}},
    {"name": "b", "type": "integer", "nullable": True, "metadata": {}}]})
ARROW = pa.schema([("k", pa.string()), ("a", pa.string()), ("b", pa.int32())])


@pytest.fixture(scope="module")
def worker():
    with python_worker(SECRET) as (_, port, _line):
        yield port


@pytest.fixture
def root(tmp_path):
    path = str(tmp_path / "root")
    with storage.connect(path) as conn:
        conn.create_table("t", {"c": {}}, split_keys=[b"m"])
    return path


def _call(port: int, op: str, body: bytes = b"", **fields) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request_bytes({"v": 1, "secret": SECRET, "op": op, **fields}) + body)
        sock.shutdown(socket.SHUT_WR)
        return read_frame(sock.makefile("rb"))


def _stream(batches) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, ARROW) as writer:
        for rows in batches:
            writer.write_batch(pa.RecordBatch.from_pylist(rows, schema=ARROW))
    return sink.getvalue().to_pybytes()


def _begin(port, root, mode="append", **options):
    reply = _call(port, "write_begin", options={"root": root, "table": "t", "hbase.columns.mapping": MAPPING,
                                                **options}, mode=mode, schema=SCHEMA)
    assert reply["ok"], reply
    _begin.job = reply["job"]
    return reply["writer"]


def _rows(root):
    from serde import create_serde

    serde = create_serde("binary", MAPPING)
    with storage.connect(root, read_only=True) as conn:
        decoded = [serde.deserialize((k, v)) for k, v in conn.table("t").scan()]
    return sorted((row[0], row[2]) for row in decoded)


def _staging(root):
    path = os.path.join(root, "t", ".staging")
    return [n for n in os.listdir(path) if not n.endswith(".aborted")] if os.path.isdir(path) else []


def test_tasks_stage_and_the_commit_makes_every_row_visible(worker, root):
    writer = _begin(worker, root)
    first = _call(worker, "write", _stream([[{"k": "a", "a": "x", "b": 1}, {"k": "z", "a": "y", "b": 2}]]),
                  writer=writer, task="p00000-a000")
    second = _call(worker, "write", _stream([]), writer=writer, task="p00001-a000")
    assert first["ok"] and first["rows"] == 2 and first["files"] == 2  # one file per region
    assert second["ok"] and second["rows"] == 0 and second["files"] == 0
    assert _rows(root) == []  # staged only
    done = _call(worker, "write_commit", writer=writer, messages=[first["staged"], second["staged"]])
    assert done == {"ok": True, "files": 2}
    assert _rows(root) == [("a", 1), ("z", 2)]
    assert _staging(root) == []
    assert stored_mapping.stored_options(root, "t") == {"hbase.columns.mapping": MAPPING}


def test_overwrite_replaces_and_abort_deletes_what_the_job_staged(worker, root):
    writer = _begin(worker, root)
    staged = _call(worker, "write", _stream([[{"k": "a", "a": "x", "b": 1}]]), writer=writer, task="p00000-a000")
    _call(worker, "write_commit", writer=writer, messages=[staged["staged"]])
    writer = _begin(worker, root, mode="overwrite")
    staged = _call(worker, "write", _stream([[{"k": "q", "a": "x", "b": 7}]]), writer=writer, task="p00000-a000")
    assert _staging(root) != []
    assert _call(worker, "write_abort", writer=writer) == {"ok": True}
    assert _staging(root) == [] and _rows(root) == [("a", 1)]
    writer = _begin(worker, root, mode="overwrite")
    staged = _call(worker, "write", _stream([[{"k": "q", "a": "x", "b": 7}]]), writer=writer, task="p00000-a000")
    _call(worker, "write_commit", writer=writer, messages=[staged["staged"]])
    assert _rows(root) == [("q", 7)]


def test_refused_rows_are_one_line_and_stage_nothing(worker, root):
    writer = _begin(worker, root)
    many = [[{"k": f"r{i:05d}", "a": "x", "b": i} for i in range(2000)] for _ in range(20)]
    bad = _call(worker, "write", _stream([[{"k": None, "a": "x", "b": 1}]] + many), writer=writer, task="p00000-a000")
    assert bad == {"ok": False, "error": "EncodeError: cannot encode None for column 'k' (a row key (part) cannot be null)"}
    assert not os.path.exists(os.path.join(root, "t", ".staging", _begin.job, "p00000-a000"))


def test_a_broken_stream_abandons_the_attempt(worker, root):
    writer = _begin(worker, root)
    body = _stream([[{"k": f"r{i:05d}", "a": "x", "b": i} for i in range(5000)]])
    with socket.create_connection(("127.0.0.1", worker), timeout=60) as sock:
        sock.sendall(request_bytes({"v": 1, "secret": SECRET, "op": "write", "writer": writer,
                                    "task": "p00000-a000"}) + body[: len(body) // 2])
        sock.shutdown(socket.SHUT_WR)  # the stream ends half-way: the task died
        sock.makefile("rb").read()
    assert not os.path.exists(os.path.join(root, "t", ".staging", _begin.job, "p00000-a000"))
    assert _rows(root) == []


@pytest.mark.parametrize("fields,message", [
    ({"mode": "upsert", "schema": SCHEMA}, "mode must be append or overwrite"),
    ({"mode": "append"}, "needs the DataFrame's schema"),
])
def test_write_begin_refuses_in_one_line(worker, root, fields, message):
    reply = _call(worker, "write_begin", options={"root": root, "table": "t", "hbase.columns.mapping": MAPPING},
                  **fields)
    assert reply["ok"] is False and message in reply["error"]


def test_write_begin_checks_the_dataframe_against_the_mapping(worker, root):
    schema = json.dumps({"type": "struct", "fields": [
        {"name": "k", "type": "string", "nullable": True, "metadata": {}},
        {"name": "nope", "type": "integer", "nullable": True, "metadata": {}}]})
    reply = _call(worker, "write_begin", options={"root": root, "table": "t", "hbase.columns.mapping": MAPPING},
                  mode="append", schema=schema)
    assert reply["ok"] is False and "DataFrame columns ['nope'] are not in the mapping" in reply["error"]
    assert _call(worker, "write", b"", writer="bm90IGEgcGlja2xl", task="p0")["ok"] is False
