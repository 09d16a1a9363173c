"""A comparison of two binary DATE columns is tested on their stored cells, with the decode's answer.

``l_commitdate < l_receiptdate`` (TPC-H q12, q21) compares two dates of a row.  The engine
worker tests it on each column's stored 8-byte milliseconds (``connector.stored_dates``), the
day being the floor of the milliseconds over a day, without decoding either column.  These
tests hold that route to the one it replaced (both columns decoded to ``date32``, then Arrow's
comparison) on the same stored batches: cells at midnight and at other hours of a day, days
before 1970 (whose floor is not a truncation), nulls on either side, the ordered (``#o``)
form, every comparison operator, and a cell that would not decode, which must still fail the
read with the decode's message.  The route is seen to be taken through ``stored_date_rows``.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import storage
from connector.decoded_filters import DecodedFilter
from connector.source_config import SourceConfig
from connector.stored_dates import STORED_DATE_ROWS, serde_stored_dates
from connector.worker import read_ops
from connector.worker.read_plan import ReadPlan, decode_filters

MAPPING = "k STRING :key, a DATE cf:a, b DATE cf:b#o, n BIGINT cf:n"
MS_PER_DAY = 86_400_000
OPS = ("=", "<>", "<", "<=", ">", ">=")
_EPOCH = dt.date(1970, 1, 1)


def _serde():
    return SourceConfig.from_options({"root": "/unused", "table": "t", "hbase.columns.mapping": MAPPING}).read_serde()


def _cell(millis: int | None, ordered: bool) -> bytes | None:
    """A DATE cell as the binary SerDe stores it (the sign bit flipped when ordered)."""
    if millis is None:
        return None
    word = millis % (1 << 64)
    return (word ^ (1 << 63) if ordered else word).to_bytes(8, "big")


def _stored(rows: list[tuple[int | None, int | None]]) -> pa.RecordBatch:
    """A stored batch: key, then the two date columns' cells (``a`` plain, ``b`` ordered)."""
    return pa.RecordBatch.from_arrays(
        [pa.array([f"r{j:05d}".encode() for j in range(len(rows))], pa.binary()),
         pa.array([_cell(a, False) for a, _ in rows], pa.binary()),
         pa.array([_cell(b, True) for _, b in rows], pa.binary())],
        names=["key", "cf:a", "cf:b"])


def _compare(op: str, left: str = "a", right: str = "b") -> dict:
    return {"op": "Compare", "cmp": op, "left": {"column": left}, "right": {"column": right}}


def _select(filters: list[dict], raw: pa.RecordBatch, stored: bool) -> tuple[list, int, dict]:
    """``DecodedFilter.select`` of ``k`` as the worker runs it: with the stored forms, or
    without them (every column decoded, then Arrow's kernels: the reference)."""
    serde = _serde()
    config = SourceConfig.from_options({"root": "/unused", "table": "t", "hbase.columns.mapping": MAPPING})
    types = {f.name.lower(): f for f in config.spark_arrow_schema(["k", "a", "b", "n"])}

    def decode(rows, lower):
        return read_ops._decoded(serde, rows, list(lower), pa.schema([types[n] for n in lower]))

    forms = serde_stored_dates(serde)
    counts: dict = {}
    flt = DecodedFilter(decode_filters(filters))
    arrays, kept = flt.select(raw, raw.num_rows, ["k"], decode, serde.batch_sources,
                              forms.get if stored else None, counts)
    return (arrays[0].to_pylist() if kept else []), kept, counts


_MILLIS = st.one_of(st.none(),
                    st.integers(-800, 800).map(lambda d: d * MS_PER_DAY),  # midnights, before 1970 too
                    st.integers(-800 * MS_PER_DAY, 800 * MS_PER_DAY))  # any hour of a day


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.tuples(_MILLIS, _MILLIS), min_size=1, max_size=60),
       ops=st.lists(st.sampled_from(OPS), min_size=1, max_size=2), swapped=st.booleans())
