"""The eight TPC-H tables as Spark sees them and as regionscan stores them.

Types follow the TPC-H specification's column classes in Spark's spelling: identifiers are
BIGINT, integers INT, decimals DECIMAL(15,2), dates DATE, text STRING (the types
``tpchgen-cli`` writes to Parquet).  The row key is the table's primary key, encoded in the
order-preserving form (``"encoding": "ordered"``), so rows sort by key value and key ranges
push down; ``lineitem`` and ``partsupp`` have two-part keys of fixed width (8 + 4 and 8 + 8
bytes).  Every other column is one cell in family ``f`` in HBase's ``Bytes`` form (the binary
SerDe), its qualifier the column's name.
"""

from __future__ import annotations

import json
import math

__all__ = ["FAMILY", "KEYS", "TABLES", "catalog", "regions_for"]

FAMILY = "f"
"""The one column family of every TPC-H table."""

_ID, _INT, _DEC, _DATE, _STR = "bigint", "int", "decimal(15,2)", "date", "string"

TABLES: dict[str, list[tuple[str, str]]] = {
    "region": [("r_regionkey", _ID), ("r_name", _STR), ("r_comment", _STR)],
    "nation": [("n_nationkey", _ID), ("n_name", _STR), ("n_regionkey", _ID), ("n_comment", _STR)],
    "supplier": [("s_suppkey", _ID), ("s_name", _STR), ("s_address", _STR), ("s_nationkey", _ID),
                 ("s_phone", _STR), ("s_acctbal", _DEC), ("s_comment", _STR)],
    "customer": [("c_custkey", _ID), ("c_name", _STR), ("c_address", _STR), ("c_nationkey", _ID),
                 ("c_phone", _STR), ("c_acctbal", _DEC), ("c_mktsegment", _STR), ("c_comment", _STR)],
    "part": [("p_partkey", _ID), ("p_name", _STR), ("p_mfgr", _STR), ("p_brand", _STR), ("p_type", _STR),
             ("p_size", _INT), ("p_container", _STR), ("p_retailprice", _DEC), ("p_comment", _STR)],
    "partsupp": [("ps_partkey", _ID), ("ps_suppkey", _ID), ("ps_availqty", _INT), ("ps_supplycost", _DEC),
                 ("ps_comment", _STR)],
    "orders": [("o_orderkey", _ID), ("o_custkey", _ID), ("o_orderstatus", _STR), ("o_totalprice", _DEC),
               ("o_orderdate", _DATE), ("o_orderpriority", _STR), ("o_clerk", _STR), ("o_shippriority", _INT),
               ("o_comment", _STR)],
    "lineitem": [("l_orderkey", _ID), ("l_partkey", _ID), ("l_suppkey", _ID), ("l_linenumber", _INT),
                 ("l_quantity", _DEC), ("l_extendedprice", _DEC), ("l_discount", _DEC), ("l_tax", _DEC),
                 ("l_returnflag", _STR), ("l_linestatus", _STR), ("l_shipdate", _DATE), ("l_commitdate", _DATE),
                 ("l_receiptdate", _DATE), ("l_shipinstruct", _STR), ("l_shipmode", _STR), ("l_comment", _STR)],
}
"""Each table's columns in the specification's order, with their Spark SQL types."""

KEYS: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey",), "nation": ("n_nationkey",), "supplier": ("s_suppkey",),
    "customer": ("c_custkey",), "part": ("p_partkey",), "partsupp": ("ps_partkey", "ps_suppkey"),
    "orders": ("o_orderkey",), "lineitem": ("l_orderkey", "l_linenumber"),
}
"""Each table's primary key, in key order: the row key's parts."""

_ROWS_PER_REGION = 75_000  # lineitem at SF 0.1 (600,000 rows) gets 8 regions, orders 2


def _table(name: str) -> list[tuple[str, str]]:
    try:
        return TABLES[name]
    except KeyError:
        from storage.names import name_hint

        raise ValueError(f"no TPC-H table {name!r} {name_hint(name, sorted(TABLES), 'tables')}") from None


def catalog(table: str, name: str | None = None) -> str:
    """The hbase-spark JSON catalog of ``table`` (stored as regionscan table ``name``, default
    the same): the primary key as the ordered row key, every other column a binary cell."""
    spec = _table(table)
    key = KEYS[table]
    columns = {}
    for column, spark_type in spec:
        if column in key:
            columns[column] = {"cf": "rowkey", "col": column, "type": spark_type, "encoding": "ordered"}
        else:
            columns[column] = {"cf": FAMILY, "col": column, "type": spark_type}
    return json.dumps({"table": {"namespace": "default", "name": name or table},
                       "rowkey": ":".join(key), "columns": columns})


def regions_for(rows: int) -> int:
    """How many regions a table of ``rows`` rows is pre-split into (``newtable``): one per
    75,000 rows, at most 8, so the big tables spread over both cores' tasks."""
    return max(1, min(8, math.ceil(rows / _ROWS_PER_REGION)))
