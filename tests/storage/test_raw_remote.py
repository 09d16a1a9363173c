"""Raw scans through the region server, and raw scans' max_versions.

A table with puts at several versions, every kind of delete, a family
keeping deleted cells, flushed files and unflushed (WAL-replayed) rows over
three regions is scanned raw embedded, then through a real region server
process on loopback, streaming and RPC: the cell batches (type column
included) and ``scan(raw=True)``'s dicts must be the same.  The version
rule (HBase's raw ``VERSIONS => n``: markers do not count, a column stops at
its n+1-th put) is checked on cells written out by hand, and the wire
versions: a raw scan travels as wire protocol version 2, a version 1 message
asking for one is refused in one line, as is a raw scan to a server that
speaks version 1 only.
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import os

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import storage
from storage import kernels
from storage.cells import CELL_SCHEMA, CellType, cells_to_batch
from storage.errors import InvalidArgument
from storage.server import RequestFieldError
from storage.server.process import ServerProcess
from storage.server.remote_errors import MalformedRequest, from_flight_error
from storage.server.wire import PRELUDE, decode_message, encode_message, message_version

PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY = (int(t) for t in CellType)
GOLDEN_WIRE = str(paths.GOLDEN / "formats" / "wire")


def _write(table) -> None:
    """Versions 1..4 of two columns per row, then every kind of delete.  Each version is
    flushed on its own: a flush keeps a column's newest ``max_versions`` of the rows it holds
    (as HBase's), so the files hold more versions than the families keep only this way."""
    for ts in (1, 2, 3, 4):
        for i in range(12):
            row = b"r%02d" % i
            table.put(row, {b"v:a": b"a%d" % ts, b"v:": b"e%d" % ts, b"k:x": b"x%d" % ts}, timestamp=ts)
        table.flush()
    table.delete_version(b"r01", b"v:a", 3)  # Delete
    table.delete(b"r02", [b"v:a"], timestamp=2)  # DeleteColumn
    table.delete(b"r03", [b"k"], timestamp=3)  # DeleteFamily of one family
    table.delete(b"r04", timestamp=2)  # DeleteFamily of every family
    table.delete_version(b"r05", b"k:x", 4)
    table.delete(b"r06", [b"k:x"], timestamp=9)  # a marker newer than every put


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("rawremote") / "root")
    conn = storage.connect(path)
    table = conn.create_table("t", {"v": {"max_versions": 2}, "k": {"max_versions": 3, "keep_deleted_cells": "TRUE"}},
                              split_keys=[b"r04", b"r08"], settings={"wal_sync": "none"})
    _write(table)
    table.flush()
    # unflushed: more versions and markers, replayed from the WAL by the server
    table.put(b"r01", {b"v:a": b"a5"}, timestamp=5)
    table.delete_version(b"r07", b"v:a", 4)
    table.delete(b"r09", [b"v"], timestamp=3)
    table.delete(b"r10", timestamp=1)
    table.put(b"r11", {b"k:y": b"new"}, timestamp=6)
    conn.close()
    return path


SCANS = [
    {},
    {"max_versions": 1},
    {"max_versions": 2},
    {"max_versions": 5},
    {"columns": [b"k"], "max_versions": 1},
    {"columns": [b"v"]},
    {"time_range": (2, 4)},
    {"time_range": (2, 4), "max_versions": 1},
    {"reverse": True, "max_versions": 2},
    {"row_start": b"r03", "row_stop": b"r10", "limit": 4},
    {"row_prefix": b"r0", "batch_size": 3},
    # qualifier columns and filters run on the raw cells, markers included
    {"columns": [b"v:a", b"k:"], "max_versions": 2},
    {"filter": "ValueFilter(=, 'binary:')"},
    {"columns": [b"v"], "filter": "RowFilter(>=, 'binary:r05') AND QualifierFilter(=, 'binary:a')", "reverse": True},
]


def _cells(batches) -> list[dict]:
    return [c for b in batches for c in b.to_pylist()]


@pytest.fixture(scope="module")
def expected(root):
    """Each scan's embedded answers, read before the server takes the table."""
    conn = storage.connect(root)
    table = conn.table("t")
    try:
        return [(_cells(table.scan_batches(output="cells", raw=True, **o)), list(table.scan(raw=True, **o)))
                for o in SCANS]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def server(root, expected):
    with ServerProcess(root, "--max-next-rows", "1000") as proc:
        yield proc


