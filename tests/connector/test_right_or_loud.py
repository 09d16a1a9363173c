"""Never a silent wrong answer: a mapping that does not fit the stored bytes fails the read.

Cells written in one encoding and read through a mapping of another (text numbers under the
binary SerDe, HBase ``Bytes`` under the string SerDe) give the right answer or the SerDe's
one-line decode error, through both Spark sources and every path: a count whose filter the
source takes or leaves to Spark, a filtered read, an aggregate the JVM source's tasks compute,
a full read.  The trial count of the generated test is ``RIGHT_OR_LOUD_EXAMPLES`` (default 5).
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pyspark.sql import functions as F

import storage
from serde import create_serde
from serde.errors import DecodeError
from connector.pushdown import push_filters
from connector.source_config import SourceConfig
from storage.storefile import StoreFileReader
from storage.storefile.fileinfo import FileInfo
from storage.vfs.fs import FileSystem
from spark_plans import executed_plan

pytestmark = pytest.mark.spark

README_MAPPING = "key STRING :key, a INT cf:a, b STRING cf:b"
DECODE_ERROR = "cannot decode column"


@pytest.fixture(scope="module")
def readme_root(tmp_path_factory) -> str:
    """The README's table: numbers stored as text (``b"%d" % i``), as the README writes them."""
    root = str(tmp_path_factory.mktemp("readme") / "data")
    conn = storage.connect(root)
    table = conn.create_table("t", {"cf": {"max_versions": 3}}, split_keys=[b"g", b"p"])
    table.put(b"row1", {b"cf:a": b"1", b"cf:b": b"x"})
    with table.batch() as batch:
        for i in range(100):
            batch.put(b"user%03d" % i, {b"cf:a": b"%d" % i, b"cf:b": b"name-%d" % i})
    conn.close()
    return root


def _read(spark, fmt: str, root: str, **options):
    reader = spark.read.format(fmt).option("root", root).option("table", "t")
    reader = reader.option("hbase.columns.mapping", options.pop("mapping", README_MAPPING))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _pushdown_on(fmt: str) -> dict:
    return {"regionscan.python.pushdown": "true"} if fmt == "regionscan_python" else {}


def _fails_to_decode(action, column: str) -> str:
    with pytest.raises(Exception) as info:  # Spark wraps the SerDe's DecodeError in its own exception
        action()
    text = str(info.value)
    assert f"{DECODE_ERROR} {column!r}" in text, text
    return text


def test_the_readme_count_under_the_default_binary_serde_fails(spark, source_format, readme_root):
    # no serde option: binary, so an INT cell must be 4 bytes; the cells hold 1 or 2 digits
    df = _read(spark, source_format, readme_root, **_pushdown_on(source_format))
    query = df.where("key >= 'u' AND a > 10")
    text = _fails_to_decode(query.count, "a")
    assert "row b'user" in text or "row b'row1'" in text
    right = _read(spark, source_format, readme_root, serde="string", **_pushdown_on(source_format))
    if source_format == "regionscan_python":
        assert right.where("key >= 'u' AND a > 10").count() == 89  # the README's own answer
        return  # (this source decodes every column of every row it reads: slow to fail, and no shortcut)
    # every comparison: a byte filter would drop all of these rows unread and count 0
    for where in ("a < 10", "a = 5", "a IS NULL", "a <> 7"):
        _fails_to_decode(df.where(where).count, "a")
    kept = _read(spark, source_format, readme_root, **{"hbase.spark.pushdown.columnfilter": "false"})
    _fails_to_decode(kept.where("key >= 'u' AND a > 10").count, "a")
    assert right.where("key >= 'u' AND a > 10").count() == 89  # the README's own answer


