"""A read's plan, made once on the driver and carried by every task in one serialized form.

The worker's ``plan`` request parses the options (:class:`~connector.source_config.SourceConfig`,
the table's stored mapping merged in), decodes the filters, pushes them down
and prunes the columns: that is a :class:`ReadPlan`.  Its :meth:`ReadPlan.to_text`
is what the ``plan`` reply hands the JVM as ``read_plan``; the JVM puts it in
each task (``RegionScanPartition``) and each task's ``read`` request carries it
back, so a task's read starts from :meth:`ReadPlan.from_text` and does no
planning of its own: no option parsing, no stored-mapping lookup, no pushdown,
and no pyspark (filters are decoded into this module's own nodes, the output's
Arrow schema travels in the plan).  The form is specified in
connector/java/PROTOCOL.md ("The read plan") and frozen by
tests/golden/formats/read_plan/v1.txt.

Filters arrive in the small JSON form of PROTOCOL.md ("Filters");
:func:`decode_filters` turns them into nodes that answer to the same names and
fields as pyspark's filter classes (``EqualTo(attribute, value)`` ...), which
is all :mod:`connector.pushdown` and :mod:`connector.decoded_filters` look at;
:func:`filter_doc` is the way back.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

from serde.mapping import ColumnKind
from storage import InvalidArgument, StorageError
from storage.engine import FileSystem, nearest_name, pin_table, table_dir
from storage.keys import intersect

from ..decoded_filters import COMPARISONS, Column, Compare, DecodedFilter, Literal, Remainder, take_decoded, valid_divisor
from ..disjunction import And, Opaque, Or, push_tree, tree_columns
from ..options import conf_bool
from ..explain import ranges_text
from ..pushdown import PushdownResult, describe_filter
from ..scanning import is_remote_root
from .. import filter_payoff
from ..source_config import DECODED_FILTERS, DECODED_MAX_KEPT, SourceConfig
from ..stored_dates import StoredForms, serde_stored_dates
from ..splits import TableSplit

__all__ = ["PLAN_FORMAT", "PLAN_VERSION", "ReadPlan", "decode_filters", "filter_doc", "literal_doc", "key_names",
           "filters_read_values", "push_read_filters", "plan_digest",
           "EqualTo", "EqualNullSafe", "GreaterThan", "GreaterThanOrEqual", "LessThan", "LessThanOrEqual",
           "StringStartsWith", "StringEndsWith", "StringContains", "In", "IsNull", "IsNotNull", "Not"]

PLAN_FORMAT = "regionscan-read-plan"
PLAN_VERSION = 1
_EPOCH = dt.date(1970, 1, 1)
_EPOCH_TIME = dt.datetime(1970, 1, 1)


# -- filter nodes: pyspark's filter classes' names and fields, without pyspark ---------------


@dataclass(frozen=True)
class EqualTo:
    """``attribute = value``."""

    attribute: tuple[str, ...]
    value: Any


@dataclass(frozen=True)
class EqualNullSafe:
    """``attribute <=> value``."""

    attribute: tuple[str, ...]
    value: Any


@dataclass(frozen=True)
class GreaterThan:
    """``attribute > value``."""

    attribute: tuple[str, ...]
    value: Any


@dataclass(frozen=True)
class GreaterThanOrEqual:
    """``attribute >= value``."""

    attribute: tuple[str, ...]
    value: Any


@dataclass(frozen=True)
class LessThan:
    """``attribute < value``."""

    attribute: tuple[str, ...]
    value: Any


@dataclass(frozen=True)
class LessThanOrEqual:
    """``attribute <= value``."""

    attribute: tuple[str, ...]
    value: Any


@dataclass(frozen=True)
class StringStartsWith:
    """``attribute LIKE 'value%'``."""

    attribute: tuple[str, ...]
    value: str


@dataclass(frozen=True)
class StringEndsWith:
    """``attribute LIKE '%value'``."""

    attribute: tuple[str, ...]
    value: str


@dataclass(frozen=True)
class StringContains:
    """``attribute LIKE '%value%'``."""

    attribute: tuple[str, ...]
    value: str


@dataclass(frozen=True)
class In:
    """``attribute IN (value...)``."""

    attribute: tuple[str, ...]
    value: tuple


@dataclass(frozen=True)
class IsNull:
    """``attribute IS NULL``."""

    attribute: tuple[str, ...]


@dataclass(frozen=True)
class IsNotNull:
    """``attribute IS NOT NULL``."""

    attribute: tuple[str, ...]


@dataclass(frozen=True)
class Not:
    """``NOT child``."""

    child: Any


_VALUED = {c.__name__: c for c in (EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan,
                                    LessThanOrEqual, StringStartsWith, StringEndsWith, StringContains)}
_NULL_TESTS = {c.__name__: c for c in (IsNull, IsNotNull)}


# -- the JSON form (PROTOCOL.md, "Filters") -> nodes, and back --------------------------------


def _literal(doc: Any) -> Any:
    kind = doc.get("t") if isinstance(doc, dict) else None
    value = doc.get("v") if isinstance(doc, dict) else None
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
    if kind == "date" and isinstance(value, int) and not isinstance(value, bool):
        return _EPOCH + dt.timedelta(days=value)
    if kind in ("timestamp", "timestamp_ntz") and isinstance(value, int) and not isinstance(value, bool):
        # TimestampType literals are instants (pyspark hands the Python source zoned values);
        # TimestampNTZType literals are wall clocks
        moment = _EPOCH_TIME + dt.timedelta(microseconds=value)
        return moment.replace(tzinfo=dt.timezone.utc) if kind == "timestamp" else moment
    if kind == "decimal" and isinstance(value, str):
        return Decimal(value)
    if kind == "binary" and isinstance(value, str):
        return base64.b64decode(value, validate=True)
    raise InvalidArgument(f"bad filter literal {json.dumps(doc, default=str)[:80]}")


def _micros(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def literal_doc(value: Any) -> dict:
    """The tagged literal of a Python value as filters carry them (the inverse of decoding one)."""
    if value is None:
        return {"t": "null"}
    if isinstance(value, bool):
        return {"t": "bool", "v": value}
    if isinstance(value, int):
        return {"t": "int", "v": value}
    if isinstance(value, float):
        return {"t": "float", "v": value}
    if isinstance(value, str):
        return {"t": "string", "v": value}
    if isinstance(value, (bytes, bytearray)):
        return {"t": "binary", "v": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Decimal):
        return {"t": "decimal", "v": format(value, "f")}
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return {"t": "timestamp", "v": _micros(value.astimezone(dt.timezone.utc).replace(tzinfo=None) - _EPOCH_TIME)}
        return {"t": "timestamp_ntz", "v": _micros(value - _EPOCH_TIME)}
    if isinstance(value, dt.date):
        return {"t": "date", "v": (value - _EPOCH).days}
    raise InvalidArgument(f"a filter literal of type {type(value).__name__} has no tagged form")


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
    raise InvalidArgument(f"bad filter expression {json.dumps(doc, default=str)[:80]}")


def _expression_doc(e: Any) -> dict:
    if isinstance(e, Column):
        return {"column": e.name}
    if isinstance(e, Literal):
        return {"literal": literal_doc(e.value)}
    if isinstance(e, Remainder):
        return {"remainder": _expression_doc(e.operand), "by": e.divisor}
    raise InvalidArgument(f"a filter expression {e!r} has no JSON form")


def _filter(doc: Any) -> Any:
    if not isinstance(doc, dict):
        raise InvalidArgument(f"a filter must be a JSON object, got {json.dumps(doc, default=str)[:80]}")
    op = doc.get("op")
    if op == "Not":
        return Not(_filter(doc.get("child")))
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
    if op in _NULL_TESTS:
        return _NULL_TESTS[op](attribute)
    if op == "In":
        values = doc.get("values")
        if not isinstance(values, list):
            raise InvalidArgument("filter In needs a list of values")
        return In(attribute, tuple(_literal(v) for v in values))
    if op in _VALUED:
        return _VALUED[op](attribute, _literal(doc.get("value") or {}))
    raise InvalidArgument(f"unknown filter op {op!r}")


def decode_filters(docs: Any) -> list:
    """Filter nodes from the JSON filter list of a request (PROTOCOL.md, "Filters")."""
    if docs is None:
        return []
    if not isinstance(docs, list):
        raise InvalidArgument("filters must be a JSON list")
    return [_filter(d) for d in docs]


def filter_doc(f: Any) -> dict:
    """The JSON form of a filter: one of this module's nodes, a pyspark filter object (the same
    names and fields), a :class:`~connector.decoded_filters.Compare` or an And/Or/Opaque tree."""
    if isinstance(f, (Or, And)):
        return {"op": type(f).__name__, "children": [filter_doc(c) for c in f.children]}
    if isinstance(f, Opaque):
        return {"op": "Opaque", "text": f.text}
    if isinstance(f, Compare):
        return {"op": "Compare", "cmp": f.op, "left": _expression_doc(f.left), "right": _expression_doc(f.right)}
    kind = type(f).__name__
    if kind == "Not":
        return {"op": "Not", "child": filter_doc(f.child)}
    attribute = getattr(f, "attribute", None)
    if not isinstance(attribute, tuple) or len(attribute) != 1:
        raise InvalidArgument(f"filter {kind} has no single column")
    if kind in _NULL_TESTS:
        return {"op": kind, "column": attribute[0]}
    if kind == "In":
        return {"op": "In", "column": attribute[0], "values": [literal_doc(v) for v in f.value]}
    if kind in _VALUED:
        return {"op": kind, "column": attribute[0], "value": literal_doc(f.value)}
    raise InvalidArgument(f"filter {kind} has no JSON form")


# -- the plan ----------------------------------------------------------------------------------


def key_names(config: SourceConfig) -> list[str]:
    """The mapping's row-key columns, in mapping order."""
    return [c.name for c in config.mapping().columns if c.kind in (ColumnKind.KEY, ColumnKind.KEY_PART)]


