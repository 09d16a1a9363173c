"""Raw scans with columns, filters and versions, on every front end.

The engine's raw scan (HBase's ``Scan.setRaw(true)``) is checked against a
model built from its unrestricted answer: qualifier columns pick cells by
column (a DeleteFamily marker is the empty qualifier's), filters see every
cell, markers included, after the versions.  Then the Thrift gateway (a real
``python -m storage.thrift`` process, scan attributes ``_raw_`` and
``_versions_``) and the Spark sources (option ``hbase.spark.query.raw``) are
held to the embedded raw scan of the same table: flushed files and unflushed
(WAL-replayed) cells, three regions, every marker type.  The region server's
raw scans with columns and filters are in tests/storage/test_raw_remote.py.
"""

from __future__ import annotations

import pytest
from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.rpc import make_client

import storage
from storage.cells import CellType
from storage.errors import InvalidArgument
from storage.server.process import ServerProcess
from storage.thrift.idl import hbase

PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY = (int(t) for t in CellType)


def _write(table) -> None:
    """Three versions of three columns per row, every kind of marker, then more unflushed."""
    for i in range(9):
        row = b"r%d" % i
        for ts in (10, 20, 30):
            table.put(row, {b"f:a": b"a%d" % ts, b"f:b": b"b%d" % ts, b"g:c": b"c%d-%d" % (i, ts)}, timestamp=ts)
    table.delete_version(b"r0", b"f:a", 20)  # Delete
    table.delete(b"r1", [b"f:a"], timestamp=20)  # DeleteColumn
    table.delete(b"r2", [b"f"], timestamp=20)  # DeleteFamily of f
    table.delete(b"r4", timestamp=15)  # DeleteFamily of every family
    table.flush()
    table.put(b"r5", {b"f:a": b"a40"}, timestamp=40)  # unflushed: replayed from the WAL by a server
    table.delete_version(b"r6", b"f:b", 30)
    table.delete(b"r7", [b"g"], timestamp=25)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("rawscans") / "root")
    conn = storage.connect(path)
    table = conn.create_table("t", {"f": {"max_versions": 2}, "g": {"max_versions": 1}},
                              split_keys=[b"r3", b"r6"], settings={"wal_sync": "none"})
    _write(table)
    conn.close()
    return path


def _cells(batches) -> list[dict]:
    return [c for b in batches for c in b.to_pylist()]


def _key(c: dict) -> tuple:
    return c["row"], c["family"], c["qualifier"], c["timestamp"], c["type"], c["value"]


# -- the engine against a model --------------------------------------------------------
@pytest.fixture(scope="module")
def table(root):
    conn = storage.connect(root, read_only=True)
    yield conn.table("t")
    conn.close()


@pytest.fixture(scope="module")
def every(table) -> list[dict]:
    cells = _cells(table.scan_batches(output="cells", raw=True))
    assert {c["type"] for c in cells} == {PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY}
    return cells


COLUMN_CASES = [
    ([b"f:a"], lambda c: (c["family"], c["qualifier"]) == (b"f", b"a")),
    ([b"f:"], lambda c: (c["family"], c["qualifier"]) == (b"f", b"")),
    ([b"f:a", b"g"], lambda c: (c["family"], c["qualifier"]) == (b"f", b"a") or c["family"] == b"g"),
]


@pytest.mark.parametrize("index", range(len(COLUMN_CASES)))
def test_qualifier_columns_pick_their_cells_and_markers(table, every, index):
    columns, wanted = COLUMN_CASES[index]
    got = _cells(table.scan_batches(output="cells", raw=True, columns=columns))
    assert got == [c for c in every if wanted(c)]
    assert got  # every case holds cells


def test_a_qualifier_column_brings_its_markers_but_not_a_family_marker(table):
    got = _cells(table.scan_batches(output="cells", raw=True, columns=[b"f:a"], row_stop=b"r3"))
    kinds = {(c["row"], c["type"]) for c in got if c["type"] != PUT}
    assert kinds == {(b"r0", DELETE), (b"r1", DELETE_COLUMN)}  # r2's DeleteFamily is f:'s cell
    family = _cells(table.scan_batches(output="cells", raw=True, columns=[b"f"], row_prefix=b"r2"))
    assert (b"", DELETE_FAMILY) in {(c["qualifier"], c["type"]) for c in family}


