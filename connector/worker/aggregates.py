"""Aggregates the engine worker answers at planning: COUNT from the block indexes, MIN/MAX of the row key.

The ``count`` request (connector/java/PROTOCOL.md) carries the query's
filters and aggregates.  They are answered without reading rows when the
filters are exact key ranges (no residual for Spark, no engine filter):

* ``count_star`` and ``count`` of the row key: the splits' row counts from
  the block indexes (:func:`~connector.scanning.split_row_count`);
* ``min`` / ``max`` of the row key: the first (last) row key in range, from
  a one-row forward (reversed) scan of the splits in key order
  (:func:`~connector.scanning.split_edge_key`), decoded by the SerDe as a
  read decodes it.  Only where the key codec's byte order is its value
  order (UTF-8 strings, binaries, order-preserving encodings): HBase
  ``Bytes`` integers sort negatives last, floats and text numbers have no
  byte order, so their MIN/MAX is left to Spark.

Anything else answers ``values: null``.  Every reply also says, in
``per_task``, whether each task can compute the aggregates from its rows
instead (:mod:`.task_aggregates`); where neither can, Spark reads the rows
and aggregates them.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import pyarrow as pa

from storage import InvalidArgument

from ..explain import ScanPlan, save_plan
from ..keyspace import value_order
from ..key_widths import check_key_widths, key_column
from ..options import conf_bool
from ..scanning import edge_key_known, split_edge_key, split_row_count
from .. import raw_read
from ..source_config import AGGREGATE_PUSHDOWN, SourceConfig
from .aggregate_spec import per_task_or_why
from .read_plan import ReadPlan

__all__ = ["count", "edge_literal"]

_EPOCH = dt.date(1970, 1, 1)
_NOT_ANSWERED: dict = {"values": None}


def _orders_like_values(serde, column) -> bool:
    order = value_order(serde.codec(column, column.type, "key"))
    return order is not None and order.kind in ("bytes", "ordered")


def edge_literal(array: pa.Array) -> dict | None:
    """A decoded one-value key array as a tagged literal (PROTOCOL.md, "Filters"), or None when
    its value is null or of a type the JVM side does not take."""
    value = array[0]
    if not value.is_valid:
        return None
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return {"t": "string", "v": value.as_py()}
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return {"t": "binary", "v": base64.b64encode(value.as_py()).decode("ascii")}
    if pa.types.is_integer(kind):
        return {"t": "int", "v": value.as_py()}
    if pa.types.is_date32(kind):
        return {"t": "date", "v": (value.as_py() - _EPOCH).days}
    if pa.types.is_timestamp(kind):
        micros = array.cast(pa.timestamp("us", kind.tz)).cast(pa.int64())[0].as_py()
        return {"t": "timestamp" if kind.tz else "timestamp_ntz", "v": micros}
    if pa.types.is_decimal(kind):
        return {"t": "decimal", "v": str(value.as_py())}
    return None


def _decoded(serde, column, raw: bytes) -> dict | None:
    rows = pa.RecordBatch.from_arrays([pa.array([raw], pa.binary())], names=["key"])
    return edge_literal(serde.deserialize_batch(rows, [column.name]).column(0))


def _parse(aggregates: Any, key) -> list[str] | None:
    """Each aggregate as ``count``, ``min`` or ``max`` (of the key), or None if one is something else."""
    if not isinstance(aggregates, list) or not aggregates:
        raise InvalidArgument("count needs a list of aggregates")
    out = []
    for a in aggregates:
        if not isinstance(a, dict):
            raise InvalidArgument(f"an aggregate must be a JSON object, got {type(a).__name__}")
        fn = a.get("fn")
        on_key = key is not None and str(a.get("column", "")).lower() == key.name.lower()
        if fn == "count_star" or (fn == "count" and on_key):  # a row key is never null: COUNT(key) is COUNT(*)
            out.append("count")
        elif fn in ("min", "max") and on_key:
            out.append(fn)
        else:
            return None
    return out


def _label(doc: dict) -> str:
    if doc.get("fn") == "count_star":
        return "COUNT(*)"
    return f"{str(doc.get('fn')).upper()}({doc.get('column')})"


def count(req: dict) -> dict:
    """``count``: COUNT(*), COUNT(key), MIN(key), MAX(key) without reading rows (else ``values: null``),
    and whether the tasks can compute them instead (``per_task``), also for a ``group_by``."""
    if raw_read.is_raw(SourceConfig.from_options(req.get("options") or {})):
        return {"values": None, "per_task": False}  # a raw read's rows are cells: Spark counts them
    rp = ReadPlan.from_request({**req, "columns": []})
    if not conf_bool(rp.base.conf, AGGREGATE_PUSHDOWN, True):
        return {"values": None, "per_task": False}  # regionscan.pushdown.aggregates=false: Spark aggregates
    answer = _NOT_ANSWERED if req.get("group_by") else _at_planning(req, rp)
    key = key_column(rp.base.mapping())
    spec, why = per_task_or_why(req, rp)
    # the columns a task reads for them: the JVM prunes its scan to these (one definition, here)
    tasks = ({"per_task": False, **({"not_per_task": why} if why else {})} if spec is None else
             {"per_task": True, "task_inputs": spec.inputs, "partial_types": spec.partial_types()})
    return {**answer, **tasks, "key_column": None if key is None else key.name}


def _at_planning(req: dict, rp: ReadPlan) -> dict:
    mapping = rp.base.mapping()
    key = key_column(mapping)
    kinds = _parse(req.get("aggregates"), key)
    if kinds is None:
        return _NOT_ANSWERED
    serde = rp.config.read_serde()
    if {"min", "max"} & set(kinds) and not _orders_like_values(serde, key):
        return _NOT_ANSWERED
    result = rp.pushdown()
    if result.residual or result.decoded or result.engine_filter is not None:
        return _NOT_ANSWERED
    fmt = rp.input_format(result)
    fmt.conf["regionscan.pin.register"] = False
    splits = sorted(fmt.get_splits(), key=lambda s: s.start)
    answers: dict[str, Any] = {}
    if "count" in kinds:
        total = 0
        for split in splits:
            n = split_row_count(split)
            if n is None:
                return _NOT_ANSWERED
            total += n
        answers["count"] = total
    if {"min", "max"} & set(kinds) and result.key_ranges is None:  # (key ranges: get_splits checked them)
        check_key_widths(serde, rp.config.root, rp.config.table)  # one edge key decoded stands for every key: they must fit
    for fn in ("min", "max"):
        if fn not in kinds:
            continue
        answers[fn] = {"t": "null"}
        if not all(edge_key_known(s) for s in splits):
            return _NOT_ANSWERED  # a region server root, or a filter: read the rows
        for split in reversed(splits) if fn == "max" else splits:
            raw = split_edge_key(split, last=fn == "max")
            if raw is not None:
                literal = _decoded(serde, key, raw)
                if literal is None:
                    return _NOT_ANSWERED  # the key decodes to null (or to no type the JVM takes)
                answers[fn] = literal
                break
    plan = ScanPlan.build(rp.config, result, splits)
    plan.aggregates = [_label(a) for a in req["aggregates"]]
    if not req.get("statistics"):  # a scan's row estimate is not the query's aggregate
        save_plan(rp.base, plan)  # what connector.explain(df) reads
    return {"values": [answers[fn] for fn in kinds]}
