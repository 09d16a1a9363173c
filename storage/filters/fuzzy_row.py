"""FuzzyRowFilter: rows matching a key pattern with fixed and free bytes."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidArgument, clip
from ._text import quote, to_bytes
from ..keys import KeyRange, prefix_stop
from .row_filters import RowKeyFilter, restricting

__all__ = ["FuzzyRowFilter"]

# A mask byte is 0 (the key's byte is fixed) or 1 (any byte), as in HBase;
# the characters "0" and "1" stand for them, so a filter string can say '0011'.
_MASK_BYTES = {0: 0, 1: 1, ord("0"): 0, ord("1"): 1}


def _runs(mask: bytes) -> list[tuple[int, int]]:
    """The ``[start, stop)`` runs of fixed positions of a (0/1) mask."""
    runs = []
    start = None
    for i, m in enumerate(mask + b"\x01"):
        if m == 0 and start is None:
            start = i
        elif m != 0 and start is not None:
            runs.append((start, i))
            start = None
    return runs


class FuzzyRowFilter(RowKeyFilter):
    """Rows whose key matches any of ``pairs`` of ``(fuzzy_key, mask)`` (HBase ``FuzzyRowFilter``).

    ``mask`` is as long as ``fuzzy_key``: at a position where it holds 0 the
    row key must have the fuzzy key's byte, where it holds 1 any byte goes
    (the characters ``"0"``/``"1"`` may stand for those bytes).  The row key
    must be at least as long as the fuzzy key; bytes past it are free.
    HBase's per-row test also lets through a row shorter than the key when
    the bytes it has match, but only when its seeks happen to land on that
    row; here such rows never pass, whatever the scan read before.

    Scanners seek to the rows that start with each pattern's leading fixed
    bytes (:meth:`row_ranges`); the batch path compares each run of fixed
    bytes with one slice-and-compare kernel over all row keys.
    """

    def __init__(self, pairs: Iterable[tuple[bytes | str, bytes | str]]):
        if isinstance(pairs, (bytes, str)):
            raise InvalidArgument("FuzzyRowFilter takes a list of (fuzzy_key, mask) pairs")
        parsed = []
        for pair in pairs:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise InvalidArgument(f"FuzzyRowFilter pairs are (fuzzy_key, mask), got {clip(repr(pair), 60)}")
            key = to_bytes(pair[0], "FuzzyRowFilter fuzzy key")
            raw = to_bytes(pair[1], "FuzzyRowFilter mask")
            if len(raw) != len(key):
                raise InvalidArgument(
                    f"FuzzyRowFilter mask has {len(raw)} bytes for a fuzzy key of {len(key)} (they must match)"
                )
            bad = [b for b in raw if b not in _MASK_BYTES]
            if bad:
                raise InvalidArgument(f"FuzzyRowFilter mask bytes must be 0 or 1 (or '0'/'1'), got {bytes(bad[:1])!r}")
            parsed.append((key, bytes(_MASK_BYTES[b] for b in raw)))
        if not parsed:
            raise InvalidArgument("FuzzyRowFilter needs at least one (fuzzy_key, mask) pair")
        self.pairs = tuple(parsed)
        self._tests = [(key, len(key), [(a, b, key[a:b]) for a, b in _runs(mask)]) for key, mask in parsed]

    def _passes(self, row: bytes) -> bool:
        for _, length, runs in self._tests:
            if len(row) >= length and all(row[a:b] == fixed for a, b, fixed in runs):
                return True
        return False

    def _passes_keys(self, keys: pa.Array) -> np.ndarray:
        lengths = pc.binary_length(keys)
        found = np.zeros(len(keys), dtype=bool)
        for _, length, runs in self._tests:
            ok = pc.greater_equal(lengths, length)
            for a, b, fixed in runs:
                ok = pc.and_(ok, pc.equal(pc.binary_slice(keys, a, b), pa.scalar(fixed, pa.binary())))
            found |= ok.to_numpy(zero_copy_only=False)
        return found

    def row_ranges(self) -> list[KeyRange] | None:
        ranges = []
        for key, mask in self.pairs:
            lead = mask.find(b"\x01")
            prefix = key if lead < 0 else key[:lead]
            ranges.append((prefix, prefix_stop(prefix)))
        return restricting(ranges)

    def _settings(self) -> tuple:
        return self.pairs

    def __repr__(self) -> str:
        args = ", ".join(f"{quote(key)}, '{''.join('01'[m] for m in mask)}'" for key, mask in self.pairs)
        return f"FuzzyRowFilter ({args})"
