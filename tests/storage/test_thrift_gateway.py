"""The HBase Thrift gateway (`regionscan thrift`) against the real happybase client.

Gateways run as child processes on loopback (``python -m storage.thrift``),
each on its own root.  The tests cover every Connection and Table method
happybase documents, the older Thrift calls through a raw thriftpy2 client,
HBase's semantics (timestamps, versions, counters, disabled tables), the
framed and compact variants, limits and leases, and bad input sent on raw
sockets: a wrong protocol, garbage, a huge length prefix, an unknown method.
"""

from __future__ import annotations

import suite_paths as paths  # tests/suite_paths.py: the repository's and the golden files' places
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import happybase
import pytest
import thriftpy2.protocol.binary
from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.rpc import make_client
from thriftpy2.transport import TTransportException

import storage
from storage.errors import InvalidArgument
from storage.server.process import ServerProcess
from storage.thrift import GatewayConfig, containers
from storage.thrift.idl import IDL_PATH, hbase

import Hbase_thrift  # noqa: E402  (happybase's own copy of the IDL, loaded by importing happybase)


def _in_threads(work, n: int) -> list[str]:
    """Run ``work(i)`` for i in range(n) on n threads at once; the errors they raised, as reprs."""
    errors: list[str] = []

    def guarded(i):
        try:
            work(i)
        except Exception as exc:  # collected and returned to the test
            errors.append(repr(exc))

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


def _gateway(root, *args):
    return ServerProcess(str(root), *args, module="storage.thrift")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("thrift") / "root"
    conn = storage.connect(str(path))
    table = conn.create_table("presplit", {"cf": {"max_versions": 3}}, split_keys=[b"g", b"p"])
    for i in range(30):
        table.put(b"%c%02d" % (ord("a") + i % 26, i), {b"cf:n": b"%d" % i})
    table.flush()
    conn.close()
    return path


@pytest.fixture(scope="module")
def gateway(root):
    with _gateway(root) as proc:
        yield proc


@pytest.fixture()
def connection(gateway):
    conn = happybase.Connection("127.0.0.1", gateway.port)
    yield conn
    conn.close()


@pytest.fixture()
def client(gateway):
    """A raw Thrift client on happybase's own copy of the IDL."""
    c = make_client(Hbase_thrift.Hbase, "127.0.0.1", gateway.port,
                    proto_factory=TBinaryProtocolFactory(decode_response=False), timeout=10000)
    yield c
    c.close()


@pytest.fixture()
def fresh(connection, request):
    """A new table ``t_<test name>`` with families cf (3 versions) and meta."""
    name = "t_" + request.node.name.replace("[", "_").replace("]", "")[:60]
    connection.create_table(name, {"cf": dict(max_versions=3), "meta": dict()})
    yield connection.table(name)
    connection.delete_table(name, disable=True)


# -- the IDL ------------------------------------------------------------------


def test_idl_matches_happybase_copy_field_for_field():
    """Every method, struct and field id of our Hbase.thrift is the one HBase (and happybase) use."""
    ours, theirs = hbase, Hbase_thrift
    assert set(theirs.Hbase.thrift_services) <= set(ours.Hbase.thrift_services)
    for api in theirs.Hbase.thrift_services:
        for suffix in ("_args", "_result"):
            a = getattr(theirs.Hbase, api + suffix).thrift_spec
            b = getattr(ours.Hbase, api + suffix).thrift_spec
            assert {k: v[:2] for k, v in a.items()} == {k: v[:2] for k, v in b.items()}, api + suffix
    for struct_name in ("TCell", "ColumnDescriptor", "TRegionInfo", "Mutation", "BatchMutation", "TIncrement",
                        "TColumn", "TRowResult", "TScan", "TAppend", "IOError", "IllegalArgument", "AlreadyExists"):
        a = getattr(theirs, struct_name).thrift_spec
        b = dict(getattr(ours, struct_name).thrift_spec)
        if struct_name == "TCell":  # the one addition: a raw scan's cell type, optional (docs/formats/thrift.md)
            assert b.pop(3)[:2] == (thriftpy2.thrift.TType.BYTE, "type")
        assert {k: v[:2] for k, v in a.items()} == {k: v[:2] for k, v in b.items()}, struct_name


def test_idl_golden_bytes():
    """A call and a struct encoded from our IDL equal the Thrift binary bytes written out by hand."""
    from thriftpy2.protocol.binary import TBinaryProtocol
    from thriftpy2.transport.memory import TMemoryBuffer

    buf = TMemoryBuffer()
    proto = TBinaryProtocol(buf)
    proto.write_message_begin("getTableNames", 1, 7)
    hbase.Hbase.getTableNames_args().write(proto)
    assert buf.getvalue() == b"\x80\x01\x00\x01" + b"\x00\x00\x00\x0dgetTableNames" + b"\x00\x00\x00\x07" + b"\x00"

    buf = TMemoryBuffer()
    hbase.TCell(value=b"v", timestamp=1).write(TBinaryProtocol(buf))
    # field 1 binary (type 11) len 1 'v'; field 2 i64 (type 10) = 1; stop
    assert buf.getvalue() == (b"\x0b\x00\x01\x00\x00\x00\x01v" + b"\x0a\x00\x02" + (1).to_bytes(8, "big") + b"\x00")
    assert os.path.basename(IDL_PATH) == "Hbase.thrift"


# -- Connection methods ---------------------------------------------------------