def test_stored_comparisons_of_two_dates_equal_the_decoded_ones(rows, ops, swapped):
    """Any cells, any operators (a range of two comparisons too), either side first."""
    filters = [_compare(op, *(("b", "a") if swapped else ("a", "b"))) for op in ops]
    raw = _stored(rows)
    got, kept, counts = _select(filters, raw, stored=True)
    want, want_kept, reference_counts = _select(filters, raw, stored=False)
    assert (got, kept) == (want, want_kept)
    assert counts.get(STORED_DATE_ROWS) == len(rows)  # tested on the stored cells, every row
    assert STORED_DATE_ROWS not in reference_counts
    # and the answer itself: the floor of the milliseconds over a day, a null dropping the row
    test = {"=": lambda x, y: x == y, "<>": lambda x, y: x != y, "<": lambda x, y: x < y,
            "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y}
    expected = []
    for j, (a, b) in enumerate(rows):
        if a is None or b is None:
            continue
        left, right = (b // MS_PER_DAY, a // MS_PER_DAY) if swapped else (a // MS_PER_DAY, b // MS_PER_DAY)
        if all(test[op](left, right) for op in ops):
            expected.append(f"r{j:05d}")
    assert got == expected


def test_hours_of_one_day_are_the_same_day():
    """Cells of one day at different hours compare equal; 1969-12-31 13:00 is before 1970-01-01."""
    rows = [(5 * MS_PER_DAY + 1, 5 * MS_PER_DAY + 80_000_000), (-MS_PER_DAY + 46_800_000, 0),
            (-1, -MS_PER_DAY)]
    assert _select([_compare("=")], _stored(rows), True)[0] == ["r00000", "r00002"]
    assert _select([_compare("<")], _stored(rows), True)[0] == ["r00001"]


def test_a_comparison_with_the_null_safe_operator_is_decoded():
    """``<=>`` is true for two nulls: it is not a null-dropping comparison, so it takes the decode."""
    rows = [(None, None), (0, 0), (0, None)]
    got, _, counts = _select([_compare("<=>")], _stored(rows), True)
    assert got == ["r00000", "r00001"] and STORED_DATE_ROWS not in counts


@pytest.mark.parametrize("bad", [b"\x00\x00\x00\xdc\x6a\xcf\xac", (1 << 62).to_bytes(8, "big")],
                         ids=["seven bytes", "a day out of range"])
def test_a_cell_that_would_not_decode_still_fails_the_read(tmp_path, bad):
    """A table's read through the worker: the pair is tested on stored cells (counted) while every
    cell decodes; a batch holding a bad cell is decoded, and fails as the unfiltered read does."""
    root = str(tmp_path / "root")
    opts = {"root": root, "table": "d", "hbase.columns.mapping": MAPPING}
    serde = SourceConfig.from_options(opts).read_serde()
    with storage.connect(root) as conn:
        table = conn.create_table("d", {"cf": {}}, settings={"wal_sync": "none"})
        with table.batch() as batch:
            for j in range(120):
                batch.put(*serde.serialize({"k": f"r{j:04d}", "a": _EPOCH + dt.timedelta(days=j % 40),
                                            "b": None if j % 9 == 0 else _EPOCH + dt.timedelta(days=j % 31), "n": j}))
        table.flush()

    def read(columns: list[str], filters: list[dict]) -> tuple[list[dict], dict]:
        config = SourceConfig.from_options(opts)
        rp = ReadPlan.from_request({"options": opts, "columns": columns, "filters": filters},
                                   config.spark_arrow_schema(columns))
        stats: dict = {}
        batches = list(read_ops.decoded_batches(rp, rp.splits(rp.pushdown()), None, rp.target, stats))
        return (pa.Table.from_batches(batches, rp.target).to_pylist() if batches else []), stats

    every, _ = read(["k", "a", "b"], [])
    rows, stats = read(["k"], [_compare("<")])
    assert rows == [{"k": r["k"]} for r in every if r["b"] is not None and r["a"] < r["b"]]
    assert rows and stats[STORED_DATE_ROWS] == 120
    with storage.connect(root) as conn:
        conn.table("d").put(b"r0005", {b"cf:b": bad})
    with pytest.raises(Exception) as unfiltered:
        read(["k", "b"], [])
    with pytest.raises(Exception) as filtered:
        read(["k"], [_compare("<")])
    assert str(filtered.value) == str(unfiltered.value)
    assert "r0005" in str(filtered.value)
