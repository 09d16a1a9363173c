"""Every option is known: one that no part of the source, its input format or its SerDe reads is
refused before the read starts, with the closest known name.

Checked on SourceConfig (what both Spark sources build from their options) against real tables,
and through real reads of both sources; tests/connector/test_source_options.py has the prefixed keys.
"""

from __future__ import annotations

import json

import pytest

import storage
from connector.source_config import SourceConfig, store_mapping
from jobs import mapping as mapping_job
from serde import SerDe, create_serde
from serde.binary_serde import BinarySerDe
from storage.errors import InvalidArgument

MAPPING = "key STRING :key, a INT cf:a"


class LabelledSerDe(BinarySerDe):
    """A SerDe of this module's own that reads one property more (``label.prefix``)."""

    own_properties = frozenset({"label.prefix"})


@pytest.fixture()
def root(tmp_path) -> str:
    path = str(tmp_path / "data")
    conn = storage.connect(path)
    conn.create_table("t", {"cf": {}})
    conn.create_table("stored", {"cf": {}})
    conn.close()
    store_mapping(path, "stored", {"hbase.columns.mapping": MAPPING, "serde": "string"})
    return path


def _refused(options: dict) -> str:
    with pytest.raises(InvalidArgument) as info:
        SourceConfig.from_options(options)
    return str(info.value)


def test_a_misspelled_serde_option_is_refused(root):
    base = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    assert _refused({**base, "sede": "binary"}) == "unknown option 'sede'; did you mean 'serde'?"
    assert _refused({**base, "SeDe": "string"}) == "unknown option 'sede'; did you mean 'serde'?"  # any case
    assert _refused({**base, "colour": "x"}).startswith("unknown option 'colour'")


def test_a_misspelled_mapping_option_does_not_fall_back_to_the_stored_mapping(root):
    wanted = "unknown option 'hbase.column.mapping'; did you mean 'hbase.columns.mapping'?"
    assert _refused({"root": root, "table": "stored", "hbase.column.mapping": MAPPING}) == wanted
    assert _refused({"root": root, "table": "t", "hbase.column.mapping": MAPPING}) == wanted  # none stored
    assert SourceConfig.from_options({"root": root, "table": "stored"}).serde_name == "string"


def test_an_unknown_key_of_an_older_stored_mapping_is_named_as_such(root):
    from storage.table.descriptor import set_table_values
    from storage.vfs.fs import FileSystem

    record = {"v": 1, "options": {"hbase.columns.mapping": MAPPING, "sede": "string"}}  # stored unchecked
    set_table_values(FileSystem(root), "t", {"regionscan.mapping": json.dumps(record)})
    assert _refused({"root": root, "table": "t"}) == (
        "unknown option of the table's stored mapping 'sede'; did you mean 'serde'?")
    assert _refused({"root": root, "table": "t", "serd": "binary"}) == "unknown option 'serd'; did you mean 'serde'?"


def test_spark_s_own_options_and_every_declared_property_pass(root):
    base = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    for extra in ({"path": ""}, {"paths": "[\"/x\"]"}, {"serde.on.error": "null"}, {"date.format": "%Y"},
                  {"collection.delim": ";"}, {"hbase.spark.query.maxversions": "2"}, {"newtable": "3"},
                  {"regionscan.pushdown.decoded": "false"}, {"maxVersions": "2"}):
        SourceConfig.from_options({**base, **extra})


def test_each_serde_declares_its_own_properties(root):
    base = {"root": root, "table": "t", "hbase.columns.mapping": MAPPING}
    assert "json.row.cell" in create_serde("json", MAPPING).property_names()
    assert "json.row.cell" not in create_serde("binary", MAPPING).property_names()
    SourceConfig.from_options({**base, "serde": "json", "json.row.cell": "cf:a"})
    assert _refused({**base, "json.row.cell": "cf:a"}).startswith("unknown option 'json.row.cell'")
    # per column, from the mapping: the Avro SerDe's schema literals
    avro = {**base, "serde": "avro"}
    SourceConfig.from_options({**avro, "a.avro.schema.literal": '"int"'})
    SourceConfig.from_options({**avro, "cf.a.avro.schema.literal": '"int"'})
    assert _refused({**avro, "a.avro.schema.litral": '"int"'}) == (
        "unknown option 'a.avro.schema.litral'; did you mean 'a.avro.schema.literal'?")
    assert _refused({**avro, "b.avro.schema.literal": '"int"'}).startswith("unknown option 'b.avro.schema.literal'")
    # a SerDe of the user's: what it declares is known
    mine = {**base, "serde": f"{__name__}:LabelledSerDe"}
    SourceConfig.from_options({**mine, "label.prefix": "x"})
    assert LabelledSerDe.declared_properties() >= SerDe.common_properties | {"label.prefix"}
    assert _refused({**base, "label.prefix": "x"}).startswith("unknown option 'label.prefix'")


def test_the_options_a_catalog_names_are_known(root):
    catalog = json.dumps({"table": {"namespace": "default", "name": "t"}, "rowkey": "key",
                          "columns": {"key": {"cf": "rowkey", "col": "key", "type": "string"},
                                      "a": {"cf": "cf", "col": "a", "avro": "avroSchema"}}})
    SourceConfig.from_options({"root": root, "catalog": catalog, "avroSchema": '"int"'})
    assert _refused({"root": root, "catalog": catalog, "avroSchema": '"int"', "avroSchem": '"int"'}) == (
        "unknown option 'avroschem'; did you mean 'avroschema'?")


def test_mapping_set_says_which_encoding_it_stored(root, capsys):
    assert mapping_job.main(["set", "t", "--root", root, "--mapping", MAPPING]) == 0
    out = capsys.readouterr().out
    assert "with SerDe binary (the default for this mapping form)" in out and "an INT cell is 4 bytes" in out
    assert mapping_job.main(["set", "t", "--root", root, "--mapping", MAPPING, "--serde", "string"]) == 0
    out = capsys.readouterr().out
    assert "with SerDe string:" in out and "holds its digits" in out
    assert mapping_job.main(["set", "t", "--root", root, "--mapping", MAPPING, "-Dsede=string"]) == 2
    assert "unknown option 'sede'; did you mean 'serde'?" in capsys.readouterr().err


@pytest.mark.spark
def test_both_sources_refuse_an_unknown_option_before_reading(spark, source_format, root):
    def reader():  # a DataFrameReader keeps every option given to it: a new one per read
        return spark.read.format(source_format).option("root", root).option("table", "t")

    with pytest.raises(Exception) as info:
        reader().option("hbase.columns.mapping", MAPPING).option("sede", "binary").load().count()
    assert "unknown option 'sede'; did you mean 'serde'?" in str(info.value)
    with pytest.raises(Exception) as info:
        spark.read.format(source_format).option("root", root).option("table", "stored") \
            .option("hbase.column.mapping", MAPPING).load().count()
    assert "did you mean 'hbase.columns.mapping'?" in str(info.value)
    # Spark's own: load(path) gives the source a "path" option, which is let through
    assert reader().option("hbase.columns.mapping", MAPPING).load("ignored").count() == 0
