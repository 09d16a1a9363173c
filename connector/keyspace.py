"""Value order of stored bytes, and row-key ranges built from per-column value intervals.

Pushdown may only promise what byte comparisons deliver exactly.  Each
codec of the SerDe layer gets a :class:`ValueOrder`, from the order its
type declares in the type registry (:mod:`serde.type_registry`) for the
codec's storage form:

* ``bytes``: byte order is value order (UTF-8 strings, binaries, any
  width).  Text storage adds a null sequence (``\\N``) that reads as null.
* ``ordered``: fixed width, byte order is value order, negatives included
  (the order-preserving ``#o`` encodings of integers, dates, timestamps,
  decimals).
* ``signed``: fixed-width big-endian two's complement (HBase ``Bytes`` of
  integers, dates and timestamps): byte order is value order within one
  sign, and negatives sort after non-negatives, so a value interval that
  crosses zero becomes two byte intervals.
* no order (floats, booleans, plain decimals, text numbers, Avro/JSON):
  nothing is pushed.

A literal is pushed only if it round-trips through the codec
(``decode(encode(v)) == v``): a timestamp with sub-millisecond digits, say,
has no exact stored form.

:class:`Interval` is a range of encoded values; :class:`KeyLayout` turns
the intervals of the row key (or of its composite parts, in order) into
row-key ranges ``[start, stop)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from serde.codecs.base import Codec
from serde.codecs.text import TextCodec
from serde.mapping import ColumnKind
from serde.rowkey import TERMINATED, TERMINATOR
from serde.type_registry import COMPLEX_NAMES, TypeSpec, find_type
from storage.keys import KeyRange, key_after, normalize, prefix_stop, row_range_of

__all__ = ["literal_spec", "ValueOrder", "value_order", "encode_literal", "Interval", "intersect_intervals", "KeyPart", "KeyLayout",
           "MAX_POINTS"]

MAX_POINTS = 4096
"""The most point keys (cross product of IN lists over key parts) turned into gets."""


@dataclass(frozen=True)
class ValueOrder:
    """How a codec's stored bytes order: ``kind`` is ``bytes``, ``ordered`` or ``signed``."""

    kind: str
    width: int | None = None
    null_marker: bytes | None = None

    def lowest(self) -> bytes | None:
        """The smallest encoding in value order (None: unbounded below)."""
        if self.kind == "signed":
            return b"\x80" + b"\x00" * (self.width - 1)
        return None

    def highest(self) -> bytes | None:
        """The largest encoding in value order (None: unbounded above)."""
        if self.kind == "signed":
            return b"\x7f" + b"\xff" * (self.width - 1)
        return None


def value_order(codec: Codec) -> ValueOrder | None:
    """The :class:`ValueOrder` of a codec, or None when byte comparisons say nothing exact.

    The kind is the type registry's fact for the codec's storage form
    (``Codec.byte_order``); a text codec adds the null sequence it reads as null.
    """
    kind = getattr(codec, "byte_order", None)
    if kind is None:
        return None
    if kind == "bytes":
        marker = codec.null if isinstance(codec, TextCodec) and codec.reads_null_sequence else None
        return ValueOrder("bytes", None, marker)
    return ValueOrder(kind, codec.fixed_width)


def literal_spec(type_name: str) -> TypeSpec | None:
    """The registry entry of a scalar column type (None for arrays, maps, structs)."""
    return find_type(type_name) if type_name not in COMPLEX_NAMES else None


def encode_literal(codec: Codec, type_name: str, value: Any) -> bytes | None:
    """The stored form of a filter literal, or None if it has no exact one."""
    spec = literal_spec(type_name)
    if spec is None or not spec.accepts_literal(value):
        return None
    value = spec.normalize_literal(value)
    try:
        raw = codec.encode(value)
        back = codec.decode(raw)
    except Exception:  # any codec failure means "no exact stored form"
        return None
    if back is None or back != value or (spec.literal_same_class and type(back) is not type(value)):
        return None
    return raw


