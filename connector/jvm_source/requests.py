"""The engine worker's requests, answered with the Python source's own code.

Every answer is computed by what ``format("regionscan_python")`` runs:
:class:`~connector.source.SourceConfig` parses the options,
:func:`~connector.pushdown.push_filters` translates the filters, the input
format plans (and pins) the splits, :class:`~connector.record_reader.TableBatchRecordReader`
scans them and the SerDe decodes the rows.  So both sources answer alike.
COUNT/MIN/MAX answered at planning are in :mod:`.aggregates`.
Filters arrive in the small JSON form of connector/jvm/PROTOCOL.md and are
rebuilt as pyspark's filter objects.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
from decimal import Decimal
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from serde.codecs.hbase_bytes import BinaryCodec, StringCodec
from serde.codecs.text import BinaryText, StringText, TextCodec
from serde.mapping import ColumnKind
from storage.errors import InvalidArgument

from ..decoded_filters import COMPARISONS, Column, Compare, DecodedFilter, Literal, Remainder, take_decoded, valid_divisor
from ..disjunction import And, Opaque, Or, push_tree, tree_columns
from ..explain import ScanPlan, printable, ranges_text, save_plan
from ..options import MAX_RESTARTS, SCAN_CACHEBLOCKS, conf_bool, conf_int
from ..pushdown import PushdownResult, describe_filter
from .. import raw_read
from ..record_reader import TableBatchRecordReader
from ..source import DECODED_FILTERS, PACK_SPLITS, SourceConfig
from ..splits import TableSplit
from .aggregate_spec import task_aggregation
from .protocol import pack_object, unpack_object

__all__ = ["decode_filters", "schema", "push", "save", "plan", "read_batches", "decoded_batches", "read_splits",
           "pack_splits", "task_layout", "ReadPlan"]

_EPOCH = dt.date(1970, 1, 1)
_COMPARISONS = ("EqualTo", "EqualNullSafe", "GreaterThan", "GreaterThanOrEqual", "LessThan", "LessThanOrEqual",
                "StringStartsWith", "StringEndsWith", "StringContains")


def _literal(doc: dict) -> Any:
    kind = doc.get("t")
    value = doc.get("v")
    if kind == "null":
        return None
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "date" and isinstance(value, int):
        return _EPOCH + dt.timedelta(days=value)
    if kind in ("timestamp", "timestamp_ntz") and isinstance(value, int) and not isinstance(value, bool):
        # TimestampType literals are instants (pyspark hands the Python source zoned values);
        # TimestampNTZType literals are wall clocks
        moment = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=value)
        return moment.replace(tzinfo=dt.timezone.utc) if kind == "timestamp" else moment
    if kind == "decimal" and isinstance(value, str):
        return Decimal(value)
    if kind == "binary" and isinstance(value, str):
        return base64.b64decode(value, validate=True)
    raise InvalidArgument(f"bad filter literal {json.dumps(doc)[:80]}")


def _expression(doc: Any) -> Any:
    """A ``Compare`` side: ``{"column": c}``, ``{"literal": L}`` or ``{"remainder": E, "by": k}``."""
    if isinstance(doc, dict):
        if isinstance(doc.get("column"), str):
            return Column(doc["column"])
        if isinstance(doc.get("literal"), dict):
            return Literal(_literal(doc["literal"]))
        by = doc.get("by")
        if "remainder" in doc and isinstance(by, int) and not isinstance(by, bool):
            if not valid_divisor(by):
                raise InvalidArgument(f"remainder by {by}: the divisor must be a non-zero BIGINT above its minimum")
            return Remainder(_expression(doc["remainder"]), by)
    raise InvalidArgument(f"bad filter expression {json.dumps(doc)[:80]}")


def _filter(doc: Any) -> Any:
    from pyspark.sql import datasource as ds

    if not isinstance(doc, dict):
        raise InvalidArgument(f"a filter must be a JSON object, got {json.dumps(doc)[:80]}")
    op = doc.get("op")
    if op == "Not":
        return ds.Not(_filter(doc.get("child")))
    if op in ("Or", "And"):
        children = doc.get("children")
        if not isinstance(children, list) or len(children) < 2:
            raise InvalidArgument(f"filter {op} needs a list of at least 2 children")
        return (Or if op == "Or" else And)(tuple(_filter(c) for c in children))
    if op == "Opaque":
        return Opaque(str(doc.get("text", "?"))[:200])
    if op == "Compare":
        if doc.get("cmp") not in COMPARISONS:
            raise InvalidArgument(f"filter Compare needs cmp, one of {', '.join(COMPARISONS)}")
        return Compare(doc["cmp"], _expression(doc.get("left")), _expression(doc.get("right")))
    column = doc.get("column")
    if not isinstance(column, str):
        raise InvalidArgument(f"filter {op!r} names no column")
    attribute = (column,)
    if op in ("IsNull", "IsNotNull"):
        return getattr(ds, op)(attribute)
    if op == "In":
        values = doc.get("values")
        if not isinstance(values, list):
            raise InvalidArgument("filter In needs a list of values")
        return ds.In(attribute, tuple(_literal(v) for v in values))
    if op in _COMPARISONS:
        return getattr(ds, op)(attribute, _literal(doc.get("value") or {}))
    raise InvalidArgument(f"unknown filter op {op!r}")


def decode_filters(docs: Any) -> list:
    """pyspark filter objects from the JSON filter list of a request."""
    if docs is None:
        return []
    if not isinstance(docs, list):
        raise InvalidArgument("filters must be a JSON list")
    return [_filter(d) for d in docs]


def _filter_columns(filters: list) -> set[str]:
    out: set[str] = set()
    for f in filters:
        out |= tree_columns(f)
    return out


def _pushdown(config: SourceConfig, filters: list) -> PushdownResult:
    """The filters translated for ``config``'s SerDe; those left that the worker evaluates
    exactly on decoded rows are taken too (``regionscan.pushdown.decoded``)."""
    result = push_tree(filters, config.read_serde(), config.column_filters, config.superset_filters)
    if conf_bool(config.conf, DECODED_FILTERS, True):
        known = {n.lower(): n for n in config.output_names}
        types = config.spark_arrow_schema(list(known.values()))

        def type_of(name: str) -> pa.DataType | None:
            found = known.get(name.lower())
            return None if found is None else types.field(found).type

        take_decoded(result, type_of)
    return result


def _key_names(config: SourceConfig) -> list[str]:
    return [c.name for c in config.mapping().columns if c.kind in (ColumnKind.KEY, ColumnKind.KEY_PART)]


class ReadPlan:
    """One request's configs: the columns Spark wants (``output``), and the scan (``config``):
    every mapped column, or the key alone when Spark wants nothing but the key."""

    def __init__(self, req: dict):
        self.base = SourceConfig.from_options(req.get("options") or {})
        known = {n.lower(): n for n in self.base.output_names}
        wanted = req.get("columns")
        if wanted is None:
            wanted = self.base.output_names
        if not isinstance(wanted, list):
            raise InvalidArgument("columns must be a JSON list")
        missing = [c for c in wanted if str(c).lower() not in known]
        if missing:
            raise InvalidArgument(f"columns {missing} are not in the mapping ({self.base.output_names})")
        self.output = [known[str(c).lower()] for c in wanted]
        self.filters = decode_filters(req.get("filters") or [])
        # an engine filter sees only the cells scanned: read the filtered columns too
        extra = {known[c] for c in _filter_columns(self.filters) if c in known}
        read = set(self.output) | extra
        if not read:
            read = set(_key_names(self.base))
        names = [n for n in self.base.output_names if n in read]
        keys = set(_key_names(self.base))
        self.hidden: tuple[bytes, ...] = ()  # scanned for their rows, not handed to the SerDe
        whole = names == self.base.output_names or not set(names) <= keys
        # the key alone: a keys-only scan
        self.config = self.base if whole else self.base.with_columns(names)
        self._pushdown = _pushdown(self.config, self.filters)
        # the filters evaluated on decoded rows, and the columns decoded for them alone
        self.decoded_filter: DecodedFilter | None = None
        self.filter_only: list[str] = []
        if self._pushdown.decoded:
            self.decoded_filter = DecodedFilter(self._pushdown.decoded)
            wanted_lower = {n.lower() for n in self.output}
            self.filter_only = [known[c] for c in sorted(self.decoded_filter.columns)
                                if c in known and c not in wanted_lower]
        if whole:
            # A row is a row when it has any mapped cell, also when it has none of the columns
            # read: a scan of those columns alone would drop it (select("i") losing the rows
            # where i is null, "i IS NULL" finding none).  So the cells of every mapped column
            # are scanned, and the engine hides those of the columns not decoded
            # (storage.read.hidden_columns: on dense blocks only their presence is tested).
            if self.output != self.base.output_names:
                decoded_names = self.output + self.filter_only
                decoded = set(self.base.with_columns(decoded_names or sorted(keys)).read_serde().scan_columns)
                self.hidden = tuple(c.encode() for c in self.base.read_serde().scan_columns
                                    if ":" in c and c not in decoded)

    def with_hidden(self, split: TableSplit) -> TableSplit:
        """``split`` with this read's hidden columns set on its scan."""
        if not self.hidden or split.scan is None:
            return split
        return dataclasses.replace(split, scan=dataclasses.replace(split.scan, hidden_columns=self.hidden))

    def pushdown(self) -> PushdownResult:
        """The filters translated for this read's SerDe."""
        return self._pushdown

    def input_format(self, result: PushdownResult):
        """The input format restricted by ``result``.

        Blocks are cached unless the options say not to: MapReduce leaves
        ``hbase.mapreduce.scan.cacheblocks`` off so that one bulk scan does not
        flush a region server's cache that others share, but the worker's cache
        is its own and it serves every task and query of its JVM.
        """
        engine = repr(result.engine_filter) if result.engine_filter is not None else None
        fmt = self.config.input_format(result.key_ranges, engine)
        fmt.conf.setdefault(SCAN_CACHEBLOCKS, True)
        return fmt


