"""Table descriptor values (storage.table.descriptor) and the column mapping stored in them
(connector.stored_mapping): set and read back, refused in one line when wrong, kept whole when
the manifest write fails or the power is cut, the ``regionscan mapping`` command, and the engine
worker's ``catalog`` op over a real socket."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from engine_worker_process import python_worker

import storage
from connector import stored_mapping
from connector.worker.protocol import read_frame, request_bytes
from connector.source_config import SourceConfig, store_mapping
from jobs import mapping as mapping_job
from storage.errors import InvalidArgument, TableLocked, TableNotFound
from storage.table.descriptor import set_table_values, table_values
from storage.vfs.faultfs import FaultFileSystem
from storage.vfs.fs import FileSystem

MAPPING = "k STRING :key, n INT cf:n"
SECRET = "catalog-test-secret"


@pytest.fixture
def root(tmp_path):
    path = str(tmp_path / "root")
    with storage.connect(path) as conn:
        conn.create_table("t", {"cf": {}}, settings={"wal_sync": "none", "extra": {"owner": "ops"}})
        conn.create_namespace("ns1")
        conn.create_table("ns1:u", {"cf": {}, "g": {}}, num_regions=2)
    return path


# -- descriptor values ----------------------------------------------------------------------
def test_values_are_set_read_back_and_removed(root):
    fs = FileSystem(root)
    assert table_values(fs, "t") == {"owner": "ops"}
    assert set_table_values(fs, "t", {"a": "1", "b": "2"}) == {"owner": "ops", "a": "1", "b": "2"}
    assert set_table_values(fs, "t", {"a": None, "b": "3"}) == {"owner": "ops", "b": "3"}
    with storage.connect(root) as conn:  # the table opens with them, and changes them while open
        table = conn.table("t")
        assert table.values() == {"owner": "ops", "b": "3"} == conn.table_values("t")
        assert conn.set_table_values("t", {"c": "4"})["c"] == "4"
        assert table.settings.extra["c"] == "4"
        table.put(b"r", {b"cf:q": b"v"})
    with storage.connect(root, read_only=True) as conn:
        assert conn.table_values("t") == {"owner": "ops", "b": "3", "c": "4"}
        assert conn.table("t").row(b"r") == {b"cf:q": b"v"}


@pytest.mark.parametrize("updates,message", [
    ({}, "non-empty dict"),
    ({"": "x"}, "non-empty string"),
    ({"k": 5}, "must be a string or None"),
    ({"k": "x" * (70 << 10)}, "at most 65536 bytes"),
])
def test_bad_values_are_refused_in_one_line_and_change_nothing(root, updates, message):
    fs = FileSystem(root)
    with pytest.raises(InvalidArgument, match=message):
        set_table_values(fs, "t", updates)
    assert table_values(fs, "t") == {"owner": "ops"}


def test_a_missing_table_and_a_held_writer_lock_are_refused(root):
    fs = FileSystem(root)
    with pytest.raises(TableNotFound, match="table nope does not exist"):
        table_values(fs, "nope")
    with pytest.raises(TableNotFound):
        set_table_values(fs, "nope", {"a": "1"})
    with storage.connect(root) as conn:
        conn.table("t")  # holds the writer lock
        with pytest.raises(TableLocked):
            set_table_values(FileSystem(root), "t", {"a": "1"})
    assert table_values(fs, "t") == {"owner": "ops"}


@pytest.mark.parametrize("kind", ["create", "write", "sync", "rename"])
def test_a_failed_or_cut_update_leaves_the_old_or_the_new_values(root, kind):
    for power_cut in (False, True):
        fs = FaultFileSystem(root)
        before = table_values(FileSystem(root), "t")
        fs.injector.fail(kind, 1)
        try:
            set_table_values(fs, "t", {"step": f"{kind}-{power_cut}"})
        except OSError:
            pass
        assert fs.injector.failures == 1
        if power_cut:
            fs.injector.power_cut()
        after = table_values(FileSystem(root), "t")  # the manifest reads whole (its CRC is checked)
        assert after in (before, {**before, "step": f"{kind}-{power_cut}"})
        with storage.connect(root) as conn:
            assert conn.table("t").values() == after


# -- the stored mapping ---------------------------------------------------------------------
def test_a_stored_mapping_completes_reads_that_give_none(root):
    with pytest.raises(InvalidArgument) as info:
        SourceConfig.from_options({"root": root, "table": "t"})
    assert str(info.value) == (f"table t under {root} has no stored column mapping: give option "
                               "'hbase.columns.mapping' or 'catalog', or store one with the table: "
                               f"regionscan mapping set t --root {root} --mapping '<mapping>'")
    kept = store_mapping(root, "t", {"hbase.columns.mapping": MAPPING, "serde": "string", "regionscan.root": root,
                                            "hbase.mapreduce.inputtable": "t", "newtable": "3", "columns": "n",
                                            "serialization.null.format": "NULL", "hbase.mapreduce.scan.caching": "9",
                                            "regionscan.timestamp.ntz": "true"})
    assert kept == {"hbase.columns.mapping": MAPPING, "serde": "string", "serialization.null.format": "NULL",
                    "regionscan.timestamp.ntz": "true"}
    value = json.loads(table_values(FileSystem(root), "t")[stored_mapping.MAPPING_KEY])
    assert value == {"v": 1, "options": kept}
    config = SourceConfig.from_options({"root": root, "table": "t"})
    assert config.schema_ddl() == "`k` STRING, `n` INT" and config.serde_name == "string"
    given = SourceConfig.from_options({"root": root, "table": "t", "serde": "binary"})
    assert given.serde_name == "binary"  # what a read gives wins
    explicit = SourceConfig.from_options({"root": root, "table": "t", "hbase.columns.mapping": "id STRING :key"})
    assert explicit.schema_ddl() == "`id` STRING"
    assert table_values(FileSystem(root), "t")["owner"] == "ops"  # other values are kept


def test_the_stored_record_is_frozen_at_version_1():
    """The bytes a table keeps (docs/formats/manifest.md, "Stored column mapping"): a change needs v 2."""
    frozen = '{"v":1,"options":{"hbase.columns.mapping":"k STRING :key, n INT cf:n","serde":"string"}}'
    assert stored_mapping.encode({"serde": "string", "hbase.columns.mapping": MAPPING}) == frozen
    assert stored_mapping.decode(frozen, "t") == {"hbase.columns.mapping": MAPPING, "serde": "string"}


def test_hive_columns_are_stored_only_with_their_types(root):
    hive = {"hbase.columns.mapping": ":key,cf:n", "columns": "id,n", "columns.types": "string:int"}
    assert store_mapping(root, "t", hive) == hive
    assert SourceConfig.from_options({"root": root, "table": "t"}).schema_ddl() == "`id` STRING, `n` INT"


@pytest.mark.parametrize("options,message", [
    ({"hbase.columns.mapping": "k STRING :key, n INT zz:n"}, r"names column families \['zz'\] that table t lacks"),
    ({"hbase.columns.mapping": "k STRANGE :key"}, "STRANGE"),
    ({"serde": "string"}, "a stored mapping needs option 'hbase.columns.mapping' or 'catalog'"),
])
def test_a_bad_mapping_is_never_stored(root, options, message):
    with pytest.raises(InvalidArgument, match=message):
        store_mapping(root, "t", options)
    assert stored_mapping.MAPPING_KEY not in table_values(FileSystem(root), "t")


@pytest.mark.parametrize("value,message", [
    ("not json", "is not a mapping record"),
    (json.dumps({"v": 2, "options": {"hbase.columns.mapping": MAPPING}}), "has version 2; this regionscan reads version 1"),
    (json.dumps({"v": 1, "options": {"serde": "binary"}}), "has no mapping option"),
])
def test_an_unreadable_stored_mapping_is_one_line_naming_the_table(root, value, message):
    set_table_values(FileSystem(root), "t", {stored_mapping.MAPPING_KEY: value})
    with pytest.raises(InvalidArgument, match=message) as info:
        SourceConfig.from_options({"root": root, "table": "t"})
    assert "table t's stored mapping" in str(info.value) and "\n" not in str(info.value)


def test_missing_tables_and_server_roots_say_what_to_give(root):
    with pytest.raises(InvalidArgument) as info:
        SourceConfig.from_options({"root": root, "table": "nope"})
    assert str(info.value) == (f"table nope does not exist under {root} (tables: t), so it has no stored mapping: "
                               "give option 'hbase.columns.mapping' or 'catalog'")
    with pytest.raises(InvalidArgument, match="stored mappings are read from a filesystem root, not grpc://"):
        SourceConfig.from_options({"root": "grpc://127.0.0.1:1", "table": "t"})


def test_remember_stores_a_first_mapping_and_replaces_only_when_asked(root):
    first = {"hbase.columns.mapping": MAPPING}
    second = {"hbase.columns.mapping": "k STRING :key"}
    assert stored_mapping.remember(root, "t", first, replace=False) is True
    assert stored_mapping.remember(root, "t", second, replace=False) is False
    assert stored_mapping.stored_options(root, "t") == first
    assert stored_mapping.remember(root, "t", first, replace=True) is False  # the same: nothing written
    assert stored_mapping.remember(root, "t", second, replace=True) is True
    assert stored_mapping.stored_options(root, "t") == second
    assert stored_mapping.remember(root, "t", {"serde": "binary"}, replace=True) is False


# -- the command ----------------------------------------------------------------------------
def test_the_mapping_command_sets_shows_and_removes(root, capsys):
    assert mapping_job.main(["show", "ns1:u", "--root", root]) == 1
    assert "table ns1:u has no stored mapping" in capsys.readouterr().err
    assert mapping_job.main(["set", "ns1:u", "--root", root, "--mapping", "k STRING :key, a INT g:a",
                             "--serde", "string", "-Dserialization.null.format=-"]) == 0
    assert "stored the mapping of table ns1:u" in capsys.readouterr().out
    assert mapping_job.main(["show", "ns1:u", "--root", root]) == 0
    assert json.loads(capsys.readouterr().out) == {"hbase.columns.mapping": "k STRING :key, a INT g:a",
                                                   "serde": "string", "serialization.null.format": "-"}
    assert mapping_job.main(["remove", "ns1:u", "--root", root]) == 0
    assert stored_mapping.stored_options(root, "ns1:u") is None


def test_the_mapping_command_through_the_regionscan_script(root, tmp_path):
    mapping_file = tmp_path / "m.txt"
    mapping_file.write_text(MAPPING)
    run = [sys.executable, "-m", "jobs.cli", "mapping"]
    done = subprocess.run(run + ["set", "t", "--root", root, "--mapping", f"@{mapping_file}"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    bad = subprocess.run(run + ["set", "t", "--root", root], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "mapping set needs --mapping" in bad.stderr
    missing = subprocess.run(run + ["show", "nope", "--root", root], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and missing.stderr.strip().endswith(f"table nope does not exist under {root} (tables: t)")


# -- the worker's catalog op ----------------------------------------------------------------
@pytest.fixture(scope="module")
def worker():
    with python_worker(SECRET) as (_, port, _line):
        yield port


def _catalog(port: int, action: str, options: dict, **fields) -> dict:
    raw = request_bytes({"v": 1, "secret": SECRET, "op": "catalog", "action": action, "options": options, **fields})
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        return read_frame(sock.makefile("rb"))


def test_the_worker_lists_loads_creates_and_drops(worker, root):
    opts = {"root": root}
    assert _catalog(worker, "namespaces", opts) == {"ok": True, "namespaces": ["default", "ns1"]}
    assert _catalog(worker, "tables", opts, namespace="ns1") == {"ok": True, "exists": True, "tables": ["u"]}
    assert _catalog(worker, "tables", opts, namespace="zz")["exists"] is False
    bare = _catalog(worker, "table", {**opts, "table": "t"})
    assert bare["exists"] is True and bare["ddl"] is None and "regionscan mapping set t" in bare["error"]
    assert _catalog(worker, "table", {**opts, "table": "nope"}) == {"ok": True, "exists": False}
    schema = json.dumps({"type": "struct", "fields": [
        {"name": "id", "type": "string", "nullable": True, "metadata": {}},
        {"name": "f:n", "type": "long", "nullable": True, "metadata": {}}]})
    made = _catalog(worker, "create", {**opts, "table": "ns1:made"}, schema=schema, regions=2)
    assert made == {"ok": True, "ddl": "`id` STRING, `f:n` BIGINT", "families": ["f"]}
    loaded = _catalog(worker, "table", {**opts, "table": "ns1:made"})
    assert loaded["ddl"] == made["ddl"] and "hbase.columns.mapping" in loaded["mapping"]
    assert _catalog(worker, "drop", {**opts, "table": "ns1:made"}) == {"ok": True, "dropped": True}
    assert _catalog(worker, "drop", {**opts, "table": "ns1:made"}) == {"ok": True, "dropped": False}
    bad = _catalog(worker, "create", {**opts, "table": "x"}, schema=json.dumps(
        {"type": "struct", "fields": [{"name": "id", "type": "string", "nullable": True, "metadata": {}},
                                      {"name": "plain", "type": "integer", "nullable": True, "metadata": {}}]}))
    assert bad["ok"] is False and "column 'plain' is not named 'family:qualifier'" in bad["error"]
    assert _catalog(worker, "what", opts)["error"].endswith("unknown catalog action 'what' (one of namespaces, "
                                                         "tables, table, create, drop, create_namespace, drop_namespace)")
    assert "needs its root" in _catalog(worker, "namespaces", {})["error"]
