"""File info: what a store file holds, written once by the writer.

The info section body is UTF-8 JSON (an object with sorted keys; binary
values as lower-case hex; cells as ``[row, family, qualifier, timestamp,
type, value]``), so fields can be added without a new format version.  The
file size is not stored: the reader takes it from the filesystem.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

from ..cells import Cell
from ..errors import CorruptionError

__all__ = ["FileInfo"]


def _cell_to_json(cell: Cell | None) -> list | None:
    if cell is None:
        return None
    return [cell[0].hex(), cell[1].hex(), cell[2].hex(), int(cell[3]), int(cell[4]), cell[5].hex()]


def _cell_from_json(value) -> Cell | None:
    if value is None:
        return None
    row, family, qualifier, ts, kind, val = value
    return Cell(bytes.fromhex(row), bytes.fromhex(family), bytes.fromhex(qualifier), int(ts), int(kind), bytes.fromhex(val))


@dataclass(frozen=True)
class FileInfo:
    """Summary of one store file.

    ``first_cell`` / ``last_cell`` are None and ``min_timestamp`` /
    ``max_timestamp`` are None for an empty file.  ``compression`` is the
    codec name or None.  ``row_count`` counts distinct rows; ``data_size``
    is the on-disk bytes of the data blocks, ``uncompressed_size`` their
    bodies' bytes before compression.
    """

    first_cell: Cell | None
    last_cell: Cell | None
    cell_count: int
    row_count: int
    min_timestamp: int | None
    max_timestamp: int | None
    max_seq_id: int
    family: bytes
    compression: str | None
    block_count: int
    block_size: int
    format_version: int
    file_size: int
    has_bloom: bool
    bloom_policy: str | None
    data_size: int
    uncompressed_size: int
    delete_count: int = -1  # delete markers in the file; -1 when not recorded
    repeated_columns: int = -1  # cells whose (row, qualifier) equals the previous cell's; -1 unknown
    # the shortest and longest row key stored (0 and 0 without cells); -1 in files written before
    # they were recorded.  A reader mapping keys to a fixed-width type checks them here, not row by row.
    min_row_length: int = -1
    max_row_length: int = -1

    @property
    def needs_resolution(self) -> bool:
        """False when every cell is the only version of its column and no marker exists,
        so reads need no version or delete resolution."""
        return self.delete_count != 0 or self.repeated_columns != 0

    @property
    def row_lengths(self) -> tuple[int, int] | None:
        """``(shortest, longest)`` row key of the file, or None where the file does not record them."""
        if self.min_row_length < 0 or self.max_row_length < 0:
            return None
        return self.min_row_length, self.max_row_length

    def to_json(self) -> bytes:
        """The info section body (``file_size`` is not stored)."""
        doc = asdict(self)
        doc.pop("file_size")
        doc["first_cell"] = _cell_to_json(self.first_cell)
        doc["last_cell"] = _cell_to_json(self.last_cell)
        doc["family"] = self.family.hex()
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, body, file_size: int, path: str, offset: int) -> "FileInfo":
        """Parse an info section body; malformed content is corruption."""
        try:
            doc = json.loads(bytes(body).decode("utf-8"))
            return cls(
                first_cell=_cell_from_json(doc["first_cell"]),
                last_cell=_cell_from_json(doc["last_cell"]),
                cell_count=int(doc["cell_count"]),
                row_count=int(doc["row_count"]),
                min_timestamp=None if doc["min_timestamp"] is None else int(doc["min_timestamp"]),
                max_timestamp=None if doc["max_timestamp"] is None else int(doc["max_timestamp"]),
                max_seq_id=int(doc["max_seq_id"]),
                family=bytes.fromhex(doc["family"]),
                compression=doc["compression"],
                block_count=int(doc["block_count"]),
                block_size=int(doc["block_size"]),
                format_version=int(doc["format_version"]),
                file_size=file_size,
                has_bloom=bool(doc["has_bloom"]),
                bloom_policy=doc["bloom_policy"],
                data_size=int(doc["data_size"]),
                uncompressed_size=int(doc["uncompressed_size"]),
                delete_count=int(doc.get("delete_count", -1)),
                repeated_columns=int(doc.get("repeated_columns", -1)),
                min_row_length=int(doc.get("min_row_length", -1)),
                max_row_length=int(doc.get("max_row_length", -1)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptionError(f"malformed file info ({exc})", path, offset) from None

    def with_file_size(self, file_size: int) -> "FileInfo":
        """A copy with ``file_size`` set."""
        return replace(self, file_size=file_size)