def test_aggregates_and_reads_of_the_misfit_column_fail(spark, source_format, readme_root):
    df = _read(spark, source_format, readme_root)
    if source_format == "regionscan_python":  # Spark aggregates the rows this source decodes
        _fails_to_decode(df.where("key >= 'u'").agg(F.sum("a")).collect, "a")
        return
    for fn in (F.sum, F.min, F.max):
        # with COUNT(b) of a STRING beside it: an ungrouped MIN/MAX of an INT alone is left to Spark
        query = df.where("key >= 'u'").agg(fn("a"), F.count("b"))
        if source_format == "regionscan":
            assert "PushedAggregation" in executed_plan(query)  # computed by the JVM source's tasks, in the worker
        _fails_to_decode(query.collect, "a")
    _fails_to_decode(df.collect, "a")
    _fails_to_decode(df.select("key", "a").where("key = 'user042'").collect, "a")
    assert df.where("key >= 'u' AND b >= 'name-5'").select("key", "b").count() == 55  # b fits: right answer


def test_a_bare_count_reads_no_value(spark, readme_root):
    # COUNT(*) references no value column: the JVM source answers from the block indexes
    assert _read(spark, "regionscan", readme_root).count() == 101
    assert _read(spark, "regionscan", readme_root).where("key >= 'u'").count() == 100


def test_a_fixed_width_column_is_checked_by_its_lengths_not_a_row_loop():
    serde = create_serde("binary", "key STRING :key, a INT cf:a")
    codec = serde.readers[1].codec
    calls = []
    scalar = codec.decode

    def counted(raw):
        calls.append(raw)
        return scalar(raw)

    codec.decode = counted  # the scalar decoder: called for the error message alone
    n = 20_000
    keys = pa.array([b"k%05d" % i for i in range(n)], pa.binary())
    text = pa.array([b"%d" % (i % 100) for i in range(n)], pa.binary())
    with pytest.raises(DecodeError) as info:
        serde.deserialize_batch(pa.RecordBatch.from_arrays([keys, text], names=["key", "cf:a"]))
    assert str(info.value).startswith("cannot decode column 'a' of row b'k00000': value b'0'")
    assert len(calls) == 1
    fitting = pa.array([np.int32(i).byteswap().tobytes() for i in range(n)], pa.binary())
    decoded = serde.deserialize_batch(pa.RecordBatch.from_arrays([keys, fitting], names=["key", "cf:a"]))
    assert decoded.column("a").to_pylist() == list(range(n)) and len(calls) == 1
    lenient = create_serde("binary", "key STRING :key, a INT cf:a", {"serde.on.error": "null"})
    mixed = pa.array([b"\x00\x00\x00\x07", b"77", None], pa.binary())
    out = lenient.deserialize_batch(pa.RecordBatch.from_arrays([keys[:3], mixed], names=["key", "cf:a"]))
    assert out.column("a").to_pylist() == [7, None, None] and lenient.stats.nulls_from_errors == {"a": 1}


# -- generated: cells in one encoding, read through the other --------------------------------

COLUMNS = {"a": "INT", "b": "BIGINT", "c": "DOUBLE"}
MAPPING = "key STRING :key, " + ", ".join(f"{name} {kind} cf:{name}" for name, kind in COLUMNS.items())
# text forms that are sometimes exactly as wide as the binary form (4 digits for an INT ...)
_VALUES = {
    "a": st.one_of(st.integers(0, 99), st.integers(1000, 9999), st.integers(-(2 ** 31), 2 ** 31 - 1)),
    "b": st.one_of(st.integers(0, 99), st.integers(10 ** 7, 10 ** 8 - 1), st.integers(-(2 ** 63), 2 ** 63 - 1)),
    "c": st.one_of(st.integers(-40, 40).map(lambda i: i / 4), st.integers(10000, 99999).map(lambda i: i + 0.25)),
}
_LITERALS = {"a": st.integers(-100, 10000), "b": st.integers(-100, 10 ** 8), "c": st.integers(-10, 10).map(float)}
_OPS = {">": lambda v, x: v > x, "<": lambda v, x: v < x, "=": lambda v, x: v == x}
_ROOTS = itertools.count()


