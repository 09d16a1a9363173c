"""Bad settings, names and arguments are refused up front, and never brick a table.

Each case is a way a careless caller once broke a table or got a foreign
error: a bad setting that left a manifest and a held lock behind, a setting
that failed only at the first flush, a name with a trailing newline, a
counter past int64, a time range of strings, an empty put, an empty row key
on delete, a filter nested deeper than repr could go.
"""

from __future__ import annotations

import pytest

import storage
from storage.errors import InvalidArgument, TableNotFound
from storage.filters import FilterList, PrefixFilter, SkipFilter, WhileMatchFilter
from storage.filters.base import MAX_FILTER_DEPTH
from storage.region.manifest import TABLE_MANIFEST


@pytest.mark.parametrize(
    "settings, words",
    [
        ({"wal_sync": "sometimes"}, ["wal_sync", "sometimes"]),
        ({"wal_sync": True}, ["wal_sync"]),
        ({"memstore_flush_size": 2**70}, ["memstore_flush_size"]),
        ({"memstore_flush_size": True}, ["memstore_flush_size"]),
        ({"compaction_threshold": 0}, ["compaction_threshold"]),
        ({"max_filesize": "1G"}, ["max_filesize"]),
        ({"extra": [1, 2]}, ["extra"]),
        ({"bogus": 1}, ["bogus"]),
    ],
)
def test_a_bad_table_setting_leaves_nothing_behind(conn, settings, words):
    with pytest.raises(InvalidArgument) as info:
        conn.create_table("t", {"cf": {}}, settings=settings)
    for word in words:
        assert word in str(info.value)
    assert not conn.fs.exists("t")  # no TABLE.manifest, no lock file, no directory
    assert conn.tables() == []
    table = conn.create_table("t", {"cf": {}})  # the name is free again, the lock too
    table.put(b"r", {b"cf:q": b"v"})
    assert table.row(b"r") == {b"cf:q": b"v"}


@pytest.mark.parametrize(
    "options, setting",
    [
        ({"block_size": 2**40}, "block_size"),
        ({"block_size": 100}, "block_size"),
        ({"block_size": 65536.0}, "block_size"),
        ({"max_versions": 0}, "max_versions"),
        ({"max_versions": 2**40}, "max_versions"),
        ({"min_versions": 5}, "min_versions"),
        ({"ttl": 0}, "ttl"),
        ({"ttl": 2**40}, "ttl"),
        ({"ttl": "1d"}, "ttl"),
        ({"compression": ["lz4"]}, "compression"),
        ({"bloom_filter": 3}, "bloom_filter"),
    ],
)
def test_family_settings_are_bounded_at_create(conn, options, setting):
    with pytest.raises(InvalidArgument) as info:
        conn.create_table("t", {"cf": options})
    assert setting in str(info.value) and "'cf'" in str(info.value)
    assert not conn.fs.exists("t")


def test_settings_within_bounds_are_kept(conn):
    table = conn.create_table(
        "t", {"cf": {"block_size": 16 << 20, "max_versions": 3, "min_versions": 2, "ttl": 2**31 - 1}},
        settings={"wal_sync": 100, "memstore_flush_size": 1024},
    )
    fam = table.families()[b"cf"]
    assert (fam["block_size"], fam["max_versions"], fam["min_versions"], fam["ttl"]) == (16 << 20, 3, 2, None)
    assert table.settings.wal_sync == "100ms"


def test_delete_table_removes_a_table_whose_manifest_is_damaged(conn):
    table = conn.create_table("t", {"cf": {}})
    table.put(b"r", {b"cf:q": b"v"})
    conn.close()
    path = conn.fs.sub("t").local_path(TABLE_MANIFEST)
    with open(path, "r+b") as f:
        f.seek(12)
        f.write(b"\xff\xff\xff\xff")
    with storage.connect(conn.root) as c2:
        with pytest.raises(storage.errors.CorruptionError):
            c2.table("t")
        c2.delete_table("t")
        assert not c2.fs.exists("t")
        with pytest.raises(TableNotFound):
            c2.delete_table("t")
        c2.create_table("t", {"cf": {}})  # and the name can be used again
        assert c2.tables() == [b"t"]


def test_delete_table_removes_a_directory_without_a_manifest(conn):
    conn.fs.makedirs("t/regions/00000000")
    conn.fs.write_bytes("t/.lock", b"")
    conn.delete_table("t")
    assert not conn.fs.exists("t")


