"""Between the engine's values and HBase's Thrift structs.

Column names follow HBase's gateway (``CellUtil.parseColumn``): in a *read*
column list they are the engine's column specs (:mod:`storage.columns`):
``b"cf"`` is the whole family, ``b"cf:q"`` a column and ``b"cf:"`` the column
with the empty qualifier; in a *mutation*, ``b"cf"`` deletes the family and
puts to the empty qualifier, while ``b"cf:"`` names the empty qualifier.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import kernels
from ..errors import InvalidArgument
from ..names import nearest_name
from ..read.python_rows import cells_to_dicts
from ..read.scan_request import ScanRequest
from .idl import hbase

__all__ = [
    "read_columns",
    "family_column",
    "put_column",
    "family_options",
    "column_descriptor",
    "region_info",
    "row_results",
    "raw_row_results",
    "scan_attributes",
    "scan_request",
    "row_result",
    "cells_of_batches",
]

TCell = hbase.TCell
TColumn = hbase.TColumn
TRowResult = hbase.TRowResult

_FOREVER = (1 << 31) - 1  # HBase writes "no TTL" as Integer.MAX_VALUE


def read_columns(columns: Iterable[bytes] | None) -> list[bytes] | None:
    """A read's column list for the engine (None for all): the specs as sent,
    parsed by the engine's one column-spec parser."""
    if not columns:
        return None
    out = []
    for c in columns:
        if not isinstance(c, bytes):
            raise InvalidArgument(f"column names must be bytes, got {c!r:.60}")
        out.append(c)
    return out


RAW_ATTRIBUTE = b"_raw_"
"""The scan attribute asking for a raw scan: the name HBase's ``Scan.setRaw`` stored
its flag under while raw was a scan attribute, its value ``Bytes.toBytes(true)``."""
VERSIONS_ATTRIBUTE = b"_versions_"
"""The scan attribute giving a raw scan's versions per column (HBase's ``VERSIONS => n``)."""
_SCAN_ATTRIBUTES = (RAW_ATTRIBUTE, VERSIONS_ATTRIBUTE)


def _attribute_flag(name: bytes, value) -> bool:
    """A boolean attribute: HBase's ``Bytes.toBytes(boolean)`` (one byte, not 0 is true)
    or the text ``true`` / ``false``."""
    if isinstance(value, bytes):
        if len(value) == 1:
            return value != b"\x00"
        if value.lower() in (b"true", b"false"):
            return value.lower() == b"true"
    raise InvalidArgument(f"scan attribute {name.decode()!r} must be one byte (Bytes.toBytes(boolean)) "
                          f"or 'true'/'false', got {value!r:.40}")


def _attribute_versions(value) -> int:
    if isinstance(value, bytes) and value.isdigit() and int(value) >= 1:
        return int(value)
    raise InvalidArgument(f"scan attribute {VERSIONS_ATTRIBUTE.decode()!r} must be a positive decimal number "
                          f"as text, got {value!r:.40}")


def scan_attributes(attributes) -> dict:
    """The engine arguments a scanner's ``attributes`` map asks for: ``raw`` from
    ``_raw_`` and ``max_versions`` from ``_versions_`` (raw scans only).  Other
    attributes are opaque, as HBase's scan attributes; a name in HBase's
    reserved ``_name_`` form close to one of these is refused, naming it."""
    out: dict = {}
    if not attributes:
        return out
    if not isinstance(attributes, dict):
        raise InvalidArgument(f"attributes must be a map of bytes to bytes, got {type(attributes).__name__}")
    known = [n.decode() for n in _SCAN_ATTRIBUTES]
    for name in attributes:
        if not isinstance(name, bytes):
            raise InvalidArgument(f"attribute names must be bytes, got {name!r:.40}")
        text = name.decode("utf-8", "replace")
        if name not in _SCAN_ATTRIBUTES and text.startswith("_") and nearest_name(text, known):
            raise InvalidArgument(f"unknown scan attribute {text!r}; did you mean {nearest_name(text, known)!r}?")
    if RAW_ATTRIBUTE in attributes:
        out["raw"] = _attribute_flag(RAW_ATTRIBUTE, attributes[RAW_ATTRIBUTE])
    if VERSIONS_ATTRIBUTE in attributes:
        if not out.get("raw"):
            raise InvalidArgument("scan attribute '_versions_' applies to raw scans: set '_raw_' too "
                                  "(a Thrift 1 row holds one cell per column)")
        out["max_versions"] = _attribute_versions(attributes[VERSIONS_ATTRIBUTE])
    return out


def scan_request(scan: "hbase.TScan", prefix: bytes | None = None, attributes=None) -> ScanRequest:
    """The engine request of a ``TScan`` (or of ``scannerOpenWithPrefix``'s ``prefix``):
    cells, its ``batchSize`` as cells per row piece and ``sortColumns`` as sorted columns;
    the scanner's ``attributes`` may ask for a raw scan (:func:`scan_attributes`)."""
    batching = scan.batchSize
    if batching is not None and batching < 1:
        raise InvalidArgument(f"TScan.batchSize must be at least 1, got {batching}")
    if prefix is not None:
        bounds = {"row_prefix": prefix}
    else:
        bounds = {"row_start": scan.startRow or None, "row_stop": scan.stopRow or None}
    return ScanRequest.from_happybase(
        **bounds, columns=read_columns(scan.columns), filter=scan.filterString or None, timestamp=scan.timestamp,
        reverse=bool(scan.reversed), output="cells", scan_batching=batching, sorted_columns=bool(scan.sortColumns),
        **scan_attributes(attributes),
    )