@pytest.fixture(scope="module")
def remote(server):
    with storage.connect(server.location) as conn:
        yield conn.table("t")


@pytest.mark.parametrize("mode", ["stream", "rpc"])
@pytest.mark.parametrize("index", range(len(SCANS)), ids=[",".join(sorted(o)) or "all" for o in SCANS])
def test_remote_raw_scans_equal_embedded(remote, expected, mode, index):
    options = SCANS[index]
    want_cells, want_rows = expected[index]
    assert want_cells, "every scan of the fixture returns cells"
    batches = list(remote.scan_batches(output="cells", raw=True, mode=mode, caching=3, **options))
    assert all(b.schema == CELL_SCHEMA for b in batches)  # the type column crosses the wire
    assert _cells(batches) == want_cells
    assert list(remote.scan(raw=True, mode=mode, caching=3, **options)) == want_rows


def test_fixture_holds_every_marker_type_and_deleted_versions(expected):
    cells = expected[0][0]
    assert {c["type"] for c in cells} == {PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY}
    # the unflushed put and markers are there, and versions past the family's 2 of v
    assert {"row": b"r01", "family": b"v", "qualifier": b"a", "timestamp": 5, "type": PUT, "value": b"a5"} in cells
    assert sum(1 for c in cells if (c["row"], c["family"], c["qualifier"]) == (b"r00", b"v", b"a")) == 4


def test_remote_raw_scan_refusals_are_one_line(remote):
    with pytest.raises(InvalidArgument, match="use output='cells'"):
        remote.scan_batches(raw=True)
    with pytest.raises(InvalidArgument, match="nope"):  # a qualifier column is served; an unknown family is not
        list(remote.scan_batches(raw=True, output="cells", columns=[b"nope:a"]))
    with pytest.raises(InvalidArgument, match="max_versions must be a positive int"):
        remote.scan_batches(raw=True, output="cells", max_versions=0)


# -- the version rule, on cells written out by hand -----------------------------------
def test_raw_versions_count_puts_not_markers():
    # one column, cell order: DeleteColumn@9, Put@8, Delete@7, Put@7, Put@6, DeleteColumn@5, Put@4
    column = [(b"r", b"f", b"q", 9, DELETE_COLUMN, b""), (b"r", b"f", b"q", 8, PUT, b"8"),
              (b"r", b"f", b"q", 7, DELETE, b""), (b"r", b"f", b"q", 7, PUT, b"7"),
              (b"r", b"f", b"q", 6, PUT, b"6"), (b"r", b"f", b"q", 5, DELETE_COLUMN, b""),
              (b"r", b"f", b"q", 4, PUT, b"4")]
    family = [(b"r", b"f", b"", 9, DELETE_FAMILY, b""), (b"r", b"f", b"", 3, PUT, b"e")]
    other = [(b"s", b"f", b"q", 2, PUT, b"x"), (b"s", b"f", b"q", 1, PUT, b"y")]
    cells = pa.Table.from_batches([cells_to_batch(family + column + other)])

    def kept(n):
        return [(c["row"], c["qualifier"], c["timestamp"], c["type"]) for c in kernels.raw_versions(cells, n).to_pylist()]

    # n=1: the first put and the marker before the second put; the second put ends the column
    assert kept(1) == [(b"r", b"", 9, DELETE_FAMILY), (b"r", b"", 3, PUT), (b"r", b"q", 9, DELETE_COLUMN),
                       (b"r", b"q", 8, PUT), (b"r", b"q", 7, DELETE), (b"s", b"q", 2, PUT)]
    # n=2: the column ends at Put@6, so DeleteColumn@5 (after it) goes too
    assert kept(2) == kept(1)[:5] + [(b"r", b"q", 7, PUT), (b"s", b"q", 2, PUT), (b"s", b"q", 1, PUT)]
    assert kept(3) == [c for c in kept(10) if c != (b"r", b"q", 4, PUT)]
    assert len(kept(4)) == cells.num_rows and kernels.raw_versions(cells, 4) is cells  # nothing goes: no copy