@st.composite
def _tables(draw):
    n = draw(st.integers(2, 10))
    rows = [{name: draw(st.none() | _VALUES[name]) for name in COLUMNS} for _ in range(n)]
    return draw(st.sampled_from(["binary", "string"])), rows


@st.composite
def _queries(draw):
    kind = draw(st.sampled_from(["count_where", "count_where_spark", "read_where", "aggregate", "full", "count"]))
    column = draw(st.sampled_from(sorted(COLUMNS)))
    op = draw(st.sampled_from([">", "<", "=", "IS NULL"]))
    literal = draw(_LITERALS[column])
    fn = draw(st.sampled_from(["min", "max"] if column == "b" else ["sum", "min", "max"]))  # no BIGINT overflow
    return kind, column, op, literal, fn


def _write(root: str, encoding: str, rows: list[dict]) -> None:
    serde = create_serde(encoding, MAPPING)
    conn = storage.connect(root)
    table = conn.create_table("t", {"cf": {}}, split_keys=[b"r05"])
    with table.batch() as batch:
        for i, row in enumerate(rows):
            key, cells = serde.serialize({"key": f"r{i:02d}", **row})
            if cells:  # a row of null values writes no cell, and so is no row
                batch.put(key, cells)
    conn.close()


def _decoded(root: str, encoding: str) -> dict[str, list | DecodeError]:
    """Each column decoded alone with ``encoding``, in key order (the reference), or its DecodeError."""
    conn = storage.connect(root)
    rows = list(conn.table("t").scan(columns=[f"cf:{c}".encode() for c in COLUMNS]))
    conn.close()
    out: dict[str, list | DecodeError] = {"key": [k.decode() for k, _ in rows]}
    for name, kind in COLUMNS.items():
        serde = create_serde(encoding, f"key STRING :key, {name} {kind} cf:{name}")
        try:
            out[name] = [serde.deserialize((k, cells))[1] for k, cells in rows]
        except DecodeError as exc:
            out[name] = exc
    return out


def _run(df, query):
    kind, column, op, literal, fn = query
    where = f"{column} IS NULL" if op == "IS NULL" else f"{column} {op} {literal!r}"
    if kind in ("count_where", "count_where_spark"):
        return df.where(where).count()
    if kind == "read_where":
        return [tuple(r) for r in df.where(where).select("key", column).orderBy("key").collect()]
    if kind == "aggregate":
        return df.agg(getattr(F, fn)(column)).collect()[0][0]
    if kind == "full":
        return [tuple(r) for r in df.orderBy("key").collect()]
    return df.count()


def _expected(reference: dict, query):
    kind, column, op, literal, fn = query
    keys = reference["key"]
    if kind == "count":
        return len(keys)
    if kind == "full":
        return [tuple([k] + [reference[c][i] for c in COLUMNS]) for i, k in enumerate(keys)]
    values = reference[column]
    if kind == "aggregate":
        present = [v for v in values if v is not None]
        return None if not present else {"sum": sum, "min": min, "max": max}[fn](present)
    test = (lambda v: v is None) if op == "IS NULL" else (lambda v: v is not None and _OPS[op](v, literal))
    chosen = [(k, v) for k, v in zip(keys, values) if test(v)]
    return len(chosen) if kind.startswith("count") else chosen


def _referenced(query) -> set[str]:
    kind, column = query[0], query[1]
    return set() if kind == "count" else set(COLUMNS) if kind == "full" else {column}


