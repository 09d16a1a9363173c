"""The Spark source's options: misspellings refused with the nearest name, SHC and Hive names honoured.

Checked on SourceConfig, what the source builds from Spark's options on the
driver, so no Spark is needed (tests/connector/test_spark_session.py checks the same
errors through a real read).
"""

from __future__ import annotations

import pytest

from connector.source_config import SourceConfig
from storage.errors import InvalidArgument
from storage.names import check_known_names, nearest_name

BASE = {"root": "/tables", "table": "t", "hbase.columns.mapping": "key STRING :key, a INT cf:a"}


@pytest.mark.parametrize("key, nearest", [
    ("hbase.spark.query.batchsiz", "hbase.spark.query.batchsize"),
    ("serde.on.eror", "serde.on.error"),
    ("regionscan.colums", "regionscan.columns"),
    ("hbase.mapreduce.scan.row.strat", "hbase.mapreduce.scan.row.start"),
    ("Hbase.Spark.Pushdown.ColumnFilters", "hbase.spark.pushdown.columnfilter"),
])
def test_misspelled_options_are_refused_naming_the_nearest(key, nearest):
    with pytest.raises(InvalidArgument) as info:
        SourceConfig.from_options({**BASE, key: "1"})
    assert str(info.value) == f"unknown option {key.lower()!r}; did you mean {nearest!r}?"


def test_options_outside_our_prefixes_go_to_the_serde_untouched():
    config = SourceConfig.from_options({**BASE, "date.format": "yyyy", "serialization.null.format": "NULL"})
    assert config.conf["date.format"] == "yyyy"


def test_shc_time_range_and_versions_are_honoured():
    config = SourceConfig.from_options({**BASE, "minStamp": "5", "maxStamp": "10", "maxVersions": "3"})
    spec = config.input_format().scan_spec()
    assert spec.request.time_range == (5, 10)
    assert spec.request.max_versions == 3


def test_hive_table_name_names_the_table():
    options = {k: v for k, v in BASE.items() if k != "table"}
    assert SourceConfig.from_options({**options, "hbase.table.name": "events"}).table == "events"


def test_nearest_name_and_check_known_names():
    assert nearest_name("colour", ["color", "size"]) == "color"
    assert nearest_name("zzzz", ["color", "size"]) is None
    check_known_names(["a", "b"], {"a", "b", "c"}, "key")
    with pytest.raises(InvalidArgument, match=r"^unknown key 'zzzz'$"):
        check_known_names(["zzzz"], {"color"}, "key")


def test_hbase_spark_write_timestamp_and_hbasecontext_options():
    from connector.source_config import write_timestamp

    assert write_timestamp(SourceConfig.from_options({**BASE, "hbase.spark.query.timestamp": "1234"}).conf) == 1234
    both = SourceConfig.from_options({**BASE, "hbase.spark.query.timestamp": "1234", "regionscan.write.timestamp": "99"})
    assert write_timestamp(both.conf) == 99
    for value in ("true", "false", "False"):
        SourceConfig.from_options({**BASE, "hbase.spark.use.hbasecontext": value})
    with pytest.raises(InvalidArgument, match="hbase.spark.use.hbasecontext must be true or false, got 'maybe'"):
        SourceConfig.from_options({**BASE, "hbase.spark.use.hbasecontext": "maybe"})


def test_catalog_namespace_names_the_table():
    import json

    catalog = json.dumps({"table": {"namespace": "NAMESPACE", "name": "TABLE"}, "rowkey": "key",
                          "columns": {"key": {"cf": "rowkey", "col": "key", "type": "string"}}})
    assert SourceConfig.from_options({"root": "/r", "catalog": catalog}).table == "NAMESPACE:TABLE"
    plain = json.dumps({"table": {"namespace": "default", "name": "TABLE"}, "rowkey": "key",
                        "columns": {"key": {"cf": "rowkey", "col": "key", "type": "string"}}})
    assert SourceConfig.from_options({"root": "/r", "catalog": plain}).table == "TABLE"
    assert SourceConfig.from_options({**BASE, "hbase.table": "default:t"}).table == "t"
    with pytest.raises(InvalidArgument, match="invalid namespace"):
        SourceConfig.from_options({**BASE, "hbase.table": "bad-ns:t"})
