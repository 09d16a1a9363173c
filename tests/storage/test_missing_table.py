"""A table that is not there: one line, the same from every front end, saying
what is there instead (no root folder, no namespace, the tables a namespace
holds, the closest names first)."""

from __future__ import annotations

import pytest

import storage
from connector import TableInputFormat
from jobs import _bulk
from storage.server.process import ServerProcess
from storage.table.descriptor import table_values
from storage.table.missing import missing_table
from storage.vfs.fs import FileSystem


@pytest.fixture
def root(tmp_path):
    path = str(tmp_path / "tables")
    with storage.connect(path) as conn:
        for name in ("events", "profiles", "users"):
            conn.create_table(name, {"cf": {}})
        conn.create_namespace("ns")
        conn.create_namespace("empty")
        conn.create_table("ns:clicks", {"cf": {}})
    return path


def _message(conn, name: str) -> str:
    with pytest.raises(storage.TableNotFound) as info:
        conn.table(name)
    return str(info.value)


def test_the_tables_there_are_listed(root):
    with storage.connect(root, read_only=True) as conn:
        assert _message(conn, "nope") == f"table nope does not exist under {root} (tables: events, profiles, users)"
        assert _message(conn, "ns:nope") == f"table ns:nope does not exist under {root} (tables of namespace ns: ns:clicks)"
        assert _message(conn, "empty:t") == f"table empty:t does not exist under {root} (namespace empty has no tables)"


def test_a_close_name_is_offered(root):
    with storage.connect(root, read_only=True) as conn:
        assert _message(conn, "user") == f"table user does not exist under {root} (did you mean users?)"
        assert _message(conn, "ns:click") == f"table ns:click does not exist under {root} (did you mean ns:clicks?)"


def test_no_root_or_no_namespace_is_said_first(tmp_path, root):
    typo = str(tmp_path / "tabels")
    with storage.connect(typo) as conn:  # a writer's connection: a read-only one refuses the root at once
        assert _message(conn, "users") == f"table users does not exist: there is no root folder {typo} (a mistyped root?)"
    with storage.connect(root, read_only=True) as conn:
        assert _message(conn, "nx:users") == f"table nx:users does not exist: there is no namespace nx under {root}"
    assert not (tmp_path / "tabels").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert missing_table(FileSystem(str(empty)), "t") == f"table t does not exist under {empty} (no tables yet)"


def test_a_long_list_is_cut(tmp_path):
    path = str(tmp_path / "many")
    with storage.connect(path) as conn:
        for i in range(11):
            conn.create_table(f"t{i:02d}", {"cf": {}})
        assert _message(conn, "zzz") == (
            f"table zzz does not exist under {path} "
            "(tables: t00, t01, t02, t03, t04, t05, t06, t07 and 3 more)"
        )


def test_a_table_being_deleted_is_not_listed(root):
    with storage.connect(root) as conn:
        conn.delete_table("events")
        assert _message(conn, "nope") == f"table nope does not exist under {root} (tables: profiles, users)"
        assert conn.tables() == [b"profiles", b"users", b"ns:clicks"]


def test_every_front_end_gives_the_same_line(root):
    expected = f"table user does not exist under {root} (did you mean users?)"
    with pytest.raises(storage.TableNotFound) as info:
        TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": "user"}).get_splits()
    assert str(info.value) == expected
    with pytest.raises(storage.TableNotFound) as info:
        table_values(FileSystem(root), "user")
    assert str(info.value) == expected
    with pytest.raises(storage.TableNotFound) as info:
        _bulk.prepare_target(root, "user")
    assert str(info.value) == expected
    with storage.connect(root) as conn:
        assert conn.missing_table("user") == expected
        with pytest.raises(storage.TableNotFound, match=f"^{expected}$".replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
            conn.delete_table("user")


def test_a_region_server_names_its_tables(root):
    with ServerProcess(root) as server, storage.connect(server.location) as remote:
        assert _message(remote, "user") == f"table user does not exist on {server.location} (did you mean users?)"
        assert _message(remote, "nope") == f"table nope does not exist on {server.location} (tables: events, profiles, users)"
        assert _message(remote, "ns:x") == f"table ns:x does not exist on {server.location} (tables of namespace ns: ns:clicks)"
        assert _message(remote, "nx:users") == f"table nx:users does not exist: there is no namespace nx on {server.location}"


def test_a_missing_family_names_the_families_there(root):
    with storage.connect(root) as conn:
        table = conn.table("users")
        with pytest.raises(storage.InvalidArgument) as info:
            table.put(b"r", {b"cff:a": b"1"})
        assert str(info.value) == "table users has no column family b'cff' (did you mean cf?)"
        with pytest.raises(storage.InvalidArgument) as info:
            list(table.scan(columns=[b"zz:a"]))
        assert str(info.value) == "table users has no column family b'zz' (families: cf)"
        # the region refuses a family it lacks the same way, before anything is logged
        region = table._regions[0]
        with pytest.raises(storage.InvalidArgument) as info:
            region.mutate([(b"r", b"zz", b"a", 1, 4, b"v")])
        assert str(info.value) == "table users has no column family b'zz' (families: cf)"
        assert table.row(b"r") == {}
    with pytest.raises(storage.InvalidArgument) as info:
        TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": "users",
                          "hbase.mapreduce.scan.columns": "cff:a"}).get_splits()
    assert str(info.value) == "scan column b'cff:a': table users has no column family b'cff' (did you mean cf?)"