@dataclass(frozen=True)
class Interval:
    """Encoded values between ``lo`` and ``hi`` (None: unbounded), each inclusive or not."""

    lo: bytes | None
    lo_incl: bool
    hi: bytes | None
    hi_incl: bool

    @property
    def is_point(self) -> bool:
        """True for a single encoded value."""
        return self.lo is not None and self.lo == self.hi and self.lo_incl and self.hi_incl

    @property
    def is_empty(self) -> bool:
        """True when no value lies in the interval."""
        if self.lo is None or self.hi is None:
            return False
        return self.lo > self.hi or (self.lo == self.hi and not (self.lo_incl and self.hi_incl))

    def contains(self, raw: bytes) -> bool:
        """Whether the encoded value ``raw`` lies in the interval."""
        if self.lo is not None and (raw < self.lo or (raw == self.lo and not self.lo_incl)):
            return False
        if self.hi is not None and (raw > self.hi or (raw == self.hi and not self.hi_incl)):
            return False
        return True

    @staticmethod
    def point(raw: bytes) -> "Interval":
        """The interval holding exactly ``raw``."""
        return Interval(raw, True, raw, True)

    @staticmethod
    def between(order: ValueOrder, lo: bytes | None, lo_incl: bool, hi: bytes | None, hi_incl: bool) -> list["Interval"]:
        """A value interval as byte intervals: two when a signed interval crosses zero."""
        if order.kind != "signed":
            iv = Interval(lo, lo_incl, hi, hi_incl)
            return [] if iv.is_empty else [iv]
        if lo is None:
            lo, lo_incl = order.lowest(), True
        if hi is None:
            hi, hi_incl = order.highest(), True
        lo_negative = lo[0] >= 0x80
        hi_negative = hi[0] >= 0x80
        if lo_negative and not hi_negative:
            parts = [Interval(lo, lo_incl, b"\xff" * order.width, True), Interval(b"\x00" * order.width, True, hi, hi_incl)]
        elif not lo_negative and hi_negative:
            parts = []  # lo >= 0 > hi
        else:
            parts = [Interval(lo, lo_incl, hi, hi_incl)]
        return [p for p in parts if not p.is_empty]


def _max_lo(a: Interval, b: Interval) -> tuple[bytes | None, bool]:
    if a.lo is None:
        return b.lo, b.lo_incl
    if b.lo is None:
        return a.lo, a.lo_incl
    if a.lo != b.lo:
        return (a.lo, a.lo_incl) if a.lo > b.lo else (b.lo, b.lo_incl)
    return a.lo, a.lo_incl and b.lo_incl


def _min_hi(a: Interval, b: Interval) -> tuple[bytes | None, bool]:
    if a.hi is None:
        return b.hi, b.hi_incl
    if b.hi is None:
        return a.hi, a.hi_incl
    if a.hi != b.hi:
        return (a.hi, a.hi_incl) if a.hi < b.hi else (b.hi, b.hi_incl)
    return a.hi, a.hi_incl and b.hi_incl


