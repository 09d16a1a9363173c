"""What the connector and the jobs ask of a table's files through ``storage.engine``, on real tables."""

from __future__ import annotations

import pytest

import storage
from storage.engine import key_not_of_width, table_exists, table_files, table_writer_lock


def _table_of_four_byte_keys(root: str) -> None:
    """Table ``t``: two regions, four-byte keys in both, flushed into store files."""
    with storage.connect(root) as conn:
        table = conn.create_table("t", {"cf": {}}, split_keys=[b"m000"])
        for i in range(10):
            table.put(b"a%03d" % i, {b"cf:q": b"1"})
            table.put(b"n%03d" % i, {b"cf:q": b"1"})
        table.flush()


def test_key_not_of_width_reads_file_infos_and_the_unflushed_log(tmp_path):
    root = str(tmp_path / "root")
    _table_of_four_byte_keys(root)
    assert key_not_of_width(table_files(root, "t"), "t", 4) is None
    assert key_not_of_width(table_files(root, "t"), "t", 8) == b"a000"  # the first key in key order
    with storage.connect(root) as conn:
        conn.table("t").put(b"zz9", {b"cf:q": b"1"})  # in the second region's log and memstore only
        assert key_not_of_width(table_files(root, "t"), "t", 4) == b"zz9"  # while the writer has it open
    assert key_not_of_width(table_files(root, "t"), "t", 4) == b"zz9"  # and from the log after it closed
    with storage.connect(root) as conn:
        conn.table("t").flush()
    assert key_not_of_width(table_files(root, "t"), "t", 4) == b"zz9"  # and from the new store file


def test_table_files_and_table_exists_follow_the_table_name_rules(tmp_path):
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_table("t", {"cf": {}})
        conn.create_namespace("ns")
        conn.create_table("ns:t", {"cf": {}})
    assert table_exists(table_files(root, "t"))
    assert table_exists(table_files(root, "default:t"))  # the default namespace, spelt out
    assert table_exists(table_files(storage.engine.FileSystem(root), "ns:t"))
    assert not table_exists(table_files(root, "u"))
    assert not table_exists(table_files(root, "ns:u"))
    conn = storage.connect(root)
    try:
        conn.delete_table("ns:t")
    finally:
        conn.close()
    assert not table_exists(table_files(root, "ns:t"))
    assert table_exists(table_files(root, "t"))


def test_table_writer_lock_keeps_writers_out_until_released(tmp_path):
    root = str(tmp_path / "root")
    _table_of_four_byte_keys(root)
    with table_writer_lock(table_files(root, "t")):
        with pytest.raises(storage.TableLocked, match="locked by another writer"):
            with storage.connect(root) as conn:
                conn.table("t").put(b"a100", {b"cf:q": b"2"})
        with storage.connect(root, read_only=True) as conn:  # readers do not take the lock
            assert conn.table("t").row(b"a001") == {b"cf:q": b"1"}
    with storage.connect(root) as conn:
        conn.table("t").put(b"a100", {b"cf:q": b"2"})
        assert conn.table("t").row(b"a100") == {b"cf:q": b"2"}