def schema(req: dict) -> dict:
    """The DataFrame schema (Spark DDL) of the mapping, as the Python source reports it."""
    config = SourceConfig.from_options(req.get("options") or {})
    if raw_read.is_raw(config):  # a raw read's cells (connector/raw_read.py)
        return {"ddl": raw_read.schema_ddl(config), "key_columns": _key_names(config)}
    return {"ddl": config.schema_ddl(), "key_columns": _key_names(config)}


def push(req: dict) -> dict:
    """Which filters (indexes) the engine applies exactly, and the key ranges and engine filter they make."""
    config = SourceConfig.from_options(req.get("options") or {})
    filters = decode_filters(req.get("filters"))
    if raw_read.is_raw(config):  # the pushdown speaks of mapped columns: Spark filters a raw read's cells
        return {"handled": [], "notes": ["a raw read pushes no filter"], "key_ranges": None, "engine_filter": None,
                "decoded": []}
    result = _pushdown(config, filters)
    handled = {id(f) for f in result.handled}
    return {"handled": [i for i, f in enumerate(filters) if id(f) in handled], "notes": result.notes,
            "key_ranges": ranges_text(result.key_ranges),
            "engine_filter": printable(repr(result.engine_filter)) if result.engine_filter is not None else None,
            "decoded": [printable(describe_filter(f)) for f in result.decoded]}


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


