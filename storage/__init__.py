"""regionscan's storage engine: an HBase-style table store.

``connect(path)`` returns a :class:`Connection` whose API follows happybase:
``create_table``, ``table(name)``, and on a table ``put``, ``row``, ``rows``,
``cells``, ``scan``, ``delete``, ``batch``, ``counter_inc`` and the batch path
``scan_batches`` that yields Arrow record batches.
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
from .table.mutation_batch import Batch
from .table.table import Table

__all__ = [
    "connect",
    "Connection",
    "Table",
    "Batch",
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