def filters_read_values(config: SourceConfig, filters: list) -> bool:
    """Whether ``filters`` name a mapped column outside the row key: a read of key columns alone
    then scans every mapped column too (:meth:`ReadPlan.from_request`), so the plan of every
    mapped column narrows to it (PROTOCOL.md, "push": ``key_reads_narrow``)."""
    known = {n.lower(): n for n in config.output_names}
    keys = set(key_names(config))
    return any(c in known and known[c] not in keys for f in filters for c in tree_columns(f))


def push_read_filters(config: SourceConfig, filters: list, decide: bool = False) -> PushdownResult:
    """The filters translated for ``config``'s SerDe; those left that the worker evaluates
    exactly on decoded rows are taken too (``regionscan.pushdown.decoded``), except the plain
    comparisons that would keep most rows (:mod:`connector.filter_payoff`): ``decide`` samples
    the table to find them (the ``push`` request), else the last push's decisions are followed."""
    result = push_tree(filters, config.read_serde(), config.column_filters, config.superset_filters)
    if conf_bool(config.conf, DECODED_FILTERS, True):
        known = {n.lower(): n for n in config.output_names}
        types = config.spark_arrow_schema(list(known.values()))

        def type_of(name: str) -> pa.DataType | None:
            found = known.get(name.lower())
            return None if found is None else types.field(found).type

        take_decoded(result, type_of)
        read = _read_key(config)
        if decide and result.decoded:
            max_kept = _max_kept(config)
            snapshot = _pinned(config)
            filter_payoff.decide(result, read, max_kept,
                                 lambda names: _sample(config, result, [known[n] for n in names], snapshot),
                                 _sample_state(result, read, snapshot), _stored_forms(config))
        elif result.decoded:
            filter_payoff.follow(result, read)
    return result