def test_connection_admin_methods(gateway):
    conn = happybase.Connection("127.0.0.1", gateway.port, table_prefix="app", table_prefix_separator=b"__")
    conn.create_table("one", {"cf": dict(max_versions=5, time_to_live=3600, compression="ZSTD",
                                         bloom_filter_type="ROW", in_memory=True)})
    assert conn.tables() == [b"one"]
    plain = happybase.Connection("127.0.0.1", gateway.port)
    assert b"app__one" in plain.tables() and b"presplit" in plain.tables()
    fam = conn.table("one").families()[b"cf"]
    assert (fam["max_versions"], fam["time_to_live"], fam["compression"], fam["bloom_filter_type"]) == (
        5, 3600, b"ZSTD", b"ROW")
    with pytest.raises(Hbase_thrift.AlreadyExists, match="already exists"):
        conn.create_table("one", {"cf": dict()})
    with pytest.raises(Hbase_thrift.IllegalArgument, match="compression"):
        conn.create_table("two", {"cf": dict(compression="SNAPPY")})
    with pytest.raises(Hbase_thrift.IllegalArgument, match="invalid table name"):
        plain.create_table("../escape", {"cf": dict()})

    assert conn.is_table_enabled("one") is True
    conn.table("one").put(b"r", {b"cf:a": b"1"})
    conn.compact_table("one")
    conn.compact_table("one", major=True)
    with pytest.raises(Hbase_thrift.IOError, match="is enabled; disable it"):
        conn.delete_table("one")
    conn.disable_table("one")
    assert conn.is_table_enabled("one") is False
    with pytest.raises(Hbase_thrift.IOError, match="already disabled"):
        conn.disable_table("one")
    with pytest.raises(Hbase_thrift.IOError, match="table app__one is disabled"):
        conn.table("one").row(b"r")
    with pytest.raises(Hbase_thrift.IOError, match="disabled"):
        conn.table("one").put(b"r", {b"cf:a": b"2"})
    with pytest.raises(Hbase_thrift.IOError, match="disabled"):
        list(conn.table("one").scan())
    conn.enable_table("one")
    with pytest.raises(Hbase_thrift.IOError, match="already enabled"):
        conn.enable_table("one")
    assert conn.table("one").row(b"r") == {b"cf:a": b"1"}
    conn.delete_table("one", disable=True)
    assert conn.tables() == []
    with pytest.raises(Hbase_thrift.IOError, match="does not exist"):
        conn.is_table_enabled("one")
    with pytest.raises(Hbase_thrift.IOError, match="does not exist"):
        conn.table("one").row(b"r")
    conn.close()
    conn.open()
    assert conn.tables() == []
    plain.close()


def test_table_families_and_regions(connection, gateway):
    table = connection.table("presplit")
    assert table.families()[b"cf"]["max_versions"] == 3
    regions = table.regions()
    assert [(r["start_key"], r["end_key"]) for r in regions] == [(b"", b"g"), (b"g", b"p"), (b"p", b"")]
    assert all(r["server_name"] == b"127.0.0.1" and r["port"] == gateway.port for r in regions)
    assert len({r["name"] for r in regions}) == 3


# -- Table methods and HBase semantics ------------------------------------------


def test_put_row_rows_cells_versions_and_timestamps(fresh):
    fresh.put(b"r1", {b"cf:a": b"v1", b"meta:m": b"x"}, timestamp=100)
    fresh.put(b"r1", {b"cf:a": b"v2"}, timestamp=200)
    fresh.put(b"r1", {b"cf:a": b"v3"}, timestamp=300)
    fresh.put(b"r1", {b"cf:a": b"v4"}, timestamp=400)  # cf keeps 3 versions
    fresh.put(b"r2", {b"cf:b": b"w"})
    assert fresh.row(b"r1") == {b"cf:a": b"v4", b"meta:m": b"x"}
    assert fresh.row(b"r1", include_timestamp=True)[b"cf:a"] == (b"v4", 400)
    assert fresh.row(b"r1", timestamp=300) == {b"cf:a": b"v2", b"meta:m": b"x"}
    assert fresh.row(b"r1", columns=[b"meta"]) == {b"meta:m": b"x"}
    assert fresh.row(b"r1", columns=[b"meta:"]) == {}  # b"meta:" is the empty qualifier, as in HBase
    assert fresh.row(b"missing") == {}
    assert fresh.cells(b"r1", b"cf:a") == [b"v4", b"v3", b"v2"]
    assert fresh.cells(b"r1", b"cf:a", versions=2, include_timestamp=True) == [(b"v4", 400), (b"v3", 300)]
    assert fresh.cells(b"r1", b"cf:a", versions=2, timestamp=400) == [b"v3", b"v2"]
    assert fresh.rows([b"r2", b"missing", b"r1"], columns=[b"cf"]) == [
        (b"r2", {b"cf:b": b"w"}), (b"r1", {b"cf:a": b"v4"})]
    assert fresh.rows([b"r1"], timestamp=250) == [(b"r1", {b"cf:a": b"v2", b"meta:m": b"x"})]
    assert fresh.rows([]) == {}
    assert dict(fresh.rows([b"r1", b"r2"], include_timestamp=True))[b"r2"][b"cf:b"][1] > 10**12


def test_deletes_with_and_without_timestamps(fresh):
    fresh.put(b"r", {b"cf:a": b"old", b"cf:b": b"b", b"meta:m": b"m"}, timestamp=100)
    fresh.put(b"r", {b"cf:a": b"new"}, timestamp=200)
    fresh.delete(b"r", columns=[b"cf:a"], timestamp=150)  # only versions at or before 150
    assert fresh.cells(b"r", b"cf:a") == [b"new"]
    fresh.delete(b"r", columns=[b"meta"])  # a whole family
    assert fresh.row(b"r") == {b"cf:a": b"new", b"cf:b": b"b"}
    fresh.delete(b"r")
    assert fresh.row(b"r") == {}
    fresh.put(b"e", {b"cf:": b"empty qualifier", b"cf:q": b"q"})
    assert fresh.row(b"e") == {b"cf:": b"empty qualifier", b"cf:q": b"q"}
    assert fresh.row(b"e", columns=[b"cf:"]) == {b"cf:": b"empty qualifier"}
    assert fresh.row(b"e", columns=[b"cf"]) == {b"cf:": b"empty qualifier", b"cf:q": b"q"}
    assert list(fresh.scan(columns=[b"cf:"])) == [(b"e", {b"cf:": b"empty qualifier"})]


