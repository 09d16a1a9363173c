"""Spark filters -> row-key ranges, point gets and engine filters.

Spark hands a Python data source its filters one conjunct at a time
(``EqualTo``, ``GreaterThan``, ``In``, ``IsNull``, ``StringStartsWith``,
``Not`` ...; see ``pyspark.sql.datasource``).  Each one is translated if the
stored bytes allow it (see :mod:`connector.keyspace`):

* on the row key, or on the parts of a composite key in key order, into
  key ranges: equalities and IN lists become point gets (a cross product
  over leading parts, up to :data:`~connector.keyspace.MAX_POINTS` keys),
  and one range on the next part becomes a key range under each prefix;
* on a single-cell column of strings or binaries, into a
  ``SingleColumnValueFilter`` with a binary comparator (``utf8:``-checked on a
  ``STRING`` column, so a cell that is not text fails the scan; ``filter_if_missing``,
  so a missing cell reads as null and fails the comparison as in SQL), or a
  small FilterList of them.  ``IS NOT NULL`` alone stays with Spark (cheaper
  there than an engine pass), unless another exact filter on the column
  already implies it.  Fixed-width values and text numbers are compared once
  decoded (:func:`compares_as_bytes`): their cells may hold bytes of another
  encoding, which must fail the read rather than be dropped unread.

A filter is reported as handled only if the translation selects exactly
the rows Spark would keep; every other filter goes back to Spark, which
checks it again, even when it still narrows the scan (key ranges from a
later composite-key part, and with ``superset`` a case-insensitive
substring filter for ``LIKE '%x%'``).

Filters are matched by class name and fields, so this module needs no
Spark installation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from serde.codecs.text import TextCodec
from serde.mapping import ColumnKind
from storage.filters import (
    BinaryComparator,
    Filter,
    FilterList,
    SingleColumnValueFilter,
    SubstringComparator,
)
from storage.filters import Comparator, Utf8Comparator
from storage.keys import KeyRange, key_after, prefix_stop

from .keyspace import Interval, KeyLayout, ValueOrder, encode_literal, intersect_intervals, literal_spec, value_order

__all__ = ["PushdownResult", "push_filters", "describe_filter", "compares_as_bytes", "PUSHABLE_SERDES"]

PUSHABLE_SERDES = ("binary", "string")
"""SerDes whose cells hold one value each in a codec of :mod:`serde.codecs`."""

_NO_FORM = object()  # the literal has the column's type but no stored form: it matches nothing
_OPS = {
    "EqualTo": "=",
    "EqualNullSafe": "<=>",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "In": "IN",
    "StringStartsWith": "STARTS WITH",
    "StringEndsWith": "ENDS WITH",
    "StringContains": "CONTAINS",
}


def describe_filter(f: Any) -> str:
    """A short SQL-like rendering of a Spark filter object."""
    describe = getattr(f, "describe", None)
    if callable(describe):
        return describe()  # an OR/AND tree (connector.disjunction)
    kind = type(f).__name__
    if kind == "Not":
        return f"NOT ({describe_filter(f.child)})"
    name = ".".join(getattr(f, "attribute", ("?",)))
    if kind == "IsNull":
        return f"{name} IS NULL"
    if kind == "IsNotNull":
        return f"{name} IS NOT NULL"
    if kind == "In":
        return f"{name} IN ({', '.join(repr(v) for v in f.value)})"
    return f"{name} {_OPS.get(kind, kind)} {getattr(f, 'value', '')!r}"


@dataclass
class PushdownResult:
    """What a set of Spark filters became.

    ``key_ranges`` (None: the key is not restricted) and ``engine_filter``
    narrow the scan; ``handled`` are the filters they apply exactly, and
    ``decoded`` those of them the JVM source's worker evaluates on the decoded
    rows (:mod:`connector.decoded_filters`); ``residual`` go back to Spark.
    ``notes`` explain each decision.
    """

    key_ranges: list[KeyRange] | None = None
    engine_filter: Filter | None = None
    handled: list = field(default_factory=list)
    residual: list = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    decoded: list = field(default_factory=list)
    # engine filters that decide no row but let the engine skip row groups whose value bounds
    # rule out a comparison left to the decoded values (storage/read/block_pruning.py)
    prune_filter: Filter | None = None

    @property
    def point_gets(self) -> int:
        """How many of the key ranges are single rows."""
        return sum(1 for lo, hi in self.key_ranges or () if hi == key_after(lo))


def _literal(codec, type_name: str, value: Any):
    """raw bytes, _NO_FORM (right type, cannot be stored, so it matches nothing) or None."""
    raw = encode_literal(codec, type_name, value)
    if raw is not None:
        return raw
    spec = literal_spec(type_name)
    if spec is None or encode_literal(codec, type_name, spec.sample) is None:
        return None  # the codec cannot encode even a plain value of this type: say nothing
    if spec.accepts_literal(value):
        return _NO_FORM
    return None


def _value_intervals(order: ValueOrder, codec, type_name: str, f: Any) -> list[Interval] | None:
    """Encoded-value intervals equal to a comparison filter, or None when not exact."""
    kind = type(f).__name__
    if kind in ("EqualTo", "EqualNullSafe", "GreaterThan", "GreaterThanOrEqual", "LessThan", "LessThanOrEqual"):
        raw = _literal(codec, type_name, f.value)
        if raw is None:
            return None
        if raw is _NO_FORM:
            return [] if kind in ("EqualTo", "EqualNullSafe") else None
        if kind in ("EqualTo", "EqualNullSafe"):
            return [Interval.point(raw)]
        if kind == "GreaterThan":
            return Interval.between(order, raw, False, None, False)
        if kind == "GreaterThanOrEqual":
            return Interval.between(order, raw, True, None, False)
        if kind == "LessThan":
            return Interval.between(order, None, False, raw, False)
        return Interval.between(order, None, False, raw, True)
    if kind == "In":
        # a set, not a scan of the list per value: a runtime filter's IN list has thousands
        raws: set[bytes] = set()
        for v in f.value:
            if v is None:
                continue  # x IN (.., NULL) is never true because of the NULL
            raw = _literal(codec, type_name, v)
            if raw is None:
                return None
            if raw is not _NO_FORM:
                raws.add(raw)
        return [Interval.point(raw) for raw in sorted(raws)]
    if kind == "StringStartsWith" and type_name == "string" and order.kind == "bytes" and isinstance(f.value, str):
        raw = f.value.encode("utf-8")  # UTF-8 keeps prefixes: a string prefix is a byte prefix
        if not raw:
            return [Interval(None, True, None, True)]
        return [Interval(raw, True, prefix_stop(raw), False)]
    return None


def compares_as_bytes(codec) -> bool:
    """Whether an engine filter may test a cell column's stored bytes in place of its values.

    Only for a variable-length ``bytes`` order (strings and binaries): a fixed-width value (a
    binary ``INT``, ``DOUBLE``, ``DATE`` ...) or a text number may be the bytes of another
    encoding (``"42"`` under a binary ``INT``), and an engine filter would drop such a row
    without decoding it, answering as if the bytes fitted the type.  Filters on those columns
    compare decoded values instead (the JVM source's worker, else Spark), so a cell that does
    not fit fails the read with the SerDe's decode error.
    """
    return codec is not None and codec.fixed_width is None and getattr(codec, "byte_order", None) == "bytes"


def _block_skip(col: _Column, f: Any) -> Filter | None:
    """The byte-range form of a comparison on a fixed-width column compared once decoded, used
    only to skip row groups (``PushdownResult.prune_filter``), or None.

    The block bounds compare unsigned bytes, so the value range must become byte ranges: an
    ordered encoding keeps the order, a signed big-endian one (the binary SerDe's INT, BIGINT,
    DATE, TIMESTAMP) has its negative half above its positive half, so a range across zero is two
    byte ranges (:meth:`~connector.keyspace.Interval.between`).  The engine judges only chunks
    whose values all have the literal's width, so a cell of another encoding is still read and
    fails the read when decoded."""
    if col.order is None or col.codec is None or col.codec.fixed_width is None:
        return None
    if type(f).__name__ not in ("EqualTo", "GreaterThan", "GreaterThanOrEqual", "LessThan", "LessThanOrEqual", "In"):
        return None
    intervals = _value_intervals(col.order, col.codec, col.type_name, f)
    if not intervals:  # None: no exact byte form; []: no stored form, nothing to judge bounds by
        return None
    return _CellFilters(col).from_intervals(intervals)


def _null_marker(codec) -> bytes | None:
    if isinstance(codec, TextCodec) and codec.reads_null_sequence:
        return codec.null
    return None


class _Column:
    """A mapped column a filter may name: its spec, codec and order."""

    def __init__(self, spec, codec):
        self.spec = spec
        self.codec = codec
        self.type_name = spec.type.name
        self.order = value_order(codec) if codec is not None else None


class _CellFilters:
    """Builds SingleColumnValueFilters for one single-cell column."""

    def __init__(self, column: _Column):
        self.col = column
        spec = column.spec
        self.family = spec.family.encode()
        self.qualifier = spec.qualifier.encode()
        self.marker = _null_marker(column.codec)
        # value-independent tests (IS NULL) need to know every way a present cell can read as null
        self.null_known = column.order is not None or isinstance(column.codec, TextCodec)

    def scvf(self, op: str, raw: bytes, if_missing: bool = True) -> SingleColumnValueFilter:
        """``SingleColumnValueFilter(family, qualifier, op, binary:raw)``."""
        return SingleColumnValueFilter(self.family, self.qualifier, op, self._checked(BinaryComparator(raw)),
                                       filter_if_missing=if_missing)

    def _checked(self, comparator: Comparator) -> Comparator:
        """A STRING column's comparator wrapped in ``utf8:``: the engine tests the stored bytes,
        and a cell that is not valid UTF-8 (which a read of the column refuses) must fail the
        scan there rather than be dropped unread."""
        return Utf8Comparator(comparator) if self.col.type_name == "string" else comparator

    def nothing(self) -> Filter:
        """A filter no row passes."""
        return self.scvf("<", b"")  # no stored bytes are below the empty string

    def present(self) -> Filter:
        """Rows whose cell is present and does not read as null."""
        if self.marker is not None:
            return self.scvf("!=", self.marker)
        return self.scvf(">=", b"")

    def absent(self) -> Filter:
        """Rows whose cell is missing or reads as null."""
        missing = self.scvf("<", b"", if_missing=False)
        if self.marker is None:
            return missing
        return FilterList.join("MUST_PASS_ONE", missing, self.scvf("=", self.marker))

    def _not_null(self, flt: Filter) -> Filter:
        if self.marker is None:
            return flt
        return FilterList.join("MUST_PASS_ALL", flt, self.scvf("!=", self.marker))

    def from_intervals(self, intervals: list[Interval]) -> Filter:
        """Rows whose cell value lies in one of ``intervals`` (and does not read as null)."""
        if not intervals:
            return self.nothing()
        alternatives = []
        for iv in intervals:
            if iv.is_point:
                alternatives.append(self.scvf("=", iv.lo))
                continue
            parts = []
            if iv.lo is not None:
                parts.append(self.scvf(">=" if iv.lo_incl else ">", iv.lo))
            if iv.hi is not None:
                parts.append(self.scvf("<=" if iv.hi_incl else "<", iv.hi))
            if not parts:
                parts.append(self.present())
            alternatives.append(parts[0] if len(parts) == 1 else FilterList.join("MUST_PASS_ALL", *parts))
        flt = alternatives[0] if len(alternatives) == 1 else FilterList.join("MUST_PASS_ONE", *alternatives)
        return self._not_null(flt)

    def translate(self, f: Any) -> tuple[Filter | None, bool]:
        """(engine filter, exact) for one Spark filter on this column."""
        kind = type(f).__name__
        col = self.col
        if kind in ("IsNull", "IsNotNull") or (kind == "EqualNullSafe" and f.value is None):
            if not self.null_known:
                return None, False
            return (self.present() if kind == "IsNotNull" else self.absent()), True
        if kind == "Not":
            return self._translate_not(f.child)
        if kind in ("StringEndsWith", "StringContains"):
            if col.type_name == "string" and isinstance(f.value, str) and f.value and col.order is not None:
                # ASCII-case-insensitive "contains" keeps a superset; Spark checks the rest
                return SingleColumnValueFilter(self.family, self.qualifier, "=",
                                               self._checked(SubstringComparator(f.value)),
                                               filter_if_missing=True), False
            return None, False
        if col.order is None:
            return None, False
        intervals = _value_intervals(col.order, col.codec, col.type_name, f)
        if intervals is None:
            return None, False
        return self.from_intervals(intervals), True

    def _translate_not(self, child: Any) -> tuple[Filter | None, bool]:
        kind = type(child).__name__
        col = self.col
        if col.order is None or kind not in ("EqualTo", "In"):
            return None, False
        values = [child.value] if kind == "EqualTo" else list(child.value)
        if any(v is None for v in values):
            return None, False  # x NOT IN (.., NULL) is never true: leave it to Spark
        parts = []
        for v in values:
            raw = _literal(col.codec, col.type_name, v)
            if raw is None:
                return None, False
            if raw is not _NO_FORM:
                parts.append(self.scvf("!=", raw))
        if not parts:
            return self.present(), True
        flt = parts[0] if len(parts) == 1 else FilterList.join("MUST_PASS_ALL", *parts)
        return self._not_null(flt), True


def _columns_by_name(serde) -> dict[str, _Column]:
    out = {}
    pushable = serde.name in PUSHABLE_SERDES and serde.on_error == "fail"
    for spec in serde.mapping.columns:
        codec = None
        if spec.kind in (ColumnKind.KEY, ColumnKind.KEY_PART):
            codec = serde.codec(spec, spec.type, "key")
        elif spec.kind == ColumnKind.CELL and pushable:
            codec = serde.value_codec(spec, spec.type, "value")
        out[spec.name.lower()] = _Column(spec, codec)
    return out


def _column_of(f: Any) -> str | None:
    target = f.child if type(f).__name__ == "Not" else f
    attribute = getattr(target, "attribute", None)
    if not isinstance(attribute, tuple) or len(attribute) != 1:
        return None  # nested fields are not mapped columns
    return attribute[0].lower()


def _key_intervals(part, f: Any) -> list[Interval] | None:
    kind = type(f).__name__
    marker = part.order.null_marker if part.order is not None else None
    if kind == "IsNotNull" and marker is None:
        return [Interval(None, True, None, True)]
    if (kind == "IsNull" or (kind == "EqualNullSafe" and f.value is None)) and marker is None:
        return []  # a row key is never null
    if part.order is None or kind in ("Not", "IsNull", "IsNotNull"):
        return None
    return _value_intervals(part.order, part.codec, part.type_name, f)


def push_filters(filters: Sequence[Any], serde, column_filters: bool = True, superset: bool = False) -> PushdownResult:
    """Translate Spark filters for a table read through ``serde`` (see the module docstring).

    ``column_filters`` False keeps every non-key filter for Spark (the
    hbase-spark option ``hbase.spark.pushdown.columnfilter``).  ``superset``
    also adds engine filters that only narrow the scan (``LIKE '%x%'`` as a
    case-insensitive substring test); each engine filter costs a pass over
    the cells, so they pay only when they drop many rows.
    """
    result = PushdownResult()
    columns = _columns_by_name(serde)
    layout = KeyLayout.from_serde(serde)
    part_index = {p.name.lower(): i for i, p in enumerate(layout.parts)}
    per_part: list[list[tuple[Any, list[Interval]]]] = [[] for _ in layout.parts]
    key_filters: list[tuple[int, Any]] = []
    engine: list[Filter] = []
    prune: list[Filter] = []  # comparisons that only skip row groups (see _block_skip)
    not_null: dict[str, tuple[Any, Filter]] = {}
    value_tested: set[str] = set()  # columns with an exact comparison (which drops nulls itself)
    for f in filters:
        name = _column_of(f)
        text = describe_filter(f)
        if name is None or name not in columns:
            result.residual.append(f)
            result.notes.append(f"{text}: left for Spark (not a mapped column)")
            continue
        if name in part_index:
            i = part_index[name]
            intervals = _key_intervals(layout.parts[i], f)
            if intervals is None:
                result.residual.append(f)
                result.notes.append(f"{text}: left for Spark (no exact key-byte form)")
                continue
            per_part[i].append((f, intervals))
            key_filters.append((i, f))
            continue
        col = columns[name]
        if col.spec.kind != ColumnKind.CELL or col.codec is None or not column_filters:
            result.residual.append(f)
            why = "column filters off" if not column_filters else "not a single-cell column of a binary/string SerDe"
            result.notes.append(f"{text}: left for Spark ({why})")
            continue
        if not compares_as_bytes(col.codec):
            result.residual.append(f)
            result.notes.append(f"{text}: left for Spark (compared once decoded: the stored bytes may not "
                                f"fit {col.type_name.upper()})")
            skip = _block_skip(col, f)
            if skip is not None:
                prune.append(skip)
                result.notes.append(f"{text}: row groups whose value bounds rule it out are skipped ({skip!r})")
            continue
        flt, exact = _CellFilters(col).translate(f)
        if flt is not None and not exact and not superset:
            result.residual.append(f)
            result.notes.append(f"{text}: left for Spark (no exact engine filter; superset pushdown is off)")
            continue
        if flt is None:
            result.residual.append(f)
            result.notes.append(f"{text}: left for Spark (byte order differs from value order)")
            continue
        if exact and type(f).__name__ == "IsNotNull":
            not_null[name] = (f, flt)  # decided below: implied by another filter, or left for Spark
            continue
        engine.append(flt)
        if exact and type(f).__name__ not in ("IsNull", "EqualNullSafe", "Not"):
            value_tested.add(name)
        if exact:
            result.handled.append(f)
            result.notes.append(f"{text}: engine filter {flt!r}")
        else:
            result.residual.append(f)
            result.notes.append(f"{text}: engine filter {flt!r} narrows the scan; Spark checks it again")
    for name, (f, _flt) in not_null.items():
        if name in value_tested:
            result.handled.append(f)
            result.notes.append(f"{describe_filter(f)}: implied by the column's other engine filter")
        else:
            # An engine filter costs a pass over every cell of the batch; Spark checks
            # IS NOT NULL for next to nothing, and it rarely drops many rows.
            result.residual.append(f)
            result.notes.append(f"{describe_filter(f)}: left for Spark (cheaper there than an engine filter)")
    constraints: list[list[Interval] | None] = []
    for entries in per_part:
        if not entries:
            constraints.append(None)
            continue
        merged = entries[0][1]
        for _, intervals in entries[1:]:
            merged = intersect_intervals(merged, intervals)
        constraints.append(merged)
    ranges, honoured = layout.ranges(constraints)
    result.key_ranges = ranges
    for i, f in key_filters:
        text = describe_filter(f)
        if i < honoured:
            result.handled.append(f)
            result.notes.append(f"{text}: row-key ranges")
        else:
            result.residual.append(f)
            how = "narrows the key ranges; " if ranges is not None else ""
            result.notes.append(f"{text}: {how}left for Spark (not expressible exactly as key ranges)")
    if engine:
        result.engine_filter = engine[0] if len(engine) == 1 else FilterList.join("MUST_PASS_ALL", *engine)
    if prune:
        result.prune_filter = prune[0] if len(prune) == 1 else FilterList.join("MUST_PASS_ALL", *prune)
    return result
