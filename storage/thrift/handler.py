"""The calls of HBase's Thrift 1 service, served from the engine.

One :class:`HbaseHandler` serves one connection (it knows the connection's
id, which owns its scanners); the state they share (the engine connection,
table states, scanners) lives in :class:`GatewayState`.  Semantics follow
HBase's gateway: a ``*Ts`` read sees versions strictly older than the
timestamp, a ``*Ts`` delete removes versions at or before it, a ``*Ts``
write stores at it; counters are 8-byte big-endian; a disabled table
refuses reads and writes; a table must be disabled before it is deleted.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

from ..table.connection import Connection
from ..errors import InvalidArgument, TableNotFound
from ..keys import key_after
from ..read.scan_request import ScanRequest
from ..schema import validate_table_name
from .convert import (
    cells_of_batches,
    column_descriptor,
    family_column,
    family_options,
    put_column,
    raw_row_results,
    read_columns,
    region_info,
    row_result,
    row_results,
    scan_request,
)
from .errors import GatewayIllegalArgument, GatewayIOError, to_thrift
from .idl import hbase
from .scanners import ScannerRegistry
from .table_state import TableStates

__all__ = ["GatewayState", "HbaseHandler"]

_END = object()


class GatewayState:
    """What every connection of a gateway shares."""

    def __init__(self, connection: Connection, scanners: ScannerRegistry, host: str, port: int,
                 max_rows_per_call: int, read_only: bool):
        self.connection = connection
        self.states = TableStates(connection.fs)
        self.scanners = scanners
        self.host = host
        self.port = port
        self.max_rows_per_call = max_rows_per_call
        self.read_only = read_only
        self.admin_lock = threading.Lock()  # create, delete, enable, disable one at a time
        self.row_lock = threading.Lock()  # append and checkAndPut read then write


def _thrift_call(method: Callable) -> Callable:
    """Turn whatever a call raises into the Thrift exception it declares."""
    api = method.__name__

    @functools.wraps(method)
    def call(self, *args: Any):
        try:
            return method(self, *args)
        except Exception as exc:  # every failure answers the caller; none kills the connection
            raise to_thrift(exc, api) from None

    return call


def _name(table_name: bytes) -> str:
    if not isinstance(table_name, bytes):
        raise InvalidArgument(f"table name must be bytes, got {table_name!r:.60}")
    return validate_table_name(table_name.decode("utf-8", "replace"))


def _row(row: bytes) -> bytes:
    if not isinstance(row, bytes) or not row:
        raise InvalidArgument(f"row key must be non-empty bytes, got {row!r:.60}")
    return row


class HbaseHandler:
    """The Hbase service for one connection (method names and arguments are the IDL's)."""

    def __init__(self, state: GatewayState, connection_id: int):
        self._s = state
        self._conn = state.connection
        self.connection_id = connection_id

    # -- helpers ---------------------------------------------------------
    def _exists(self, name: str) -> None:
        if not self._conn.is_table_available(name):
            raise TableNotFound(f"table {name} does not exist")

    def _table(self, table_name: bytes, write: bool = False):
        """The engine table for a data call: it must exist and be enabled."""
        name = _name(table_name)
        if write and self._s.read_only:
            raise GatewayIOError(message="the gateway is read-only (started with --read-only)")
        try:
            table = self._conn.table(name)
        except TableNotFound:
            raise TableNotFound(f"table {name} does not exist") from None
        if not self._s.states.is_enabled(name):
            raise GatewayIOError(message=f"table {name} is disabled")
        return table

    def _writable(self) -> None:
        if self._s.read_only:
            raise GatewayIOError(message="the gateway is read-only (started with --read-only)")

    # -- tables ----------------------------------------------------------
    @_thrift_call
    def getTableNames(self) -> list:
        return sorted(self._conn.tables())

    @_thrift_call
    def createTable(self, tableName, columnFamilies) -> None:
        self._writable()
        name = _name(tableName)
        if not columnFamilies:
            raise InvalidArgument(f"table {name} needs at least one column family")
        families: dict = {}
        for descriptor in columnFamilies:
            family, options = family_options(descriptor)
            if family in families:
                raise InvalidArgument(f"column family {family!r} given twice")
            families[family] = options
        with self._s.admin_lock:
            self._conn.create_table(name, families)
            self._s.states.forget(name)

    @_thrift_call
    def deleteTable(self, tableName) -> None:
        self._writable()
        name = _name(tableName)
        with self._s.admin_lock:
            self._exists(name)
            if self._s.states.is_enabled(name):
                raise GatewayIOError(message=f"table {name} is enabled; disable it before deleting it")
            self._s.scanners.close_table(name, f"table {name} was deleted")
            self._conn.delete_table(name)
            self._s.states.forget(name)

    @_thrift_call
    def enableTable(self, tableName) -> None:
        self._writable()
        name = _name(tableName)
        with self._s.admin_lock:
            self._exists(name)
            if self._s.states.is_enabled(name):
                raise GatewayIOError(message=f"table {name} is already enabled")
            self._s.states.set_enabled(name, True)

    @_thrift_call
    def disableTable(self, tableName) -> None:
        self._writable()
        name = _name(tableName)
        with self._s.admin_lock:
            self._exists(name)
            if not self._s.states.is_enabled(name):
                raise GatewayIOError(message=f"table {name} is already disabled")
            self._conn.table(name).flush()  # as HBase flushes regions it takes offline
            self._s.scanners.close_table(name, f"table {name} was disabled")
            self._s.states.set_enabled(name, False)

    @_thrift_call
    def isTableEnabled(self, tableName) -> bool:
        name = _name(tableName)
        self._exists(name)
        return self._s.states.is_enabled(name)

    def _compact(self, target: bytes, major: bool) -> None:
        # A region name is "table,start,id": regions compact with their table.
        if isinstance(target, bytes) and b"," in target:
            target = target.split(b",", 1)[0]
        self._table(target, write=True).compact(major=major)

    @_thrift_call
    def compact(self, tableNameOrRegionName) -> None:
        self._compact(tableNameOrRegionName, major=False)

    @_thrift_call
    def majorCompact(self, tableNameOrRegionName) -> None:
        self._compact(tableNameOrRegionName, major=True)

    @_thrift_call
    def getColumnDescriptors(self, tableName) -> dict:
        name = _name(tableName)
        self._exists(name)
        families = self._conn.table(name).families()
        return {family + b":": column_descriptor(family, settings) for family, settings in families.items()}

    @_thrift_call
    def getTableRegions(self, tableName) -> list:
        name = _name(tableName)
        self._exists(name)
        return [region_info(r, self._s.host, self._s.port) for r in self._conn.table(name).regions()]

    @_thrift_call
    def getRegionInfo(self, row) -> Any:
        # HBase looks the row up in hbase:meta, whose keys are "table,row,..."
        if not isinstance(row, bytes) or b"," not in row:
            raise InvalidArgument(f"getRegionInfo wants a meta key b'table,row', got {row!r:.60}")
        table_name, key = row.split(b",", 1)
        head, sep, tail = key.rpartition(b",")
        if sep and tail.isdigit():
            key = head
        for region in self._table(table_name).regions():
            if region["start_key"] <= key and (not region["end_key"] or key < region["end_key"]):
                return region_info(region, self._s.host, self._s.port)
        raise GatewayIOError(message=f"no region of {table_name.decode('utf-8', 'replace')} holds row {key!r}")

    # -- point reads -----------------------------------------------------
    def _versions(self, tableName, row, column, timestamp, versions: int) -> list:
        if not isinstance(versions, int) or versions < 1:
            raise InvalidArgument(f"numVersions must be at least 1, got {versions!r}")
        if not isinstance(column, bytes) or not column:
            raise InvalidArgument(f"column must be non-empty bytes like b'cf:q', got {column!r:.60}")
        table = self._table(tableName)
        row = _row(row)
        return cells_of_batches(table.run_scan(ScanRequest(
            row_start=row, row_stop=key_after(row), columns=read_columns([column]), timestamp=timestamp,
            max_versions=versions, output="cells",
        )))

    @_thrift_call
    def get(self, tableName, row, column, attributes) -> list:
        return self._versions(tableName, row, column, None, 1)

    @_thrift_call
    def getVer(self, tableName, row, column, numVersions, attributes) -> list:
        return self._versions(tableName, row, column, None, numVersions)

    @_thrift_call
    def getVerTs(self, tableName, row, column, timestamp, numVersions, attributes) -> list:
        return self._versions(tableName, row, column, timestamp, numVersions)

    def _rows(self, tableName, rows, columns, timestamp) -> list:
        table = self._table(tableName)
        if rows is None:
            raise InvalidArgument("rows must be a list of row keys")
        columns = read_columns(columns)
        found = []
        for row in rows:
            data = table.row(_row(row), columns, timestamp, include_timestamp=True)
            if data:
                found.append(row_result(row, data))
        return found

    @_thrift_call
    def getRow(self, tableName, row, attributes) -> list:
        return self._rows(tableName, [row], None, None)

    @_thrift_call
    def getRowWithColumns(self, tableName, row, columns, attributes) -> list:
        return self._rows(tableName, [row], columns, None)

    @_thrift_call
    def getRowTs(self, tableName, row, timestamp, attributes) -> list:
        return self._rows(tableName, [row], None, timestamp)

    @_thrift_call
    def getRowWithColumnsTs(self, tableName, row, columns, timestamp, attributes) -> list:
        return self._rows(tableName, [row], columns, timestamp)

    @_thrift_call
    def getRows(self, tableName, rows, attributes) -> list:
        return self._rows(tableName, rows, None, None)

    @_thrift_call
    def getRowsWithColumns(self, tableName, rows, columns, attributes) -> list:
        return self._rows(tableName, rows, columns, None)

    @_thrift_call
    def getRowsTs(self, tableName, rows, timestamp, attributes) -> list:
        return self._rows(tableName, rows, None, timestamp)

    @_thrift_call
    def getRowsWithColumnsTs(self, tableName, rows, columns, timestamp, attributes) -> list:
        return self._rows(tableName, rows, columns, timestamp)

    @_thrift_call
    def getRowOrBefore(self, tableName, row, family) -> list:
        table = self._table(tableName)
        for _, data in table.scan(row_start=_row(row), columns=family_column(family), reverse=True, limit=1,
                                  include_timestamp=True):
            return [hbase.TCell(value=v, timestamp=ts) for v, ts in data.values()]
        return []

    # -- writes ----------------------------------------------------------
    def _mutate(self, tableName, row_batches, timestamp) -> None:
        """Apply every row's mutations as one engine batch (one WAL record per region).

        Within a row, HBase applies the deletes and then the puts; every
        mutation is checked before anything is written.
        """
        table = self._table(tableName, write=True)
        if not row_batches:
            return
        batch = table.batch(timestamp=timestamp)
        for row, mutations in row_batches:
            row = _row(row)
            deletes, puts = [], {}
            for m in mutations or ():
                if m.isDelete:
                    if not isinstance(m.column, bytes) or not m.column:
                        raise InvalidArgument(f"delete mutation of row {row!r} needs a column")
                    deletes.append(m.column)
                else:
                    if not isinstance(m.value, bytes):
                        raise InvalidArgument(f"put of column {m.column!r} in row {row!r} has no value")
                    puts[put_column(m.column)] = m.value
            if deletes:
                batch.delete(row, deletes)
            if puts:
                batch.put(row, puts)
        batch.send()

    @_thrift_call
    def mutateRow(self, tableName, row, mutations, attributes) -> None:
        self._mutate(tableName, [(row, mutations)], None)

    @_thrift_call
    def mutateRowTs(self, tableName, row, mutations, timestamp, attributes) -> None:
        self._mutate(tableName, [(row, mutations)], timestamp)

    @_thrift_call
    def mutateRows(self, tableName, rowBatches, attributes) -> None:
        self._mutate(tableName, [(b.row, b.mutations) for b in rowBatches or ()], None)

    @_thrift_call
    def mutateRowsTs(self, tableName, rowBatches, timestamp, attributes) -> None:
        self._mutate(tableName, [(b.row, b.mutations) for b in rowBatches or ()], timestamp)

    def _delete(self, tableName, row, columns, timestamp) -> None:
        self._table(tableName, write=True).delete(_row(row), columns, timestamp)

    @_thrift_call
    def deleteAll(self, tableName, row, column, attributes) -> None:
        self._delete(tableName, row, [column], None)

    @_thrift_call
    def deleteAllTs(self, tableName, row, column, timestamp, attributes) -> None:
        self._delete(tableName, row, [column], timestamp)

    @_thrift_call
    def deleteAllRow(self, tableName, row, attributes) -> None:
        self._delete(tableName, row, None, None)

    @_thrift_call
    def deleteAllRowTs(self, tableName, row, timestamp, attributes) -> None:
        self._delete(tableName, row, None, timestamp)

    def _increment(self, tableName, row, column, amount) -> int:
        if not isinstance(amount, int):
            raise InvalidArgument(f"increment amount must be an i64, got {amount!r}")
        return self._table(tableName, write=True).counter_inc(_row(row), put_column(column), amount)

    @_thrift_call
    def atomicIncrement(self, tableName, row, column, value) -> int:
        return self._increment(tableName, row, column, value)

    @_thrift_call
    def increment(self, increment) -> None:
        self._increment(increment.table, increment.row, increment.column, increment.ammount)

    @_thrift_call
    def incrementRows(self, increments) -> None:
        for inc in increments or ():
            self._increment(inc.table, inc.row, inc.column, inc.ammount)

    @_thrift_call
    def append(self, append) -> list:
        table = self._table(append.table, write=True)
        row = _row(append.row)
        columns = [put_column(c) for c in append.columns or ()]
        values = list(append.values or ())
        if not columns or len(columns) != len(values):
            raise InvalidArgument("append needs as many values as columns, at least one")
        with self._s.row_lock:
            current = table.row(row, columns)
            new = {c: current.get(c, b"") + v for c, v in zip(columns, values)}
            table.put(row, new)
            stored = table.row(row, columns, include_timestamp=True)
        return [hbase.TCell(value=stored[c][0], timestamp=stored[c][1]) for c in columns if c in stored]

    @_thrift_call
    def checkAndPut(self, tableName, row, column, value, mput, attributes) -> bool:
        table = self._table(tableName, write=True)
        row = _row(row)
        column = put_column(column)
        if mput is None:
            raise InvalidArgument("checkAndPut needs a mutation")
        with self._s.row_lock:
            current = table.row(row, [column]).get(column)
            if current != (value or None):
                return False
            self._mutate(tableName, [(row, [mput])], None)
            return True

    # -- scanners --------------------------------------------------------
    def _open(self, tableName, scan, attributes, prefix: bytes | None = None) -> int:
        table = self._table(tableName)
        self._s.scanners.check_room(self.connection_id)  # refuse before any scan work
        request = scan_request(scan, prefix, attributes)
        if request.raw:  # every cell, markers with their types: sortedColumns (convert.raw_row_results)
            results = raw_row_results(table.run_scan(request), request.scan_batching)
        else:
            results = row_results(table.run_scan(request), request.sorted_columns, request.scan_batching)
        # Pull the first row now, so a bad scan (filter, columns, range) fails at open.
        first = next(results, _END)
        results = _prepend(first, results) if first is not _END else iter(())
        try:
            return self._s.scanners.open(self.connection_id, table.name, results)
        except BaseException:
            close = getattr(results, "close", None)
            if close is not None:
                close()  # frees the region views the scan holds
            raise

    @_thrift_call
    def scannerOpenWithScan(self, tableName, scan, attributes) -> int:
        if scan is None:
            raise InvalidArgument("scannerOpenWithScan needs a TScan")
        return self._open(tableName, scan, attributes)

    @_thrift_call
    def scannerOpen(self, tableName, startRow, columns, attributes) -> int:
        return self._open(tableName, hbase.TScan(startRow=startRow, columns=columns), attributes)

    @_thrift_call
    def scannerOpenWithStop(self, tableName, startRow, stopRow, columns, attributes) -> int:
        return self._open(tableName, hbase.TScan(startRow=startRow, stopRow=stopRow, columns=columns), attributes)

    @_thrift_call
    def scannerOpenWithPrefix(self, tableName, startAndPrefix, columns, attributes) -> int:
        if not isinstance(startAndPrefix, bytes):
            raise InvalidArgument(f"prefix must be bytes, got {startAndPrefix!r:.60}")
        return self._open(tableName, hbase.TScan(columns=columns), attributes, prefix=startAndPrefix)

    @_thrift_call
    def scannerOpenTs(self, tableName, startRow, columns, timestamp, attributes) -> int:
        return self._open(tableName, hbase.TScan(startRow=startRow, columns=columns, timestamp=timestamp), attributes)

    @_thrift_call
    def scannerOpenWithStopTs(self, tableName, startRow, stopRow, columns, timestamp, attributes) -> int:
        return self._open(
            tableName, hbase.TScan(startRow=startRow, stopRow=stopRow, columns=columns, timestamp=timestamp),
            attributes,
        )

    def _next(self, scanner_id, n) -> list:
        if not isinstance(scanner_id, int):
            raise GatewayIllegalArgument(message=f"scanner id must be an i32, got {scanner_id!r}")
        scanner = self._s.scanners.get(self.connection_id, scanner_id)
        if not isinstance(n, int) or n < 1:
            return []
        with scanner.lock:
            return scanner.take(min(n, self._s.max_rows_per_call))

    @_thrift_call
    def scannerGet(self, id) -> list:
        return self._next(id, 1)

    @_thrift_call
    def scannerGetList(self, id, nbRows) -> list:
        return self._next(id, nbRows)

    @_thrift_call
    def scannerClose(self, id) -> None:
        if not isinstance(id, int):
            raise GatewayIllegalArgument(message=f"scanner id must be an i32, got {id!r}")
        self._s.scanners.close(self.connection_id, id)


def _prepend(first, rest):
    """An iterator yielding ``first`` and then ``rest``; closing it closes ``rest``."""
    try:
        yield first
        yield from rest
    finally:
        rest.close()
