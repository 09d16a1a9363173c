"""TableRecordReader (rows) and TableBatchRecordReader (Arrow batches) over one split.

Both follow Hadoop's ``RecordReader`` life cycle: ``initialize(split,
context)``, then ``next_key_value()`` / ``next_batch()`` until it says the
split is done, ``get_progress()`` at any time, ``close()`` at the end.

A read error that may be transient (an ``OSError`` or a storage error other
than a bad argument or a lost snapshot) reopens the scan just after the
last row already handed out, as HBase's ``TableRecordReaderImpl.restart``
does, up to ``regionscan.reader.max.restarts`` times per split; each
restart is counted in ``NUM_SCANNER_RESTARTS``.  Scan metrics (HBase
names: ``ROWS_SCANNED``, ``BYTES_IN_RESULTS``, ``REGIONS_SCANNED`` ...)
are exposed by :meth:`get_counters`.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator

import pyarrow as pa

from storage import InvalidArgument, ScanMetrics, ScannerError, StorageError, TableNotFound
from storage.engine import SnapshotLost, cells_to_dicts, raw_dicts, row_boundaries

from .scanning import last_row_of, split_batches, split_row_count
from .splits import TableSplit

__all__ = ["TableRecordReader", "TableBatchRecordReader", "COUNTER_GROUP", "key_progress"]

COUNTER_GROUP = "HBaseCounters"
_LOG = logging.getLogger("connector.record_reader")
_FATAL = (InvalidArgument, SnapshotLost, TableNotFound, ScannerError)


def _restartable(exc: BaseException) -> bool:
    if isinstance(exc, _FATAL):
        return False
    return isinstance(exc, (OSError, StorageError))


def _position(key: bytes, skip: int) -> int:
    return int.from_bytes(key[skip : skip + 8].ljust(8, b"\x00"), "big")


def key_progress(start: bytes, end: bytes | None, key: bytes | None) -> float:
    """Where ``key`` lies in ``[start, end)``, from 0.0 to 1.0, by big-endian key position.

    The common prefix of start and end is skipped so keys that differ only
    late still spread over the range.
    """
    if key is None:
        return 0.0
    skip = 0
    if end is not None:
        while skip < min(len(start), len(end)) and start[skip] == end[skip]:
            skip += 1
    lo = _position(start, skip)
    hi = _position(end, skip) if end is not None else 1 << 64
    if hi <= lo:
        return 0.0
    return min(1.0, max(0.0, (_position(key, skip) - lo) / (hi - lo)))


class _SplitScan:
    """The resumable batch stream of one split, shared by both readers."""

    def __init__(self, split: TableSplit, output: str, max_restarts: int, remote_options: dict[str, Any]):
        if not isinstance(split, TableSplit):
            raise InvalidArgument(f"a record reader needs a TableSplit, got {type(split).__name__}")
        self.split = split
        self.output = output
        self.max_restarts = max_restarts
        self.remote_options = remote_options
        self.metrics = ScanMetrics()
        self.restarts = 0
        self.last_row: bytes | None = None  # the last row handed out
        self.done = False
        self._stream = self._open()

    def _open(self) -> Iterator[pa.RecordBatch]:
        return split_batches(self.split, self.output, self.last_row, self.metrics, self.remote_options)

    def next_batch(self) -> pa.RecordBatch | None:
        """The next non-empty batch, restarting after transient errors; None at the end."""
        while not self.done:
            try:
                batch = next(self._stream, None)
            except Exception as exc:  # sorted by _restartable; anything else propagates
                if not _restartable(exc) or self.restarts >= self.max_restarts:
                    raise
                self.restarts += 1
                _LOG.warning(
                    "split %d of %s: read error (%s); restarting after row %r (restart %d of %d)",
                    self.split.index, self.split.table, exc, self.last_row, self.restarts, self.max_restarts,
                )
                self._stream = self._open()
                continue
            if batch is None:
                self.done = True
                return None
            if batch.num_rows:
                return batch
        return None

    def counters(self) -> dict[str, int | float]:
        """Scan metrics by HBase name plus ``NUM_SCANNER_RESTARTS``."""
        out = self.metrics.to_dict()
        out["NUM_SCANNER_RESTARTS"] = self.restarts
        return out

    def close(self) -> None:
        """Stop the scan and release its files."""
        self.done = True
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class _ReaderBase:
    def __init__(self, max_restarts: int = 3, remote_options: dict[str, Any] | None = None):
        if not isinstance(max_restarts, int) or max_restarts < 0:
            raise InvalidArgument(f"max_restarts must be a non-negative int, got {max_restarts!r}")
        self.max_restarts = max_restarts
        self.remote_options = dict(remote_options or {})
        self._scan: _SplitScan | None = None

    def _require(self) -> _SplitScan:
        if self._scan is None:
            raise InvalidArgument("record reader used before initialize(split)")
        return self._scan

    def get_progress(self) -> float:
        """Fraction of the split's key range read so far (1.0 once done)."""
        scan = self._scan
        if scan is None:
            return 0.0
        if scan.done:
            return 1.0
        return key_progress(scan.split.start, scan.split.end, scan.last_row)

    def count_rows(self) -> int:
        """The rows the reader has still to hand out, counted instead of read; the
        reader is done afterwards.

        Before the first row, a split without columns, filter or time range is
        counted from the store files' block indexes where they can answer
        (:func:`connector.scanning.split_row_count`); otherwise the remaining
        batches are read and their rows counted.
        """
        scan = self._require()
        raw = scan.split.scan is not None and scan.split.scan.request.raw  # cells, rows of markers alone included
        if scan.last_row is None and not scan.done and not raw:
            counted = split_row_count(scan.split, scan.metrics, scan.remote_options)
            if counted is not None:
                scan.close()
                return counted
        total = 0
        while (batch := scan.next_batch()) is not None:
            total += batch.num_rows if scan.output == "rows" and not raw else len(row_boundaries(batch))
        return total

    def get_counters(self) -> dict[str, int | float]:
        """Scan metrics by HBase name, plus ``NUM_SCANNER_RESTARTS`` (group :data:`COUNTER_GROUP`)."""
        return self._scan.counters() if self._scan is not None else {}

    @property
    def split(self) -> TableSplit | None:
        """The split being read, or None before :meth:`initialize`."""
        return self._scan.split if self._scan is not None else None

    def close(self) -> None:
        """Stop the scan and release its files."""
        if self._scan is not None:
            self._scan.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TableRecordReader(_ReaderBase):
    """Rows of one split as ``(row key, {b"family:qualifier": value})`` pairs.

    With the scan's ``batch`` (``hbase.mapreduce.scan.batchsize``) a wide
    row comes out as several values of at most that many cells, as HBase's
    ``Scan.setBatch`` partial results.
    """

    def __init__(self, max_restarts: int = 3, remote_options: dict[str, Any] | None = None):
        super().__init__(max_restarts, remote_options)
        self._rows: Iterator[tuple[bytes, dict]] = iter(())
        self._key: bytes | None = None
        self._value: dict | None = None

    def initialize(self, split: TableSplit, context: Any = None) -> None:
        """Open the scan of ``split`` (``context`` is accepted for Hadoop's signature and unused)."""
        self.close()
        self._scan = _SplitScan(split, "cells", self.max_restarts, self.remote_options)
        self._rows = iter(())
        self._key = self._value = None

    def next_key_value(self) -> bool:
        """Advance to the next row; False when the split is done."""
        scan = self._require()
        while True:
            pair = next(self._rows, None)
            if pair is not None:
                self._key, self._value = pair
                scan.last_row = pair[0]
                return True
            batch = scan.next_batch()
            if batch is None:
                self._key = self._value = None
                return False
            spec = scan.split.scan
            if spec is not None and spec.request.raw:  # markers and every version: the raw scan's dicts
                self._rows = raw_dicts(batch)
                continue
            batching = spec.batch if spec is not None else None
            all_versions = spec is not None and spec.request.versions() > 1
            include_ts = spec is not None and spec.request.include_timestamp
            self._rows = cells_to_dicts(batch, include_ts, False, batching, all_versions)

    def get_current_key(self) -> bytes | None:
        """The current row key (HBase's ``ImmutableBytesWritable``)."""
        return self._key

    def get_current_value(self) -> dict | None:
        """The current row's cells ``{b"cf:q": value}`` (HBase's ``Result``)."""
        return self._value

    def __iter__(self) -> Iterator[tuple[bytes, dict]]:
        while self.next_key_value():
            yield self._key, self._value