@pytest.mark.parametrize("name", ["t\n", "t\nx", "cf\n"])
def test_names_with_a_trailing_newline_are_refused(conn, name):
    with pytest.raises(InvalidArgument):
        conn.create_table(name, {"cf": {}})
    with pytest.raises(InvalidArgument):
        conn.create_table("ok", {name: {}})
    assert conn.tables() == []


def test_a_huge_name_gives_a_short_error(conn):
    with pytest.raises(InvalidArgument) as info:
        conn.create_table("x" * 100_000, {"cf": {}})
    assert len(str(info.value)) < 500 and "(100002 chars)" in str(info.value)


# -- API edges -------------------------------------------------------------------


def test_counter_inc_past_int64_is_refused_and_leaves_the_counter(conn):
    table = conn.create_table("t", {"cf": {}})
    table.counter_set(b"r", b"cf:c", 2**63 - 2)
    assert table.counter_inc(b"r", b"cf:c") == 2**63 - 1
    with pytest.raises(InvalidArgument, match="64-bit"):
        table.counter_inc(b"r", b"cf:c")
    assert table.counter_get(b"r", b"cf:c") == 2**63 - 1
    with pytest.raises(InvalidArgument):
        table.counter_inc(b"r", b"cf:c", 2**64)
    with pytest.raises(InvalidArgument):
        table.counter_set(b"r", b"cf:c", -(2**63) - 1)
    with pytest.raises(InvalidArgument):
        table.counter_inc(b"r", b"cf:c", True)
    assert table.counter_dec(b"r", b"cf:c", 2**63 - 1) == 0


@pytest.mark.parametrize("time_range", [("a", "b"), (1,), (5, 1), (-1, 10), (0, 2**64), [0, None], "ab"])
def test_scan_time_range_of_the_wrong_kind_is_refused(conn, time_range):
    table = conn.create_table("t", {"cf": {}})
    table.put(b"r", {b"cf:q": b"v"}, timestamp=5)
    for path in ("batch", "cell"):
        with pytest.raises(InvalidArgument, match="time_range"):
            list(table.scan(time_range=time_range, path=path))
    assert [k for k, _ in table.scan(time_range=(0, 10))] == [b"r"]


def test_an_empty_put_is_refused(conn):
    table = conn.create_table("t", {"cf": {}})
    with pytest.raises(InvalidArgument, match="no columns"):
        table.put(b"r", {})
    with pytest.raises(InvalidArgument, match="no columns"):
        with table.batch() as b:
            b.put(b"r", {})
    assert list(table.scan()) == []


def test_delete_refuses_the_empty_row_key_as_put_does(conn):
    table = conn.create_table("t", {"cf": {}})
    for call in (
        lambda: table.put(b"", {b"cf:q": b"v"}),
        lambda: table.delete(b""),
        lambda: table.delete(b"", columns=[b"cf:q"]),
        lambda: table.delete_version(b"", b"cf:q", 1),
    ):
        with pytest.raises(InvalidArgument, match="row key must not be empty"):
            call()


def _nested(depth: int):
    f = PrefixFilter(b"r")
    for i in range(depth - 1):
        f = SkipFilter(f) if i % 2 else FilterList(FilterList.MUST_PASS_ALL, [f, PrefixFilter(b"r")])
    return f


def test_filters_nest_to_the_bound_and_no_further(conn):
    table = conn.create_table("t", {"cf": {}})
    table.put(b"r1", {b"cf:q": b"v"})
    deepest = _nested(MAX_FILTER_DEPTH)
    assert storage.filters.parse_filter_string(repr(deepest)) == deepest
    assert [k for k, _ in table.scan(filter=deepest)] == [b"r1"]
    assert [k for k, _ in table.scan(filter=deepest, path="cell")] == [b"r1"]
    for wrap in (SkipFilter, WhileMatchFilter, lambda f: FilterList("AND", [f])):
        with pytest.raises(InvalidArgument, match="nested more than"):
            wrap(deepest)


def test_a_list_grown_deep_after_construction_is_refused_at_scan(conn):
    table = conn.create_table("t", {"cf": {}})
    outer = FilterList("AND", [PrefixFilter(b"r")])
    inner = outer
    for _ in range(MAX_FILTER_DEPTH + 5):  # each list is shallow when added, then grows
        child = FilterList("AND", [PrefixFilter(b"r")])
        inner.filters.append(child)
        inner = child
    with pytest.raises(InvalidArgument, match="nested more than"):
        list(table.scan(filter=outer))