def test_scan_options(fresh):
    with fresh.batch() as b:
        for i in range(50):
            b.put(b"k%03d" % i, {b"cf:a": b"%d" % i, b"cf:b": b"x" * (i % 3), b"meta:m": b"m%d" % (i % 5)})
    all_rows = list(fresh.scan())
    assert [k for k, _ in all_rows] == [b"k%03d" % i for i in range(50)]
    assert list(fresh.scan(batch_size=7)) == all_rows
    assert list(fresh.scan(batch_size=1, limit=3)) == all_rows[:3]
    assert list(fresh.scan(batch_size=7, limit=10)) == all_rows[:10]  # asks 7, then 3 of the 7 read ahead
    assert [k for k, _ in fresh.scan(row_prefix=b"k01")] == [b"k%03d" % i for i in range(10, 20)]
    assert [k for k, _ in fresh.scan(row_start=b"k045")] == [b"k%03d" % i for i in range(45, 50)]
    assert [k for k, _ in fresh.scan(row_start=b"k010", row_stop=b"k005", reverse=True)] == [
        b"k%03d" % i for i in range(10, 5, -1)]
    assert [k for k, _ in fresh.scan(reverse=True, limit=4)] == [b"k049", b"k048", b"k047", b"k046"]
    # happybase turns a reversed row_prefix into [increment(prefix), prefix): HBase's reading of it
    assert [k for k, _ in fresh.scan(row_prefix=b"k04", reverse=True)] == [b"k%03d" % i for i in range(49, 39, -1)]
    assert list(fresh.scan(columns=[b"meta"], limit=2)) == [(b"k000", {b"meta:m": b"m0"}), (b"k001", {b"meta:m": b"m1"})]
    rows = list(fresh.scan(filter="SingleColumnValueFilter('meta', 'm', =, 'binary:m3')", columns=[b"cf:a", b"meta:m"]))
    assert [k for k, _ in rows] == [b"k%03d" % i for i in range(50) if i % 5 == 3]
    rows = list(fresh.scan(filter="PrefixFilter('k02') AND KeyOnlyFilter()"))
    assert [k for k, _ in rows] == [b"k%03d" % i for i in range(20, 30)]
    assert all(v == b"" for _, d in rows for v in d.values())
    ordered = next(iter(fresh.scan(sorted_columns=True, limit=1)))[1]
    assert list(ordered) == [b"cf:a", b"cf:b", b"meta:m"] and type(ordered).__name__ == "OrderedDict"
    assert next(iter(fresh.scan(include_timestamp=True, limit=1)))[1][b"cf:a"][0] == b"0"
    chunks = list(fresh.scan(row_prefix=b"k002", scan_batching=1))  # partial rows of one cell each
    assert chunks == [(b"k002", {b"cf:a": b"2"}), (b"k002", {b"cf:b": b"xx"}), (b"k002", {b"meta:m": b"m2"})]
    fresh.put(b"k000", {b"cf:a": b"later"}, timestamp=1 << 50)
    assert next(iter(fresh.scan(timestamp=1 << 50, limit=1)))[1][b"cf:a"] == b"0"
    with pytest.raises(Hbase_thrift.IOError, match="invalid filter string"):
        list(fresh.scan(filter="ValueFilter(=, 'binary:x'"))
    with pytest.raises(Hbase_thrift.IOError, match="no column family"):
        list(fresh.scan(columns=[b"nope:x"]))


def test_scan_matches_the_engine(connection, client, root):
    """A filtered scan through the gateway returns what the engine's own scan returns,
    whatever the sizes of the successive scannerGetList calls (reads ahead included)."""
    flt = "ValueFilter(>=, 'binary:2') AND QualifierFilter(=, 'binary:n')"
    through = list(connection.table("presplit").scan(filter=flt, include_timestamp=True))
    engine = storage.connect(str(root), read_only=True)
    try:
        direct = list(engine.table("presplit").scan(filter=flt, include_timestamp=True))
    finally:
        engine.close()
    assert through == direct and len(through) > 5
    sid = client.scannerOpenWithScan(b"presplit", Hbase_thrift.TScan(), {})
    keys = []
    for n in (5, 2, 10, 1, 3, 100, 100):
        keys += [r.row for r in client.scannerGetList(sid, n)]
    client.scannerClose(sid)
    assert keys == sorted(keys) and len(keys) == 30


def test_batches_and_transactions(fresh):
    with fresh.batch(batch_size=5) as b:
        for i in range(12):
            b.put(b"b%02d" % i, {b"cf:a": b"%d" % i})
        b.delete(b"b00")
    assert len(list(fresh.scan())) == 11
    with pytest.raises(RuntimeError):
        with fresh.batch(transaction=True) as b:
            b.put(b"t1", {b"cf:a": b"1"})
            b.delete(b"b01")
            raise RuntimeError("abort")
    assert fresh.row(b"t1") == {} and fresh.row(b"b01") != {}
    with fresh.batch(transaction=True, timestamp=77) as b:
        b.put(b"t2", {b"cf:a": b"1"})
        b.delete(b"b02", columns=[b"cf:a"])
    assert fresh.row(b"t2", include_timestamp=True) == {b"cf:a": (b"1", 77)}
    assert fresh.row(b"b02") != {}  # the delete at ts 77 is older than the cell
    with pytest.raises(Hbase_thrift.IllegalArgument, match="no column family"):
        with fresh.batch() as b:
            b.put(b"t3", {b"cf:a": b"ok"})
            b.put(b"t4", {b"nofamily:a": b"bad"})
    assert fresh.row(b"t3") == {}  # checked before anything was written