def _stored_forms(config: SourceConfig) -> StoredForms:
    """The columns of ``config``'s SerDe whose date comparisons the worker tests on stored cells."""
    forms = serde_stored_dates(config.read_serde())
    return lambda name: forms.get(name.lower())


def _read_key(config: SourceConfig) -> tuple:
    """What identifies a read's filter decisions: its options but the pruned columns."""
    return tuple(kv for kv in config.options if kv[0] != "regionscan.columns")


def _pinned(config: SourceConfig) -> Any:  # storage.engine.pin_table's snapshot, or None
    """The read's table pinned now (its regions' store files, generations and WAL positions);
    None when its files are not seen from here (a region server's root, a table that cannot be
    pinned: the sample then meets the same problem and decides nothing, see
    :func:`connector.filter_payoff.kept_shares`)."""
    if is_remote_root(config.root):
        return None
    try:
        return pin_table(FileSystem(config.root).sub(table_dir(config.table)))
    except (StorageError, OSError):
        return None


def _sample_state(result: PushdownResult, read: tuple, snapshot: Any) -> tuple | None:
    """What a payoff sample's shares depend on: the read, the rows it scans (key ranges, engine
    filter, decoded filters) and the table's exact contents, i.e. each region's store files,
    manifest generation and WAL position, so any flush, compaction, bulk load or write changes
    it.  None without a ``snapshot``: the sample is then taken on every push."""
    if snapshot is None:
        return None
    table = (snapshot.table_generation, tuple((p.region_id, p.generation, p.files, p.wal_files, p.flushed_seq_id,
                                               p.max_seq_id, p.staged) for p in snapshot.regions))
    scanned = (str(ranges_text(result.key_ranges)), repr(result.engine_filter),
               tuple(sorted(describe_filter(f) for f in result.decoded)))
    return read, scanned, table