def test_raw_max_versions_is_not_capped_by_the_family(tmp_path):
    """HBase's raw scan takes the scan's versions alone: a family keeping one
    version still shows the older puts a raw scan asks for, until a major compaction
    (or a flush of several of them: it keeps the newest, as HBase's does)."""
    conn = storage.connect(str(tmp_path / "r"))
    t = conn.create_table("t", {"f": {"max_versions": 1}}, settings={"wal_sync": "none"})
    for ts in (1, 2, 3):
        t.put(b"r", {b"f:q": b"%d" % ts}, timestamp=ts)
        t.flush()  # one version a flush: every one of them stays in the files

    def stamps(**kw):
        return [c["timestamp"] for c in _cells(t.scan_batches(output="cells", raw=True, **kw))]

    assert stamps() == [3, 2, 1]
    assert stamps(max_versions=2) == [3, 2]
    assert [c["timestamp"] for c in _cells(t.scan_batches(output="cells", max_versions=2))] == [3]
    t.compact()
    assert stamps() == [3]
    conn.close()


# -- wire versions ------------------------------------------------------------------
def test_raw_scans_travel_as_version_2_and_others_as_version_1():
    raw = {"table": "t", "scan": {"output": "cells", "raw": True}}
    plain = {"table": "t", "scan": {"output": "cells"}}
    assert message_version(raw) == 2 and message_version(plain) == 1
    assert PRELUDE.unpack_from(encode_message(raw), 0)[1] == 2
    assert PRELUDE.unpack_from(encode_message(plain), 0)[1] == 1
    assert decode_message(encode_message(raw)).version == 2


def _flight_error(call) -> BaseException:
    with pytest.raises(flight.FlightError) as info:
        call()
    return from_flight_error(info.value)


def test_a_version_1_message_asking_for_a_raw_scan_is_refused_in_one_line(server):
    """What a client from before version 2 would get if it sent raw: one line, before any work."""
    client = flight.FlightClient(server.location)
    header = {"table": "t", "scan": {"output": "cells", "raw": True}}
    ticket = encode_message(header, version=1)
    error = _flight_error(lambda: client.do_get(flight.Ticket(ticket)).read_all())
    assert type(error) is RequestFieldError
    assert "needs wire protocol version 2" in str(error) and "\n" not in str(error)
    error = _flight_error(lambda: list(client.do_action(flight.Action("scan_open", encode_message(header, version=1)))))
    assert type(error) is RequestFieldError and "upgrade the client" in str(error)
    # a version 1 client's ordinary scan is served as before, and every answer is version 1
    plain = encode_message({"table": "t", "scan": {"output": "cells", "row_prefix": b"r00"}}, version=1)
    assert client.do_get(flight.Ticket(plain)).read_all().num_rows > 0
    (info,) = client.do_action(flight.Action("server_info", encode_message({}, version=1)))
    info = decode_message(info.body)
    assert info.version == 1 and info.header["protocol"] == 2 and info.header["protocols"] == [1, 2]
    (opened,) = client.do_action(flight.Action("scan_open", encode_message(header)))  # version 2: served
    opened = decode_message(opened.body)
    assert opened.version == 1 and opened.header["scanner_id"]
    list(client.do_action(flight.Action("scan_close", encode_message({"scanner_id": opened.header["scanner_id"]}))))
    client.close()


def test_a_version_the_server_does_not_speak_is_refused_in_one_line(server):
    """An older server refuses a version 2 message as this one refuses version 3."""
    client = flight.FlightClient(server.location)
    data = bytearray(encode_message({"table": "t", "scan": {"output": "cells", "raw": True}}))
    data[4:6] = (3).to_bytes(2, "big")
    error = _flight_error(lambda: client.do_get(flight.Ticket(bytes(data))).read_all())
    assert type(error) is MalformedRequest
    assert "uses wire protocol version 3; this side speaks versions 1 to 2" in str(error) and "\n" not in str(error)
    client.close()


def test_client_refuses_a_raw_scan_to_a_version_1_server_before_sending(server):
    """Given a version 1 server's ``server_info`` answer (the golden one), the raw scan
    is refused in one line and nothing is sent; other scans still go."""
    with open(os.path.join(GOLDEN_WIRE, "server_info_answer.msg"), "rb") as f:
        answer = decode_message(f.read())
    assert answer.version == 1
    with storage.connect(server.location) as conn:
        conn._info = answer.header  # the cached answer: what a version 1 server gives
        assert conn._info["protocol"] == 1
        table = conn.table("t")
        calls = conn.rpc_calls
        with pytest.raises(InvalidArgument, match="speaks wire protocol version 1, which has no raw scans"):
            table.scan_batches(raw=True, output="cells")
        with pytest.raises(InvalidArgument, match="upgrade the server"):
            table.open_scanner(raw=True, output="cells")
        assert conn.rpc_calls == calls
        assert list(table.scan(row_prefix=b"r00"))