def test_counters_are_8_byte_big_endian(fresh):
    assert fresh.counter_get(b"c", b"cf:n") == 0
    assert fresh.counter_inc(b"c", b"cf:n", 10) == 10
    assert fresh.counter_dec(b"c", b"cf:n", 15) == -5
    assert fresh.row(b"c")[b"cf:n"] == struct.pack(">q", -5)
    fresh.counter_set(b"c", b"cf:n", 2**40)
    assert fresh.counter_inc(b"c", b"cf:n") == 2**40 + 1
    fresh.put(b"c", {b"cf:s": b"abc"})
    with pytest.raises(Hbase_thrift.IllegalArgument, match="not an 8-byte counter"):
        fresh.counter_inc(b"c", b"cf:s")

    results = []

    def bump(i):
        conn = happybase.Connection("127.0.0.1", fresh.connection.port)
        t = conn.table(fresh.name)
        for _ in range(20):
            results.append(t.counter_inc(b"c", b"cf:par"))
        conn.close()

    assert _in_threads(bump, 5) == []
    assert sorted(results) == list(range(1, 101))


def test_framed_and_compact_variants(tmp_path):
    for flags, kwargs in (
        (["-f"], {"transport": "framed"}),
        (["-c"], {"protocol": "compact"}),
        (["--framed", "--compact"], {"transport": "framed", "protocol": "compact"}),
    ):
        with _gateway(tmp_path / "_".join(flags).strip("-"), *flags) as gw:
            conn = happybase.Connection("127.0.0.1", gw.port, **kwargs)
            conn.create_table("v", {"cf": dict()})
            t = conn.table("v")
            with t.batch() as b:
                for i in range(300):
                    b.put(b"r%03d" % i, {b"cf:a": b"%d" % i, b"cf:b": b"y" * 200})
            assert len(list(t.scan(batch_size=100))) == 300
            assert t.row(b"r007") == {b"cf:a": b"7", b"cf:b": b"y" * 200}
            assert t.counter_inc(b"c", b"cf:n", 3) == 3
            assert [k for k, _ in t.scan(row_prefix=b"r29", reverse=True)][0] == b"r299"
            conn.close()
            # the default client (buffered, binary) cannot talk to it; the gateway survives that
            wrong = happybase.Connection("127.0.0.1", gw.port, timeout=3000)
            with pytest.raises((TTransportException, EOFError, OSError, struct.error, Hbase_thrift.IOError)):
                wrong.tables()
            conn = happybase.Connection("127.0.0.1", gw.port, **kwargs)
            assert conn.tables() == [b"v"]
            conn.close()


# -- the older Thrift calls, through a raw client -------------------------------


