"""Namespaces (``ns:table``, HBase 0.96+) through every front end.

The embedded API, a region server process, the Thrift gateway with happybase,
the input format, the Spark source (``hbase.table`` and hbase-spark's catalog
``namespace``) and a job's table argument all address the same tables, and a
``default`` table keeps its pre-namespace folder.
"""

from __future__ import annotations

import json
import os

import happybase
import pytest

import storage
from connector import TableInputFormat
from storage.namespaces import canonical_table_name, parse_table_name, table_dir
from storage.server.process import ServerProcess


def _fill(table, tag: bytes, n: int = 5) -> None:
    with table.batch() as b:
        for i in range(n):
            b.put(b"r%02d" % i, {b"cf:v": tag + b"%d" % i})


@pytest.fixture()
def root(tmp_path):
    path = str(tmp_path / "root")
    conn = storage.connect(path)
    _fill(conn.create_table("t", {"cf": {}}), b"default-")
    conn.create_namespace("ns")
    _fill(conn.create_table("ns:t", {"cf": {}}, split_keys=[b"r02"]), b"ns-", n=7)
    conn.close()
    return path


def test_names_have_one_spelling():
    assert canonical_table_name("default:t") == canonical_table_name(b"t") == "t"
    assert canonical_table_name("NS_1:t.x-y") == "NS_1:t.x-y"
    assert parse_table_name("ns:t") == ("ns", "t")
    assert table_dir("default:t") == "t" and table_dir("ns:t") == "@ns/t"
    for bad, reason in [
        ("a:b:c", "more than one ':'"),
        ("x-y:t", "invalid namespace 'x-y'"),
        ("ns:", "invalid table name 'ns:'"),
        (":t", "invalid namespace ''"),
        ("hbase:meta", "reserved"),
        ("@ns", "invalid table name"),
        ("../t", "invalid table name"),
    ]:
        with pytest.raises(storage.InvalidArgument, match=reason) as info:
            parse_table_name(bad)
        assert "\n" not in str(info.value)


def test_embedded_namespaces_are_separate_and_default_keeps_its_folder(root):
    assert os.path.isdir(os.path.join(root, "t")), "a default table keeps the pre-namespace layout"
    assert os.path.isfile(os.path.join(root, "@ns", ".namespace"))
    with storage.connect(root) as conn:
        assert conn.list_namespaces() == ["default", "ns"]
        assert sorted(conn.tables()) == [b"ns:t", b"t"]
        assert conn.tables(namespace="ns") == [b"ns:t"]
        assert conn.tables(namespace="default") == [b"t"]
        assert conn.table("default:t") is conn.table("t")
        assert conn.table("t").row(b"r01") == {b"cf:v": b"default-1"}
        assert conn.table("ns:t").row(b"r01") == {b"cf:v": b"ns-1"}
        assert len(conn.table("ns:t").regions()) == 2
        assert conn.table("ns:t").count() == 7

        with pytest.raises(storage.NamespaceNotFound, match="namespace other does not exist"):
            conn.create_table("other:t", {"cf": {}})
        with pytest.raises(storage.TableNotFound, match="there is no namespace other"):
            conn.table("other:t")
        with pytest.raises(storage.NamespaceExists):
            conn.create_namespace("ns")
        with pytest.raises(storage.InvalidArgument, match="always exists"):
            conn.create_namespace("default")
        with pytest.raises(storage.NamespaceNotEmpty, match=r"still holds 1 table\(s\) \(ns:t\)"):
            conn.delete_namespace("ns")
        with pytest.raises(storage.TableExists):
            conn.create_table("ns:t", {"cf": {}})

        conn.delete_table("ns:t")
        assert conn.tables(namespace="ns") == []
        conn.delete_namespace("ns")
        assert conn.list_namespaces() == ["default"]
        assert conn.tables() == [b"t"]
        assert conn.table("t").row(b"r00") == {b"cf:v": b"default-0"}, "dropping a namespace left default alone"
        with pytest.raises(storage.NamespaceNotFound):
            conn.tables(namespace="ns")


def test_a_namespace_named_like_a_default_table(tmp_path):
    with storage.connect(str(tmp_path / "r")) as conn:
        _fill(conn.create_table("t", {"cf": {}}), b"table-")
        conn.create_namespace("t")
        _fill(conn.create_table("t:t", {"cf": {}}), b"namespaced-")
        assert conn.table("t").row(b"r00") == {b"cf:v": b"table-0"}
        assert conn.table("t:t").row(b"r00") == {b"cf:v": b"namespaced-0"}
        conn.delete_table("t")
        assert conn.table("t:t").count() == 5