def intersect_intervals(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """Values in both interval lists."""
    out = []
    for x in a:
        for y in b:
            lo, lo_incl = _max_lo(x, y)
            hi, hi_incl = _min_hi(x, y)
            iv = Interval(lo, lo_incl, hi, hi_incl)
            if not iv.is_empty and iv not in out:
                out.append(iv)
    return out


@dataclass(frozen=True)
class KeyPart:
    """The row key, or one part of a composite key: its column, codec, order and byte width."""

    name: str
    type_name: str
    codec: Codec
    order: ValueOrder | None
    width: int | None  # fixed byte width inside a fixed-length composite key; None: the rest; TERMINATED: to 0x00


class KeyLayout:
    """How row-key bytes are made of key columns, and key ranges from their intervals."""

    def __init__(self, parts: Sequence[KeyPart], delimiter: bytes | None = None, composite: bool = False):
        self.parts = list(parts)
        self.delimiter = delimiter
        self.composite = composite

    @classmethod
    def from_serde(cls, serde) -> "KeyLayout":
        """The layout of a SerDe's row key (whole key, fixed-length or delimited composite)."""
        mapping = serde.mapping
        if mapping.rowkey is None:
            col = next(c for c in mapping.columns if c.kind == ColumnKind.KEY)
            codec = serde.codec(col, col.type, "key")
            return cls([KeyPart(col.name, col.type.name, codec, value_order(codec), None)])
        parts = []
        widths = serde.composite_key.widths
        for name, width in zip(mapping.rowkey.parts, widths):
            col = mapping.column(name)
            codec = serde.codec(col, col.type, "key")
            width = None if mapping.rowkey.delimiter is not None else width
            parts.append(KeyPart(col.name, col.type.name, codec, value_order(codec), width))
        return cls(parts, mapping.rowkey.delimiter, True)

    # -- building ranges ---------------------------------------------------------
    def _fixed_range(self, prefix: bytes, iv: Interval) -> KeyRange | None:
        """Keys whose next fixed-width part lies in ``iv`` (more parts follow it)."""
        if iv.lo is None:
            start = prefix
        elif iv.lo_incl:
            start = prefix + iv.lo
        else:
            start = prefix_stop(prefix + iv.lo)
            if start is None:
                return None
        if iv.hi is None:
            stop = prefix_stop(prefix) if prefix else None
        elif iv.hi_incl:
            stop = prefix_stop(prefix + iv.hi)
        else:
            stop = prefix + iv.hi
        return (start, stop)

    @staticmethod
    def _rest_range(prefix: bytes, iv: Interval) -> KeyRange:
        """Keys whose remaining bytes (the last, variable part) lie in ``iv``."""
        if iv.lo is None:
            start = prefix
        else:
            start = prefix + iv.lo if iv.lo_incl else key_after(prefix + iv.lo)
        if iv.hi is None:
            stop = prefix_stop(prefix) if prefix else None
        else:
            stop = key_after(prefix + iv.hi) if iv.hi_incl else prefix + iv.hi
        return (start, stop)

    def _exact_for_part(self, part: KeyPart, intervals: Sequence[Interval]) -> bool:
        """Whether byte intervals of this part select exactly the values they stand for."""
        if part.order is None:
            return False
        marker = part.order.null_marker
        if marker is not None and any(iv.contains(marker) for iv in intervals):
            return False  # the null sequence reads as null: Spark would drop it
        if part.width is not None and part.order.kind == "bytes":
            # a fixed-width text part compares bytes of that width only when bounds have it too
            for iv in intervals:
                for bound in (iv.lo, iv.hi):
                    if bound is not None and len(bound) != part.width:
                        return False
        return True

    def ranges(self, constraints: Sequence[list[Interval] | None]) -> tuple[list[KeyRange] | None, int]:
        """Key ranges for per-part constraints (None: unconstrained), in part order.

        Returns the ranges (None when nothing restricts the key) and how
        many leading parts the ranges honour exactly: filters on those
        parts need no further check; later parts' filters do.
        """
        prefixes = [b""]
        last = len(self.parts) - 1
        for i, part in enumerate(self.parts):
            intervals = constraints[i] if i < len(constraints) else None
            if intervals is None:
                if i == 0:
                    return None, 0
                return normalize([(p, prefix_stop(p)) for p in prefixes]), i
            if not intervals:
                return [], i + 1  # contradictory: no key at all
            terminated = self.delimiter is None and part.width == TERMINATED
            fixed = self.delimiter is None and part.width is not None and not terminated
            sep = self.delimiter if self.delimiter is not None else TERMINATOR if terminated else b""
            separated = self.delimiter is not None or terminated
            if all(iv.is_point for iv in intervals) and len(prefixes) * len(intervals) <= MAX_POINTS:
                points = [iv.lo for iv in intervals]
                if fixed:
                    # a value of another width can never be stored in this part
                    points = [p for p in points if len(p) == part.width]
                    if not points:
                        return [], i + 1
                marker = part.order.null_marker if part.order is not None else None
                exact = part.order is not None and marker not in points
                if separated and i < last and any(sep in p for p in points):
                    return normalize([(p, prefix_stop(p)) for p in prefixes]) if i else None, i
                if i == last:
                    keys = [p + pt for p in prefixes for pt in points]
                    return normalize([row_range_of(k) for k in keys]), (i + 1 if exact else i)
                new = [p + pt + sep for p in prefixes for pt in points]
                if not exact:
                    return normalize([(p, prefix_stop(p)) for p in new]), i
                prefixes = new
                continue
            # a range on this part: the last part this key range can honour
            exact = self._exact_for_part(part, intervals)
            if separated and i < last:
                return (normalize([(p, prefix_stop(p)) for p in prefixes]) if i else None), i
            out = []
            for p in prefixes:
                for iv in intervals:
                    r = self._fixed_range(p, iv) if fixed and i < last else self._rest_range(p, iv)
                    if r is not None and (r[1] is None or r[0] < r[1]):
                        out.append(r)
            return normalize(out), (i + 1 if exact else i)
        return normalize([(p, prefix_stop(p)) for p in prefixes]), len(self.parts)
