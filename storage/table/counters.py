"""HBase counters on a table: 64-bit big-endian integers read, set and
incremented atomically per row."""

from __future__ import annotations

import struct

from ..errors import InvalidArgument, clip
from .arguments import _INT64_MAX, _INT64_MIN, _check_counter


class TableCounters:
    """Counter reads and increments of a :class:`~storage.table.table.Table`."""

    def counter_get(self, row: bytes, column: bytes) -> int:
        """The 8-byte big-endian counter in ``column`` (0 if unset), as HBase stores it."""
        value = self.row(row, columns=[column]).get(column)
        if value is None:
            return 0
        if len(value) != 8:
            raise InvalidArgument(f"column {column!r} of row {row!r} holds {len(value)} bytes, not an 8-byte counter")
        return struct.unpack(">q", value)[0]

    def counter_set(self, row: bytes, column: bytes, value: int = 0) -> None:
        """Store ``value`` as the 8-byte big-endian counter in ``column``."""
        self.put(row, {column: struct.pack(">q", _check_counter(value, "counter value"))})

    def counter_inc(self, row: bytes, column: bytes, value: int = 1) -> int:
        """Atomically add ``value`` to the counter and return the new value.

        A result outside the signed 64-bit range HBase counters hold raises
        InvalidArgument and leaves the counter as it was.
        """
        _check_counter(value, "counter increment")
        with self._mutex:
            current = self.counter_get(row, column)
            new = current + value
            if not _INT64_MIN <= new <= _INT64_MAX:
                raise InvalidArgument(
                    f"counter {clip(repr(column), 60)} of row {clip(repr(row), 60)} would overflow a signed 64-bit"
                    f" integer ({current} + {value})"
                )
            self.counter_set(row, column, new)
            return new

    def counter_dec(self, row: bytes, column: bytes, value: int = 1) -> int:
        return self.counter_inc(row, column, -value)
