"""regionscan's storage engine: an HBase-style table store.

``connect(path)`` returns a :class:`Connection` whose API follows happybase:
``create_table``, ``table(name)``, and on a table ``put``, ``row``, ``rows``,
``cells``, ``scan``, ``delete``, ``batch``, ``counter_inc`` and the batch path
``scan_batches`` that yields Arrow record batches, described by a
:class:`ScanRequest`.

Code outside the engine (the connector, the jobs) imports four public
modules and nothing deeper: this one, :mod:`storage.keys` (row keys and key
ranges), :mod:`storage.filters` (the filter language) and
:mod:`storage.engine` (what a reader or writer outside the engine needs of a
table's files: pinned snapshots, split planning, row counts, bulk load).
"""

from .cells import CELL_SCHEMA, LATEST_TIMESTAMP, Cell, CellType
from .namespaces import DEFAULT_NAMESPACE, table_dir
from .table.connection import Connection, connect, uniform_split_keys
from .errors import (
    CorruptionError,
    InvalidArgument,
    NamespaceExists,
    NamespaceNotEmpty,
    NamespaceNotFound,
    RegionNotFound,
    ScannerError,
    StorageError,
    StorageIOError,
    TableExists,
    TableLocked,
    TableNotFound,
)
from .keys import KeyRange
from .read.scan_request import ScanRequest
from .scanner.metrics import ScanMetrics
from .schema import FamilySettings
from .table.mutation_batch import Batch
from .table.table import Table

__all__ = [
    "connect",
    "Connection",
    "Table",
    "Batch",
    "ScanRequest",
    "KeyRange",
    "ScanMetrics",
    "FamilySettings",
    "Cell",
    "CellType",
    "CELL_SCHEMA",
    "LATEST_TIMESTAMP",
    "uniform_split_keys",
    "DEFAULT_NAMESPACE",
    "table_dir",
    "StorageError",
    "StorageIOError",
    "CorruptionError",
    "InvalidArgument",
    "TableNotFound",
    "TableExists",
    "TableLocked",
    "NamespaceNotFound",
    "NamespaceExists",
    "NamespaceNotEmpty",
    "RegionNotFound",
    "ScannerError",
]