def test_region_server_namespaces(root):
    with ServerProcess(root) as proc, storage.connect(proc.location) as remote:
        assert remote.list_namespaces() == ["default", "ns"]
        assert sorted(remote.tables()) == [b"ns:t", b"t"]
        assert remote.tables("ns") == [b"ns:t"]
        assert remote.table("ns:t").row(b"r03") == {b"cf:v": b"ns-3"}
        assert sum(b.num_rows for b in remote.table("ns:t").scan_batches()) == 7
        remote.create_namespace("more")
        remote.create_table("more:x", {"cf": {}}).put(b"k", {b"cf:a": b"1"})
        assert remote.table("more:x").row(b"k") == {b"cf:a": b"1"}
        with pytest.raises(storage.NamespaceNotEmpty):
            remote.delete_namespace("more")
        remote.delete_table("more:x")
        remote.delete_namespace("more")
        with pytest.raises(storage.NamespaceNotFound):
            remote.create_table("gone:x", {"cf": {}})
        assert remote.list_namespaces() == ["default", "ns"]


def test_thrift_gateway_takes_happybase_namespaced_names(root):
    with ServerProcess(root, module="storage.thrift") as proc:
        conn = happybase.Connection("127.0.0.1", proc.port)
        try:
            assert sorted(conn.tables()) == [b"ns:t", b"t"]
            table = conn.table("ns:t")
            assert table.row(b"r04") == {b"cf:v": b"ns-4"}
            assert len(list(table.scan())) == 7
            table.put(b"new", {b"cf:v": b"via-thrift"})
            conn.create_table("ns:made", {"cf": dict()})
            assert b"ns:made" in conn.tables()
            # happybase's table_prefix joins with '_': it names a default table, as in HBase
            prefixed = happybase.Connection("127.0.0.1", proc.port, table_prefix="app")
            prefixed.create_table("x", {"cf": dict()})
            assert b"app_x" in conn.tables()
            prefixed.close()
        finally:
            conn.close()
    with storage.connect(root, read_only=True) as check:
        assert check.table("ns:t").row(b"new") == {b"cf:v": b"via-thrift"}
        assert check.tables(namespace="ns") == [b"ns:made", b"ns:t"]


def test_input_format_reads_a_namespaced_table(root):
    fmt = TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": "ns:t"})
    splits = fmt.get_splits()
    assert len(splits) == 2
    rows = []
    for split in splits:
        reader = fmt.create_record_reader(split)
        while reader.next_key_value():
            rows.append(reader.get_current_key())
        reader.close()
    assert rows == [b"r%02d" % i for i in range(7)]


@pytest.mark.spark
def test_spark_source_hbase_table_and_catalog_namespace(spark, root):
    base = {"root": root, "serde": "string"}
    mapping = "key STRING :key, v STRING cf:v"
    for name in ("ns:t", "default:t", "t"):
        df = spark.read.format("regionscan").options(**base, **{"hbase.table": name, "hbase.columns.mapping": mapping}).load()
        expected = 7 if name.startswith("ns:") else 5
        assert df.count() == expected, name
    catalog = json.dumps({
        "table": {"namespace": "ns", "name": "t"},
        "rowkey": "key",
        "columns": {"key": {"cf": "rowkey", "col": "key", "type": "string"},
                    "v": {"cf": "cf", "col": "v", "type": "string"}},
    })
    rows = spark.read.format("regionscan").options(root=root, catalog=catalog).load().orderBy("key").collect()
    assert [r.v for r in rows] == [f"ns-{i}" for i in range(7)]


@pytest.mark.spark
def test_row_counter_job_takes_a_namespaced_table(spark, root, capsys):
    from jobs import row_counter

    assert row_counter.main(["--root", root, "ns:t"]) == 0
    assert "ROWS=7" in capsys.readouterr().out


def test_namespace_command(tmp_path, capsys):
    from jobs import cli

    root = str(tmp_path / "cli")
    assert cli.main(["namespace", "create", "app", "--root", root]) == 0
    assert cli.main(["namespace", "list", "--root", root]) == 0
    assert capsys.readouterr().out.split() == ["created", "namespace", "app", "default", "app"]
    with storage.connect(root) as conn:
        conn.create_table("app:events", {"cf": {}})
    assert cli.main(["namespace", "tables", "app", "--root", root]) == 0
    assert capsys.readouterr().out.split() == ["app:events"]
    assert cli.main(["namespace", "drop", "app", "--root", root]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "regionscan namespace: failed: namespace app still holds 1 table(s) (app:events): delete them first"
    assert cli.main(["namespace", "create", "bad-name", "--root", root]) == 2
    assert capsys.readouterr().err.strip().endswith("invalid namespace 'bad-name': use 1-128 letters, digits or '_'")
