"""The type registry: a type declared in one place works in every SerDe, in key ranges and in pushdown."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan

import storage
from connector.keyspace import KeyLayout, value_order
from connector.pushdown import push_filters
from serde import MappingError, create_serde, parse_type, rows_to_batch
from serde.codecs.base import Codec
from serde.codecs.json_values import read_string, write_same
from serde.codecs.text import StringText
from serde.type_registry import TypeSpec, find_type, register_type, registered_types, type_spec, unregister_type


class UuidCodec(Codec):
    """A UUID as its 16 raw bytes; values are canonical lower-case text."""

    fixed_width = 16

    def decode(self, raw: bytes) -> str:
        return str(uuid.UUID(bytes=bytes(raw)))

    def encode(self, value) -> bytes:
        if not isinstance(value, str):
            raise TypeError(f"expected str, got {type(value).__name__}")
        return uuid.UUID(value).bytes


# The whole declaration of the new type: nothing else in the project changes.
UUID_TYPE = TypeSpec(
    name="uuid",
    aliases=("guid",),
    arrow=pa.string(),
    ddl="STRING",
    binary=lambda t, ordered, unit: UuidCodec(t),
    text=StringText,
    avro_schema={"type": "string", "logicalType": "uuid"},
    avro_names=("string:uuid",),
    avro_read=lambda t: str,  # fastavro gives uuid.UUID objects for this logical type
    json_read=read_string,
    json_write=write_same,
    order={"binary": "bytes", "ordered": "bytes", "string": "bytes"},  # 16 bytes sort as their hex text
    literal_types=(str,),
    sample="00000000-0000-0000-0000-000000000000",
)

IDS = [str(uuid.UUID(int=(i * 0x9E3779B97F4A7C15) % (1 << 128))) for i in range(1, 41)]
MAPPING = "id UUID :key, other GUID cf:o, n INT cf:n"


@pytest.fixture
def uuid_type():
    register_type(UUID_TYPE)
    try:
        yield UUID_TYPE
    finally:
        unregister_type("uuid")


def _rows():
    return [(u, IDS[-1 - i], i) for i, u in enumerate(IDS)]


def test_builtins_are_registered_with_their_facts():
    assert registered_types()[:4] == ["string", "binary", "boolean", "tinyint"]
    assert find_type("LONG").name == "bigint" and find_type("varchar").name == "string"
    assert type_spec("smallint").value_range == (-(1 << 15), (1 << 15) - 1)
    assert type_spec("int").order_of("binary") == "signed" and type_spec("int").order_of("ordered") == "ordered"
    assert type_spec("double").order_of("binary") is None
    assert type_spec("timestamp").ddl_of(parse_type("timestamp"), timestamp_ntz=True) == "TIMESTAMP_NTZ"


def test_a_registered_name_cannot_be_taken_twice(uuid_type):
    with pytest.raises(MappingError, match="already registered"):
        register_type(UUID_TYPE)
    with pytest.raises(MappingError, match="already registered"):
        register_type(TypeSpec(name="my_long", aliases=("long",), arrow=pa.int64(), ddl="BIGINT"))
    with pytest.raises(MappingError, match="constructors"):
        TypeSpec(name="map", arrow=pa.int64(), ddl="BIGINT")


def test_an_unregistered_type_is_unknown():
    with pytest.raises(MappingError, match="unknown type"):
        parse_type("uuid")


@pytest.mark.parametrize("serde_name", ["binary", "string", "json", "avro"])
def test_a_new_type_goes_through_every_serde_both_paths(uuid_type, serde_name):
    sd = create_serde(serde_name, MAPPING)
    assert sd.ddl == "`id` STRING, `other` STRING, `n` INT"
    assert sd.arrow_schema.field("id").type == pa.string()
    rows = _rows()
    encoded = [sd.serialize(r) for r in rows]
    if serde_name == "binary":
        assert encoded[0][0] == uuid.UUID(IDS[0]).bytes
        assert encoded[0][1][b"cf:o"] == uuid.UUID(IDS[-1]).bytes
    assert [sd.deserialize(e) for e in encoded] == rows
    batch = rows_to_batch(encoded, sd.scan_columns)
    assert sd.deserialize_batch(batch).to_pylist() == [dict(zip(sd.column_names, r)) for r in rows]
    record = pa.RecordBatch.from_pylist([dict(zip(sd.column_names, r)) for r in rows], schema=sd.arrow_schema)
    assert sd.serialize_batch(record).to_pylist() == batch.to_pylist()


def test_a_new_type_gives_key_ranges_and_pushdown(uuid_type, tmp_path):
    sd = create_serde("binary", MAPPING)
    layout = KeyLayout.from_serde(sd)
    assert value_order(layout.parts[0].codec).kind == "bytes"
    conn = storage.connect(str(tmp_path / "root"))
    table = conn.create_table("u", {"cf": {}}, split_keys=[uuid.UUID(IDS[5]).bytes])
    with table.batch() as b:
        for row in _rows():
            b.put(*sd.serialize(row))
    ordered = sorted(IDS, key=lambda u: uuid.UUID(u).bytes)
    lo, hi = ordered[10], ordered[20]

    def scan(filters):
        result = push_filters(filters, sd)
        assert result.residual == []  # every filter became key ranges, exactly
        got = []
        for start, stop in result.key_ranges:
            got.extend(sd.deserialize(r)[0] for r in table.scan(row_start=start, row_stop=stop))
        return result, got

    result, got = scan([GreaterThanOrEqual(("id",), lo), LessThan(("id",), hi)])
    assert got == ordered[10:20]
    result, got = scan([EqualTo(("id",), IDS[3])])
    assert result.point_gets == 1 and got == [IDS[3]]
    result, got = scan([In(("id",), (IDS[1], IDS[2], "not-a-uuid"))])
    assert sorted(got) == sorted(IDS[1:3])
    # A value filter on a cell of the new fixed-width type is compared once decoded: the cell may
    # hold bytes of another width, which an engine filter would drop unread.
    cell = push_filters([EqualTo(("other",), IDS[7])], sd)
    assert cell.residual and cell.engine_filter is None and "compared once decoded" in cell.notes[0]
    conn.close()