def family_column(family: bytes) -> list[bytes]:
    """The column list reading one family named as getColumnDescriptors names it
    (``b"cf:"``) or bare (``b"cf"``)."""
    if not isinstance(family, bytes) or not family.rstrip(b":"):
        raise InvalidArgument(f"family must be non-empty bytes like b'cf', got {family!r:.60}")
    return [family[:-1] if family.endswith(b":") else family]


def put_column(column: bytes) -> bytes:
    """A put's column: ``b"cf"`` writes the empty qualifier, as HBase's gateway does."""
    if not isinstance(column, bytes) or not column:
        raise InvalidArgument(f"mutation column must be non-empty bytes like b'cf:q', got {column!r:.60}")
    return column if b":" in column else column + b":"


def _text(value) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def family_options(descriptor) -> tuple[bytes, dict]:
    """(family name, engine options) of a ColumnDescriptor sent to createTable."""
    name = descriptor.name
    if not isinstance(name, bytes) or not name.rstrip(b":"):
        raise InvalidArgument(f"column family name must be non-empty bytes, got {name!r:.60}")
    if name.count(b":") > 1 or (b":" in name and not name.endswith(b":")):
        raise InvalidArgument(f"column family name {name!r} may only end with ':'")
    options = {
        "max_versions": descriptor.maxVersions,
        "compression": _text(descriptor.compression) or "NONE",
        "bloom_filter_type": _text(descriptor.bloomFilterType) or "NONE",
        "in_memory": descriptor.inMemory,
        "block_cache_enabled": descriptor.blockCacheEnabled,
    }
    ttl = descriptor.timeToLive
    if ttl is not None and ttl != -1 and ttl != _FOREVER:
        options["time_to_live"] = ttl
    return name.rstrip(b":"), options


def column_descriptor(family: bytes, settings: dict):
    """The ColumnDescriptor HBase's getColumnDescriptors reports for a family."""
    compression = settings.get("compression")
    ttl = settings.get("ttl")
    return hbase.ColumnDescriptor(
        name=family + b":",
        maxVersions=settings.get("max_versions", 1),
        compression=compression.upper() if compression else "NONE",
        inMemory=False,
        bloomFilterType="ROW" if settings.get("bloom_filter", True) else "NONE",
        bloomFilterVectorSize=0,
        bloomFilterNbHashes=0,
        blockCacheEnabled=True,
        timeToLive=_FOREVER if ttl is None else int(ttl),
    )


def region_info(region: dict, host: str, port: int):
    """TRegionInfo of one entry of ``Table.regions()``."""
    rid = region["id"]
    return hbase.TRegionInfo(
        startKey=region["start_key"],
        endKey=region["end_key"],
        id=int(rid) if str(rid).isdigit() else 0,
        name=region["name"],
        version=int(region.get("version", 1)),
        serverName=host.encode(),
        port=port,
    )


def row_results(batches: Iterator, sort_columns: bool, scan_batching: int | None = None) -> Iterator:
    """TRowResults of an engine scan's cell batches, one Python step per row.

    Row boundaries, keys and column names come from the engine's batch
    kernels (:func:`storage.read.python_rows.cells_to_dicts`), which also build each
    ``TCell``; ``sort_columns`` fills ``sortedColumns`` (a list in column
    order) instead of the ``columns`` map, as HBase does for a TScan with
    sortColumns; ``scan_batching`` cuts wide rows into partial rows.
    Closing the iterator closes the scan.
    """
    try:
        for batch in batches:
            rows = cells_to_dicts(batch, True, sort_columns, scan_batching, False, cell=TCell)
            if sort_columns:
                for key, data in rows:
                    yield TRowResult(row=key, sortedColumns=[TColumn(n, c) for n, c in data.items()])
            else:
                for key, data in rows:
                    yield TRowResult(row=key, columns=data)
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()  # frees the region views the engine scan holds


def raw_row_results(batches: Iterator, scan_batching: int | None = None) -> Iterator:
    """TRowResults of a raw scan's cell batches: every cell, markers included, as
    ``sortedColumns`` in cell order (a column may hold several cells, which the
    ``columns`` map cannot), each ``TCell`` with its ``type`` code.
    ``scan_batching`` cuts a row into pieces of at most that many cells.
    Row bounds and column names come from the batch kernels; one Python step
    per row or piece.  Closing the iterator closes the scan."""
    try:
        for batch in batches:
            n = batch.num_rows
            if not n:
                continue
            starts = kernels.row_boundaries(batch)
            ends = np.append(starts[1:], n)
            keys = batch.column("row").take(pa.array(starts)).to_pylist()
            names = pc.binary_join_element_wise(batch.column("family"), batch.column("qualifier"), b":").to_pylist()
            cells = list(map(TCell, batch.column("value").to_pylist(), batch.column("timestamp").to_pylist(),
                             batch.column("type").to_pylist()))
            columns = list(map(TColumn, names, cells))
            for key, lo, hi in zip(keys, starts.tolist(), ends.tolist()):
                step = scan_batching or (hi - lo)
                for at in range(lo, hi, step):
                    yield TRowResult(row=key, sortedColumns=columns[at:min(at + step, hi)])
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()  # frees the region views the engine scan holds


def row_result(key: bytes, data: dict):
    """The TRowResult of a point read's ``{column: (value, timestamp)}`` row."""
    return TRowResult(row=key, columns={name: TCell(value, ts) for name, (value, ts) in data.items()})


def cells_of_batches(batches) -> list:
    """TCells of cell batches (value and timestamp columns), in cell order."""
    out = []
    for batch in batches:
        values = batch.column("value").to_pylist()
        stamps = batch.column("timestamp").to_pylist()
        out.extend(TCell(value=v, timestamp=t) for v, t in zip(values, stamps))
    return out