def _max_kept(config: SourceConfig) -> float:
    text = config.conf.get(DECODED_MAX_KEPT)
    if text is None:
        return filter_payoff.DEFAULT_MAX_KEPT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"{DECODED_MAX_KEPT} must be a share between 0 and 1 (1 keeps every decoded "
                              f"filter in the worker), got {text!r}")
    return value


def _sample(config: SourceConfig, result: PushdownResult, names: list[str],
            snapshot: Any = None) -> list[pa.RecordBatch]:
    """The first rows of up to ``filter_payoff.SAMPLE_SPLITS`` splits of the read, spread over
    its key space, decoded as Spark reads ``names`` (at most ``filter_payoff.SAMPLE_ROWS`` rows).

    Regions are cut at block-index keys only as far as needed for that many splits (``snapshot``
    counts the scanned regions): cutting opens each region's store file index, which a read
    with as many regions as sampled splits does not need."""
    from ..options import PIN_REGISTER, SCAN_CACHEBLOCKS, SCAN_CACHEDROWS, SPLITS_PER_REGION
    from ..record_reader import TableBatchRecordReader

    cfg = config.with_columns(names)
    engine = repr(result.engine_filter) if result.engine_filter is not None else None
    fmt = cfg.input_format(result.key_ranges, engine)
    fmt.conf[PIN_REGISTER] = False  # planning only: no pin file
    fmt.conf[SCAN_CACHEDROWS] = filter_payoff.SAMPLE_BATCH
    # cut at block-index keys: rows from across a region
    fmt.conf[SPLITS_PER_REGION] = _pieces_per_region(fmt, snapshot)
    fmt.conf.setdefault(SCAN_CACHEBLOCKS, True)  # the query reads these blocks next
    splits = fmt.get_splits()
    if len(splits) > filter_payoff.SAMPLE_SPLITS:
        step = len(splits) / filter_payoff.SAMPLE_SPLITS
        splits = [splits[int(i * step)] for i in range(filter_payoff.SAMPLE_SPLITS)]
    serde = cfg.read_serde()
    target = cfg.spark_arrow_schema(names)
    out: list[pa.RecordBatch] = []
    rows = 0
    for split in splits:
        reader = TableBatchRecordReader(0, {"token": cfg.conf["token"]} if cfg.conf.get("token") else None)
        reader.initialize(split)
        try:
            stored = next(iter(reader), None)
        finally:
            reader.close()
        if stored is None or not stored.num_rows:
            continue
        decoded = serde.deserialize_batch(stored, names)
        arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(decoded.columns, target)]
        out.append(pa.RecordBatch.from_arrays(arrays, schema=target))
        rows += stored.num_rows
        if rows >= filter_payoff.SAMPLE_ROWS:
            break
    return out


