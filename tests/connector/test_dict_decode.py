"""Dictionary-coded stored columns decoded and filtered as their expanded bytes are.

The engine worker asks the storage scan for row batches whose dictionary-chunk columns stay
codes (``ScanRequest.dictionary_values``).  The SerDe then decodes each distinct entry once
and takes the decoded values by the codes; a decoded filter takes codes, not bytes, at the
rows it keeps; a stored date column's milliseconds are read from the entries.  Each must
give exactly what the expanded binary column gives: the same values, the same nulls, the
same error for a cell that does not decode (and none for an entry no row uses).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import datasource as ds

import storage
from connector.decoded_filters import DecodedFilter
from connector.disjunction import Or
from connector.source_config import SourceConfig
from connector.stored_dates import serde_stored_dates
from serde.errors import DecodeError
from storage.scanner.metrics import ScanMetrics
from storage.storefile._chunk_encodings import dict_codes, encode_dict
from storage.storefile.format import ChunkEncoding

MAPPING = "k STRING :key, q DECIMAL(15,2) f:q, m STRING f:m, d DATE f:d, n INT f:n"
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_MODES = ["AIR", "AIR REG", "MAIL", "SHIP", "TRUCK", "RAIL", "FOB", "é"]
_Q = [Decimal(f"{i}.00") for i in range(1, 51)] + [Decimal("0.05"), Decimal("-3.10")]
_D = [dt.date(1992, 1, 1) + dt.timedelta(days=i * 37) for i in range(40)]


def _serde():
    return SourceConfig.from_options({"root": "/nonexistent", "table": "t", "hbase.columns.mapping": MAPPING}).read_serde()


def _coded(column: pa.Array) -> pa.Array:
    """``column`` as the storage scan hands a dictionary chunk's rows (codes over entries)."""
    body = encode_dict(column)
    return column if body is None else dict_codes(body, len(column), "chunk", "f.sf", 0)


def _stored(serde, rows: list[dict]) -> pa.RecordBatch:
    cells = [serde.serialize(r) for r in rows]
    arrays = [pa.array([k for k, _ in cells], pa.binary())]
    names = ["key"]
    for c in ("f:q", "f:m", "f:d", "f:n"):
        arrays.append(pa.array([v.get(c.encode()) for _, v in cells], pa.binary()))
        names.append(c)
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _with_codes(batch: pa.RecordBatch) -> pa.RecordBatch:
    arrays = [batch.column(0)] + [_coded(batch.column(i)) for i in range(1, batch.num_columns)]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


_rows = st.lists(st.fixed_dictionaries({
    "q": st.one_of(st.none(), st.sampled_from(_Q)),
    "m": st.one_of(st.none(), st.sampled_from(_MODES)),
    "d": st.one_of(st.none(), st.sampled_from(_D)),
    "n": st.one_of(st.none(), st.integers(0, 5)),
}), min_size=12, max_size=120)

_LEAVES = st.one_of(
    st.builds(lambda vs: ds.In(("m",), tuple(vs)), st.lists(st.sampled_from(_MODES + [None]), max_size=3)),
    st.builds(lambda v: ds.EqualTo(("m",), v), st.sampled_from(_MODES)),
    st.builds(lambda v: ds.StringStartsWith(("m",), v), st.sampled_from(["A", "AIR", "T", ""])),
    st.builds(lambda cls, v: cls(("q",), v), st.sampled_from([ds.GreaterThanOrEqual, ds.LessThan, ds.EqualTo]),
              st.sampled_from(_Q + [Decimal("24.5")])),
    st.builds(lambda cls, v: cls(("d",), v), st.sampled_from([ds.GreaterThanOrEqual, ds.LessThan, ds.LessThanOrEqual]),
              st.sampled_from(_D)),
    st.builds(lambda v: ds.EqualNullSafe(("n",), v), st.one_of(st.none(), st.integers(0, 5))),
    st.builds(lambda c: ds.IsNull((c,)), st.sampled_from(["q", "m", "d", "n"])),
)
_FILTERS = st.lists(st.one_of(_LEAVES, st.builds(lambda a, b: Or((a, b)), _LEAVES, _LEAVES)), min_size=1, max_size=3)


@SETTINGS
@given(_rows)
def test_the_serde_decodes_codes_as_it_decodes_their_bytes(rows):
    serde = _serde()
    for i, r in enumerate(rows):
        r["k"] = f"r{i:04d}"
    plain = _stored(serde, rows)
    coded = _with_codes(plain)
    names = ["k", "q", "m", "d", "n"]
    assert coded.num_rows == plain.num_rows
    assert serde.deserialize_batch(coded, names).equals(serde.deserialize_batch(plain, names))
    assert serde.deserialize_batch(coded).equals(serde.deserialize_batch(plain))
    # the stored form of the date column: its milliseconds read from the entries
    form = serde_stored_dates(serde)["d"]
    want, got = form.millis(plain.column(3)), form.millis(coded.column(3))
    assert (want is None) == (got is None)
    if want is not None:
        assert (want[1] == got[1]).all() and (want[0][want[1]] == got[0][got[1]]).all()