def plan(req: dict) -> dict:
    """The tasks of a read: pinned splits packed by size, each split pickled for the read request."""
    base = SourceConfig.from_options(req.get("options") or {})
    if raw_read.is_raw(base):
        if req.get("aggregate") is not None:
            raise InvalidArgument("a raw read's tasks compute no aggregate; let Spark aggregate")
        return _raw_plan(req, base)
    rp = ReadPlan(req)
    result = rp.pushdown()
    splits = rp.input_format(result).get_splits()
    summary = ScanPlan.build(rp.config, result, splits)
    if rp.output:
        summary.columns = list(rp.output)  # the columns decoded; the cells of every mapped one are scanned
    aggregation = task_aggregation(req, rp)
    if aggregation is not None:
        summary.task_aggregates = aggregation.labels()
    save_plan(rp.base, summary)  # what connector.explain(df) reads
    if conf_bool(rp.base.conf, PACK_SPLITS, True):
        tasks = pack_splits(splits, _int(req, "max_partition_bytes", 128 << 20), _int(req, "open_cost", 4 << 20),
                            max(1, _int(req, "parallelism", 1)))
    else:
        tasks = [[s] for s in splits]  # regionscan.pack.splits=false: one task per split
    if not tasks and aggregation is not None and not aggregation.group_by:
        tasks = [[]]  # one task answers the empty range's row (COUNT 0), or Spark would sum no counts to null
    out = {
        "tasks": [{"splits": [pack_object(s) for s in t],
                   "hosts": sorted({s.location for s in t}), "bytes": sum(s.size for s in t)} for t in tasks],
        "size_bytes": sum(s.size for s in splits),
        "splits": len(splits),
    }
    if req.get("task_ranges") is True:
        layout = task_layout(rp, tasks)
        if layout is not None:
            out.update(layout)
    return out


