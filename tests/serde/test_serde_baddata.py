"""Bad stored values: a clear DecodeError, or a counted null; never dropped silently."""

from __future__ import annotations

import io
import json
import logging

import fastavro
import pytest

from serde import DecodeError, create_serde, record_batch_rows, rows_to_batch
from storage.errors import InvalidArgument

BINARY = "key STRING :key, n INT cf:n, s STRING cf:s, d DATE cf:d"
TEXT = "key STRING :key, n INT cf:n, s STRING cf:s, d DATE cf:d, t TIMESTAMP cf:t, a ARRAY<INT> cf:a"


def _rows(serde, mapping, good_values, bad_cells):
    sd = create_serde(serde, mapping)
    rows = [sd.serialize(v) for v in good_values]
    for i, cells in enumerate(bad_cells):
        rows.insert(1 + 2 * i, (f"bad{i}".encode(), cells))
    return rows


CASES = [
    # serde, mapping, bad cells, the column and raw value the error must name
    ("binary", BINARY, {b"cf:n": b"\x00\x01\x02"}, "n", b"\x00\x01\x02"),
    ("binary", BINARY, {b"cf:s": b"\xff\xfe"}, "s", b"\xff\xfe"),
    ("binary", BINARY, {b"cf:d": b"\x7f" * 8}, "d", b"\x7f" * 8),
    ("string", TEXT, {b"cf:n": b"12x"}, "n", b"12x"),
    ("string", TEXT, {b"cf:n": b"99999999999"}, "n", b"99999999999"),
    ("string", TEXT, {b"cf:d": b"2021-02-29"}, "d", b"2021-02-29"),
    ("string", TEXT, {b"cf:t": b"2021-01-01 25:00:00"}, "t", b"2021-01-01 25:00:00"),
    ("string", TEXT, {b"cf:a": b"1\x02x\x023"}, "a", b"1\x02x\x023"),
    ("string", TEXT, {b"cf:s": b"\xc3"}, "s", b"\xc3"),
    ("json", BINARY, {b"cf:n": b'"seven"'}, "n", b'"seven"'),
    ("json", BINARY, {b"cf:d": b"[2020"}, "d", b"[2020"),
]


def _good(serde):
    import datetime as dt

    base = [("k0", 1, "a", dt.date(2020, 1, 1)), ("k1", -2, "b", dt.date(1999, 12, 31)), ("k2", None, None, None)]
    if serde == "string":
        return [v + (dt.datetime(2020, 1, 1, 12), [1, None]) for v in base]
    return base


@pytest.mark.parametrize("serde,mapping,bad,column,raw", CASES)
def test_fail_mode_names_row_column_and_bytes(serde, mapping, bad, column, raw):
    rows = _rows(serde, mapping, _good(serde), [bad])
    sd = create_serde(serde, mapping)  # serde.on.error defaults to fail
    with pytest.raises(DecodeError) as err:
        [sd.deserialize(r) for r in rows]
    assert isinstance(err.value, InvalidArgument)
    assert (err.value.row_key, err.value.column, err.value.value) == (b"bad0", column, raw)
    assert repr(b"bad0") in str(err.value) and repr(column) in str(err.value)
    # The vectorized path detects the same value and finds its row.
    with pytest.raises(DecodeError) as err:
        sd.deserialize_batch(rows_to_batch(rows, sd.scan_columns))
    assert (err.value.row_key, err.value.column, err.value.value) == (b"bad0", column, raw)
    assert sd.stats.errors_raised == 2


@pytest.mark.parametrize("serde,mapping,bad,column,raw", CASES)
def test_null_mode_counts_every_bad_value(serde, mapping, bad, column, raw, caplog):
    rows = _rows(serde, mapping, _good(serde), [bad, bad])
    props = {"serde.on.error": "null"}
    row_sd = create_serde(serde, mapping, props)
    with caplog.at_level(logging.WARNING, logger="serde"):
        expected = [row_sd.deserialize(r) for r in rows]
    assert row_sd.stats.nulls_from_errors == {column: 2}
    assert row_sd.stats.warnings == 2
    first = row_sd.stats.first_errors[column]
    assert (first["row_key"], first["value"]) == (b"bad0", raw)
    assert any(column in rec.getMessage() and "bad0" in rec.getMessage() for rec in caplog.records)
    names = row_sd.column_names
    for row in expected:
        if row[0].startswith("bad"):
            assert row[names.index(column)] is None
    batch_sd = create_serde(serde, mapping, props)
    got = record_batch_rows(batch_sd.deserialize_batch(rows_to_batch(rows, batch_sd.scan_columns)))
    assert got == expected
    assert batch_sd.stats.nulls_from_errors == {column: 2}
    assert batch_sd.stats.as_dict()["rows"] == len(rows)