def _pieces_per_region(fmt: Any, snapshot: Any) -> int:
    """Splits per scanned region for the payoff sample: enough for ``SAMPLE_SPLITS`` in all."""
    if snapshot is None:
        return filter_payoff.SAMPLE_SPLITS
    spans = fmt.scan_spec().spans()
    scanned = sum(1 for p in snapshot.regions if intersect(spans, [(p.start, p.end)]))
    return max(1, -(-filter_payoff.SAMPLE_SPLITS // max(1, scanned)))


def _filter_only(known: dict[str, str], decoded: list, output: list[str]) -> list[str]:
    """The columns decoded for the ``decoded`` filters alone (not in ``output``), in name order."""
    wanted = {n.lower() for n in output}
    columns: set[str] = set()
    for f in decoded:
        columns |= tree_columns(f)
    return [known[c] for c in sorted(columns) if c in known and c not in wanted]


def _hidden(base: SourceConfig, output: list[str], filter_only: list[str]) -> tuple[bytes, ...]:
    """The stored columns of a scan of every mapped column that the engine hides: those not decoded.

    A row is a row when it has any mapped cell, also when it has none of the columns read: a
    scan of those columns alone would drop it (select("i") losing the rows where i is null,
    "i IS NULL" finding none).  So the cells of every mapped column are scanned, and the
    engine hides those of the columns not decoded (storage.read.hidden_columns: on dense
    blocks only their presence is tested)."""
    if output == base.output_names:
        return ()
    decoded_names = output + filter_only
    decoded = set(base.with_columns(decoded_names or sorted(key_names(base))).read_serde().scan_columns)
    return tuple(c.encode() for c in base.read_serde().scan_columns if ":" in c and c not in decoded)


def plan_digest(body: dict) -> str:
    """The digest of a plan's JSON body (every field but ``digest``): 32 hex digits of its canonical SHA-256."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()[:32]


def _schema_text(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def _plan_error(why: str) -> InvalidArgument:
    return InvalidArgument(f"a task's read plan {why}; plan the query again (connector/java/PROTOCOL.md, \"The read plan\")")


def _names(doc: dict, key: str) -> list[str]:
    value = doc.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _plan_error(f"has no list of names {key!r}")
    return value


class ReadPlan:
    """A read's plan: the options (``base``), the columns Spark wants (``output``), the scan
    (``config``: every mapped column, or the key alone when Spark wants nothing but the key),
    the columns the engine hides, the filters evaluated on decoded rows, the aggregate, the
    limit and the Arrow schema of what the tasks return (``target``).

    Made on the driver by :meth:`from_request` (the pushdown result is kept there, as
    ``pushdown``); a task gets it back by :meth:`from_text`, with no planning."""

    def __init__(self, base: SourceConfig, output: list[str], scan_columns: list[str] | None,
                 hidden: tuple[bytes, ...], decoded: list, filter_only: list[str], target: pa.Schema | None,
                 aggregate: Any = None, limit: int | None = None, raw: bool = False,
                 pushdown: PushdownResult | None = None, table: str | None = None):
        self.base = base
        self.table = base.table if table is None else table  # what every split of the read scans
        self.output = output
        self.config = base if scan_columns is None else base.with_columns(scan_columns)
        self.scan_columns = scan_columns
        self.hidden = hidden  # scanned for their rows, not handed to the SerDe
        self.decoded_filter = DecodedFilter(decoded) if decoded else None
        self.filter_only = filter_only  # columns decoded for the decoded filter alone
        self.target = target
        self.aggregate = aggregate
        self.limit = limit
        self.raw = raw
        self._pushdown = pushdown

    @classmethod
    def from_request(cls, req: dict, target: pa.Schema | None = None,
                     pushed: PushdownResult | None = None) -> "ReadPlan":
        """Plan a read from a request's ``options``, ``columns``, ``filters``, ``aggregate``
        and ``limit`` (``target``: the Arrow schema of what the tasks return).  ``pushed``: these
        filters as the ``push`` that plans this read translated them for every mapped column,
        taken instead of translating them again when the read scans every mapped column."""
        base = SourceConfig.from_options(req.get("options") or {})
        limit = req.get("limit")
        limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0 else None
        aggregate = req.get("aggregate")
        from .. import raw_read  # a raw read's own names (connector/raw_read.py)

        if raw_read.is_raw(base):
            names = raw_read.resolve_names(base, req.get("columns"))
            return cls(base, names, None, (), [], [], target, aggregate, limit, raw=True)
        known = {n.lower(): n for n in base.output_names}
        wanted = req.get("columns")
        if wanted is None:
            wanted = base.output_names
        if not isinstance(wanted, list):
            raise InvalidArgument("columns must be a JSON list")
        missing = [c for c in wanted if str(c).lower() not in known]
        if missing:
            raise InvalidArgument(f"columns {missing} are not in the mapping ({base.output_names})")
        output = [known[str(c).lower()] for c in wanted]
        filters = decode_filters(req.get("filters") or [])
        # an engine filter sees only the cells scanned: read the filtered columns too
        extra = {known[c] for f in filters for c in tree_columns(f) if c in known}
        keys = key_names(base)
        read = (set(output) | extra) or set(keys)
        names = [n for n in base.output_names if n in read]
        whole = names == base.output_names or not set(names) <= set(keys)
        # the key alone: a keys-only scan
        config = base if whole else base.with_columns(names)
        result = pushed if pushed is not None and whole else push_read_filters(config, filters)
        filter_only = _filter_only(known, result.decoded, output)
        hidden = _hidden(base, output, filter_only) if whole else ()
        return cls(base, output, None if whole else names, hidden, list(result.decoded), filter_only, target,
                   aggregate, limit, pushdown=result)

    def narrowed(self, columns: Any, limit: Any = None) -> "ReadPlan":
        """This plan, made for every mapped column (the ``push`` reply's, PROTOCOL.md "push"),
        for a read of ``columns`` alone (Spark's pruned top-level names) and at most ``limit``
        rows per task: the same scan, decoded filters and splits, the other columns hidden.

        It is :meth:`from_request`'s plan for those columns wherever that scans every mapped
        column (the JVM plans reads of key columns alone with a ``plan`` request instead), and
        costs no pushdown, option parsing or pyspark: the output's Arrow fields are taken from
        this plan's."""
        if self.raw or self.aggregate is not None or self.scan_columns is not None or self.hidden \
                or self.limit is not None or list(self.output) != list(self.base.output_names):
            raise _plan_error("narrowed to columns must be the plan of every mapped column, with no aggregate or limit")
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise _plan_error("is narrowed by a list of column names")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise _plan_error(f"is narrowed with a bad limit {limit!r}")
        known = {n.lower(): n for n in self.base.output_names}
        missing = [c for c in columns if c.lower() not in known]
        if missing:
            hint = nearest_name(missing[0], self.base.output_names)
            raise _plan_error(f"has no column {missing[0]!r} ("
                              + (f"did you mean {hint}?)" if hint else f"columns: {', '.join(self.base.output_names)})"))
        output = [known[c.lower()] for c in columns]
        fields = {f.name.lower(): f for f in self.target}
        target = pa.schema([fields[n.lower()] for n in output])
        decoded = [] if self.decoded_filter is None else list(self.decoded_filter.filters)
        filter_only = _filter_only(known, decoded, output)
        return ReadPlan(self.base, output, None, _hidden(self.base, output, filter_only), decoded, filter_only,
                        target, None, limit, table=self.table)

    def with_hidden(self, split: TableSplit) -> TableSplit:
        """``split`` with this read's hidden columns set on its scan."""
        if not self.hidden or split.scan is None:
            return split
        return dataclasses.replace(split, scan=dataclasses.replace(split.scan, hidden_columns=self.hidden))

    def check_splits(self, splits: list[TableSplit]) -> list[TableSplit]:
        """``splits``, each checked to be of this plan's table; one line naming the first that is not."""
        for split in splits:
            if split.table != self.table:
                raise _plan_error(f"is for table {self.table}, not for the split of table {split.table} sent with it")
        return splits

    def pushdown(self) -> PushdownResult:
        """The filters translated for this read's SerDe (on the driver, where the plan was made)."""
        if self._pushdown is None:
            raise InvalidArgument("a task's read plan carries no pushdown result (it is the driver's)")
        return self._pushdown

    def input_format(self, result: PushdownResult):
        """The input format restricted by ``result``.

        Blocks are cached unless the options say not to: MapReduce leaves
        ``hbase.mapreduce.scan.cacheblocks`` off so that one bulk scan does not
        flush a region server's cache that others share, but the worker's cache
        is its own and it serves every task and query of its JVM.
        """
        from ..options import SCAN_CACHEBLOCKS

        engine = repr(result.engine_filter) if result.engine_filter is not None else None
        fmt = self.config.input_format(result.key_ranges, engine)
        fmt.conf.setdefault(SCAN_CACHEBLOCKS, True)
        return fmt

    def splits(self, result: PushdownResult) -> list[TableSplit]:
        """The read's pinned splits (:meth:`input_format`'s).  When the options do not say
        whether to cache blocks and the splits hold more than the block cache should take
        for one scan (:func:`storage.engine.scan_keeps_blocks`: a quarter of it), none of
        them caches blocks: a table larger than the worker's cache, read again and again,
        would otherwise evict the cache's working set and then its own blocks, each before
        its next read, and find none of them (HBase's big scans skip its block cache)."""
        from storage.engine import scan_keeps_blocks

        from ..options import SCAN_CACHEBLOCKS

        splits = self.input_format(result).get_splits()
        if result.prune_filter is not None:  # the engine skips row groups the decoded comparisons rule out
            prune = repr(result.prune_filter)
            splits = [dataclasses.replace(s, scan=s.scan.with_request(prune_filter=prune))
                      if s.scan is not None else s for s in splits]
        if SCAN_CACHEBLOCKS in self.config.conf or scan_keeps_blocks(sum(s.size for s in splits)):
            return splits
        return [dataclasses.replace(s, scan=dataclasses.replace(s.scan, cache_blocks=False))
                if s.scan is not None else s for s in splits]

    # -- the serialized form (PROTOCOL.md, "The read plan") -------------------------------------

    def to_doc(self) -> dict:
        """The plan as the JSON object of its serialized form (its ``digest`` included)."""
        if self.target is None:
            raise InvalidArgument("a read plan needs the Arrow schema of what its tasks return")
        body = {
            "format": PLAN_FORMAT,
            "v": PLAN_VERSION,
            "kind": "raw" if self.raw else "rows",
            "table": self.table,
            "options": [list(kv) for kv in self.base.options],
            "output": list(self.output),
            "scan_columns": None if self.scan_columns is None else list(self.scan_columns),
            "hidden": [c.decode("utf-8") for c in self.hidden],
            "decoded": [] if self.decoded_filter is None else [filter_doc(f) for f in self.decoded_filter.filters],
            "filter_only": list(self.filter_only),
            "aggregate": self.aggregate,
            "limit": self.limit,
            "arrow_schema": _schema_text(self.target),
        }
        return {**body, "digest": plan_digest(body)}

    def to_text(self) -> str:
        """The serialized form: canonical JSON (sorted keys, no spaces) of :meth:`to_doc`."""
        return json.dumps(self.to_doc(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_text(cls, text: Any) -> "ReadPlan":
        """The plan :meth:`to_text` serialized; one line saying what is wrong with any other text."""
        if not isinstance(text, str):
            raise _plan_error(f"must be the text the plan reply gave, got {type(text).__name__}")
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _plan_error(f"is not JSON ({exc.msg} at character {exc.pos})") from None
        if not isinstance(doc, dict) or doc.get("format") != PLAN_FORMAT:
            raise _plan_error(f"is not a {PLAN_FORMAT} (format {doc.get('format') if isinstance(doc, dict) else None!r})")
        if doc.get("v") != PLAN_VERSION:
            raise _plan_error(f"has version {doc.get('v')!r}; this worker reads version {PLAN_VERSION}")
        body = {k: v for k, v in doc.items() if k != "digest"}
        if doc.get("digest") != plan_digest(body):
            raise _plan_error("is corrupted: its digest does not match its content")
        if doc.get("kind") not in ("rows", "raw"):
            raise _plan_error(f"has kind {doc.get('kind')!r}, not rows or raw")
        options = doc.get("options")
        if not isinstance(options, list) or not all(
                isinstance(kv, list) and len(kv) == 2 and all(isinstance(x, str) for x in kv) for kv in options):
            raise _plan_error("has no options (a list of [name, value] strings)")
        scan_columns = doc.get("scan_columns")
        if scan_columns is not None:
            scan_columns = _names(doc, "scan_columns")
        limit = doc.get("limit")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise _plan_error(f"has a bad limit {limit!r}")
        try:
            target = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(doc.get("arrow_schema") or "", validate=True)))
        except (ValueError, TypeError, pa.ArrowInvalid) as exc:
            raise _plan_error(f"has no Arrow schema ({str(exc).splitlines()[0] if str(exc) else 'empty'})") from None
        decoded = doc.get("decoded")
        if not isinstance(decoded, list):
            raise _plan_error("has no list of decoded filters")
        if not isinstance(doc.get("table"), str):
            raise _plan_error("names no table")
        base = SourceConfig(tuple((k, v) for k, v in options))
        return cls(base, _names(doc, "output"), scan_columns, tuple(c.encode() for c in _names(doc, "hidden")),
                   decode_filters(decoded), _names(doc, "filter_only"), target, doc.get("aggregate"), limit,
                   raw=doc["kind"] == "raw", table=doc["table"])
