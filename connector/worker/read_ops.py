"""The engine worker's read-side ops (schema, push, save, plan, read), answered with the Python source's own code.

Every answer is computed by what ``format("regionscan_python")`` runs:
:class:`~connector.source_config.SourceConfig` parses the options,
:func:`~connector.pushdown.push_filters` translates the filters, the input
format plans (and pins) the splits, :class:`~connector.record_reader.TableBatchRecordReader`
scans them and the SerDe decodes the rows.  So both sources answer alike.
The ``plan`` op makes the read's :class:`~.read_plan.ReadPlan` once and hands
it to the JVM serialized; each task's ``read`` carries it back and reads with
no planning of its own (:func:`task_plan`).  COUNT/MIN/MAX answered at
planning are in :mod:`.aggregates`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any, Iterator

import pyarrow as pa

from serde.codecs.hbase_bytes import BinaryCodec, StringCodec
from serde.codecs.text import BinaryText, StringText, TextCodec
from serde.mapping import ColumnKind
from storage import InvalidArgument

from ..explain import ScanPlan, printable, ranges_text, save_plan
from ..options import MAX_RESTARTS, conf_bool, conf_int
from ..pushdown import PushdownResult, describe_filter
from .. import raw_read
from ..record_reader import TableBatchRecordReader
from ..source_config import PACK_SPLITS, SourceConfig
from ..splits import TableSplit
from ..stored_dates import serde_stored_dates
from .aggregate_spec import task_aggregation
from .protocol import pack_object, unpack_object
from .read_plan import ReadPlan, decode_filters, filters_read_values, key_names, push_read_filters

__all__ = ["schema", "push", "save", "plan", "task_plan", "plan_batches", "read_batches", "decoded_batches",
           "read_splits", "read_schema", "pack_splits", "task_layout"]


def schema(req: dict) -> dict:
    """The DataFrame schema (Spark DDL) of the mapping, as the Python source reports it."""
    config = SourceConfig.from_options(req.get("options") or {})
    if raw_read.is_raw(config):  # a raw read's cells (connector/raw_read.py)
        return {"ddl": raw_read.schema_ddl(config), "key_columns": key_names(config)}
    return {"ddl": config.schema_ddl(), "key_columns": key_names(config)}


def push(req: dict) -> dict:
    """Which filters (indexes) the engine applies exactly, and the key ranges and engine filter they make."""
    config = SourceConfig.from_options(req.get("options") or {})
    filters = decode_filters(req.get("filters"))
    if raw_read.is_raw(config):  # the pushdown speaks of mapped columns: Spark filters a raw read's cells
        return {"handled": [], "notes": ["a raw read pushes no filter"], "key_ranges": None, "engine_filter": None,
                "decoded": []}
    result = push_read_filters(config, filters, decide=True)
    handled = {id(f) for f in result.handled}
    out = {"handled": [i for i, f in enumerate(filters) if id(f) in handled], "notes": result.notes,
           "key_ranges": ranges_text(result.key_ranges),
           "engine_filter": printable(repr(result.engine_filter)) if result.engine_filter is not None else None,
           "decoded": [printable(describe_filter(f)) for f in result.decoded]}
    asked = req.get("plan")
    if asked is not None:
        # the scan planned in the same request, for every mapped column: its tasks then read the
        # plan narrowed to Spark's pruned columns (ReadPlan.narrowed), and no plan request follows
        if not isinstance(asked, dict):
            raise InvalidArgument("push's plan must be a JSON object of the plan request's fields")
        fields = {k: v for k, v in asked.items() if k not in ("columns", "aggregate", "limit", "options", "filters")}
        # the filters just translated for every mapped column are the plan's: not translated again;
        # key_reads_narrow: a read of key columns alone scans every mapped column too (the filters
        # read other columns), so its tasks narrow this plan as well and no plan request follows
        out["plan"] = {**plan({**fields, "options": req.get("options") or {}, "filters": req.get("filters")},
                              with_push=True, pushed=result), "key_columns": key_names(config),
                       "key_reads_narrow": filters_read_values(config, filters)}
    return out


def save(req: dict) -> dict:
    """What a write in ``mode`` does (:func:`connector.savemode.decide`), decided before any task."""
    from ..savemode import decide

    return decide(req.get("options") or {}, str(req.get("mode", "")))


def pack_splits(splits: list[TableSplit], max_bytes: int, open_cost: int, parallelism: int) -> list[list[TableSplit]]:
    """Splits packed into tasks by size as Spark packs files (FilePartition's target size and open cost).

    Spark packs files largest first; splits are packed in key order instead
    (next fit), so a task reads adjacent rows and the tasks' rows come in key
    order, as the Python source's do.
    """
    if not splits:
        return []
    total = sum(s.size + open_cost for s in splits)
    per_core = total // max(1, parallelism)
    target = min(max_bytes, max(open_cost, per_core))
    tasks: list[list[TableSplit]] = []
    current: list[TableSplit] = []
    size = 0
    for split in sorted(splits, key=lambda s: s.index):
        if current and size + split.size > target:
            tasks.append(current)
            current, size = [], 0
        current.append(split)
        size += split.size + open_cost
    tasks.append(current)
    return tasks


def _int(req: dict, key: str, default: int) -> int:
    value = req.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(f"{key} must be a non-negative integer")
    return value


def _target(req: dict) -> pa.Schema | None:
    """The Arrow schema of what the tasks return, from the request's ``schema``; None without one."""
    return read_schema(req) if "schema" in req else None


def _packed(req: dict, config: SourceConfig, splits: list[TableSplit]) -> list[list[TableSplit]]:
    if conf_bool(config.conf, PACK_SPLITS, True):
        return pack_splits(splits, _int(req, "max_partition_bytes", 128 << 20), _int(req, "open_cost", 4 << 20),
                           max(1, _int(req, "parallelism", 1)))
    return [[s] for s in splits]  # regionscan.pack.splits=false: one task per split


def _tasks_reply(rp: ReadPlan, tasks: list[list[TableSplit]], splits: list[TableSplit]) -> dict:
    out: dict[str, Any] = {
        "tasks": [{"splits": [pack_object(s) for s in t],
                   "hosts": sorted({s.location for s in t}), "bytes": sum(s.size for s in t)} for t in tasks],
        "size_bytes": sum(s.size for s in splits),
        "splits": len(splits),
    }
    if rp.target is not None:
        out["read_plan"] = rp.to_text()  # made once here; every task's read carries it back
    return out


def plan(req: dict, with_push: bool = False, pushed: PushdownResult | None = None) -> dict:
    """The tasks of a read: pinned splits packed by size, each split pickled for the read request,
    and the read's plan serialized (``read_plan``, when the request gives the ``schema``);
    ``with_push``: planned by a ``push`` for every mapped column, which its tasks narrow, with
    the filters as that push translated them (``pushed``)."""
    rp = ReadPlan.from_request(req, _target(req), pushed)
    if rp.raw:
        if req.get("aggregate") is not None:
            raise InvalidArgument("a raw read's tasks compute no aggregate; let Spark aggregate")
        splits = raw_read.planned_splits(rp.base)
        return _tasks_reply(rp, _packed(req, rp.base, splits), splits)
    result = rp.pushdown()
    splits = rp.splits(result)  # uncached when big for the block cache
    summary = ScanPlan.build(rp.config, result, splits)
    if rp.output:
        summary.columns = list(rp.output)  # the columns decoded; the cells of every mapped one are scanned
    if with_push:
        summary.notes.append("planned with the filters for every column: each task decodes the columns Spark keeps")
    aggregation = task_aggregation(req, rp)
    if aggregation is not None:
        summary.task_aggregates = aggregation.labels()
    save_plan(rp.base, summary)  # what connector.explain(df) reads
    tasks = _packed(req, rp.base, splits)
    if not tasks and aggregation is not None and not aggregation.group_by:
        tasks = [[]]  # one task answers the empty range's row (COUNT 0), or Spark would sum no counts to null
    out = _tasks_reply(rp, tasks, splits)
    if req.get("task_ranges") is True:
        layout = task_layout(rp, tasks)
        if layout is not None:
            out.update(layout)
    return out


def task_layout(rp: ReadPlan, tasks: list[list[TableSplit]]) -> dict | None:
    """The row-key column, how the JVM computes a key value's stored bytes (``key_encoding``: ``utf8``
    or ``bytes``; ``key_null``: the key that reads as null, or None), and each task's row ranges
    (``task_ranges``), or None when those bytes are not exactly computable there (PROTOCOL.md, "plan").

    Exact: a BINARY key stored as it is, or a STRING key stored as its UTF-8 bytes with
    ``serde.on.error=fail`` (with ``null`` a key that is not UTF-8 would read as null, and such
    nulls could come from any task); under the string SerDe the null sequence reads as null.
    Other types, codecs and composite keys give None.
    """
    mapping = rp.base.mapping()
    if mapping.rowkey is not None:
        return None
    key = next((c for c in mapping.columns if c.kind == ColumnKind.KEY), None)
    if key is None:
        return None
    serde = rp.config.read_serde()
    codec = serde.codec(key, key.type, "key")
    if type(codec) in (BinaryCodec, BinaryText):
        encoding = "bytes"
    elif type(codec) in (StringCodec, StringText) and serde.on_error == "fail":
        encoding = "utf8"
    else:
        return None
    null = codec.null if isinstance(codec, TextCodec) and codec.reads_null_sequence else None

    def edge(raw: bytes | None) -> str | None:
        return None if not raw else base64.b64encode(raw).decode("ascii")

    return {
        "key_column": key.name,
        "key_encoding": encoding,
        "key_null": None if null is None else base64.b64encode(null).decode("ascii"),
        "task_ranges": [[[base64.b64encode(s.start).decode("ascii"), edge(s.end)] for s in t] for t in tasks],
    }


def read_splits(req: dict) -> list[TableSplit]:
    """The splits of a ``read`` request (one task's)."""
    docs = req.get("splits")
    if not isinstance(docs, list):
        raise InvalidArgument("read needs a list of splits")
    return [unpack_object(doc, TableSplit, "a split") for doc in docs]


def read_schema(req: dict) -> pa.Schema:
    """The Arrow schema Spark expects for the read (from its StructType JSON)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    text = req.get("schema")
    if not isinstance(text, str):
        raise InvalidArgument("read needs the Spark schema (JSON)")
    return to_arrow_schema(StructType.fromJson(json.loads(text)), timezone="UTC")  # Spark reads instants as UTC micros


def task_plan(req: dict) -> ReadPlan:
    """A ``read`` request's plan: its ``read_plan`` (the driver's, as the ``plan`` reply gave it, or
    the ``push`` reply's narrowed to the request's ``columns`` and ``limit``), read without
    planning again; a request without one (a client that predates it) is planned
    from its own ``options``, ``columns``, ``filters``, ``schema``, ``aggregate`` and ``limit``."""
    if "read_plan" in req:
        rp = ReadPlan.from_text(req["read_plan"])
        # a plan made with the push for every mapped column, narrowed to this read's columns
        return rp.narrowed(req["columns"], req.get("limit")) if "columns" in req else rp
    return ReadPlan.from_request(req, read_schema(req))


def plan_batches(rp: ReadPlan, splits: list[TableSplit], stats: dict) -> Iterator[pa.RecordBatch]:
    """A task's batches by its plan (one that aggregates: :func:`.task_aggregates.aggregate_read`):
    raw cells or decoded rows, as batches of ``rp.target``; the scan metrics are added to ``stats``."""
    if rp.raw:
        return raw_read.raw_batches(rp.base, splits, rp.output, rp.target, rp.limit, stats)
    return decoded_batches(rp, splits, rp.limit, rp.target, stats)


def read_batches(req: dict, target: pa.Schema, stats: dict) -> Iterator[pa.RecordBatch]:
    """The task's rows as Arrow batches of ``target`` (its splits one after another), planned
    from the request's own fields (:func:`task_plan` takes the driver's plan instead).

    The request is checked now; the rows come as the iterator is consumed.
    """
    rp = ReadPlan.from_request({k: v for k, v in req.items() if k != "aggregate"}, target)
    return plan_batches(rp, read_splits(req), stats)


def _decoded(serde, rows: pa.RecordBatch, names: list[str], target: pa.Schema) -> list[pa.Array]:
    """The SerDe's arrays of ``names``, as the types of ``target`` (its fields in that order)."""
    arrays = serde.deserialize_batch(rows, names).columns
    return [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, target)]


