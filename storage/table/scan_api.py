"""The happybase scan calls, written once for every table front end.

:class:`ScanCalls` turns ``scan(...)`` and ``scan_batches(...)`` arguments
into one checked :class:`~storage.read.scan_request.ScanRequest` and hands it
to the table's executor: the embedded :class:`~storage.table.table.Table`
plans and runs it over its regions, :class:`~storage.server.remote_table.RemoteTable`
sends it to a region server.  Both therefore take the same arguments and
refuse the same mistakes with the same message, before any work starts.

Keywords beyond the listed ones that name a ScanRequest field go into the
request (so a field added there is an argument of every front end at once);
the rest are the executor's own options (``path=`` embedded; ``mode=``,
``caching=``, ``max_bytes=`` remote; ``snapshot=`` embedded batches).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa

from ..read.python_rows import cells_to_dicts, rows_to_dicts
from ..read.scan_request import ScanRequest, check_positive

__all__ = ["ScanCalls", "request_options"]

_REQUEST_FIELDS = tuple(f.name for f in dataclasses.fields(ScanRequest))


def request_options(options: dict, taken: Iterable[str]) -> dict:
    """Move the ScanRequest fields a call does not list (``taken``) out of ``options``."""
    skip = set(taken)
    return {name: options.pop(name) for name in _REQUEST_FIELDS if name in options and name not in skip}


# the arguments scan() lists itself, plus the request fields it sets on its own
_SCAN_TAKES = ("row_start", "row_stop", "row_prefix", "columns", "filter", "timestamp", "include_timestamp",
               "batch_size", "scan_batching", "limit", "sorted_columns", "reverse", "time_range", "max_versions",
               "output")
_BATCHES_TAKES = ("row_start", "row_stop", "row_prefix", "columns", "filter", "timestamp", "time_range",
                  "max_versions", "limit", "reverse", "output", "include_timestamp", "batch_size",
                  "scan_batching", "sorted_columns")


class ScanCalls:
    """``scan`` and ``scan_batches`` over an executor's ``run_scan`` and ``_scan_rows``."""

    def run_scan(self, request: ScanRequest, metrics: Any = None, **options: Any) -> Iterator[pa.RecordBatch]:
        """Run a checked request; its batches (the executor's)."""
        raise NotImplementedError

    def _scan_rows(self, request: ScanRequest, batch_size: int | None, **options: Any) -> Iterator[tuple[bytes, dict]]:
        raise NotImplementedError

    def scan_batches(
        self,
        row_start: bytes | None = None,
        row_stop: bytes | None = None,
        row_prefix: bytes | None = None,
        columns: Sequence[bytes] | None = None,
        filter: Any = None,
        timestamp: int | None = None,
        time_range: tuple[int, int] | None = None,
        max_versions: int = 1,
        limit: int | None = None,
        reverse: bool = False,
        output: str = "rows",
        include_timestamp: bool = False,
        batch_size: int = 65536,
        metrics: Any = None,
        **options: Any,
    ) -> Iterator[pa.RecordBatch]:
        """Scan as Arrow record batches: ``output="rows"`` (key + one column per
        requested column) or ``"cells"`` (the six cell columns); ``batch_size``
        cells per batch at most.  The vectorized path.

        The scan fixes its read point when called.  Embedded tables take
        ``snapshot=`` (from ``Table.snapshot``) to read that snapshot's views;
        remote tables take ``mode="stream"`` (one streamed call) or ``"rpc"``
        (``caching`` rows per next() call, at most ``max_bytes`` bytes each).
        ``metrics`` (a ScanMetrics) is charged with what the scan did.
        """
        request = ScanRequest.from_happybase(
            row_start=row_start, row_stop=row_stop, row_prefix=row_prefix, columns=columns, filter=filter,
            timestamp=timestamp, time_range=time_range, max_versions=max_versions, limit=limit, reverse=reverse,
            output=output, include_timestamp=include_timestamp, batch_size=batch_size,
            **request_options(options, _BATCHES_TAKES),
        )
        return self.run_scan(request, metrics, **options)

    def scan(
        self,
        row_start: bytes | None = None,
        row_stop: bytes | None = None,
        row_prefix: bytes | None = None,
        columns: Sequence[bytes] | None = None,
        filter: Any = None,
        timestamp: int | None = None,
        include_timestamp: bool = False,
        batch_size: int | None = 1000,
        scan_batching: int | None = None,
        limit: int | None = None,
        sorted_columns: bool = False,
        reverse: bool = False,
        time_range: tuple[int, int] | None = None,
        max_versions: int = 1,
        **options: Any,
    ) -> Iterator[tuple[bytes, dict]]:
        """Scan rows as ``(row_key, {b"cf:q": value})`` pairs, as happybase does.

        ``include_timestamp`` makes values ``(value, timestamp)`` pairs;
        ``sorted_columns`` gives OrderedDicts in column order; ``reverse``
        scans from ``row_start`` (highest, inclusive) down to ``row_stop``
        (exclusive); ``scan_batching`` caps cells per yielded chunk of a wide
        row; ``batch_size`` is happybase's rows per fetch.  Embedded tables
        take ``path="cell"`` (the cell-at-a-time scanners instead of the batch
        kernels; same results); remote tables ``mode=`` and ``caching=``
        (rows per next() call, ``batch_size`` by default).
        """
        if batch_size is not None:
            check_positive("batch_size", batch_size)
        request = ScanRequest.from_happybase(
            row_start=row_start, row_stop=row_stop, row_prefix=row_prefix, columns=columns, filter=filter,
            timestamp=timestamp, include_timestamp=include_timestamp, scan_batching=scan_batching, limit=limit,
            sorted_columns=sorted_columns, reverse=reverse, time_range=time_range, max_versions=max_versions,
            output="cells", **request_options(options, _SCAN_TAKES),
        )
        return self._scan_rows(request, batch_size, **options)

    @staticmethod
    def _dicts(batches: Iterator[pa.RecordBatch], request: ScanRequest) -> Iterator[tuple[bytes, dict]]:
        """The row dicts of a scan's batches (cell batches, or row batches of dense blocks)."""
        try:
            for batch in batches:
                if batch.schema.names[0] == "key":
                    yield from rows_to_dicts(batch, request.include_timestamp, request.sorted_columns)
                else:
                    yield from cells_to_dicts(batch, request.include_timestamp, request.sorted_columns,
                                              request.scan_batching, request.max_versions > 1)
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()
