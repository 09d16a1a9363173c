"""regionscan's SerDe layer: cells to typed columns and back.

A SerDe is configured with a column mapping (Hive's ``hbase.columns.mapping``,
the hbase-spark string form, or a JSON catalog) and properties, and decodes
rows row-wise (``deserialize``) or whole row batches vectorized
(``deserialize_batch``), with identical results::

    from serde import create_serde
    sd = create_serde("binary", "key STRING :key, n INT cf:n, d DATE cf:d")
    for batch in table.scan_batches(columns=sd.scan_columns):
        typed = sd.deserialize_batch(batch)

Built-ins: ``binary`` (HBase ``Bytes``, order-preserving variants),
``string`` (LazySimpleSerDe-style text), ``avro`` (fastavro) and ``json``.
Third-party SerDes plug in by entry point (``regionscan.serdes``) or dotted
path.  :func:`profile_serde` attributes scan time to stages and columns.
See ``docs/serde.md``.
"""

from __future__ import annotations

from serde.base import SerDe
from serde.errors import DecodeError, EncodeError, MappingError
from serde.mapping import (
    ColumnKind,
    ColumnMapping,
    MappedColumn,
    RowKeySpec,
    load_mapping,
    parse_catalog,
    parse_hive_mapping,
    parse_spark_mapping,
)
from serde.profiler import ProfileReport, profile_serde
from serde.registry import available_serdes, create_serde, get_serde_class, register_serde
from serde.rowbatch import InMemoryRowSource, batch_to_rows, record_batch_rows, rows_to_batch
from serde.stats import SerDeStats
from serde.type_registry import TypeSpec, register_type
from serde.types import DataType, parse_type

__all__ = [
    "SerDe",
    "SerDeStats",
    "DecodeError",
    "EncodeError",
    "MappingError",
    "ColumnKind",
    "ColumnMapping",
    "MappedColumn",
    "RowKeySpec",
    "DataType",
    "parse_type",
    "TypeSpec",
    "register_type",
    "load_mapping",
    "parse_catalog",
    "parse_hive_mapping",
    "parse_spark_mapping",
    "create_serde",
    "get_serde_class",
    "register_serde",
    "available_serdes",
    "rows_to_batch",
    "batch_to_rows",
    "record_batch_rows",
    "InMemoryRowSource",
    "profile_serde",
    "ProfileReport",
]
