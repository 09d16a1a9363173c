"""Counters a SerDe keeps: rows, batches, and every value nulled by a decode error.

Nothing is dropped silently: with ``serde.on.error=null`` each bad value
becomes a null, is counted per column in ``nulls_from_errors``, and the
first one of each column is kept (row key, bytes, reason) and logged as a
warning on the ``serde`` logger.  Counters are updated once per batch on the
batch path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SerDeStats", "logger"]

logger = logging.getLogger("serde")


@dataclass
class SerDeStats:
    """What a SerDe did: row and batch counts both ways, and decode errors."""

    rows: int = 0
    batches: int = 0
    rows_serialized: int = 0
    batches_serialized: int = 0
    errors_raised: int = 0
    nulls_from_errors: dict[str, int] = field(default_factory=dict)
    first_errors: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def warnings(self) -> int:
        """Total values nulled by decode errors (each one is a counted warning)."""
        return sum(self.nulls_from_errors.values())

    def record_nulls(self, column: str, count: int, row_key: Any, value: Any, reason: str) -> None:
        """Count ``count`` bad values of ``column`` that became nulls; log the first of each column."""
        before = self.nulls_from_errors.get(column, 0)
        self.nulls_from_errors[column] = before + count
        if before == 0:
            self.first_errors[column] = {"row_key": row_key, "value": value, "reason": reason}
            logger.warning(
                "column %r: value %r of row %r does not decode (%s); read as null (serde.on.error=null)",
                column,
                value,
                row_key,
                reason,
            )

    def as_dict(self) -> dict[str, Any]:
        """A plain dict of every counter, for reports and logs."""
        return {
            "rows": self.rows,
            "batches": self.batches,
            "rows_serialized": self.rows_serialized,
            "batches_serialized": self.batches_serialized,
            "errors_raised": self.errors_raised,
            "nulls_from_errors": dict(self.nulls_from_errors),
            "warnings": self.warnings,
            "first_errors": {k: dict(v) for k, v in self.first_errors.items()},
        }

    def reset(self) -> None:
        """Zero every counter."""
        self.rows = self.batches = self.rows_serialized = self.batches_serialized = self.errors_raised = 0
        self.nulls_from_errors.clear()
        self.first_errors.clear()
