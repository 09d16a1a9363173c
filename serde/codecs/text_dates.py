"""Text dates and timestamps with configurable formats.

Formats are ``strftime`` patterns (``%Y-%m-%d``) or Java ``SimpleDateFormat``
patterns as Hive users write them (``yyyy-MM-dd'T'HH:mm:ss``: letters
``yyyy yy MM dd HH mm ss``, quoted literals).  Dates use one format
(``date.format``, default ``%Y-%m-%d``).  Timestamps try Hive's default
``yyyy-MM-dd HH:mm:ss[.fffffffff]`` first (fractions beyond microseconds are
truncated), then each of ``timestamp.formats`` in order; ``millis`` there
means epoch milliseconds.  Writing uses the first of ``timestamp.formats``,
or Hive's default (fraction trimmed of trailing zeros, omitted when zero).

Batch kernels: canonical ISO text (``yyyy-MM-dd``, Hive's timestamp form)
is parsed with Arrow's validating ISO-8601 cast after a regex gate.  Other
formats, and columns where that cast fails, go through ``pc.strptime``
followed by ``pc.strftime`` of the result: a row is taken only when it
reproduces its input exactly (this rejects dates that strptime normalises,
such as Feb 30).  Rows must also lie in Python's date range.  Anything else
goes to the scalar parser.  The
row-wise parser uses ``date.fromisoformat`` for the canonical ISO forms and
``datetime.strptime`` otherwise; with ``serde.row.dates=naive`` it always
calls ``datetime.strptime``, the classic per-row hotspot.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from serde.codecs.epoch import EPOCH, MAX_DAYS, MAX_US, MIN_DAYS, MIN_US, datetime_to_us
from serde.codecs.text import TextCodec, TextOptions
from serde.errors import MappingError
from serde.types import DataType

__all__ = ["to_strftime", "DateText", "TimestampText", "HIVE_TIMESTAMP", "MILLIS"]

HIVE_TIMESTAMP = "hive"
"""Marker of Hive's default timestamp format in a format list."""

MILLIS = "millis"
"""Marker of epoch milliseconds in ``timestamp.formats`` (as Hive spells it)."""

_JAVA = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}


def to_strftime(pattern: str) -> str:
    """A ``strftime`` pattern from a strftime or Java ``SimpleDateFormat`` pattern."""
    if "%" in pattern:
        return pattern
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise MappingError("unterminated quote in date pattern", pattern[i:], i)
            out.append(pattern[i + 1 : end].replace("%", "%%") if end > i + 1 else "'")
            i = end + 1
            continue
        if ch.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == ch:
                j += 1
            run = pattern[i:j]
            if run not in _JAVA:
                raise MappingError("unsupported date pattern letters (use yyyy yy MM dd HH mm ss)", run, i)
            out.append(_JAVA[run])
            i = j
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ISO_DATE_GATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_HIVE_TS = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?")
_HIVE_TS_GATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?$"
_MILLIS_RE = re.compile(r"-?[0-9]{1,18}")
_MILLIS_GATE = r"^-?[0-9]{1,18}$"


def _np(arr: pa.Array, fill: Any) -> np.ndarray:
    return arr.fill_null(fill).to_numpy(zero_copy_only=False)


def _round_trip(strings: pa.Array, fmt: str) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """``pc.strptime`` at second precision plus the format-back check.

    Returns ``(seconds, parsed, exact)``: seconds since the epoch (int64),
    rows strptime parsed, and rows whose formatted value equals the input.
    """
    seconds = pc.strptime(strings, format=fmt, unit="s", error_is_null=True)
    back = pc.strftime(seconds, format=fmt)
    exact = _np(pc.equal(back, strings), False)
    parsed = _np(pc.is_valid(seconds), False)
    return _np(seconds.cast(pa.int64()), 0), parsed, exact