def test_versions_are_counted_per_column_the_same_with_named_columns(table):
    for n in (1, 2):
        whole = _cells(table.scan_batches(output="cells", raw=True, max_versions=n))
        named = _cells(table.scan_batches(output="cells", raw=True, max_versions=n, columns=[b"f:a"]))
        assert named == [c for c in whole if (c["family"], c["qualifier"]) == (b"f", b"a")]
    # r0's f:a: Put@30, then Delete@20 (a marker is not a version), Put@20 ends one version
    one = _cells(table.scan_batches(output="cells", raw=True, max_versions=1, columns=[b"f:a"], row_prefix=b"r0"))
    assert [(c["timestamp"], c["type"]) for c in one] == [(30, PUT), (20, DELETE)]


FILTER_CASES = [
    # markers have empty values: this keeps exactly the markers
    ("ValueFilter(=, 'binary:')", {}, lambda c: c["value"] == b""),
    ("ValueFilter(!=, 'binary:')", {"max_versions": 1}, lambda c: c["value"] != b""),
    ("RowFilter(=, 'binary:r2')", {}, lambda c: c["row"] == b"r2"),
    ("QualifierFilter(=, 'binary:a')", {"columns": [b"f"]}, lambda c: c["qualifier"] == b"a"),
    ("TimestampsFilter(20, 25)", {}, lambda c: c["timestamp"] in (20, 25)),
]


@pytest.mark.parametrize("index", range(len(FILTER_CASES)), ids=[f[0] for f in FILTER_CASES])
def test_filters_run_on_the_raw_cells_markers_included(table, index):
    flt, options, wanted = FILTER_CASES[index]
    base = _cells(table.scan_batches(output="cells", raw=True, **options))
    got = _cells(table.scan_batches(output="cells", raw=True, filter=flt, **options))
    assert got == [c for c in base if wanted(c)]
    assert any(c["type"] != PUT for c in got) or "!=" in flt


def test_key_only_filter_and_reverse_and_limit(table, every):
    got = _cells(table.scan_batches(output="cells", raw=True, filter="KeyOnlyFilter()"))
    assert [_key(c)[:5] for c in got] == [_key(c)[:5] for c in every] and {c["value"] for c in got} == {b""}
    rows = [r for r, _ in table.scan(raw=True, filter="ValueFilter(=, 'binary:')", reverse=True, limit=3)]
    assert rows == [b"r7", b"r6", b"r4"]  # the rows holding markers, last first


def test_rows_output_is_still_refused_in_one_line(table):
    with pytest.raises(InvalidArgument, match="a raw scan returns cells") as info:
        table.scan_batches(raw=True, output="rows", filter="KeyOnlyFilter()")
    assert "\n" not in str(info.value)


# -- the Thrift gateway ----------------------------------------------------------------
@pytest.fixture(scope="module")
def gateway(root, every):
    with ServerProcess(root, "--read-only", module="storage.thrift") as proc:
        yield proc


@pytest.fixture()
def client(gateway):
    """A Thrift client on the gateway's IDL (whose TCell carries the type)."""
    c = make_client(hbase.Hbase, "127.0.0.1", gateway.port,
                    proto_factory=TBinaryProtocolFactory(decode_response=False), timeout=10000)
    yield c
    c.close()


def _thrift_cells(client, scan, attributes, batch: int = 4) -> list[tuple]:
    sid = client.scannerOpenWithScan(b"t", scan, attributes)
    out = []
    try:
        while True:
            results = client.scannerGetList(sid, batch)
            if not results:
                return out
            for r in results:
                assert r.columns is None  # a raw row's cells come as sortedColumns only
                for column in r.sortedColumns:
                    family, _, qualifier = column.columnName.partition(b":")
                    out.append((r.row, family, qualifier, column.cell.timestamp, column.cell.type, column.cell.value))
    finally:
        client.scannerClose(sid)


RAW = {b"_raw_": b"\xff"}  # HBase's Bytes.toBytes(true)
THRIFT_CASES = [
    ({}, {}, {}),
    ({"columns": [b"f:a", b"g"]}, {}, {"columns": [b"f:a", b"g"]}),
    ({"filterString": b"ValueFilter(=, 'binary:')"}, {}, {"filter": "ValueFilter(=, 'binary:')"}),
    ({}, {b"_versions_": b"1"}, {"max_versions": 1}),
    ({"startRow": b"r7", "stopRow": b"r1", "reversed": True, "columns": [b"f"]}, {b"_versions_": b"2"},
     {"row_start": b"r7", "row_stop": b"r1", "reverse": True, "columns": [b"f"], "max_versions": 2}),
    ({"timestamp": 25, "batchSize": 2}, {}, {"timestamp": 25}),
]


