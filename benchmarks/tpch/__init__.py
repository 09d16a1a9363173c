"""TPC-H on regionscan tables: the eight tables' schemas and keys, the 22 queries, the load.

One definition for the benchmark (``benchmarks/bench_tpch.py``) and the suite's correctness
test (``tests/connector/test_tpch.py``), so both load and query the tables the same way:

* :mod:`.schema`: each table's columns with their Spark types (BIGINT keys, INT, DECIMAL(15,2),
  DATE, STRING), its primary key (composite for ``lineitem`` and ``partsupp``) and the JSON
  catalog that maps it to a regionscan table (binary SerDe, the key as an ordered row key);
* :mod:`.queries`: the 22 queries as Spark SQL (``qNN.sql`` beside this file, the spec's
  default substitution parameters) and the comparison of two answers;
* :mod:`.load`: a DataFrame written with ``df.write.format("regionscan")`` as a user would
  (pre-split with ``newtable``, no compaction), and the temporary views the queries name.
"""

from __future__ import annotations

from .load import read_regionscan, register_views, write_regionscan
from .queries import QUERIES, answer_difference, is_ordered, parse_query_list, query_text
from .schema import KEYS, TABLES, catalog, regions_for

__all__ = [
    "KEYS", "QUERIES", "TABLES", "answer_difference", "catalog", "is_ordered", "parse_query_list",
    "query_text",
    "read_regionscan", "regions_for", "register_views", "write_regionscan",
]