def test_raw_thrift_calls(client, connection, fresh):
    name = fresh.name.encode() if isinstance(fresh.name, str) else fresh.name
    M = Hbase_thrift.Mutation
    client.mutateRowTs(name, b"r1", [M(column=b"cf:a", value=b"1"), M(column=b"meta:m", value=b"m")], 100, {})
    client.mutateRow(name, b"r2", [M(column=b"cf:a", value=b"2")], {})
    client.mutateRows(name, [Hbase_thrift.BatchMutation(row=b"r3", mutations=[M(column=b"cf:a", value=b"3")])], {})
    client.mutateRowsTs(name, [Hbase_thrift.BatchMutation(row=b"r1", mutations=[M(column=b"cf:a", value=b"1b")])], 200, {})
    assert [c.value for c in client.get(name, b"r1", b"cf:a", {})] == [b"1b"]
    assert [(c.value, c.timestamp) for c in client.getVer(name, b"r1", b"cf:a", 5, {})] == [(b"1b", 200), (b"1", 100)]
    assert [c.value for c in client.getVerTs(name, b"r1", b"cf:a", 200, 5, {})] == [b"1"]
    assert [c.value for c in client.get(name, b"r1", b"meta", {})] == [b"m"]  # a family
    row = client.getRow(name, b"r1", {})[0]
    assert row.row == b"r1" and set(row.columns) == {b"cf:a", b"meta:m"}
    assert client.getRowTs(name, b"r1", 150, {})[0].columns[b"cf:a"].value == b"1"
    assert [r.row for r in client.getRows(name, [b"r3", b"rx", b"r2"], {})] == [b"r3", b"r2"]
    assert client.getRowsTs(name, [b"r1"], 150, {})[0].columns[b"cf:a"].value == b"1"
    assert client.getRow(name, b"nothing", {}) == []

    sid = client.scannerOpen(name, b"r2", [b"cf"], {})
    assert [r.row for r in client.scannerGetList(sid, 10)] == [b"r2", b"r3"]
    assert client.scannerGetList(sid, 10) == []
    client.scannerClose(sid)
    sid = client.scannerOpenWithStop(name, b"r1", b"r3", None, {})
    assert [client.scannerGet(sid)[0].row, client.scannerGet(sid)[0].row, client.scannerGet(sid)] == [b"r1", b"r2", []]
    client.scannerClose(sid)
    sid = client.scannerOpenWithPrefix(name, b"r3", None, {})
    assert [r.row for r in client.scannerGetList(sid, 5)] == [b"r3"]
    client.scannerClose(sid)
    sid = client.scannerOpenTs(name, b"", [b"cf:a"], 150, {})
    assert [(r.row, r.columns[b"cf:a"].value) for r in client.scannerGetList(sid, 5)] == [(b"r1", b"1")]
    client.scannerClose(sid)
    sid = client.scannerOpenWithStopTs(name, b"r1", b"r2", None, 1 << 60, {})
    assert [r.row for r in client.scannerGetList(sid, 5)] == [b"r1"]
    client.scannerClose(sid)
    scan = Hbase_thrift.TScan(startRow=b"r1", columns=[b"cf:a", b"meta:m"], sortColumns=True, batchSize=1, caching=2)
    sid = client.scannerOpenWithScan(name, scan, {})
    parts = client.scannerGetList(sid, 10)
    assert [(r.row, [c.columnName for c in r.sortedColumns]) for r in parts] == [
        (b"r1", [b"cf:a"]), (b"r1", [b"meta:m"]), (b"r2", [b"cf:a"]), (b"r3", [b"cf:a"])]
    client.scannerClose(sid)

    client.deleteAllTs(name, b"r1", b"cf:a", 150, {})
    assert [c.value for c in client.getVer(name, b"r1", b"cf:a", 5, {})] == [b"1b"]
    client.deleteAll(name, b"r1", b"cf:a", {})
    assert client.get(name, b"r1", b"cf:a", {}) == []
    client.deleteAllRowTs(name, b"r2", 1, {})
    assert client.getRow(name, b"r2", {}) != []
    client.deleteAllRow(name, b"r2", {})
    assert client.getRow(name, b"r2", {}) == []

    assert client.atomicIncrement(name, b"n", b"cf:c", 4) == 4
    client.increment(Hbase_thrift.TIncrement(table=name, row=b"n", column=b"cf:c", ammount=2))
    client.incrementRows([Hbase_thrift.TIncrement(table=name, row=b"n", column=b"cf:c", ammount=1)] * 3)
    assert client.atomicIncrement(name, b"n", b"cf:c", 0) == 9
    cells = client.append(Hbase_thrift.TAppend(table=name, row=b"r3", columns=[b"cf:a"], values=[b"+x"]))
    assert [c.value for c in cells] == [b"3+x"]
    assert client.checkAndPut(name, b"r3", b"cf:a", b"3+x", M(column=b"cf:a", value=b"swapped"), {}) is True
    assert client.checkAndPut(name, b"r3", b"cf:a", b"3+x", M(column=b"cf:a", value=b"again"), {}) is False
    assert client.checkAndPut(name, b"r9", b"cf:a", None, M(column=b"cf:a", value=b"new"), {}) is True
    assert [c.value for c in client.getRowOrBefore(name, b"r4", b"cf")] == [b"swapped"]
    info = client.getRegionInfo(name + b",r3,99999999999999")
    assert info.startKey == b"" and info.endKey == b""
    assert name in client.getTableNames()
    assert set(client.getColumnDescriptors(name)) == {b"cf:", b"meta:"}
    region = client.getTableRegions(name)[0].name
    client.majorCompact(region)  # a region name compacts its table
    client.compact(name)
    assert client.getRow(name, b"r3", {})[0].columns[b"cf:a"].value == b"swapped"


def test_errors_are_hbase_exceptions(client, fresh, gateway):
    name = fresh.name.encode() if isinstance(fresh.name, str) else fresh.name
    with pytest.raises(Hbase_thrift.IllegalArgument, match="scanner id 987654 is unknown"):
        client.scannerGetList(987654, 10)
    with pytest.raises(Hbase_thrift.IllegalArgument, match="unknown"):
        client.scannerClose(987654)
    with pytest.raises(Hbase_thrift.IOError, match="table nosuch does not exist"):
        client.getRow(b"nosuch", b"r", {})
    with pytest.raises(Hbase_thrift.IllegalArgument, match="row key must be non-empty"):
        client.mutateRow(name, b"", [Hbase_thrift.Mutation(column=b"cf:a", value=b"1")], {})
    with pytest.raises(Hbase_thrift.IOError, match="numVersions must be at least 1"):
        client.getVer(name, b"r", b"cf:a", 0, {})
    with pytest.raises(Hbase_thrift.IOError, match="timestamp must be"):
        client.deleteAllTs(name, b"r", b"cf:a", -5, {})
    # a scanner belongs to the connection that opened it
    sid = client.scannerOpen(name, b"", None, {})
    other = _raw_client(gateway.port)
    with pytest.raises(Hbase_thrift.IllegalArgument, match="unknown on this connection"):
        other.scannerGetList(sid, 1)
    other.close()
    client.scannerClose(sid)


# -- limits, leases and bad input -------------------------------------------------


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    root = tmp_path_factory.mktemp("thrift_strict") / "root"
    with _gateway(root, "--scanner-lease-timeout", "1", "--max-scanners-per-connection", "2",
                  "--max-scanners", "3", "--max-request-bytes", "65536", "--max-rows-per-call", "50") as proc:
        conn = happybase.Connection("127.0.0.1", proc.port)
        conn.create_table("s", {"cf": dict()})
        with conn.table("s").batch() as b:
            for i in range(120):
                b.put(b"r%03d" % i, {b"cf:a": b"%d" % i})
        conn.close()
        yield proc


def _raw_client(port):
    return make_client(Hbase_thrift.Hbase, "127.0.0.1", port,
                       proto_factory=TBinaryProtocolFactory(decode_response=False), timeout=10000)