@pytest.mark.parametrize("index", range(len(THRIFT_CASES)))
def test_thrift_raw_scans_equal_embedded(table, client, index):
    scan, attributes, options = THRIFT_CASES[index]
    want = [_key(c) for c in _cells(table.scan_batches(output="cells", raw=True, **options))]
    assert want
    assert _thrift_cells(client, hbase.TScan(**scan), {**RAW, **attributes}) == want


def test_thrift_raw_attribute_forms_and_plain_scans(table, client):
    want = [_key(c) for c in _cells(table.scan_batches(output="cells", raw=True, row_prefix=b"r2"))]
    scan = hbase.TScan(startRow=b"r2", stopRow=b"r3")
    assert _thrift_cells(client, scan, {b"_raw_": b"true"}) == want
    assert _thrift_cells(client, scan, {b"_raw_": b"\x01", b"other": b"kept opaque"}) == want
    # _raw_ false, or no attribute: the resolved scan as before, one cell per column in the map
    sid = client.scannerOpenWithScan(b"t", scan, {b"_raw_": b"\x00"})
    (result,) = client.scannerGetList(sid, 10)
    client.scannerClose(sid)
    assert result.row == b"r2" and set(result.columns) == {b"f:a", b"f:b", b"g:c"}
    assert (result.columns[b"f:a"].value, result.columns[b"f:a"].type) == (b"a30", None)  # no type: not raw
    # the other scannerOpen calls take the attribute as well (HBase applies attributes to every one)
    sid = client.scannerOpenWithPrefix(b"t", b"r2", [b"f"], RAW)
    cells = [(c.columnName, c.cell.type) for r in client.scannerGetList(sid, 10) for c in r.sortedColumns]
    client.scannerClose(sid)
    assert (b"f:", DELETE_FAMILY) in cells and len(cells) == 7  # the marker, 3 versions of f:a and of f:b


@pytest.mark.parametrize("attributes, message", [
    ({b"_raw_": b"yes"}, "'_raw_' must be one byte"),
    ({b"_raw": b"\xff"}, "did you mean '_raw_'"),
    ({b"_versions_": b"2"}, "applies to raw scans"),
    ({b"_raw_": b"\xff", b"_versions_": b"0"}, "'_versions_' must be a positive decimal"),
    ({b"_raw_": b"\xff", b"_version_": b"2"}, "did you mean '_versions_'"),
])
def test_thrift_bad_raw_attributes_are_refused_in_one_line(client, attributes, message):
    with pytest.raises(hbase.IOError) as info:
        client.scannerOpenWithScan(b"t", hbase.TScan(), attributes)
    text = info.value.message if isinstance(info.value.message, str) else info.value.message.decode()
    assert message in text and "\n" not in text


def test_happybase_idl_clients_read_raw_answers(gateway, table):
    """HBase's own IDL has no TCell.type: such a client skips the field and reads the rest."""
    import happybase  # noqa: F401  (loads happybase's copy of the IDL as Hbase_thrift)
    import Hbase_thrift

    c = make_client(Hbase_thrift.Hbase, "127.0.0.1", gateway.port,
                    proto_factory=TBinaryProtocolFactory(decode_response=False), timeout=10000)
    try:
        sid = c.scannerOpenWithScan(b"t", Hbase_thrift.TScan(startRow=b"r0", stopRow=b"r1"), RAW)
        got = [(col.columnName, col.cell.timestamp, col.cell.value) for r in c.scannerGetList(sid, 10)
               for col in r.sortedColumns]
        c.scannerClose(sid)
    finally:
        c.close()
    want = [(c["family"] + b":" + c["qualifier"], c["timestamp"], c["value"])
            for c in _cells(table.scan_batches(output="cells", raw=True, row_prefix=b"r0"))]
    assert got == want