class DateText(TextCodec):
    """A date in ``date.format``."""

    def __init__(self, data_type: DataType, options: TextOptions):
        super().__init__(data_type, options)
        self.fmt = to_strftime(options.date_format)
        self.iso = self.fmt == "%Y-%m-%d"
        self.naive = options.naive_dates

    def parse(self, text: str) -> _dt.date:
        if self.naive:
            return _dt.datetime.strptime(text, self.fmt).date()
        if self.iso and _ISO_DATE.fullmatch(text):
            return _dt.date.fromisoformat(text)  # same result as strptime, much cheaper
        return _dt.datetime.strptime(text, self.fmt).date()

    def format(self, value: Any) -> str:
        if not isinstance(value, _dt.date):
            raise TypeError(f"expected date, got {type(value).__name__}")
        if isinstance(value, _dt.datetime):
            value = value.date()
        return value.isoformat() if self.iso else value.strftime(self.fmt)

    def parse_array(self, strings):
        if self.iso:
            # Arrow's ISO-8601 parser validates month and day lengths itself and is
            # far cheaper than a strftime round trip; it fails the whole column on a
            # bad date, and then the strptime kernel below sorts the rows out.
            gate = pc.match_substring_regex(strings, _ISO_DATE_GATE).fill_null(False)
            try:
                dates = pc.cast(pc.if_else(gate, strings, None), pa.date32())
            except pa.ArrowInvalid:
                pass
            else:
                days = _np(dates.cast(pa.int32()), 0)
                handled = _np(gate, False) & (days >= MIN_DAYS) & (days <= MAX_DAYS)
                return pc.if_else(pa.array(handled), dates, None), handled
        seconds, _, exact = _round_trip(strings, self.fmt)
        days = np.floor_divide(seconds, 86_400)
        handled = exact & (days >= MIN_DAYS) & (days <= MAX_DAYS)
        values = pa.array(np.where(handled, days, 0).astype(np.int32), type=pa.date32(), mask=~handled)
        return values, handled

    def format_array(self, arr):
        stamps = arr.cast(pa.int32()).cast(pa.int64())
        seconds = pc.multiply(stamps, 86_400).cast(pa.timestamp("s"))
        return pc.strftime(seconds, format=self.fmt)


