"""Composite row keys: split a key into its parts and join parts into a key.

Fixed-length layout (no delimiter)::

    | part 1 (w1 bytes) | part 2 (w2 bytes) | ... | last part (wN bytes, or the rest) |

Every part but the last has a width (its ``length``, or the fixed width of a
binary-encoded type such as int = 4); the last part is either fixed or takes
the rest of the key.  With ordered encodings the key sorts by its parts.

A string part of no fixed length before other parts (hbase-spark's
``length: -1``) ends at a 0x00 byte: the writer puts one after it (so the
part itself may not hold 0x00), the reader ends the part at the first 0x00
and goes on after it::

    | string part | 0x00 | part 2 (w2 bytes) | ... |

0x00 is the smallest byte, so such a key still sorts by its parts.

Delimited layout: ``part1 <d> part2 <d> ... <d> last``; the key splits on the
first N-1 delimiters, so only the last part may contain the delimiter.

The batch path slices whole key columns with ``pc.binary_slice`` or
``pc.split_pattern``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from serde.codecs.binary_arrays import as_binary, binary_from_row_slice, dense_fixed_rows, valid_mask
from serde.errors import MappingError

__all__ = ["CompositeKey", "TERMINATED", "TERMINATOR"]

_END = 2**31 - 1

TERMINATED = -1
"""The width of a variable-length part that ends at :data:`TERMINATOR` (hbase-spark's ``length: -1``)."""
TERMINATOR = b"\x00"


class CompositeKey:
    """Splits and joins the row key of a mapping with key-part columns.

    ``widths[i]`` is the byte width of part i (None = the rest of the key,
    only allowed for the last part of a fixed-length key; :data:`TERMINATED`
    = ends at a 0x00 byte, only before another part); ``delimiter`` selects
    the delimited layout.
    """

    def __init__(self, names: Sequence[str], widths: Sequence[int | None], delimiter: bytes | None = None):
        self.names = list(names)
        self.widths = list(widths)
        self.delimiter = delimiter
        self.count = len(self.names)
        self.terminated = delimiter is None and TERMINATED in self.widths
        if delimiter is None:
            for name, width in zip(self.names[:-1], self.widths[:-1]):
                if width is None:
                    raise MappingError(
                        "a fixed-length composite key part needs a length (only the last part may be variable)",
                        name,
                    )
            if self.widths and self.widths[-1] == TERMINATED:
                raise MappingError("the last key part takes the rest of the key; it cannot end at 0x00", self.names[-1])
            # The fewest bytes a key can have: fixed widths plus one terminator per terminated part.
            self.prefix = sum(1 if w == TERMINATED else w for w in self.widths[:-1])
            self.total = None if self.widths[-1] is None or self.terminated else self.prefix + self.widths[-1]

    def describe(self) -> str:
        """A short description of the layout, for error messages."""
        if self.delimiter is not None:
            return f"{self.count} parts separated by {self.delimiter!r}"
        widths = ", ".join("rest" if w is None else "to 0x00" if w == TERMINATED else str(w) for w in self.widths)
        return f"fixed widths ({widths})"

    # -- row-wise --------------------------------------------------------
    def split(self, key: bytes) -> list[bytes]:
        """The parts of ``key``; raises ``ValueError`` when it does not fit the layout."""
        if self.delimiter is not None:
            parts = key.split(self.delimiter, self.count - 1)
            if len(parts) != self.count:
                raise ValueError(f"row key has {len(parts)} parts, expected {self.describe()}")
            return parts
        size = len(key)
        if (self.total is not None and size != self.total) or size < self.prefix:
            raise ValueError(f"row key is {size} bytes, expected {self.describe()}")
        parts = []
        start = 0
        for name, width in zip(self.names, self.widths):
            if width == TERMINATED:
                end = key.find(TERMINATOR, start)
                if end < 0:
                    raise ValueError(f"row key has no 0x00 byte ending key part {name!r}, expected {self.describe()}")
                parts.append(key[start:end])
                start = end + 1
                continue
            end = size if width is None else start + width
            if end > size:
                raise ValueError(f"row key is {size} bytes, too short for {self.describe()}")
            parts.append(key[start:end])
            start = end
        if start != size:
            raise ValueError(f"row key is {size} bytes, longer than {self.describe()}")
        return parts

    def join(self, parts: Sequence[bytes]) -> bytes:
        """The key made of ``parts``; raises ``ValueError`` when a part does not fit."""
        if self.delimiter is not None:
            for name, part in zip(self.names[:-1], parts[:-1]):
                if self.delimiter in part:
                    raise ValueError(f"key part {name!r} = {part!r} contains the delimiter {self.delimiter!r}")
            return self.delimiter.join(parts)
        out = []
        for name, part, width in zip(self.names, parts, self.widths):
            if width == TERMINATED:
                if TERMINATOR in part:
                    raise ValueError(f"key part {name!r} = {part!r} contains the 0x00 byte that ends it")
                out.append(part + TERMINATOR)
                continue
            if width is not None and len(part) != width:
                raise ValueError(f"key part {name!r} = {part!r} is {len(part)} bytes, expected {width}")
            out.append(part)
        return b"".join(out)

    # -- batch -----------------------------------------------------------
    def fixed_rows(self, keys: pa.Array) -> tuple[np.ndarray, list[int]] | None:
        """``(matrix, starts)`` when every key of ``keys`` is present and of a fixed-length
        layout's full width (a dense block's key chunk): the ``(n, total)`` uint8 view of the
        keys and the byte offset of each part; None otherwise (:meth:`split_array` then)."""
        if self.delimiter is not None or self.terminated or self.total is None:
            return None
        matrix = dense_fixed_rows(as_binary(keys), self.total)
        if matrix is None:
            return None
        starts = [0]
        for width in self.widths[:-1]:
            starts.append(starts[-1] + width)
        return matrix, starts

    def split_array(self, keys: pa.Array) -> tuple[list[pa.Array], np.ndarray]:
        """Split a key column; returns the part columns and the mask of keys that do not fit."""
        keys = as_binary(keys)
        n = len(keys)
        valid = valid_mask(keys)
        if self.delimiter is not None:
            lists = pc.split_pattern(keys, self.delimiter, max_splits=self.count - 1)
            fits = pc.equal(pc.list_value_length(lists), self.count).fill_null(False)
            lists = pc.if_else(fits, lists, pa.nulls(n, lists.type))
            parts = [pc.list_element(lists, i) for i in range(self.count)]
            return parts, valid & ~fits.to_numpy(zero_copy_only=False)
        if self.terminated:
            return self._split_terminated(keys, valid)
        if self.total is not None:
            matrix = dense_fixed_rows(keys, self.total)
            if matrix is not None:
                # every key present and of the full width (a dense block's key chunk): each
                # part is one strided copy of its bytes, not a masked slice kernel per part
                parts, start = [], 0
                for width in self.widths:
                    parts.append(binary_from_row_slice(matrix, start, width))
                    start += width
                return parts, np.zeros(n, dtype=bool)
        sizes = pc.binary_length(keys).fill_null(0).to_numpy(zero_copy_only=False)
        fits = sizes >= self.prefix
        if self.total is not None:
            fits &= sizes == self.total
        mask = pa.array(fits & valid)
        kept = pc.if_else(mask, keys, pa.nulls(n, pa.binary()))
        parts = []
        start = 0
        for width in self.widths:
            stop = None if width is None else start + width
            # An explicit stop: binary_slice with stop=None mis-sizes its output
            # when null slots are non-empty (pyarrow 26).
            parts.append(pc.binary_slice(kept, start, _END if stop is None else stop))
            if stop is not None:
                start = stop
        return parts, valid & ~fits

    def _split_terminated(self, keys: pa.Array, valid: np.ndarray) -> tuple[list[pa.Array], np.ndarray]:
        """Split part by part: a terminated part is one ``split_pattern`` at its first 0x00."""
        n = len(keys)
        ok = valid.copy()
        rest = keys
        raw_parts = []
        last = self.count - 1
        for i, width in enumerate(self.widths):
            if width == TERMINATED:
                lists = pc.split_pattern(rest, TERMINATOR, max_splits=1)
                two = pc.equal(pc.list_value_length(lists), 2).fill_null(False)
                ok &= two.to_numpy(zero_copy_only=False)
                lists = pc.if_else(two, lists, pa.nulls(n, lists.type))
                raw_parts.append(pc.list_element(lists, 0))
                rest = pc.list_element(lists, 1)
                continue
            if width is None:
                raw_parts.append(rest)
                continue
            sizes = pc.binary_length(rest).fill_null(0).to_numpy(zero_copy_only=False)
            ok &= (sizes == width) if i == last else (sizes >= width)
            raw_parts.append(pc.binary_slice(rest, 0, width))
            rest = pc.binary_slice(rest, width, _END)
        mask = pa.array(ok)
        parts = [pc.if_else(mask, as_binary(p), pa.nulls(n, pa.binary())) for p in raw_parts]
        return parts, valid & ~ok

    def join_arrays(self, parts: Sequence[pa.Array]) -> tuple[pa.Array, np.ndarray]:
        """Join part columns into a key column; returns it and the mask of rows whose parts do not fit."""
        parts = [as_binary(p) for p in parts]
        n = len(parts[0]) if parts else 0
        bad = np.zeros(n, dtype=bool)
        if self.delimiter is not None:
            for part in parts[:-1]:
                bad |= _contains(part, self.delimiter)
            joined = pc.binary_join_element_wise(*parts, self.delimiter)
        else:
            pieces = []
            for part, width in zip(parts, self.widths):
                pieces.append(part)
                if width == TERMINATED:
                    bad |= _contains(part, TERMINATOR)
                    pieces.append(pa.scalar(TERMINATOR, pa.binary()))
                elif width is not None:
                    size = pc.binary_length(part).fill_null(width).to_numpy(zero_copy_only=False)
                    bad |= size != width
            joined = pc.binary_join_element_wise(*pieces, b"")
        return joined, bad


def _contains(part: pa.Array, needle: bytes) -> np.ndarray:
    """Rows of a binary column that contain ``needle`` (find_substring works on bytes)."""
    return pc.greater_equal(pc.find_substring(part, needle), 0).fill_null(False).to_numpy(zero_copy_only=False)
