"""Date comparisons tested on stored cells, before any date is decoded.

The binary SerDe stores a ``DATE`` as the 8-byte big-endian milliseconds of the day's
midnight UTC (the sign bit flipped when ``ordered``), and decodes it to the floor of
those milliseconds over a day.  So ``day >= d`` is ``ms >= d's midnight`` and ``day > d``
is ``ms >= the next midnight``: a comparison with a date literal is exact on the stored
integers, one NumPy pass over a batch instead of a decode to ``date32`` and an Arrow
comparison.  A batch holding a cell that would not decode (another width, a day out of
range) is left to the decode, which fails or handles it as before.  The engine worker's
decoded filters (:mod:`connector.decoded_filters`) use it for the first test of a column.

A comparison of two such columns (TPC-H q12's ``l_commitdate < l_receiptdate``, q21's
``l_receiptdate > l_commitdate``) is tested the same way: each side's day is the floor of its
milliseconds over a day, one NumPy division per column, and a null on either side drops the row
as SQL's null comparison does.  Neither column is decoded for it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pyarrow as pa

__all__ = ["StoredDates", "StoredForms", "stored_dates", "serde_stored_dates", "date_test", "stored_group",
           "stored_pair", "stored_keep", "STORED_DATE_ROWS"]

_MS_PER_DAY = 86_400_000
# the milliseconds whose day a date32 holds (Python's dates): any other fails the decode
_LOW_MS = (dt.date.min - dt.date(1970, 1, 1)).days * _MS_PER_DAY
_HIGH_MS = ((dt.date.max - dt.date(1970, 1, 1)).days + 1) * _MS_PER_DAY
_SIGN = np.uint64(1 << 63)


@dataclass(frozen=True)
class StoredDates:
    """A ``DATE`` column stored as the binary SerDe stores it: each cell the 8-byte big-endian
    milliseconds of the day's midnight UTC (``ordered``: the sign bit flipped), in the stored
    batch's column ``field``.  Its comparisons with date literals are tested on those integers."""

    field: str
    ordered: bool

    def millis(self, stored: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
        """``(milliseconds, valid)`` of a stored binary column, one per row (0 where null), or
        None when some non-null cell would not decode (not 8 bytes, or a day out of range)."""
        n = len(stored)
        if isinstance(stored, pa.DictionaryArray):  # dictionary codes: each entry read once, taken by code
            return self._coded_millis(stored)
        if stored.type != pa.binary() or not n:
            return None
        bufs = stored.buffers()
        offsets = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=stored.offset * 4)
        data = bufs[2]
        if stored.null_count == 0:
            valid = None
            if int(offsets[-1]) - int(offsets[0]) != 8 * n or (np.diff(offsets) != 8).any():
                return None
            raw = np.frombuffer(data, dtype=">u8", count=n, offset=int(offsets[0]))
        else:
            valid = np.asarray(stored.is_valid())
            starts = offsets[:-1][valid]
            if (np.diff(offsets)[valid] != 8).any():
                return None
            raw = np.zeros(n, dtype=">u8")
            if len(starts):
                if data is None:
                    return None
                windows = np.frombuffer(data, dtype=np.uint8)[starts[:, None] + np.arange(8)]
                raw[valid] = windows.view(">u8").ravel()
        longs = (raw ^ _SIGN if self.ordered else raw).astype(np.uint64).view(np.int64)
        live = longs if valid is None else longs[valid]
        if len(live) and (int(live.min()) < _LOW_MS or int(live.max()) >= _HIGH_MS):
            return None
        return longs, (np.ones(n, dtype=bool) if valid is None else valid)

    def _coded_millis(self, stored: pa.DictionaryArray) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`millis` of a column of dictionary codes: its entries' milliseconds taken by
        the codes (None when an entry would not decode, as a cell's would make it)."""
        n = len(stored)
        found = self.millis(stored.dictionary) if stored.dictionary.type == pa.binary() else None
        if found is None or not n:
            return None
        indices = stored.indices
        codes = indices.fill_null(0).to_numpy(zero_copy_only=False) if indices.null_count else \
            indices.to_numpy(zero_copy_only=False)
        longs = found[0][codes]
        if not indices.null_count:
            return longs, np.ones(n, dtype=bool)
        valid = np.asarray(indices.is_valid())
        longs[~valid] = 0
        return longs, valid


StoredForms = Callable[[str], "StoredDates | None"]
"""A column's stored form compared before decoding, by lower-case name; None: decode it."""


def stored_dates(codec: Any, field: str) -> StoredDates | None:
    """The :class:`StoredDates` of a single-cell column whose cells are in ``field`` and decoded by
    ``codec``, when that is the binary SerDe's ``DATE`` codec; else None."""
    from serde.codecs.hbase_bytes import DateCodec

    if type(codec) is not DateCodec:
        return None
    return StoredDates(field, bool(codec.ordered))


def serde_stored_dates(serde: Any) -> dict[str, StoredDates]:
    """The stored forms of a SerDe's single-cell ``DATE`` columns, by lower-case column name."""
    forms = {}
    for r in getattr(serde, "readers", ()):
        if getattr(r, "cell", None) is not None and len(r.names) == 1:
            form = stored_dates(r.codec, r.cell)
            if form is not None:
                forms[r.names[0].lower()] = form
    return forms


def date_test(kind: str, value: Any, millis: np.ndarray) -> np.ndarray | None:
    """``day <kind> value`` over the stored milliseconds (the day is their floor over a day, so
    ``day >= d`` is ``ms >= d's midnight`` and ``day > d`` is ``ms >= the next midnight``), or None
    for a test not done this way."""
    if type(value) is not dt.date:
        return None
    day = (value - dt.date(1970, 1, 1)).days
    low, high = day * _MS_PER_DAY, (day + 1) * _MS_PER_DAY
    if kind == "GreaterThanOrEqual":
        return millis >= low
    if kind == "GreaterThan":
        return millis >= high
    if kind == "LessThan":
        return millis < low
    if kind == "LessThanOrEqual":
        return millis < high
    if kind == "EqualTo":
        return (millis >= low) & (millis < high)
    return None


def stored_group(group: list, stored: StoredForms | None) -> tuple[str, StoredDates] | None:
    """The column and its stored form when every test of ``group`` compares it with a date literal
    (tested on stored integers), else None."""
    if stored is None:
        return None
    names = set()
    for f in group:
        kind = type(f).__name__
        attribute = getattr(f, "attribute", None)
        if kind not in _DATE_TESTS or not isinstance(attribute, tuple) or len(attribute) != 1:
            return None
        if type(f.value) is not dt.date:
            return None
        names.add(attribute[0].lower())
    if len(names) != 1:
        return None
    name = names.pop()
    form = stored(name)
    return None if form is None else (name, form)


def stored_pair(group: list, stored: StoredForms | None) -> list[tuple[str, StoredDates]] | None:
    """The two columns and their stored forms when every test of ``group`` compares them with each
    other (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``; not ``<=>``), both stored as dates; else None."""
    if stored is None:
        return None
    names: set[str] = set()
    for f in group:
        if type(f).__name__ != "Compare" or f.op not in _PAIR_TESTS:
            return None
        for side in (f.left, f.right):
            if type(side).__name__ != "Column":
                return None
            names.add(side.name.lower())
    if len(names) != 2:
        return None
    forms = [(name, stored(name)) for name in sorted(names)]
    return None if any(form is None for _, form in forms) else forms  # type: ignore[return-value]


Millis = Callable[[str, StoredDates], "tuple[np.ndarray, np.ndarray] | None"]
"""A column's ``(milliseconds, valid)`` at the rows being tested (:meth:`StoredDates.millis`, read
once per batch), or None when some cell would not decode or the column is decoded already."""


def stored_keep(group: list, stored: StoredForms | None, millis: Millis) -> tuple[np.ndarray, int] | None:
    """``(keep, rows tested)``: where every test of ``group`` is true, tested on stored dates
    (comparisons of one column with date literals, or of two date columns with each other); None
    when the group is not tested so, and the decode and its kernels test it instead."""
    single = stored_group(group, stored)
    if single is not None:
        found = millis(*single)
        if found is None:
            return None
        values, keep = found
        for f in group:
            keep = keep & date_test(type(f).__name__, f.value, values)
        return keep, len(values)
    pair = stored_pair(group, stored)
    if pair is None:
        return None
    days: dict[str, np.ndarray] = {}
    valid = None
    for name, form in pair:
        found = millis(name, form)
        if found is None:
            return None
        # the decoded day is the floor of the milliseconds over a day, for negative ones too
        days[name] = np.floor_divide(found[0], _MS_PER_DAY)
        valid = found[1] if valid is None else valid & found[1]
    keep = valid
    for f in group:
        keep = keep & _PAIR_TESTS[f.op](days[f.left.name.lower()], days[f.right.name.lower()])
    return keep, len(keep)


_PAIR_TESTS = {"=": np.equal, "<>": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater,
               ">=": np.greater_equal}

#: the scan statistic of rows whose date comparisons were tested on stored integers
STORED_DATE_ROWS = "stored_date_rows"

_DATE_TESTS = ("GreaterThanOrEqual", "GreaterThan", "LessThan", "LessThanOrEqual", "EqualTo")