class TableBatchRecordReader(_ReaderBase):
    """Rows of one split as Arrow row batches (``key`` + one column per requested column).

    The scan's ``caching`` (``hbase.mapreduce.scan.cachedrows``) caps the
    rows per batch; batches are zero-copy slices of the engine's.
    """

    def __init__(self, max_restarts: int = 3, remote_options: dict[str, Any] | None = None):
        super().__init__(max_restarts, remote_options)
        self._pending: pa.RecordBatch | None = None

    def initialize(self, split: TableSplit, context: Any = None) -> None:
        """Open the scan of ``split``."""
        self.close()
        self._scan = _SplitScan(split, "rows", self.max_restarts, self.remote_options)
        self._pending = None

    def next_batch(self) -> pa.RecordBatch | None:
        """The next batch of rows, or None when the split is done."""
        scan = self._require()
        if self._pending is None:
            self._pending = scan.next_batch()
            if self._pending is None:
                return None
        batch = self._pending
        spec = scan.split.scan
        # a raw scan's batches are cells of whole rows: kept whole, so a restart after the
        # last row handed out repeats no cell and loses none
        limit = spec.caching if spec is not None and not spec.request.raw else None
        if limit is not None and batch.num_rows > limit:
            out, self._pending = batch.slice(0, limit), batch.slice(limit)
        else:
            out, self._pending = batch, None
        scan.last_row = last_row_of(out)
        return out

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            batch = self.next_batch()
            if batch is None:
                return
            yield batch