def _with_codes(split: TableSplit) -> TableSplit:
    """``split`` whose rows may hold dictionary-coded columns as codes: the SerDe decodes each
    distinct value once and the decoded filters take codes, not bytes, at the rows they keep
    (storage.read.scan_request.ScanRequest.dictionary_values)."""
    if split.scan is None or split.scan.request.dictionary_values:
        return split
    return dataclasses.replace(split, scan=dataclasses.replace(
        split.scan, request=split.scan.request.replace(dictionary_values=True)))


def decoded_batches(rp: ReadPlan, splits: list[TableSplit], limit: Any, target: pa.Schema,
                    stats: dict, names: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The splits' rows, one after another, decoded by the SerDe as batches of ``target``
    (the columns ``names``, by default the request's), at most ``limit`` rows; the scan
    metrics are added to ``stats``."""
    remaining = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0 else None
    serde = rp.config.read_serde()
    conf = rp.config.conf
    names = rp.output if names is None else names
    flt = rp.decoded_filter
    # a decoded filter's columns are decoded beside the output, tested, then dropped
    extra = [n for n in rp.filter_only if n not in names] if flt is not None else []
    every = pa.schema(list(target) + list(rp.base.spark_arrow_schema(extra))) if flt is not None else target
    types = {f.name.lower(): (f.name, f) for f in every}

    def decoder(stored: pa.RecordBatch, lower: list[str]) -> list[pa.Array]:
        """Columns of stored rows decoded as Spark reads them (a decoded filter's lazy decode)."""
        return _decoded(serde, stored, [types[n][0] for n in lower], pa.schema([types[n][1] for n in lower]))

    def sources(lower: list[str]) -> list[str] | None:
        """The stored columns decoding those columns reads (the rest are not taken at kept rows)."""
        return serde.batch_sources([types[n][0] for n in lower])

    # single-cell columns whose date comparisons are tested on the stored cells, before decoding
    forms = serde_stored_dates(serde) if flt is not None else {}

    for split in map(_with_codes, map(rp.with_hidden, splits)):
        reader = TableBatchRecordReader(conf_int(conf, MAX_RESTARTS, 3, minimum=0),
                                        {"token": conf["token"]} if conf.get("token") else None)
        reader.initialize(split)
        try:
            for rows in reader:
                batch = None
                if flt is not None:
                    # each column decoded only at the rows the conditions before it kept
                    arrays, kept = flt.select(rows, rows.num_rows, names, decoder, sources, forms.get, stats)
                    if names:
                        batch = pa.RecordBatch.from_arrays(
                            arrays if kept else [pa.array([], f.type) for f in target], schema=target)
                    rows = rows.slice(0, kept)  # only its length counts from here
                if remaining is not None:
                    if remaining <= 0:
                        return
                    if rows.num_rows > remaining:
                        rows = rows.slice(0, remaining)
                        batch = None if batch is None else batch.slice(0, remaining)
                    remaining -= rows.num_rows
                if not names:
                    yield rows.select([])
                elif batch is not None:
                    yield batch
                else:
                    yield pa.RecordBatch.from_arrays(_decoded(serde, rows, names, target), schema=target)
        finally:
            for key, value in reader.get_counters().items():
                if isinstance(value, (int, float)):
                    stats[key] = stats.get(key, 0) + value
            reader.close()