def test_tcell_type_golden_bytes():
    """TCell's field 3 (a raw cell's type) as docs/formats/thrift.md writes it; absent when unset."""
    from thriftpy2.protocol.binary import TBinaryProtocol
    from thriftpy2.transport.memory import TMemoryBuffer

    head = b"\x0b\x00\x01\x00\x00\x00\x00" + b"\x0a\x00\x02" + (1).to_bytes(8, "big")
    for cell, tail in ((hbase.TCell(value=b"", timestamp=1, type=DELETE), b"\x03\x00\x03\x08\x00"),
                       (hbase.TCell(value=b"", timestamp=1), b"\x00")):
        buf = TMemoryBuffer()
        cell.write(TBinaryProtocol(buf))
        assert buf.getvalue() == head + tail


# -- the Spark sources -----------------------------------------------------------------
MAPPING = "key STRING :key, a STRING f:a, c STRING g:c"
TYPE_NAMES = {PUT: "Put", DELETE: "Delete", DELETE_COLUMN: "DeleteColumn", DELETE_FAMILY: "DeleteFamily"}
COLUMN_OF = {(b"f", b"a"): "a", (b"g", b"c"): "c"}


def _as_spark(c: dict) -> tuple:
    """A raw cell as the raw DataFrame's row (key decoded as the mapping's STRING key)."""
    return (c["row"].decode(), c["family"].decode(), c["qualifier"], COLUMN_OF.get((c["family"], c["qualifier"])),
            c["timestamp"], TYPE_NAMES[c["type"]], c["value"])


SPARK_CASES = [
    ({}, {}),
    ({"hbase.spark.query.maxVersions": "1"}, {"max_versions": 1}),
    ({"filter": "ValueFilter(=, 'binary:')", "hbase.spark.query.timerange.start": "15",
      "hbase.spark.query.timerange.end": "40"}, {"filter": "ValueFilter(=, 'binary:')", "time_range": (15, 40)}),
    ({"hbase.mapreduce.scan.columns": "f:a g"}, {"columns": [b"f:a", b"g"]}),
]


def _spark_read(spark, root, fmt, options):
    reader = (spark.read.format(fmt).option("root", root).option("table", "t")
              .option("hbase.columns.mapping", MAPPING).option("serde", "string").option("hbase.spark.query.raw", "true"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.mark.parametrize("fmt", ["regionscan", "regionscan_python"])
@pytest.mark.parametrize("index", range(len(SPARK_CASES)))
def test_spark_raw_reads_equal_embedded(spark, root, table, fmt, index):
    options, scan = SPARK_CASES[index]
    df = _spark_read(spark, root, fmt, options)
    assert df.columns == ["key", "family", "qualifier", "column", "timestamp", "type", "value"]
    scan = {"columns": [b"f", b"g"], **scan}  # the mapped families, whole, unless the scan columns say
    want = [_as_spark(c) for c in _cells(table.scan_batches(output="cells", raw=True, **scan))]
    assert want
    assert [tuple(r) for r in df.collect()] == want


@pytest.mark.parametrize("fmt", ["regionscan", "regionscan_python"])
def test_spark_raw_read_filters_prunes_and_counts_in_spark(spark, root, table, every, fmt):
    df = _spark_read(spark, root, fmt, {})
    markers = [c for c in every if c["type"] != PUT]
    got = df.where("type <> 'Put' AND key >= 'r1'").select("key", "type", "timestamp").collect()
    assert [tuple(r) for r in got] == [(c["row"].decode(), TYPE_NAMES[c["type"]], c["timestamp"])
                                       for c in markers if c["row"] >= b"r1"]
    assert df.count() == len(every)  # cells, not rows: nothing answered from the block indexes
    import connector

    plan = connector.explain(df.where("type = 'Delete'"))
    assert plan.pushed == [] and plan.scan_columns == ["f", "g"] and "raw scan" in str(plan)


def test_spark_raw_read_through_a_region_server(spark, root, table):
    """A ``grpc://`` root: the tasks' raw scans run in the server, WAL-replayed cells included."""
    want = [_as_spark(c) for c in _cells(table.scan_batches(output="cells", raw=True, columns=[b"f", b"g"]))]
    with ServerProcess(root, "--read-only") as server:
        for fmt in ("regionscan", "regionscan_python"):
            df = _spark_read(spark, server.location, fmt, {})
            assert [tuple(r) for r in df.collect()] == want, fmt


def test_spark_raw_option_mistakes_are_one_line(spark, root):
    with pytest.raises(Exception, match="must be true or false"):
        _spark_read(spark, root, "regionscan_python", {"hbase.spark.query.raw": "maybe"}).collect()
    rows = spark.createDataFrame([("r9", "x", "y")], "key STRING, a STRING, c STRING")
    with pytest.raises(Exception, match="hbase.spark.query.raw is a read option"):  # both sources' writer refuses
        (rows.write.format("regionscan").mode("append").option("root", root).option("table", "t")
         .option("hbase.columns.mapping", MAPPING).option("hbase.spark.query.raw", "true").save())
    with pytest.raises(Exception, match="did you mean 'hbase.spark.query.raw'"):
        (spark.read.format("regionscan_python").option("root", root).option("table", "t")
         .option("hbase.columns.mapping", MAPPING).option("hbase.spark.query.rw", "true").load().collect())


def test_record_readers_take_the_raw_option(root, table, every):
    """The input format's raw scan: TableRecordReader values are the raw dicts, the batch
    reader's batches raw cells of whole rows, and count_rows counts rows of markers too."""
    from connector.input_format import TableInputFormat
    from connector.record_reader import TableBatchRecordReader, TableRecordReader

    fmt = TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": "t", "hbase.spark.query.raw": "true",
                            "hbase.mapreduce.scan.columns": "f:a", "hbase.mapreduce.scan.cachedrows": "2"})
    try:
        splits = fmt.get_splits()
        assert len(splits) == 3
        pairs, cells, counted = [], [], 0
        for split in splits:
            with TableRecordReader() as reader:
                reader.initialize(split)
                pairs += list(reader)
            with TableBatchRecordReader() as reader:
                reader.initialize(split)
                cells += _cells(reader)
            with TableRecordReader() as reader:
                reader.initialize(split)
                counted += reader.count_rows()
    finally:
        fmt.release()
    assert pairs == list(table.scan(raw=True, columns=[b"f:a"]))
    assert cells == [c for c in every if (c["family"], c["qualifier"]) == (b"f", b"a")]
    assert counted == len(pairs) == 9