def test_scanner_leases_and_caps(strict):
    c1, c2 = _raw_client(strict.port), _raw_client(strict.port)
    try:
        a = c1.scannerOpen(b"s", b"", None, {})
        b = c1.scannerOpen(b"s", b"", None, {})
        with pytest.raises(Hbase_thrift.IOError, match="too many open scanners on this connection"):
            c1.scannerOpen(b"s", b"", None, {})
        c = c2.scannerOpen(b"s", b"", None, {})
        with pytest.raises(Hbase_thrift.IOError, match="too many open scanners in the gateway"):
            c2.scannerOpen(b"s", b"", None, {})
        assert len(c1.scannerGetList(a, 1000)) == 50  # capped per call
        for _ in range(7):  # keep a in use for 2.1 s; b and c sit idle past their 1 s lease
            c1.scannerGet(a)
            time.sleep(0.3)
        with pytest.raises(Hbase_thrift.IllegalArgument, match="expired after 1 s idle"):
            c1.scannerGet(b)
        with pytest.raises(Hbase_thrift.IllegalArgument, match="expired after 1 s idle"):
            c2.scannerGetList(c, 5)
        c1.scannerGet(a)
        d = c1.scannerOpen(b"s", b"", None, {})  # room again
        c1.scannerClose(d)
        c1.scannerClose(a)
    finally:
        c1.close()
        c2.close()
    # closing a connection closes its scanners
    c3 = _raw_client(strict.port)
    c3.scannerOpen(b"s", b"", None, {})
    c3.close()
    time.sleep(0.3)
    c4 = _raw_client(strict.port)
    ids = [c4.scannerOpen(b"s", b"", None, {}) for _ in range(2)]
    assert len(ids) == 2
    c4.close()


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _send_raw(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send bytes, then read until the gateway closes the connection (a reset counts as closed)."""
    chunks = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except (ConnectionResetError, BrokenPipeError):
            pass
    return b"".join(chunks)


def _message(name: bytes, body: bytes, seqid: int = 1) -> bytes:
    return b"\x80\x01\x00\x01" + struct.pack(">i", len(name)) + name + struct.pack(">i", seqid) + body


def _alive(port: int) -> bool:
    conn = happybase.Connection("127.0.0.1", port)
    try:
        return b"s" in conn.tables()
    finally:
        conn.close()


def test_bad_input_closes_only_that_connection(strict):
    port = strict.port
    bystander = happybase.Connection("127.0.0.1", port)  # stays open through it all
    rss_before = _rss_kib(strict.proc.pid)
    # garbage
    assert _send_raw(port, os.urandom(64) + b"GET / HTTP/1.1\r\n\r\n") == b""
    # a wrong protocol: a compact-protocol call to the binary gateway
    assert _send_raw(port, b"\x82\x21\x01\x0dgetTableNames\x00") == b""
    # a string whose length prefix claims 2 GiB: refused before anything is read or allocated
    huge = _message(b"isTableEnabled", b"\x0b\x00\x01" + struct.pack(">i", 0x7FFFFFF0))
    started = time.time()
    assert _send_raw(port, huge) == b""
    assert time.time() - started < 5
    # a list claiming 2**31 - 1 rows: refused at its header, before any row is read
    rows = _message(b"getRows", b"\x0b\x00\x01\x00\x00\x00\x01s" + b"\x0f\x00\x02\x0b" + struct.pack(">i", 0x7FFFFFFF))
    assert _send_raw(port, rows + b"\x00" * 70_000) == b""
    # a request over the limit
    big = _message(b"getRow", b"\x0b\x00\x01\x00\x00\x00\x01s" + b"\x0b\x00\x02" + struct.pack(">i", 100_000) + b"k" * 100_000)
    assert _send_raw(port, big) == b""
    # an unknown method: the standard answer, then the connection ends
    answer = _send_raw(port, _message(b"noSuchMethod", b"\x00", seqid=5))
    assert answer[:4] == b"\x80\x01\x00\x03" and b"noSuchMethod" in answer  # message type EXCEPTION
    assert _rss_kib(strict.proc.pid) - rss_before < 50_000
    assert bystander.tables() == [b"s"]
    bystander.close()
    assert _alive(port)
    deadline = time.time() + 10  # the gateway's log reaches us through a reader thread
    while time.time() < deadline:
        log = "".join(strict.output)
        if "request needs more than 65536 bytes" in log and "unknown method 'noSuchMethod'" in log:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the gateway did not log the closed connections: {log[-2000:]}")


def test_framed_gateway_refuses_a_huge_frame(tmp_path):
    with _gateway(tmp_path / "framed", "--framed", "--max-request-bytes", "65536") as gw:
        rss_before = _rss_kib(gw.proc.pid)
        assert _send_raw(gw.port, struct.pack(">i", 0x7FFFFFFF) + b"\x80\x01") == b""
        assert _rss_kib(gw.proc.pid) - rss_before < 50_000
        # in a frame, a list of 2**31 - 1 void entries, and one of 20 rows where the frame holds 3 bytes
        for body in (b"\x0f\x00\x02\x01" + struct.pack(">i", 0x7FFFFFFF),
                     b"\x0f\x00\x02\x0b" + struct.pack(">i", 20) + b"\x00" * 3):
            call = _message(b"getRows", b"\x0b\x00\x01\x00\x00\x00\x01s" + body)
            _refused_promptly(gw.port, struct.pack(">i", len(call)) + call)
        _wait_for_log(gw, "declares entry type id 1", "declares 20 entries but the request holds at most 3 more bytes")
        conn = happybase.Connection("127.0.0.1", gw.port, transport="framed")
        assert conn.tables() == []
        conn.close()


def _refused_promptly(port: int, data: bytes) -> None:
    """``data`` gets no answer and its connection is closed within two seconds."""
    started = time.monotonic()
    assert _send_raw(port, data, timeout=5) == b""
    assert time.monotonic() - started < 2


def _wait_for_log(proc, *needles: str) -> None:
    deadline = time.time() + 10  # the gateway's log reaches us through a reader thread
    while time.time() < deadline:
        log = "".join(proc.output)
        if all(n in log for n in needles):
            return
        time.sleep(0.1)
    pytest.fail(f"the gateway did not log {needles}: {log[-2000:]}")


_HUGE = 0x7FFFFFFF


def test_zero_width_containers_are_refused_binary(strict):
    """Containers of entries that carry no bytes, which thriftpy2 would skip one by one for half an hour."""
    port = strict.port
    bystander = happybase.Connection("127.0.0.1", port)
    table = b"\x0b\x00\x01\x00\x00\x00\x01s"
    # getRows' rows (list<Text>) declared as 2**31 - 1 entries of type void
    _refused_promptly(port, _message(b"getRows", table + b"\x0f\x00\x02\x01" + struct.pack(">i", _HUGE)))
    # its attributes (map<Text,Text>) declared as 2**31 - 1 stop -> stop entries
    _refused_promptly(port, _message(b"getRows", table + b"\x0d\x00\x03\x00\x00" + struct.pack(">i", _HUGE)))
    # an unknown field (skipped, not read) holding a list of a type id no Thrift type has
    _refused_promptly(port, _message(b"getRows", table + b"\x0f\x00\x63\x63" + struct.pack(">i", _HUGE)))
    # a set nested in a skipped list: the inner header is checked too
    nested = b"\x0f\x00\x63\x0e\x00\x00\x00\x01" + b"\x00" + struct.pack(">i", _HUGE)
    _refused_promptly(port, _message(b"getRows", table + nested))
    # a negative count
    _refused_promptly(port, _message(b"getRows", table + b"\x0f\x00\x02\x0b" + struct.pack(">i", -5)))
    # the gateway answers the others at once
    started = time.monotonic()
    assert bystander.tables() == [b"s"]
    assert _alive(port)
    assert time.monotonic() - started < 2
    bystander.close()
    _wait_for_log(strict, "declares entry type id 1, which is not a value type",
                  "declares entry type id 0, which is not a value type",
                  "declares entry type id 99, which is not a value type",
                  "a container declares -5 entries")


def _compact_call(name: bytes, body: bytes) -> bytes:
    """A framed compact-protocol call: header (CALL, seqid 1), ``name``, then the struct ``body``."""
    message = b"\x82\x21\x01" + bytes([len(name)]) + name + body
    return struct.pack(">i", len(message)) + message


def test_zero_width_containers_and_per_host_limit_compact(tmp_path):
    with _gateway(tmp_path / "compact", "--framed", "--compact", "--max-container-entries", "100",
                  "--max-connections-per-host", "2") as gw:
        port = gw.port
        bystander = happybase.Connection("127.0.0.1", port, transport="framed", protocol="compact")
        bystander.create_table("c", {"cf": dict()})
        bystander.table("c").put(b"r", {b"cf:a": b"1"})
        table = b"\x18\x01c"  # field 1, binary, length 1
        varint_huge = b"\xff\xff\xff\xff\x07"
        # getRows' rows field sent as a set (skipped: not the declared type) of 2**31 - 1 stop entries
        _refused_promptly(port, _compact_call(b"getRows", table + b"\x1a\xf0" + varint_huge + b"\x00"))
        # its attributes map: 2**31 - 1 entries of stop -> stop
        _refused_promptly(port, _compact_call(b"getRows", table + b"\x2b" + varint_huge + b"\x00\x00"))
        # 101 real (empty) rows: over --max-container-entries
        _refused_promptly(port, _compact_call(b"getRows", table + b"\x19\xf8\x65" + b"\x00" * 101 + b"\x00"))
        # 50 rows declared, 5 sent: more than the frame holds, refused before waiting for another frame
        _refused_promptly(port, _compact_call(b"getRows", table + b"\x19\xf8\x32" + b"\x00" * 5))
        # a well-formed call on the same bytes answers
        client = happybase.Connection("127.0.0.1", port, transport="framed", protocol="compact")
        assert client.table("c").rows([b"r"] * 3) == [(b"r", {b"cf:a": b"1"})] * 3
        started = time.monotonic()
        assert bystander.tables() == [b"c"]
        assert time.monotonic() - started < 2
        # bystander and client hold this host's 2 connections: a third is closed at once
        third = happybase.Connection("127.0.0.1", port, transport="framed", protocol="compact", timeout=3000)
        with pytest.raises((TTransportException, EOFError, OSError)):
            third.tables()
        third.close()
        client.close()
        deadline = time.time() + 5  # the gateway notices the close when its worker reads EOF
        while True:
            again = happybase.Connection("127.0.0.1", port, transport="framed", protocol="compact", timeout=3000)
            try:
                assert again.tables() == [b"c"]
                break
            except (TTransportException, EOFError, OSError):
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
            finally:
                again.close()
        bystander.close()
        _wait_for_log(gw, "declares entry type id 0, which is not a value type",
                      "more than max_container_entries (100)", "the request holds at most",
                      "connections from that host open (max_connections_per_host)")


def test_container_and_connection_limits_in_config():
    assert GatewayConfig(max_connections=10).max_connections_per_host == 10
    assert GatewayConfig(max_connections_per_host=3).max_connections_per_host == 3
    with pytest.raises(InvalidArgument, match="^max_container_entries must be a positive int, got 0$"):
        GatewayConfig(max_container_entries=0)
    with pytest.raises(InvalidArgument, match="^max_connections_per_host must be a positive int, got -1$"):
        GatewayConfig(max_connections_per_host=-1)
    with pytest.raises(InvalidArgument, match="^workers must be a positive int"):
        GatewayConfig(workers="8")
    # the checked binary decoder is a private copy: thriftpy2's shared module, used by clients, is untouched
    assert thriftpy2.protocol.binary.read_list_begin is not containers.CheckedBinaryProtocol.read_struct.__globals__[
        "read_list_begin"]
    assert containers.CheckedBinaryProtocol is not thriftpy2.protocol.binary.TBinaryProtocol


def test_idle_connections_are_closed(tmp_path):
    with _gateway(tmp_path / "idle", "--idle-timeout", "1") as gw:
        idle = happybase.Connection("127.0.0.1", gw.port)
        busy = happybase.Connection("127.0.0.1", gw.port)
        assert idle.tables() == []
        for _ in range(6):  # busy keeps talking for 1.8 s, idle says nothing
            assert busy.tables() == []
            time.sleep(0.3)
        with pytest.raises((TTransportException, OSError)):
            idle.tables()
        assert busy.tables() == []
        idle.close()
        busy.close()


def test_many_concurrent_connections(gateway, connection):
    connection.create_table("conc", {"cf": dict()})
    with connection.table("conc").batch() as b:
        for i in range(100):
            b.put(b"r%03d" % i, {b"cf:a": b"%d" % i})
    counts = []

    def work(i):
        conn = happybase.Connection("127.0.0.1", gateway.port)
        t = conn.table("conc")
        t.put(b"w%02d" % i, {b"cf:a": b"%d" % i})
        assert t.row(b"w%02d" % i) == {b"cf:a": b"%d" % i}
        counts.append(len(list(t.scan(row_prefix=b"r", batch_size=25))))
        conn.close()

    assert _in_threads(work, 40) == []
    assert counts == [100] * 40


def test_disabled_state_persists_across_restarts(tmp_path):
    root = tmp_path / "persist"
    with _gateway(root) as gw:
        conn = happybase.Connection("127.0.0.1", gw.port)
        conn.create_table("p", {"cf": dict()})
        conn.table("p").put(b"r", {b"cf:a": b"1"})
        conn.disable_table("p")
        conn.close()
        assert gw.stop() == 0  # SIGTERM: a clean shutdown
        gw._drain.join(10)  # the rest of its output
        assert "thrift gateway stopped" in "".join(gw.output)
    with _gateway(root) as gw:
        conn = happybase.Connection("127.0.0.1", gw.port)
        assert conn.is_table_enabled("p") is False
        with pytest.raises(Hbase_thrift.IOError, match="disabled"):
            conn.table("p").row(b"r")
        conn.enable_table("p")
        conn.close()
    with _gateway(root, "--read-only") as gw:
        conn = happybase.Connection("127.0.0.1", gw.port)
        assert conn.is_table_enabled("p") is True
        assert conn.table("p").row(b"r") == {b"cf:a": b"1"}
        with pytest.raises(Hbase_thrift.IOError, match="read-only"):
            conn.table("p").put(b"r", {b"cf:a": b"2"})
        with pytest.raises(Hbase_thrift.IOError, match="read-only"):
            conn.disable_table("p")
        conn.close()


def test_cli_refuses_remote_host_unless_allowed(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(paths.REPO))
    done = subprocess.run([sys.executable, "-m", "jobs.cli", "thrift", "--root", str(tmp_path / "r"),
                           "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "regionscan thrift: error: refusing to bind 0.0.0.0: Thrift 1 carries no credentials, so anyone who can "
        "reach the port could read and write every table; bind loopback or pass --allow-remote"]
    done = subprocess.run([sys.executable, "-m", "storage.thrift", "--root", "grpc://127.0.0.1:1", "--port", "0"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "regionscan thrift: error: --root grpc://127.0.0.1:1: the Thrift gateway serves a table directory or "
        "filesystem URI, not a region server"]
    with ServerProcess(str(tmp_path / "r"), "--host", "0.0.0.0", "--allow-remote", module="storage.thrift") as gw:
        assert "warning: serving 0.0.0.0 to the network (--allow-remote)" in "".join(gw.output)
        conn = happybase.Connection("127.0.0.1", gw.port)
        assert conn.tables() == []
        conn.close()


def test_happybase_compat_090_uses_the_older_scanner_calls(gateway, connection):
    """happybase's compat='0.90' scans through scannerOpen, scannerOpenWithStop and their Ts forms."""
    old = happybase.Connection("127.0.0.1", gateway.port, compat="0.90")
    try:
        new_t, old_t = connection.table("presplit"), old.table("presplit")
        for kwargs in ({}, {"row_start": b"c"}, {"row_start": b"c", "row_stop": b"m"},
                       {"row_stop": b"h", "timestamp": 1 << 60}, {"row_start": b"b", "timestamp": 1 << 60},
                       {"row_prefix": b"k", "columns": [b"cf:n"]}):
            assert list(old_t.scan(**kwargs)) == list(new_t.scan(**kwargs)), kwargs
        assert list(old_t.scan(timestamp=1)) == []
    finally:
        old.close()


def test_connection_pool_shared_by_threads(gateway, connection):
    """happybase's ConnectionPool: threads share 3 connections, each lease used exclusively."""
    connection.create_table("pooled", {"cf": dict()})
    pool = happybase.ConnectionPool(size=3, host="127.0.0.1", port=gateway.port)

    def work(i):
        for j in range(15):
            with pool.connection() as conn:
                t = conn.table("pooled")
                t.counter_inc(b"total", b"cf:n")
                t.put(b"t%02d-%02d" % (i, j), {b"cf:a": b"x"})

    assert _in_threads(work, 8) == []
    table = connection.table("pooled")
    assert table.counter_get(b"total", b"cf:n") == 120
    assert len(list(table.scan(row_prefix=b"t"))) == 121  # 120 rows and the counter row