def test_bad_family_entry_nulls_the_map_and_is_counted():
    mapping = "key STRING :key, m MAP<STRING,INT> f:"
    rows = [(b"a", {b"f:x": b"\x00\x00\x00\x01"}), (b"b", {b"f:x": b"\x00\x00\x00\x01", b"f:y": b"\x01"})]
    sd = create_serde("binary", mapping, {"serde.on.error": "null"})
    expected = [sd.deserialize(r) for r in rows]
    assert expected == [("a", {"x": 1}), ("b", None)]
    other = create_serde("binary", mapping, {"serde.on.error": "null"})
    assert record_batch_rows(other.deserialize_batch(rows_to_batch(rows, ["f"]))) == expected
    assert other.stats.nulls_from_errors == sd.stats.nulls_from_errors == {"m": 1}
    strict = create_serde("binary", mapping)
    with pytest.raises(DecodeError) as err:
        strict.deserialize_batch(rows_to_batch(rows, ["f"]))
    assert (err.value.row_key, err.value.value) == (b"b", b"\x01")


def test_avro_trailing_bytes_and_garbage_are_bad_values():
    mapping = "key STRING :key, v BIGINT cf:v"
    sd = create_serde("avro", mapping, {"serde.on.error": "null"})
    good = sd.serialize(("k", 5))
    rows = [good, (b"x", {b"cf:v": good[1][b"cf:v"] + b"\x00"}), (b"y", {b"cf:v": b""})]
    expected = [sd.deserialize(r) for r in rows]
    assert expected == [("k", 5), ("x", None), ("y", None)]
    assert "trailing" in sd.stats.first_errors["v"]["reason"]
    other = create_serde("avro", mapping, {"serde.on.error": "null"})
    assert record_batch_rows(other.deserialize_batch(rows_to_batch(rows, ["cf:v"]))) == expected
    assert other.stats.nulls_from_errors == {"v": 2}


def test_row_document_that_does_not_decode_nulls_all_its_columns():
    mapping = "key STRING :key, a INT d:r, b STRING d:r"
    props = {"json.row.cell": "d:r", "serde.on.error": "null"}
    sd = create_serde("json", mapping, props)
    rows = [(b"1", {b"d:r": json.dumps({"a": 1, "b": "x"}).encode()}), (b"2", {b"d:r": b"{nope"}), (b"3", {b"d:r": b'{"a": "one"}'})]
    expected = [sd.deserialize(r) for r in rows]
    assert expected == [("1", 1, "x"), ("2", None, None), ("3", None, None)]
    assert sd.stats.nulls_from_errors == {"a": 2, "b": 2}
    other = create_serde("json", mapping, props)
    assert record_batch_rows(other.deserialize_batch(rows_to_batch(rows, ["d:r"]))) == expected
    assert other.stats.nulls_from_errors == {"a": 2, "b": 2}
    strict = create_serde("json", mapping, {"json.row.cell": "d:r"})
    with pytest.raises(DecodeError) as err:
        strict.deserialize(rows[1])
    assert err.value.column == "d:r (a, b)"


def test_bad_on_error_setting_is_refused():
    with pytest.raises(InvalidArgument) as err:
        create_serde("binary", BINARY, {"serde.on.error": "skip"})
    assert "skip" in str(err.value)


def test_avro_schema_mismatch_on_write_is_an_encode_error():
    sd = create_serde("avro", "key STRING :key, v INT cf:v")
    with pytest.raises(InvalidArgument) as err:
        sd.serialize(("k", "not an int"))
    assert "'v'" in str(err.value)
    stream = io.BytesIO()
    fastavro.schemaless_writer(stream, fastavro.parse_schema("int"), 3)
    assert sd.deserialize((b"k", {b"cf:v": stream.getvalue()})) == ("k", 3)


@pytest.mark.parametrize("columns", [["n"], ["s", "n"], ["key"], ["d", "key", "s"], []])
def test_decoding_some_columns_equals_the_full_decode_of_them(columns):
    sd = create_serde("binary", BINARY)
    import datetime as dt

    rows = [sd.serialize({"key": f"r{i}", "n": i, "s": f"s{i}", "d": dt.date(2020, 1, 1 + i)}) for i in range(5)]
    batch = rows_to_batch(rows, sd.scan_columns)
    part = sd.deserialize_batch(batch, columns)
    assert part.schema.names == columns
    assert part.equals(sd.deserialize_batch(batch).select(columns))


def test_a_column_not_decoded_cannot_fail_the_decode():
    """A bad value in a column the read does not ask for is not seen (a lazy SerDe);
    asked for, it is the usual one-line DecodeError."""
    sd = create_serde("binary", BINARY)
    rows = [sd.serialize({"key": "r0", "n": 1, "s": "a"}), (b"r1", {b"cf:n": b"\x00\x01\x02", b"cf:s": b"b"})]
    batch = rows_to_batch(rows, sd.scan_columns)
    assert sd.deserialize_batch(batch, ["s"]).column(0).to_pylist() == ["a", "b"]
    with pytest.raises(DecodeError):
        sd.deserialize_batch(batch, ["n"])
    with pytest.raises(InvalidArgument, match=r"unknown columns \['zz'\]"):
        sd.deserialize_batch(batch, ["s", "zz"])