def test_count_rows_of_a_raw_read_counts_rows_holding_markers_alone(root):
    """f: (the empty qualifier) holds only the DeleteFamily markers of r2 and r4."""
    from connector.input_format import TableInputFormat
    from connector.record_reader import TableRecordReader

    counts = {}
    for raw in ("true", "false"):
        fmt = TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": "t",
                                "hbase.spark.query.raw": raw, "hbase.mapreduce.scan.columns": "f:"})
        try:
            total = 0
            for split in fmt.get_splits():
                with TableRecordReader() as reader:
                    reader.initialize(split)
                    total += reader.count_rows()
            counts[raw] = total
        finally:
            fmt.release()
    assert counts == {"true": 2, "false": 0}


def test_copy_table_all_cells_before_and_after_a_flush(spark, tmp_path, capsys):
    """--all.cells copies every marker and version whether the source's cells sit in the
    WAL and memstore (before a flush) or in store files (after one): each copy's raw scan,
    and its resolved scans of versions and of the past, are the source's."""
    from jobs import copy_table

    path = str(tmp_path / "root")
    conn = storage.connect(path)
    _write(conn.create_table("src", {"f": {"max_versions": 2}, "g": {"max_versions": 1}},
                             split_keys=[b"r3", b"r6"], settings={"wal_sync": "none"}))
    conn.close()
    assert copy_table.main(["--root", path, "--new.name=before", "--all.cells", "--create", "src"]) == 0
    conn = storage.connect(path)
    conn.table("src").flush()
    conn.close()
    assert copy_table.main(["--root", path, "--new.name=after", "--all.cells", "--create", "src"]) == 0
    capsys.readouterr()
    conn = storage.connect(path, read_only=True)
    try:
        src = conn.table("src")
        want = _cells(src.scan_batches(output="cells", raw=True))
        assert {c["type"] for c in want} == {PUT, DELETE, DELETE_COLUMN, DELETE_FAMILY}
        for name in ("before", "after"):
            copy = conn.table(name)
            assert _cells(copy.scan_batches(output="cells", raw=True)) == want, name
            for options in ({"max_versions": 3}, {"timestamp": 25, "max_versions": 2}, {"columns": [b"f:a"]}):
                assert list(copy.scan(**options)) == list(src.scan(**options)), (name, options)
    finally:
        conn.close()
