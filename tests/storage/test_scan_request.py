"""ScanRequest: the one checked scan request of every front end.

Its argument checks (one line naming the argument), its wire form (round trip
through a real framed message; the bytes of the protocol's ``scan`` object
pinned), and the embedded and remote tables refusing the same bad arguments
with the same message (a real region server on loopback).
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import dataclasses
import inspect
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from storage.errors import InvalidArgument
from storage.filters import PrefixFilter
from storage.read.scan_request import WIRE_OPTIONS, ScanRequest, plan_batch_scan
from storage.server import RequestFieldError
from storage.server.process import ServerProcess
from storage.server.remote_table import RemoteTable
from storage.server.wire import SCAN_OPTIONS, decode_message, encode_message
from storage.table.table import Table

GOLDEN = str(paths.GOLDEN / "formats" / "wire")

# (arguments, the start of the one-line message); every front end says the same
BAD = [
    ({"row_start": "a"}, "row_start must be bytes, got str 'a'"),
    ({"row_stop": 5}, "row_stop must be bytes, got int 5"),
    ({"row_prefix": b"p", "row_start": b"a"}, "row_prefix cannot be combined with row_start or row_stop"),
    ({"columns": b"cf:a"}, "columns must be a list of b'family:qualifier' or b'family'"),
    ({"columns": [1]}, "column must be bytes, got int 1"),
    ({"columns": [b":q"]}, "column spec b':q' has an empty family"),
    ({"filter": 5}, "filter must be a Filter, a filter string or None, got int 5"),
    ({"timestamp": -1}, "timestamp must be an int in [0, 2**63-1), got -1"),
    ({"timestamp": True}, "timestamp must be an int in [0, 2**63-1), got True"),
    ({"time_range": (5,)}, "time_range must be a (min, max) pair of ints"),
    ({"time_range": (0, 2**63)}, "time_range bounds must be ints in [0, 2**63-1]"),
    ({"time_range": (9, 3)}, "time_range min 9 is above its max 3"),
    ({"max_versions": 0}, "max_versions must be a positive int, got 0"),
    ({"limit": -1}, "limit must be a non-negative int, got -1"),
    ({"limit": "3"}, "limit must be a non-negative int, got '3'"),
]
BAD_BATCHES = [
    ({"output": "dicts"}, "output must be 'rows' or 'cells', got 'dicts'"),
    ({"batch_size": 0}, "batch_size must be a positive int, got 0"),
    ({"batch_size": True}, "batch_size must be a positive int, got True"),
]
BAD_SCAN = [
    ({"batch_size": 0}, "batch_size must be a positive int, got 0"),
    ({"scan_batching": 0}, "scan_batching must be a positive int, got 0"),
]


@pytest.mark.parametrize("kwargs,message", BAD + BAD_BATCHES + BAD_SCAN[1:], ids=lambda v: str(v)[:40])
def test_each_bad_argument_is_one_line_naming_it(kwargs, message):
    with pytest.raises(InvalidArgument) as info:
        ScanRequest.from_happybase(**kwargs)
    text = str(info.value)
    assert text.startswith(message)
    assert "\n" not in text


def test_unknown_keyword_and_normalized_values():
    with pytest.raises(TypeError, match="unexpected keyword argument 'colums'"):
        ScanRequest.from_happybase(colums=[b"cf"])
    request = ScanRequest(row_start=bytearray(b"a"), columns=["cf:a", memoryview(b"meta")], time_range=[1, 5],
                          filter=bytearray(b"KeyOnlyFilter ()"))
    assert request.row_start == b"a" and type(request.row_start) is bytes
    assert request.columns == (b"cf:a", b"meta")
    assert request.time_range == (1, 5)
    assert request.filter == b"KeyOnlyFilter ()"
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.limit = 3
    with pytest.raises(InvalidArgument, match="max_versions"):
        request.replace(max_versions=0)  # a copy is checked again


def test_bounds_and_time_bounds():
    assert ScanRequest(row_start=b"b", row_stop=b"d").bounds() == (b"b", b"d")
    assert ScanRequest(row_start=b"d", row_stop=b"b", reverse=True).bounds() == (b"b\x00", b"d\x00")
    assert ScanRequest(row_prefix=b"ab").bounds() == (b"ab", b"ac")
    assert ScanRequest(time_range=(3, 100), timestamp=50).time_bounds() == (3, 50)
    scan, spans = plan_batch_scan(ScanRequest(row_start=b"a", filter="PrefixFilter ('k')", output="cells"))
    assert spans == [(b"k", b"l")]  # the filter's range, seeked to
    assert (scan.low, scan.high, scan.output, scan.batch_size) == (b"a", None, "cells", 65536)


# -- the wire ---------------------------------------------------------------------------------

_keys = st.binary(max_size=6)
_column = st.tuples(st.binary(min_size=1, max_size=3).filter(lambda f: b":" not in f),
                    st.none() | st.binary(max_size=3)).map(lambda fq: fq[0] if fq[1] is None else fq[0] + b":" + fq[1])
_ts = st.integers(0, 2**63 - 2)


@st.composite
def requests(draw) -> ScanRequest:
    bounds = draw(st.sampled_from(["range", "prefix"]))
    kwargs = {}
    if bounds == "prefix":
        kwargs["row_prefix"] = draw(_keys)
    else:
        kwargs["row_start"] = draw(st.none() | _keys)
        kwargs["row_stop"] = draw(st.none() | _keys)
    lo, hi = sorted(draw(st.tuples(_ts, _ts)))
    kwargs.update(
        columns=draw(st.none() | st.lists(_column, max_size=4).map(tuple)),
        filter=draw(st.sampled_from([None, "KeyOnlyFilter ()", "PrefixFilter ('a\\x00')", "PageFilter (3)"])),
        timestamp=draw(st.none() | _ts),
        time_range=draw(st.none() | st.just((lo, hi))),
        max_versions=draw(st.integers(1, 2**31)),
        limit=draw(st.none() | st.integers(0, 10**6)),
        reverse=draw(st.booleans()),
        output=draw(st.sampled_from(["rows", "cells"])),
        include_timestamp=draw(st.booleans()),
        batch_size=draw(st.integers(1, 1 << 20)),
    )
    return ScanRequest(**kwargs)


@settings(max_examples=200, deadline=None)
@given(requests())
def test_wire_round_trip_through_a_framed_message(request):
    data = encode_message({"table": "t", "scan": request.to_wire()})
    back = ScanRequest.from_wire(decode_message(data).header["scan"], RequestFieldError)
    assert back == request
    # the first protocol's keys always travel; a later field (raw) only when set
    assert list(request.to_wire()) == [k for k in WIRE_OPTIONS if k != "raw"]


def test_a_field_added_later_travels_only_when_set():
    assert "raw" not in ScanRequest(output="cells").to_wire()
    wire = ScanRequest(output="cells", raw=True).to_wire()
    assert wire["raw"] is True and list(wire)[-1] == "raw"
    assert ScanRequest.from_wire(wire) == ScanRequest(output="cells", raw=True)
    with pytest.raises(InvalidArgument, match="raw scan returns cells"):
        ScanRequest(raw=True)  # output="rows"


def test_client_side_fields_do_not_travel_and_a_filter_object_travels_as_its_string():
    request = ScanRequest(filter=PrefixFilter(b"r"), scan_batching=2, sorted_columns=True)
    wire = request.to_wire()
    assert "scan_batching" not in wire and "sorted_columns" not in wire
    assert ScanRequest.from_wire(wire) == ScanRequest(filter="PrefixFilter ('r')")


def test_wire_bytes_are_the_protocols():
    """The ``scan`` object of a full request, byte for byte as docs/formats/wire.md has it
    (and as clients before ScanRequest sent it)."""
    request = ScanRequest(row_start=b"a\x00", row_stop=b"z", columns=[b"cf:a", "meta"], filter=PrefixFilter(b"r"),
                          timestamp=5, time_range=(1, 9), max_versions=3, limit=7, reverse=True, output="cells",
                          include_timestamp=True, batch_size=10)
    data = encode_message({"table": "t", "scan": request.to_wire()})
    assert data[:12] == bytes.fromhex("52535750" "0001" "0000" "0000012e")
    assert data[12:] == (
        b'{"table":"t","scan":{"row_start":{"$b":"YQA="},"row_stop":{"$b":"eg=="},"row_prefix":null,'
        b'"columns":[{"$b":"Y2Y6YQ=="},{"$b":"bWV0YQ=="}],"filter":"PrefixFilter (\'r\')","timestamp":5,'
        b'"time_range":[1,9],"max_versions":3,"limit":7,"reverse":true,"output":"cells",'
        b'"include_timestamp":true,"batch_size":10}}'
    )
    assert SCAN_OPTIONS == WIRE_OPTIONS
    with open(os.path.join(GOLDEN, "scan_ticket.msg"), "rb") as f:
        golden = decode_message(f.read()).header["scan"]
    assert ScanRequest.from_wire(golden) == ScanRequest(row_start=b"a", row_stop=b"z\xff", columns=[b"cf:q"],
                                                        time_range=(0, 10), reverse=True, limit=100,
                                                        filter="PrefixFilter('a')")


@pytest.mark.parametrize("raw,message", [
    ([], "scan must be an object of scan options, got list"),
    ({"row_strat": None}, "unknown scan options ['row_strat']; accepted: row_start,"),
    ({"row_start": "a"}, "request field 'row_start' must be bytes, got str"),
    ({"reverse": 1}, "request field 'reverse' must be bool, got int"),
    ({"limit": True}, "request field 'limit' must be int, got bool"),
    ({"time_range": [1, "2"]}, "time_range must be a [min, max) pair of ints"),
    ({"columns": [1]}, "scan columns must be bytes or strings, got int"),
    ({"scan_batching": 2}, "unknown scan options ['scan_batching']"),
])
def test_wire_refusals_are_field_errors(raw, message):
    with pytest.raises(RequestFieldError) as info:
        ScanRequest.from_wire(raw, RequestFieldError)
    assert str(info.value).startswith(message)


def test_every_request_field_is_a_keyword_of_both_tables():
    """A field added to ScanRequest is an argument of every front end (``**options``)."""
    for method in ("scan", "scan_batches"):
        for cls in (Table, RemoteTable):
            params = inspect.signature(getattr(cls, method)).parameters
            assert any(p.kind is p.VAR_KEYWORD for p in params.values()), (cls, method)
    assert Table.scan is RemoteTable.scan and Table.scan_batches is RemoteTable.scan_batches


# -- the same refusals, embedded and remote -------------------------------------------------------

@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("scanreq") / "root")
    conn = storage.connect(root)
    table = conn.create_table("t", {"cf": {}, "meta": {}}, settings={"wal_sync": "none"})
    table.put(b"r1", {b"cf:a": b"1", b"meta:m": b"x"})
    conn.close()
    with ServerProcess(root) as server, storage.connect(server.location) as remote, \
            storage.connect(root, read_only=True) as embedded:
        yield embedded.table("t"), remote.table("t")


def _refusal(call):
    try:
        result = call()
        list(result)
    except (InvalidArgument, TypeError) as exc:
        return type(exc), str(exc)
    return None


SERVER_SIDE = [  # checked where the table is known: on the server for a remote table
    ({"columns": [b"nope:q"]}, "table t has no column family b'nope'"),
    ({"filter": "PrefixFilter ("}, ""),
]


@pytest.mark.parametrize("kwargs,message", BAD + SERVER_SIDE + [({"colums": [b"cf"]}, "unexpected keyword")],
                         ids=lambda v: str(v)[:40])
@pytest.mark.parametrize("method", ["scan", "scan_batches"])
def test_table_and_remote_table_refuse_alike(tables, method, kwargs, message):
    embedded, remote = tables
    local = _refusal(lambda: getattr(embedded, method)(**kwargs))
    far = _refusal(lambda: getattr(remote, method)(**kwargs))
    assert local is not None and message in local[1]
    assert far is not None and far[1] == local[1] and issubclass(far[0], local[0] if local[0] is TypeError
                                                                 else InvalidArgument)


@pytest.mark.parametrize("method,kwargs,message", [("scan_batches", k, m) for k, m in BAD_BATCHES]
                         + [("scan", k, m) for k, m in BAD_SCAN])
def test_table_and_remote_table_refuse_shaping_arguments_alike(tables, method, kwargs, message):
    embedded, remote = tables
    local = _refusal(lambda: getattr(embedded, method)(**kwargs))
    far = _refusal(lambda: getattr(remote, method)(**kwargs))
    assert local == far == (InvalidArgument, message)


def test_refused_before_any_work(tables):
    """A bad scan raises at the call, before an iterator exists (nothing leased, nothing sent)."""
    embedded, remote = tables
    for table in tables:
        with pytest.raises(InvalidArgument, match="max_versions"):
            table.scan(max_versions=0)
        with pytest.raises(InvalidArgument, match="max_versions"):
            table.scan_batches(max_versions=0)
    with pytest.raises(InvalidArgument, match="^max_versions must be a positive int, got 0$"):
        remote.open_scanner(max_versions=0)
    with pytest.raises(TypeError, match="'metrics'"):
        remote.open_scanner(metrics=None)
    with remote.open_scanner(None, None, None, [b"cf:a"], caching=5) as scanner:  # scan_batches' positions
        assert [b.column(0).to_pylist() for b in scanner] == [[b"r1"]]
    assert list(remote.scan(columns=[b"cf:a"])) == list(embedded.scan(columns=[b"cf:a"])) == [(b"r1", {b"cf:a": b"1"})]
