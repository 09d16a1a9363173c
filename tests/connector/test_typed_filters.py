"""Typed comparisons pushed to the engine worker, and pushed only where they pay.

Every comparison operator on INT, BIGINT, DATE, DECIMAL(15,2) and STRING columns, negatives and
nulls included, through the JVM source under the binary and the string SerDe: the rows must equal
Spark's own evaluation of the same predicate over the same rows held in memory, with the filter
pushed to the worker (``regionscan.pushdown.decoded.maxkept=1``: every decoded filter stays
there), with the default decision, and with nothing pushed.  A filter keeping almost every row
(TPC-H q1's shape) is left to Spark by the default decision, a selective one is evaluated by the
worker (connector/filter_payoff.py); connector.explain says which and why.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pyarrow as pa
import pytest

import connector
import storage
from connector.decoded_filters import DecodedFilter, evaluable
from connector.worker.read_plan import (EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull, LessThan,
                                        LessThanOrEqual, Not)
from serde import create_serde
from serde_tables import fill_table

MAPPING = "k INT :key, n INT cf:n, b BIGINT cf:b, d DATE cf:d, m DECIMAL(15,2) cf:m, s STRING cf:s"
SCHEMA = "k INT, n INT, b BIGINT, d DATE, m DECIMAL(15,2), s STRING"


def _row(k: int) -> dict:
    return {
        "k": k,
        "n": None if k % 11 == 1 else k * 3 - 7,
        "b": None if k % 13 == 0 else k * 10 ** 12 + 5,
        "d": None if k % 31 == 0 else dt.date(1970, 1, 1) + dt.timedelta(days=k * 40),
        "m": None if k % 5 == 0 else Decimal(k * 137) / 100,
        "s": None if k % 9 == 0 else f"s{(k * 7) % 23:02d}",
    }


ROWS = [_row(k) for k in range(-120, 120)]

# per column: literals in SQL, the first one a stored value (so "=" finds rows), negatives included
LITERALS = {
    "n": ["-37", "0", "200"],
    "b": ["-40000000000005", "5"],
    "d": ["DATE'1969-07-11'", "DATE'1975-06-01'"],
    "m": ["-13.70", "0.00", "41.10"],
    "s": ["'s07'", "'s15'"],
}
OPS = ["=", "<>", "<", "<=", ">", ">="]


def _predicates() -> list[str]:
    out = []
    for column, literals in LITERALS.items():
        out.extend(f"{column} {op} {literals[0]}" for op in OPS)
        out.append(f"{column} IN ({', '.join(literals)})")
        out.append(f"{column} NOT IN ({', '.join(literals)})")
    return out


PREDICATES = _predicates()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("typed") / "root")
    with storage.connect(path) as conn:
        for serde_name in ("binary", "string"):
            serde = create_serde(serde_name, MAPPING)
            splits = sorted(serde.serialize({"k": v})[0] for v in (-60, 0, 60))
            fill_table(conn, f"t_{serde_name}", serde, ROWS, splits)
    return path


@pytest.fixture(scope="module")
def reference(spark):
    """The rows held by Spark itself: its own evaluation is the answer."""
    return spark.createDataFrame([tuple(r[c] for c in ("k", "n", "b", "d", "m", "s")) for r in ROWS], SCHEMA)


def _read(spark, root, serde_name, **options):
    base = {"root": root, "table": f"t_{serde_name}", "hbase.columns.mapping": MAPPING, "serde": serde_name}
    return spark.read.format("regionscan").options(**base, **options).load()


def _keys(df) -> list[int]:
    return sorted(r.k for r in df.select("k").collect())


MODES = {
    "pushed": {"regionscan.pushdown.decoded.maxkept": "1"},
    "spark": {"hbase.spark.pushdown.columnfilter": "false", "regionscan.pushdown.decoded": "false"},
}


@pytest.mark.spark
@pytest.mark.parametrize("serde_name, mode", [("binary", "pushed"), ("binary", "spark"), ("string", "pushed")])
def test_every_operator_and_type_answers_as_spark(spark, root, reference, serde_name, mode):
    df = _read(spark, root, serde_name, **MODES[mode])
    # with nothing pushed, three operators per type (the reference is Spark's evaluation already)
    chosen = PREDICATES if mode != "spark" else [p for p in PREDICATES if " <= " in p or " <> " in p or " IN " in p]
    for where in chosen:
        want = _keys(reference.where(where))
        got_df = df.where(where)
        assert _keys(got_df) == want, (where, serde_name, mode)
        if mode == "pushed" and " < " in where:  # the plan of one operator per column (planning costs)
            plan = connector.explain(got_df)
            left = [f for f in plan.residual if not f.endswith("IS NOT NULL")]
            assert not left, (where, str(plan))  # every comparison is taken: by the worker or as bytes
            if serde_name == "binary" and not where.startswith("s "):
                assert any(not f.endswith("IS NOT NULL") for f in plan.decoded), (where, str(plan))
    if mode == "spark":
        assert not connector.explain(df.where(PREDICATES[0])).decoded


@pytest.mark.spark
def test_a_filter_keeping_most_rows_is_left_to_spark_and_a_selective_one_is_not(spark, root, reference):
    df = _read(spark, root, "binary")
    broad = "n >= -360"  # keeps about 90% of the rows (nulls fail it), as q1's l_shipdate <= date '1998-09-02'
    narrow = "n >= 20 AND n < 40"  # keeps 3%, as q6's year of l_shipdate
    for where in (broad, narrow):
        assert _keys(df.where(where)) == _keys(reference.where(where))
    plan = connector.explain(df.where(broad))
    assert "n >= -360" in plan.residual and not plan.decoded, str(plan)
    assert re.search(r"keeps \d+% of a sample of the rows", str(plan)), str(plan)
    plan = connector.explain(df.where(narrow))
    assert {"n >= 20", "n < 40"} <= set(plan.decoded), str(plan)
    assert not [f for f in plan.residual], str(plan)
    # the share is an option: 1 keeps every decoded filter in the worker
    plan = connector.explain(_read(spark, root, "binary", **MODES["pushed"]).where(broad))
    assert "n >= -360" in plan.decoded, str(plan)


@pytest.mark.spark
def test_a_broad_date_filter_tested_on_stored_cells_stays_with_the_worker(spark, root, reference):
    """A binary-SerDe DATE comparison is tested on the stored milliseconds (nothing decoded), so
    the worker keeps it however many rows it keeps, and a query whose filters are all taken can
    have its aggregate computed by the tasks; the string SerDe decodes its dates, so there the
    broad filter is still left to Spark."""
    broad = "d <= DATE'1982-06-01'"  # keeps 96% of the rows, as q1's l_shipdate <= date '1998-09-02'
    df = _read(spark, root, "binary")
    assert _keys(df.where(broad)) == _keys(reference.where(broad))
    plan = connector.explain(df.where(broad))
    assert "d <= datetime.date(1982, 6, 1)" in plan.decoded and not plan.residual, str(plan)
    plan = connector.explain(_read(spark, root, "string").where(broad))
    assert "d <= datetime.date(1982, 6, 1)" in plan.residual and not plan.decoded, str(plan)


@pytest.mark.spark
def test_a_bad_share_is_one_line_naming_the_option(spark, root):
    df = _read(spark, root, "binary", **{"regionscan.pushdown.decoded.maxkept": "most"}).where("n > 0")
    with pytest.raises(Exception) as err:
        df.collect()
    assert "regionscan.pushdown.decoded.maxkept must be a share between 0 and 1" in str(err.value)


# -- the kernel: decimals compared exactly, and the lazy decode ---------------------------------

_DEC = pa.decimal128(15, 2)
_VALUES = [Decimal("-0.05"), Decimal("0.05"), None, Decimal("0.06"), Decimal("9999999999999.99"),
           Decimal("-9999999999999.99"), Decimal("0.07")]


def _sql(op: str, a, b):
    if a is None or b is None:
        return None
    return {"=": a == b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


@pytest.mark.parametrize("literal", [Decimal("0.05"), Decimal("0.055"), Decimal("-0.050"), Decimal("1E+2"),
                                     Decimal("12345678901234567890.5"), Decimal("-9999999999999.99")])
def test_decimal_comparisons_are_exact(literal):
    batch = pa.RecordBatch.from_arrays([pa.array(_VALUES, _DEC)], names=["m"])
    kinds = {"=": EqualTo, "<": LessThan, "<=": LessThanOrEqual, ">": GreaterThan, ">=": GreaterThanOrEqual}
    for op, cls in kinds.items():
        f = cls(("m",), literal)
        assert evaluable(f, lambda name: _DEC)
        got = DecodedFilter([f]).mask(batch).to_pylist()
        assert got == [_sql(op, v, literal) is True for v in _VALUES], (op, literal)
    within = In(("m",), (literal, Decimal("0.07"), None))
    assert DecodedFilter([within]).mask(batch).to_pylist() == [v is not None and v in (literal, Decimal("0.07"))
                                                               for v in _VALUES]
    outside = Not(In(("m",), (literal, Decimal("0.07"))))
    assert DecodedFilter([outside]).mask(batch).to_pylist() == [v is not None and v not in (literal, Decimal("0.07"))
                                                                for v in _VALUES]


def test_select_decodes_each_column_only_where_needed():
    """``select`` answers as ``mask``, decoding later conditions' and the output's columns only at
    the rows still passing (a selective filter spares the decoding of the rows it drops)."""
    n = 1000
    stored = pa.RecordBatch.from_arrays([pa.array(range(n)), pa.array([i % 7 for i in range(n)]),
                                         pa.array([f"v{i}" for i in range(n)])], names=["a", "b", "c"])
    decoded_rows: dict[str, int] = {}

    def decode(rows, names):
        for name in names:
            decoded_rows[name] = decoded_rows.get(name, 0) + rows.num_rows
        return [rows.column(name) for name in names]

    flt = DecodedFilter([LessThan(("a",), 100), EqualTo(("b",), 3), IsNotNull(("a",))])
    arrays, kept = flt.select(stored, n, ["c", "a"], decode)
    want = [i for i in range(100) if i % 7 == 3]
    assert kept == len(want) and arrays[1].to_pylist() == want and arrays[0].to_pylist() == [f"v{i}" for i in want]
    assert flt.mask(stored).true_count == kept
    assert decoded_rows == {"a": n, "b": 100, "c": len(want)}
    # when most rows pass, the output is decoded at every row in one pass, then taken
    decoded_rows.clear()
    broad = DecodedFilter([GreaterThanOrEqual(("a",), 10)])
    arrays, kept = broad.select(stored, n, ["c"], decode)
    assert kept == n - 10 and arrays[0].to_pylist() == [f"v{i}" for i in range(10, n)]
    assert decoded_rows == {"a": n, "c": n}
    none = DecodedFilter([LessThan(("a",), -1)]).select(stored, n, ["c"], decode)
    assert none == ([], 0)
