"""The new filters and user filters (HBase's ``ParseFilter.registerFilter``) where
filter strings travel: the region server (wire), the Thrift gateway (happybase
``filter=`` strings) and the connector's splits.

Servers run as real child processes on loopback; user filters reach them as
``--filter NAME=package.module:Class``.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import happybase
import pyarrow as pa
import pytest

import storage
from connector import TableInputFormat
from connector.options import FILTER_CLASSES, SCAN_FILTER
from connector.scanning import split_batches
from storage.errors import InvalidArgument
from storage.filters import (
    FilterSyntaxError,
    InclusiveStopFilter,
    parse_filter_string,
    register_filter,
    register_filter_specs,
    registered_filters,
    unregister_filter,
)
from storage.server.process import ServerProcess
from tests.user_filters import KeyLengthFilter

USER = "KeyLengthFilter=tests.user_filters:KeyLengthFilter"
FILTERS = [
    "KeyLengthFilter (3)",
    "KeyLengthFilter (4) AND ColumnPaginationFilter (1, 'b')",
    "DependentColumnFilter ('cf', 'a', true)",
    "ColumnCountGetFilter (5)",
    "FuzzyRowFilter ('k?2', '010')",
    "RandomRowFilter (0.5, 11)",
    "ValueFilter (!=, 'null:') AND InclusiveStopFilter ('k25')",
]


@pytest.fixture()
def user_filter():
    register_filter("KeyLengthFilter", KeyLengthFilter)
    yield
    unregister_filter("KeyLengthFilter")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("remote-filters") / "root")
    conn = storage.connect(path)
    t = conn.create_table("t", {"cf": {"max_versions": 3}}, split_keys=[b"k2"], settings={"wal_sync": "none"})
    for i in range(40):
        key = b"k%d" % i
        t.put(key, {b"cf:a": b"%d" % (i % 7), b"cf:b": b"x", b"cf:c": b"y%d" % i}, timestamp=100 + i % 3)
        if i % 4:
            t.put(key, {b"cf:d": b"z"}, timestamp=100 + (i + 1) % 3)
    t.flush()
    conn.close()
    return path


def _embedded(root, **options):
    with storage.connect(root, read_only=True) as conn:
        return list(conn.table("t").scan(**options))


def test_registry_rules(user_filter):
    assert registered_filters() == {"KeyLengthFilter": KeyLengthFilter}
    assert parse_filter_string("KeyLengthFilter (3) AND PrefixFilter ('k')").filters[0] == KeyLengthFilter(3)
    register_filter("KeyLengthFilter", "tests.user_filters:KeyLengthFilter")  # the same class again: fine
    for name, cls, words in [
        ("PrefixFilter", KeyLengthFilter, "built-in"),
        ("AND", KeyLengthFilter, "keyword"),
        ("1x", KeyLengthFilter, "identifier"),
        ("KeyLengthFilter", type("Twin", (KeyLengthFilter,), {}), "already registered"),
        ("Other", "tests.user_filters:Missing", "has no 'Missing'"),
        ("Other", "no_such_module_xyz:Thing", "cannot import"),
        ("Other", dict, "Filter subclass"),
        ("Other", InclusiveStopFilter, "from_arguments"),
    ]:
        with pytest.raises(InvalidArgument, match=words) as info:
            register_filter(name, cls)
        assert "\n" not in str(info.value)
    with pytest.raises(FilterSyntaxError, match="KeyLengthFilter takes 1 argument") as info:
        parse_filter_string("KeyLengthFilter (3, 4)")
    assert info.value.position == 0
    with pytest.raises(FilterSyntaxError, match="argument 1 must be a quoted string, a number"):
        parse_filter_string("KeyLengthFilter (bogus)")
    with pytest.raises(InvalidArgument, match="NAME=package.module:ClassName"):
        register_filter_specs(["KeyLengthFilter"])
    unregister_filter("KeyLengthFilter")
    with pytest.raises(FilterSyntaxError, match="unknown filter 'KeyLengthFilter'"):
        parse_filter_string("KeyLengthFilter (3)")


def test_region_server_runs_new_and_user_filters(root, user_filter):
    with ServerProcess(root, "--filter", USER) as server, storage.connect(server.location) as remote:
        t = remote.table("t")
        for text in FILTERS:
            for reverse in (False, True):
                assert list(t.scan(filter=text, reverse=reverse)) == _embedded(root, filter=text, reverse=reverse), text
        # a Filter object crosses the wire as its filter-language text
        flt = KeyLengthFilter(2) | InclusiveStopFilter(b"k12")
        assert list(t.scan(filter=flt, reverse=True)) == _embedded(root, filter=flt, reverse=True)
        assert [row for row, _ in t.scan(filter=InclusiveStopFilter(b"k12"), row_start=b"k15", reverse=True)] == [
            b"k15", b"k14", b"k13", b"k12"]


def test_region_server_without_the_user_filter_refuses_it_in_one_line(root, user_filter):
    with ServerProcess(root) as server, storage.connect(server.location) as remote:
        with pytest.raises(InvalidArgument, match="unknown filter 'KeyLengthFilter'") as info:
            list(remote.table("t").scan(filter="KeyLengthFilter (3)"))
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("module", ["storage.server", "storage.thrift"])
def test_a_bad_filter_class_stops_the_command_before_it_serves(root, module):
    done = subprocess.run([sys.executable, "-m", module, "--root", root, "--port", "0", "--filter", "X=nowhere_xyz:Y"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot import module 'nowhere_xyz'" in lines[0], done.stderr
    assert "listening" not in done.stdout


def test_thrift_gateway_runs_new_and_user_filters(root, user_filter):
    with ServerProcess(root, "--filter", USER, module="storage.thrift") as gateway:
        conn = happybase.Connection("127.0.0.1", gateway.port)
        try:
            table = conn.table("t")
            for text in FILTERS:
                for reverse in (False, True):
                    got = list(table.scan(filter=text, reverse=reverse))
                    assert got == _embedded(root, filter=text, reverse=reverse), text
            got = [row for row, _ in table.scan(row_start=b"k15", reverse=True, filter="InclusiveStopFilter ('k12')")]
            assert got == [b"k15", b"k14", b"k13", b"k12"]
        finally:
            conn.close()


def test_connector_splits_carry_the_user_filters(root, user_filter):
    text = "KeyLengthFilter (2) OR DependentColumnFilter ('cf', 'd', true)"
    fmt = TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": "t",
                            SCAN_FILTER: text, FILTER_CLASSES: USER})
    splits = fmt.get_splits()
    try:
        unregister_filter("KeyLengthFilter")  # a task's process has not seen the driver's registration
        rows = []
        for split in splits:
            for batch in split_batches(pickle.loads(pickle.dumps(split)), output="cells"):
                rows.extend(pa.Table.from_batches([batch]).column("row").to_pylist())
        assert "KeyLengthFilter" in registered_filters()
        expected = [row for row, cols in _embedded(root, filter=text) for _ in cols]
        assert rows == expected
    finally:
        fmt.release()
    with pytest.raises(InvalidArgument, match="cannot import"):
        TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": "t",
                          SCAN_FILTER: "PrefixFilter ('k')", FILTER_CLASSES: "X=nowhere_xyz:Y"}).get_splits()


def test_spark_reads_with_a_user_filter(spark, root):
    """``filter`` and ``regionscan.filter.classes`` options: Python workers register the class themselves."""
    unregister_filter("KeyLengthFilter")
    try:
        df = (spark.read.format("regionscan")
              .options(root=root, table="t", filter="KeyLengthFilter (2) AND ColumnPaginationFilter (1, 'c')",
                       **{"hbase.columns.mapping": "key STRING :key, c BINARY cf:c", FILTER_CLASSES: USER})
              .load())
        got = sorted((r.key, bytes(r.c)) for r in df.collect())
        assert got == sorted((f"k{i}", b"y%d" % i) for i in range(10))
    finally:
        unregister_filter("KeyLengthFilter")
