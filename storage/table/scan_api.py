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

import abc
import dataclasses
import inspect
from typing import Any, Iterator, Sequence

import pyarrow as pa

from ..read.python_rows import cells_to_dicts, row_dict_chunks
from ..read.scan_request import ScanRequest, check_positive

__all__ = ["ScanCalls", "request_of"]

_REQUEST_FIELDS = tuple(f.name for f in dataclasses.fields(ScanRequest))


def _check_options(call: str, executor: Any, options: dict) -> None:
    """Refuse a keyword neither the request nor the executor takes, as a call would (TypeError)."""
    if options:
        takes = inspect.signature(executor).parameters if executor is not None else {}
        for name in options:
            if name not in takes:
                raise TypeError(f"{call}() got an unexpected keyword argument {name!r}")


def _request(call: str, given: dict, executor: Any, refused: tuple[str, ...] = (),
             **fixed: Any) -> tuple[ScanRequest, dict]:
    """The checked request of a scan call and the options left for its executor.

    ``given`` is the call's arguments by name (its ``locals()``), ``**options``
    among them: the ScanRequest fields the call does not list (nor ``refused``)
    move from there into the request, the rest must be the executor's keywords.
    """
    options = dict(given.get("options") or {})
    listed = set(given) | set(refused) | set(fixed)
    extra = {name: options.pop(name) for name in _REQUEST_FIELDS if name in options and name not in listed}
    _check_options(call, executor, options)
    kwargs = {name: value for name, value in given.items() if name in _REQUEST_FIELDS and name not in refused}
    return ScanRequest.from_happybase(**kwargs, **fixed, **extra), options


def request_of(given: dict) -> ScanRequest:
    """The checked request of a call's arguments by name (its ``locals()``): those that are
    ScanRequest fields (a call with other names for them, or other meanings, picks its own)."""
    return ScanRequest.from_happybase(**{name: value for name, value in given.items() if name in _REQUEST_FIELDS})


_SHAPES_ROWS = ("scan_batching", "sorted_columns")  # scan()'s alone: scan_batches refuses them


class ScanCalls(abc.ABC):
    """``scan`` and ``scan_batches`` over an executor's ``run_scan`` and ``_scan_rows``
    (each table front end implements both)."""

    @abc.abstractmethod
    def run_scan(self, request: ScanRequest, metrics: Any = None, **options: Any) -> Iterator[pa.RecordBatch]:
        """Run a checked request; its batches (the executor's)."""

    @abc.abstractmethod
    def _scan_rows(self, request: ScanRequest, batch_size: int | None, **options: Any) -> Iterator[tuple[bytes, dict]]:
        """Run a checked request of ``scan()``; its ``(row, dict)`` pairs, ``batch_size`` rows per fetch."""

    def scan_batches(
        self,
        row_start: bytes | None = None,
        row_stop: bytes | None = None,
        row_prefix: bytes | None = None,
        columns: Sequence[bytes] | None = None,
        filter: Any = None,
        timestamp: int | None = None,
        time_range: tuple[int, int] | None = None,
        max_versions: int | None = None,
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

        ``max_versions`` is the versions per column, 1 when not given; a raw
        scan (``raw=True``, cells only: delete markers and deleted cells) then
        returns every version, and with ``max_versions=n`` counts puts only,
        as HBase's raw scan with ``VERSIONS => n`` (:mod:`storage.read.raw`);
        its ``columns`` (qualifiers too) and ``filter`` apply to every cell,
        markers included.

        The scan fixes its read point when called.  Embedded tables take
        ``snapshot=`` (from ``Table.snapshot``) to read that snapshot's views;
        remote tables take ``mode="stream"`` (one streamed call) or ``"rpc"``
        (``caching`` rows per next() call, at most ``max_bytes`` bytes each).
        ``metrics`` (a ScanMetrics) is charged with what the scan did.
        """
        request, options = _request("scan_batches", locals(), self.run_scan, _SHAPES_ROWS)
        return self.run_scan(request, metrics, **options)

    def scan_request(self, *args: Any, **kwargs: Any) -> ScanRequest:
        """The checked request ``scan_batches(*args, **kwargs)`` would run (no executor options)."""
        given = inspect.signature(ScanCalls.scan_batches).bind(self, *args, **kwargs).arguments
        if "metrics" in given:
            raise TypeError("scan_request() got an unexpected keyword argument 'metrics'")
        return _request("scan_request", given, None, _SHAPES_ROWS)[0]

    def batches_call(self, *args: Any, **kwargs: Any) -> tuple[ScanRequest, Any, dict]:
        """``scan_batches(*args, **kwargs)`` taken apart: the checked request, the
        metrics and the executor's options (``run_scan(request, metrics, **options)``
        runs it; the parallel scanner runs it once per region)."""
        bound = inspect.signature(ScanCalls.scan_batches).bind(self, *args, **kwargs)
        request, options = _request("scan_batches", bound.arguments, self.run_scan, _SHAPES_ROWS)
        return request, bound.arguments.get("metrics"), options

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
        max_versions: int | None = None,
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
        # happybase's batch_size is rows per fetch, not the request's cells per batch
        request, options = _request("scan", locals(), self._scan_rows, ("batch_size",), output="cells")
        return self._scan_rows(request, batch_size, **options)

    @staticmethod
    def _dicts(batches: Iterator[pa.RecordBatch], request: ScanRequest) -> Iterator[tuple[bytes, dict]]:
        """The row dicts of a scan's batches (cell batches, or row batches of dense blocks)."""
        try:
            for batch in batches:
                if batch.schema.names[0] == "key":
                    # a few hundred rows at a time, not the batch's tens of thousands at once
                    # (python_rows.ROW_CHUNK): one generator level, one step per row
                    for rows in row_dict_chunks(batch, request.include_timestamp, request.sorted_columns):
                        yield from rows
                else:
                    yield from cells_to_dicts(batch, request.include_timestamp, request.sorted_columns,
                                              request.scan_batching, request.versions() != 1)
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()