@settings(max_examples=int(os.environ.get("RIGHT_OR_LOUD_EXAMPLES", "5")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(table=_tables(), query=_queries())
def test_a_read_through_another_encoding_answers_right_or_fails(spark, tmp_path_factory, table, query):
    written_as, rows = table
    read_as = "string" if written_as == "binary" else "binary"
    root = str(tmp_path_factory.getbasetemp() / f"right_or_loud_{next(_ROOTS)}")
    _write(root, written_as, rows)
    reference = _decoded(root, read_as)
    bad = {c for c in COLUMNS if isinstance(reference[c], DecodeError)}
    must_fail = bool(bad & _referenced(query))
    for fmt in ("regionscan_python", "regionscan"):
        options = {"serde": read_as, "mapping": MAPPING}
        if query[0] == "count_where_spark":
            options["hbase.spark.pushdown.columnfilter"] = "false"
        elif fmt == "regionscan_python":
            options["regionscan.python.pushdown"] = "true"
        df = _read(spark, fmt, root, **options)
        try:
            got = _run(df, query)
        except Exception as exc:  # noqa: BLE001 - Spark wraps the SerDe's error
            text = str(exc)
            # the error: required where a referenced column does not decode; allowed (a source may
            # decode more than the query needs) only where some column does not
            assert DECODE_ERROR in text and bad, (fmt, written_as, read_as, query, text[:400])
            assert any(f"{DECODE_ERROR} {c!r}" in text for c in bad), (fmt, query, text[:400])
            continue
        assert not must_fail, (fmt, written_as, read_as, query, got)
        want = _expected(reference, query)
        if query[1] == "c" and query[0] == "aggregate" and want is not None:
            assert got == pytest.approx(want, rel=1e-9), (fmt, query)
        else:
            assert got == want, (fmt, written_as, read_as, query)


# -- row keys under a fixed-width key codec --------------------------------------------------

INT_KEY = "key INT :key, b STRING cf:b"  # binary SerDe: a key is 4 bytes
ORDERED_INT_KEY = {"hbase.columns.mapping": ":key#o,cf:b", "columns": "key,b", "columns.types": "int:string",
                   "serde": "binary"}


def _int_keyed(root: str, name: str, keys: range, options: dict, unflushed: bytes | None = None,
               deleted: bytes | None = None) -> None:
    """``keys`` written as the mapping encodes them and flushed; ``unflushed`` (raw) left in the
    WAL; ``deleted`` (raw) put, flushed, then deleted."""
    serde = SourceConfig.from_options({"root": root, "table": name, **options}).read_serde()
    conn = storage.connect(root)
    table = conn.create_table(name, {"cf": {}}, split_keys=[serde.serialize({"key": 50, "b": ""})[0]])
    with table.batch() as batch:
        for k in keys:
            batch.put(*serde.serialize({"key": k, "b": f"v{k}"}))
    if deleted is not None:
        table.put(deleted, {b"cf:b": b"gone"})
    table.flush()
    if deleted is not None:
        table.delete(deleted)
    if unflushed is not None:
        table.put(unflushed, {b"cf:b": b"late"})
    conn.close()


def test_a_key_range_over_keys_of_another_width_fails(spark, source_format, readme_root):
    # the README's text keys under a binary INT key: a key range is a byte seek, and the JVM
    # source counted 101 rows "> 10" from the block indexes; "< 10" seeks past every text key
    df = _read(spark, source_format, readme_root, mapping="key INT :key, b STRING cf:b", **_pushdown_on(source_format))
    for where in ("key > 10", "key < 10", "key = 5", "key >= 0 AND key < 100000"):
        text = _fails_to_decode(df.where(where).count, "key")
        assert "row b'row1'" in text or "row b'user" in text
    _fails_to_decode(df.where("key < 10").select("b").collect, "key")  # the key column not read
    ordered = _read(spark, source_format, readme_root, **ORDERED_INT_KEY, **_pushdown_on(source_format))
    _fails_to_decode(ordered.where("key > 10").count, "key")
    _fails_to_decode(ordered.agg(F.min("key"), F.max("key")).collect, "key")  # MIN/MAX of the key


def test_keys_that_fit_keep_the_count_from_the_indexes(spark, source_format, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("fitting_keys") / "data")
    _int_keyed(root, "t", range(100), {"hbase.columns.mapping": INT_KEY}, deleted=b"zz-gone")
    _int_keyed(root, "o", range(-20, 80), ORDERED_INT_KEY)
    df = _read(spark, source_format, root, mapping=INT_KEY, **_pushdown_on(source_format))
    query = df.where("key > 10 AND key < 60")
    assert query.count() == 49  # the deleted text key (still in the file) is not a row: no error
    ordered = spark.read.format(source_format).option("root", root).option("table", "o")
    for k, v in {**ORDERED_INT_KEY, **_pushdown_on(source_format)}.items():
        ordered = ordered.option(k, v)
    ordered = ordered.load()
    assert ordered.agg(F.min("key"), F.max("key")).collect()[0][:] == (-20, 79)
    assert ordered.where("key >= 0").count() == 80
    if source_format == "regionscan":  # answered while planning, from the indexes and edge keys
        assert "LocalTableScan" in executed_plan(query.groupBy().count())
        assert "LocalTableScan" in executed_plan(ordered.agg(F.min("key"), F.max("key")))


def test_a_key_of_another_width_in_the_memstore_or_an_old_file_fails(spark, source_format, tmp_path_factory,
                                                                     monkeypatch):
    root = str(tmp_path_factory.mktemp("late_keys") / "data")
    _int_keyed(root, "t", range(100), {"hbase.columns.mapping": INT_KEY}, unflushed=b"late-text-key")
    df = _read(spark, source_format, root, mapping=INT_KEY, **_pushdown_on(source_format))
    text = _fails_to_decode(df.where("key > 10").count, "key")
    assert "row b'late-text-key'" in text
    # a store file written before the file info recorded key lengths: its keys are measured
    old_root = str(tmp_path_factory.mktemp("old_files") / "data")
    to_json = FileInfo.to_json

    def without_key_lengths(info):
        doc = json.loads(to_json(info))
        del doc["min_row_length"], doc["max_row_length"]
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")

    with monkeypatch.context() as patched:
        patched.setattr(FileInfo, "to_json", without_key_lengths)
        _int_keyed(old_root, "t", range(100), {"hbase.columns.mapping": INT_KEY}, deleted=b"zz-gone")
        conn = storage.connect(old_root)
        conn.table("t").put(b"old-text-key", {b"cf:b": b"x"})
        conn.table("t").flush()
        conn.close()
    files = [p for p in pathlib.Path(old_root).rglob("regions/*/cf/*") if p.is_file()]
    assert files and all(_info(p).row_lengths is None for p in files)  # written as the old writer did
    old = _read(spark, source_format, old_root, mapping=INT_KEY, **_pushdown_on(source_format))
    assert "row b'old-text-key'" in _fails_to_decode(old.where("key > 10").count, "key")


def _info(path: pathlib.Path) -> FileInfo:
    with StoreFileReader(FileSystem(str(path.parent)), path.name) as reader:
        return reader.info


def test_the_input_format_of_a_mapping_checks_its_key_range(readme_root, tmp_path_factory):
    """The embedded path: a SourceConfig's input format, its splits and the record reader's count."""
    from pyspark.sql.datasource import GreaterThan

    config = SourceConfig.from_options({"root": readme_root, "table": "t", "hbase.columns.mapping": INT_KEY})
    pushed = push_filters([GreaterThan(("key",), 10)], config.read_serde())
    assert pushed.key_ranges is not None
    with pytest.raises(DecodeError, match=r"^cannot decode column 'key' of row b'(row1|user000)'"):
        config.input_format(pushed.key_ranges).get_splits()
    lenient = SourceConfig.from_options({"root": readme_root, "table": "t", "hbase.columns.mapping": INT_KEY,
                                         "serde.on.error": "null"})
    with pytest.raises(DecodeError, match="a row key of .* bytes where INT takes 4"):
        lenient.input_format(pushed.key_ranges).get_splits()
    root = str(tmp_path_factory.mktemp("fitting_input_format") / "data")
    _int_keyed(root, "t", range(100), {"hbase.columns.mapping": INT_KEY})
    fitting = SourceConfig.from_options({"root": root, "table": "t", "hbase.columns.mapping": INT_KEY})
    fmt = fitting.input_format(push_filters([GreaterThan(("key",), 10)], fitting.read_serde()).key_ranges)
    total = 0
    for split in fmt.get_splits():
        reader = fmt.create_batch_reader(split)
        total += reader.count_rows()
        reader.close()
    fmt.release()
    assert total == 89


# -- STRING cells under an engine byte filter ------------------------------------------------

TEXT_MAPPING = "key STRING :key, b STRING cf:b"
NOT_UTF8 = b"\xff\xfe-not-text"


@pytest.fixture(scope="module")
def not_utf8_root(tmp_path_factory) -> str:
    """Text cells and one that is not UTF-8: flushed (dense blocks), and again in the memstore
    of a second table with two versions per cell (cell blocks and the cell path)."""
    root = str(tmp_path_factory.mktemp("not_utf8") / "data")
    conn = storage.connect(root)
    for name, versions in (("t", 1), ("v", 2)):
        table = conn.create_table(name, {"cf": {"max_versions": 3}}, split_keys=[b"r15"])
        for version in range(versions):
            with table.batch() as batch:
                for i in range(30):
                    batch.put(b"r%02d" % i, {b"cf:b": b"name-%d" % (i + version)})
            if name == "t":
                table.put(b"r99", {b"cf:b": NOT_UTF8})
            table.flush()
        if name == "v":
            table.put(b"r99", {b"cf:b": NOT_UTF8})  # in the WAL only
    conn.close()
    return root


def _not_utf8_fails(action) -> str:
    with pytest.raises(Exception) as info:
        action()
    text = str(info.value)
    assert "not valid UTF-8" in text and "row b'r99'" in text and repr(NOT_UTF8)[2:-1] in text, text
    return text


def test_a_string_filter_the_engine_takes_fails_on_a_cell_that_is_not_text(spark, source_format, not_utf8_root):
    # the engine compares stored bytes: b'\xff...' sorts after every name, so "<" and "=" dropped
    # its row unread and counted as if every cell were text, where a read of b fails
    for table in ("t", "v"):
        df = spark.read.format(source_format).option("root", not_utf8_root).option("table", table) \
            .option("hbase.columns.mapping", TEXT_MAPPING)
        for k, v in _pushdown_on(source_format).items():
            df = df.option(k, v)
        df = df.load()
        _fails_to_decode(df.collect, "b")  # the full read
        for where in ("b < 'name-5'", "b = 'name-7'", "b >= 'name-5'", "b LIKE 'name-1%'"):
            _not_utf8_fails(df.where(where).count)
        _not_utf8_fails(df.where("b < 'name-5'").select("key").collect)
        assert df.where("key < 'r99' AND b < 'name-5'").count() > 0  # the key range leaves r99 out: right


def test_an_input_format_with_a_pushed_string_filter_fails_on_a_cell_that_is_not_text(not_utf8_root):
    from pyspark.sql.datasource import LessThan

    config = SourceConfig.from_options({"root": not_utf8_root, "table": "t", "hbase.columns.mapping": TEXT_MAPPING})
    pushed = push_filters([LessThan(("b",), "name-5")], config.read_serde())
    assert "utf8:binary:name-5" in repr(pushed.engine_filter)
    fmt = config.input_format(pushed.key_ranges, repr(pushed.engine_filter))
    splits = fmt.get_splits()

    def count():
        total = 0
        for split in splits:
            reader = fmt.create_batch_reader(split)
            try:
                total += sum(batch.num_rows for batch in reader)
            finally:
                reader.close()
        return total

    _not_utf8_fails(count)
    fmt.release()