class TimestampText(TextCodec):
    """A timestamp in Hive's default format or one of ``timestamp.formats``."""

    def __init__(self, data_type: DataType, options: TextOptions):
        super().__init__(data_type, options)
        extra = [f if f == MILLIS else to_strftime(f) for f in options.timestamp_formats]
        self.formats = [HIVE_TIMESTAMP] + [f for f in extra if f != HIVE_TIMESTAMP]
        self.write_format = extra[0] if extra else HIVE_TIMESTAMP
        self.naive = options.naive_dates

    # -- row-wise --------------------------------------------------------
    def _parse_hive(self, text: str) -> _dt.datetime | None:
        if not _HIVE_TS.fullmatch(text):
            return None
        if len(text) > 26:
            text = text[:26]  # keep microseconds, truncate nanoseconds
        if self.naive:
            if len(text) > 19:
                return _dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f")
            return _dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
        return _dt.datetime.fromisoformat(text)

    def parse(self, text: str) -> _dt.datetime:
        for fmt in self.formats:
            try:
                if fmt == HIVE_TIMESTAMP:
                    value = self._parse_hive(text)
                    if value is not None:
                        return value
                elif fmt == MILLIS:
                    if _MILLIS_RE.fullmatch(text):
                        return EPOCH + _dt.timedelta(milliseconds=int(text))
                else:
                    return _dt.datetime.strptime(text, fmt)
            except (ValueError, OverflowError):
                continue
        raise ValueError(f"matches none of the timestamp formats {self.formats}")

    def format(self, value: Any) -> str:
        if not isinstance(value, _dt.datetime):
            raise TypeError(f"expected datetime, got {type(value).__name__}")
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        if self.write_format == MILLIS:
            return str(datetime_to_us(value) // 1000)
        if self.write_format != HIVE_TIMESTAMP:
            return value.strftime(self.write_format)
        text = value.isoformat(" ")
        return text.rstrip("0") if value.microsecond else text

    # -- batch -----------------------------------------------------------
    def _hive_kernel(self, strings: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        gate_arr = pc.match_substring_regex(strings, _HIVE_TS_GATE).fill_null(False)
        gate = _np(gate_arr, False)
        # Fast case: Arrow's ISO-8601 cast (it validates every field) on the text cut
        # to microseconds.  A single invalid value fails the cast; then the
        # strptime + round-trip kernel below decides row by row.
        head26 = pc.utf8_slice_codeunits(pc.if_else(gate_arr, strings, None), 0, 26)
        try:
            stamps = pc.cast(head26, pa.timestamp("us"))
        except pa.ArrowInvalid:
            pass
        else:
            return _np(stamps.cast(pa.int64()), 0), gate, np.zeros(len(gate), dtype=bool)
        head = pc.utf8_slice_codeunits(strings, 0, 19)
        seconds, parsed, exact = _round_trip(head, "%Y-%m-%d %H:%M:%S")
        fraction = pc.utf8_rpad(pc.utf8_slice_codeunits(strings, 20, 26), width=6, padding="0")
        has_fraction = _np(pc.greater(pc.utf8_length(strings), 19), False)
        digits = pc.if_else(pa.array(has_fraction & gate), fraction, "0")
        micros = _np(pc.cast(digits, pa.int64()), 0)
        return seconds * 1_000_000 + micros, gate & exact, gate & parsed & ~exact

    def _millis_kernel(self, strings: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        gate = pc.match_substring_regex(strings, _MILLIS_GATE).fill_null(False)
        millis = _np(pc.cast(pc.if_else(gate, strings, None), pa.int64()), 0)
        gate = _np(gate, False)
        safe = gate & (np.abs(millis) < (1 << 62) // 1000)
        return np.where(safe, millis, 0) * 1000, safe, gate & ~safe

    def parse_array(self, strings):
        n = len(strings)
        micros = np.zeros(n, dtype=np.int64)
        handled = np.zeros(n, dtype=bool)
        # Rows a kernel parsed but could not confirm go to the scalar parser, which
        # tries the formats in the same order; they must not be claimed by a later format.
        scalar = np.zeros(n, dtype=bool)
        for fmt in self.formats:
            open_rows = ~handled & ~scalar
            if not open_rows.any():
                break
            if fmt == HIVE_TIMESTAMP:
                values, ok, unsure = self._hive_kernel(strings)
            elif fmt == MILLIS:
                values, ok, unsure = self._millis_kernel(strings)
            else:
                seconds, parsed, exact = _round_trip(strings, fmt)
                values, ok, unsure = seconds * 1_000_000, exact, parsed & ~exact
            in_range = (values >= MIN_US) & (values <= MAX_US)
            take = open_rows & ok & in_range
            micros[take] = values[take]
            handled |= take
            scalar |= open_rows & ((ok & ~in_range) | unsure)
        values = pa.array(micros, type=pa.timestamp("us"), mask=~handled)
        return values, handled

    def format_array(self, arr):
        if self.write_format == MILLIS:
            micros = arr.cast(pa.int64())
            return pc.cast(pa.array(np.floor_divide(_np(micros, 0), 1000), mask=~_np(pc.is_valid(arr), False)), pa.string())
        if self.write_format != HIVE_TIMESTAMP:
            return pc.strftime(_floor_seconds(arr), format=self.write_format)
        seconds = _floor_seconds(arr)
        base = pc.strftime(seconds, format="%Y-%m-%d %H:%M:%S")
        micros = _np(arr.cast(pa.int64()), 0) % 1_000_000
        fraction = pc.utf8_rtrim(pc.utf8_lpad(pc.cast(pa.array(micros), pa.string()), width=6, padding="0"), characters="0")
        joined = pc.binary_join_element_wise(base, fraction, ".")
        return pc.if_else(pa.array(micros != 0), joined, base)


def _floor_seconds(arr: pa.Array) -> pa.Array:
    """Whole seconds (floored) as ``timestamp[s]``, so strftime prints no fraction."""
    micros = arr.cast(pa.int64())
    valid = _np(pc.is_valid(arr), False)
    seconds = np.floor_divide(_np(micros, 0), 1_000_000)
    return pa.array(seconds, type=pa.timestamp("s"), mask=~valid)