def _raw_plan(req: dict, config: SourceConfig) -> dict:
    """``plan`` of a raw read: its splits packed as any read's, no key layout reported."""
    splits = raw_read.planned_splits(config)
    if conf_bool(config.conf, PACK_SPLITS, True):
        tasks = pack_splits(splits, _int(req, "max_partition_bytes", 128 << 20), _int(req, "open_cost", 4 << 20),
                            max(1, _int(req, "parallelism", 1)))
    else:
        tasks = [[s] for s in splits]
    return {"tasks": [{"splits": [pack_object(s) for s in t], "hosts": sorted({s.location for s in t}),
                       "bytes": sum(s.size for s in t)} for t in tasks],
            "size_bytes": sum(s.size for s in splits), "splits": len(splits)}


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


def read_batches(req: dict, target: pa.Schema, stats: dict) -> Iterator[pa.RecordBatch]:
    """The task's rows as Arrow batches of ``target`` (its splits one after another).

    The request is checked now; the rows come as the iterator is consumed.
    """
    base = SourceConfig.from_options(req.get("options") or {})
    if raw_read.is_raw(base):
        names = raw_read.resolve_names(base, req.get("columns"))
        limit = req.get("limit")
        limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0 else None
        return raw_read.raw_batches(base, read_splits(req), names, target, limit, stats)
    rp = ReadPlan(req)
    splits = read_splits(req)
    return decoded_batches(rp, splits, req.get("limit"), target, stats)


def _decoded(serde, rows: pa.RecordBatch, names: list[str], target: pa.Schema) -> list[pa.Array]:
    """The SerDe's arrays of ``names``, as the types of ``target`` (its fields in that order)."""
    arrays = serde.deserialize_batch(rows, names).columns
    return [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, target)]


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
    for split in map(rp.with_hidden, splits):
        reader = TableBatchRecordReader(conf_int(conf, MAX_RESTARTS, 3, minimum=0),
                                        {"token": conf["token"]} if conf.get("token") else None)
        reader.initialize(split)
        try:
            for rows in reader:
                batch = None
                if flt is not None:
                    arrays = _decoded(serde, rows, names + extra, every)
                    keep = flt.mask(pa.RecordBatch.from_arrays(arrays, names=names + extra))
                    if names:
                        batch = pa.RecordBatch.from_arrays(arrays[:len(names)], schema=target).filter(keep)
                    rows = rows.slice(0, pc.sum(keep).as_py() or 0)  # only its length counts from here
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
