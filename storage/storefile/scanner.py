"""StoreFileScanner: the cell-at-a-time path over one store file.

It follows the engine's scanner protocol (``docs/architecture.md``): seek,
reseek, peek, next, seek_to_previous_row, seek_to_last_row, close.  For the
current block the scanner keeps the row keys as one bytes copy plus offsets
(positions are found with ``bisect`` on them) and turns cells into Python
tuples a window at a time, with one ``to_pylist`` per column per window,
never per cell: ``next`` is a list index and an attribute store.  Moving
forward past a block reads the next one sequentially (with the reader's
prefetched header).  The block decoded before the current one is kept too,
since reverse steps and reseeks around a block boundary revisit it.

``reseek`` never moves backwards; on a scanner past the end (or after a get
that the bloom filter skipped) it behaves as ``seek``.

Reverse scans (HBASE-28043): stepping to the previous row needs the first
cell of the row before ``row``.  Done naively that is two seeks, one to find
the previous row and one to find its first cell.  The scanner keeps a hint
``(row, previous row)`` from each step, so the next step knows its target
row already: one seek to the cell just before the target (which also tells
the row before it, the next hint) and a forward reseek to the target.
``counters.seeks`` counts every positioning that searches the block index
and a block from its start, so a reverse scan over N rows costs about N
seeks, not 2N.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import partial
from typing import Protocol

import numpy as np
import pyarrow as pa

from ..cells import Cell
from ..errors import InvalidArgument, ScannerError
from ._block import Block
from .counters import ReadCounters
from .fileinfo import FileInfo

__all__ = ["StoreFileScanner", "ScannedFile"]


class ScannedFile(Protocol):
    """What a scanner reads of its file: a :class:`~storage.storefile.reader.StoreFileReader`
    (which makes its scanners, so this module names it through this protocol only)."""

    info: FileInfo
    counters: ReadCounters
    block_count: int

    def find_block(self, key: tuple) -> int: ...

    def might_contain_row(self, row: bytes) -> bool: ...

    def _block(self, i: int, cache_blocks: bool = True, use_cache: bool = True) -> Block: ...

    def _next_block(self, block: Block, cache_blocks: bool = True, use_cache: bool = True) -> Block | None: ...

# Builds Cell tuples from plain tuples without a Python-level __new__ per cell.
_make_cell = partial(tuple.__new__, Cell)

# Cells are turned into Python objects a window at a time: a get touches one
# small window of one block instead of paying for the whole block (profiled:
# making Cell tuples for a 64 KiB block costs several times the rest of a
# get), while reading on sequentially takes large windows, which amortize the
# per-call cost of to_pylist.  Windows start at multiples of _UNIT cells.
_UNIT_SHIFT = 6
_UNIT = 1 << _UNIT_SHIFT
_SEQUENTIAL_WINDOW = 512


def _key_after_row(cell: tuple) -> tuple:
    # The part of a sort key that orders cells within one row.
    return (cell[1], cell[2], -cell[3], -cell[4])


class _RowKeys:
    """The row column of a block as a read-only sequence of ``bytes`` for
    ``bisect``: one copy of the row bytes and the offsets, no object per row."""

    __slots__ = ("_data", "_offsets", "_n")

    def __init__(self, rows: pa.Array):
        n = len(rows)
        bufs = rows.buffers()
        offsets = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=rows.offset * 4)
        base, end = int(offsets[0]), int(offsets[-1])
        self._data = bufs[2].slice(base, end - base).to_pybytes() if bufs[2] is not None else b""
        self._offsets = (offsets - base).tolist()
        self._n = n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> bytes:
        if i < 0:
            i += self._n
        return self._data[self._offsets[i] : self._offsets[i + 1]]


class _Decoded:
    """A block for the cell path: its row keys (for bisect) and its cells as
    Python tuples, made on demand one window of cells at a time."""

    __slots__ = ("block", "index", "batch", "rows", "n", "_windows")

    def __init__(self, block):
        self.block = block
        self.index = block.index
        self.batch = block.batch
        self.rows = _RowKeys(self.batch.column(0))
        self.n = len(self.rows)
        self._windows: dict[int, list] = {}

    def window(self, p: int, size: int) -> tuple[int, list]:
        """``(start, cells)`` of a decoded window holding position ``p``; a new
        window starts at ``p``'s unit and spans ``size`` cells (one to_pylist
        per column)."""
        unit = p >> _UNIT_SHIFT
        found = self._windows.get(unit)
        if found is None:
            start = unit << _UNIT_SHIFT
            part = self.batch.slice(start, size)
            found = (start, list(map(_make_cell, zip(*(part.column(i).to_pylist() for i in range(6))))))
            for u in range(unit, unit + -(-len(found[1]) // _UNIT)):
                self._windows[u] = found
        return found

    def cell(self, p: int) -> Cell:
        start, cells = self.window(p, _UNIT)
        return cells[p - start]


class StoreFileScanner:
    """A position in one store file, moved by seeks and ``next``.

    Keys are :func:`storage.cells.sort_key` tuples or prefixes of them
    (``(row,)`` is the position before every cell of ``row``).  Methods
    return the cell now current (``None`` past the end).  Not thread-safe
    by itself: one thread at a time (successive calls may come from
    different threads).
    """

    def __init__(self, reader: ScannedFile, *, cache_blocks: bool = True):
        self._reader = reader
        self._counters = reader.counters
        self._cache_blocks = cache_blocks
        self._dec: _Decoded | None = None  # the current block
        self._other: _Decoded | None = None  # the block decoded before it (reverse steps revisit it)
        self._rows: _RowKeys | list = []
        self._n = 0
        self._pos = 0
        # The window of decoded cells holding the current position: next()
        # stays inside it with one list index.
        self._win: list = []
        self._win_start = 0
        self._win_end = 0
        self._cur: Cell | None = None
        self._hint: tuple[bytes, bytes | None] | None = None  # (row, the row before it)
        self._closed = False

    # -- block handling ----------------------------------------------------
    def _use(self, dec: _Decoded) -> None:
        if self._dec is not dec:
            self._other, self._dec = self._dec, dec
            self._rows, self._n = dec.rows, dec.n
            self._win_start = self._win_end = 0

    def _go_to_block(self, i: int) -> None:
        if self._dec is not None and self._dec.index == i:
            return
        if self._other is not None and self._other.index == i:
            self._use(self._other)
            return
        self._use(_Decoded(self._reader._block(i, self._cache_blocks)))

    def _go_to_next_block(self) -> bool:
        nxt = self._dec.index + 1
        if self._other is not None and self._other.index == nxt:
            self._use(self._other)
            return True
        block = self._reader._next_block(self._dec.block, self._cache_blocks)
        if block is None:
            return False
        self._use(_Decoded(block))
        return True

    def _settle(self, p: int) -> Cell | None:
        """Make cell ``p`` of the current block current, moving on past its end."""
        while p >= self._n:
            if not self._go_to_next_block():
                self._pos, self._cur = self._n, None
                return None
            p = 0
        if not self._win_start <= p < self._win_end:
            # Reading on from the end of the last window: a large one.
            size = _SEQUENTIAL_WINDOW if p == self._win_end else _UNIT
            self._win_start, self._win = self._dec.window(p, size)
            self._win_end = self._win_start + len(self._win)
        self._pos = p
        self._cur = self._win[p - self._win_start]
        return self._cur

    def _lower_bound(self, key: tuple, lo: int) -> int:
        """First position >= ``lo`` in the current block whose cell sorts >= ``key``."""
        n = self._n
        if not key:
            return lo
        rows = self._rows
        row = key[0]
        lo = bisect_left(rows, row, lo, n)
        if len(key) == 1 or lo == n or rows[lo] != row:
            return lo
        hi = bisect_right(rows, row, lo, n)
        cell = self._dec.cell
        return bisect_left(range(hi), key[1:], lo, hi, key=lambda j: _key_after_row(cell(j)))

    def _in_block(self, key: tuple) -> bool:
        """True if ``key`` sorts at or before the current block's last cell."""
        last_row = self._rows[-1]
        if not key or key[0] < last_row:
            return True
        if key[0] > last_row:
            return False
        last = self._dec.cell(self._n - 1)
        return key <= (last[0], last[1], last[2], -last[3], -last[4])

    def _check(self) -> None:
        if self._closed:
            raise ScannerError("store file scanner is closed")

    # -- forward protocol --------------------------------------------------
    def seek(self, key: tuple, *, exact_row: bool = False) -> Cell | None:
        """Position at the first cell with sort key >= ``key`` and return it.

        With ``exact_row`` the caller wants only cells of ``key[0]``'s row (a
        get): when the file's key range or bloom filter rules the row out,
        nothing is read and None is returned (a later seek or reseek
        positions the scanner normally).
        """
        self._check()
        if not isinstance(key, tuple):
            raise InvalidArgument(f"seek key must be a sort-key tuple, got {key!r}")
        if exact_row and (not key or not self._reader.might_contain_row(key[0])):
            self._cur = None
            return None
        self._counters.add("seeks")
        i = self._reader.find_block(key)
        if i < 0:
            self._cur = None
            return None
        self._go_to_block(i)
        return self._settle(self._lower_bound(key, 0))

    def reseek(self, key: tuple) -> Cell | None:
        """Like :meth:`seek` for ``key`` at or after the current position; moves
        forward only, reading on sequentially when the key is in the next block."""
        self._check()
        if self._cur is None:
            return self.seek(key)
        if self._in_block(key):
            return self._settle(self._lower_bound(key, self._pos))
        here = self._dec.index
        j = self._reader.find_block(key)
        if j <= here:  # between this block's last cell and the next block's first
            return self._settle(self._n)
        if j == here + 1:
            self._go_to_next_block()
            return self._settle(self._lower_bound(key, 0))
        self._counters.add("seeks")
        self._go_to_block(j)
        return self._settle(self._lower_bound(key, 0))

    def peek(self) -> Cell | None:
        """The current cell, not consumed (None before a seek or past the end)."""
        return self._cur

    def next(self) -> Cell | None:
        """Return the current cell and advance (None past the end)."""
        cur = self._cur
        if cur is None:
            return None
        p = self._pos + 1
        if p < self._win_end:
            self._pos = p
            self._cur = self._win[p - self._win_start]
        else:
            self._settle(p)
        return cur

    # -- reverse protocol --------------------------------------------------
    def _seek_before(self, key: tuple) -> Cell | None:
        """Position at the last cell sorting before ``key`` and return it; with no
        such cell, position at the file's first cell and return None.  One seek."""
        self._counters.add("seeks")
        i = self._reader.find_block(key)
        self._go_to_block(i)
        p = self._lower_bound(key, 0)
        if p == 0 and i > 0:
            self._go_to_block(i - 1)
            p = self._n
        if p == 0:
            self._settle(0)
            return None
        return self._settle(p - 1)

    def _step_to(self, target: bytes) -> Cell | None:
        """Position at the first cell of ``target`` (a row of the file), leaving a hint."""
        before = self._seek_before((target,))
        self._hint = (target, None if before is None else before[0])
        return self.reseek((target,))

    def seek_to_previous_row(self, row: bytes) -> Cell | None:
        """Position at the first cell of the last row before ``row`` and return it
        (None if there is none)."""
        self._check()
        if self._reader.block_count == 0:
            self._cur = None
            return None
        hint = self._hint
        if hint is not None and hint[0] == row:
            target = hint[1]  # known from the previous step: no seek to find it
        else:
            before = self._seek_before((row,))
            target = None if before is None else before[0]
        if target is None:
            self._cur = None
            return None
        return self._step_to(target)

    def seek_to_last_row(self) -> Cell | None:
        """Position at the first cell of the file's last row and return it."""
        self._check()
        last = self._reader.info.last_cell
        if last is None:
            self._cur = None
            return None
        return self._step_to(last[0])

    def close(self) -> None:
        """Release the decoded blocks; later positioning calls raise ScannerError."""
        self._closed = True
        self._dec = self._other = None
        self._rows, self._win, self._n, self._cur = [], [], 0, None
        self._win_start = self._win_end = 0

    def __enter__(self) -> "StoreFileScanner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