@SETTINGS
@given(_rows, _FILTERS)
def test_decoded_filters_on_codes_keep_the_rows_and_values_they_keep_on_bytes(rows, filters):
    serde = _serde()
    for i, r in enumerate(rows):
        r["k"] = f"r{i:04d}"
    plain = _stored(serde, rows)
    coded = _with_codes(plain)
    schema = serde.arrow_schema
    types = {f.name.lower(): (f.name, f) for f in schema}

    def decoder(stored, lower):
        return serde.deserialize_batch(stored, [types[n][0] for n in lower]).columns

    def sources(lower):
        return serde.batch_sources([types[n][0] for n in lower])

    forms = serde_stored_dates(serde)
    flt = DecodedFilter(filters)
    names = ["k", "q", "m", "d", "n"]
    want = flt.select(plain, plain.num_rows, names, decoder, sources, forms.get, {})
    got = flt.select(coded, coded.num_rows, names, decoder, sources, forms.get, {})
    assert got[1] == want[1]
    assert all(a.equals(b) for a, b in zip(got[0], want[0]))


def test_a_bad_cell_fails_at_its_row_and_an_unused_bad_entry_does_not():
    serde = _serde()
    good = [serde.serialize({"k": f"r{i:03d}", "q": _Q[i % 3], "m": "AIR", "d": _D[0], "n": 1})
            for i in range(40)]
    cells = [v[b"f:q"] for _, v in good]
    cells[17] = b"\x01"  # not a DECIMAL(15,2) cell
    keys = pa.array([k for k, _ in good], pa.binary())
    batch = pa.RecordBatch.from_arrays([keys, _coded(pa.array(cells, pa.binary()))], names=["key", "f:q"])
    assert pa.types.is_dictionary(batch.column(1).type)
    with pytest.raises(DecodeError) as plain_error:
        serde.deserialize_batch(pa.RecordBatch.from_arrays([keys, pa.array(cells, pa.binary())],
                                                           names=["key", "f:q"]), ["q"])
    with pytest.raises(DecodeError) as coded_error:
        serde.deserialize_batch(batch, ["q"])
    assert str(coded_error.value) == str(plain_error.value) and "r017" in str(coded_error.value)
    # rows that do not use the bad entry decode (a filter kept only them)
    kept = batch.filter(pa.array([i != 17 for i in range(40)]))
    assert serde.deserialize_batch(kept, ["q"]).column(0).to_pylist() == [_Q[i % 3] for i in range(40) if i != 17]


def test_the_worker_scan_hands_codes_and_the_answers_do_not_change(tmp_path):
    """The storage scan the worker runs keeps a dictionary chunk's rows as codes when asked,
    and only then; either way the SerDe decodes the same values."""
    root = str(tmp_path / "root")
    serde = _serde()
    conn = storage.connect(root)
    table = conn.create_table("t", {"f": {}}, settings={"wal_sync": "none"})
    rng = np.random.default_rng(3)
    rows = [{"k": f"r{i:05d}", "q": _Q[int(rng.integers(0, 50))], "m": _MODES[int(rng.integers(0, 7))],
             "d": _D[int(rng.integers(0, 40))], "n": int(rng.integers(0, 1000))} for i in range(4000)]
    with table.batch() as b:
        for r in rows:
            b.put(*serde.serialize(r))
    table.flush()
    (reader,) = table.store_file_readers()
    chunks = reader._index.chunks
    qualifiers = sorted([b"d", b"m", b"n", b"q"])
    assert chunks.encoding[chunks.starts[0] + 1 + qualifiers.index(b"m")] == ChunkEncoding.DICT
    columns = [b"f:q", b"f:m", b"f:d", b"f:n"]
    flt = "SingleColumnValueFilter ('f', 'm', >=, 'binary:MAIL')"
    for kw in ({}, {"filter": flt}):
        coded_metrics, plain_metrics = ScanMetrics(), ScanMetrics()
        coded = list(table.scan_batches(columns=columns, dictionary_values=True, metrics=coded_metrics, **kw))
        plain = list(table.scan_batches(columns=columns, metrics=plain_metrics, **kw))
        # the scan's figures count the values the codes stand for
        assert coded_metrics.bytes_in_results == plain_metrics.bytes_in_results > 0
        assert coded_metrics.rows_filtered == plain_metrics.rows_filtered
        assert any(pa.types.is_dictionary(f.type) for b in coded for f in b.schema)
        assert not any(pa.types.is_dictionary(f.type) for b in plain for f in b.schema)
        decoded = [serde.deserialize_batch(b) for b in coded]
        want = [serde.deserialize_batch(b) for b in plain]
        assert pa.Table.from_batches(decoded).equals(pa.Table.from_batches(want))
    with pytest.raises(storage.InvalidArgument, match="dictionary_values must be True or False"):
        list(table.scan_batches(dictionary_values="yes"))
    conn.close()
