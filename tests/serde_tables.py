"""Tables whose rows a serde encoded, as the connector's and the jobs' tests start from them.

A row is a mapping of column names to values; ``serde.serialize`` makes its row key and
cells, as the Spark source's writes do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import storage
from serde import create_serde


def put_rows(table, serde, rows: Iterable[Mapping]) -> None:
    """Put each of ``rows`` as ``serde`` encodes it, in one batch."""
    with table.batch() as b:
        for row in rows:
            b.put(*serde.serialize(row))


def create_table(conn, name: str, split_keys: Sequence[bytes] = (), families: Mapping | None = None):
    """Table ``name`` split at ``split_keys`` with ``families`` (one family ``cf`` by default).

    Its WAL is not synced: the tests flush what they must keep, or close the connection.
    """
    return conn.create_table(name, dict(families or {"cf": {}}), split_keys=list(split_keys),
                             settings={"wal_sync": "none"})


def fill_table(conn, name: str, serde, rows: Iterable[Mapping], split_keys: Sequence[bytes] = (),
               families: Mapping | None = None):
    """Create table ``name`` in ``conn`` holding ``rows`` in flushed store files; returns the table."""
    table = create_table(conn, name, split_keys, families)
    put_rows(table, serde, rows)
    table.flush()
    return table


def write_table(root: str, name: str, serde, rows: Iterable[Mapping], split_keys: Sequence[bytes] = (),
                families: Mapping | None = None) -> None:
    """:func:`fill_table` at ``root``, through a connection of its own."""
    with storage.connect(root) as conn:
        fill_table(conn, name, serde, rows, split_keys, families)


KAB_MAPPING = "k STRING :key, a STRING c:a, b INT c:b"
"""The connector tests' common mapping: a string row key ``k``, a string ``a`` and an int ``b``
in family ``c``."""

KAB_SERDE = create_serde("binary", KAB_MAPPING)


def write_kab_table(root: str, name: str, rows: Iterable[tuple[str, str, int]],
                    split_keys: Sequence[bytes] = ()) -> None:
    """Create table ``name`` at ``root`` holding ``rows`` of (k, a, b) in :data:`KAB_MAPPING`, flushed."""
    write_table(root, name, KAB_SERDE, ({"k": k, "a": a, "b": b} for k, a, b in rows), split_keys, {"c": {}})


def kab_options(root: str, name: str = "t", **extra) -> dict:
    """The Spark source's options reading table ``name`` at ``root`` through :data:`KAB_MAPPING`."""
    return {"root": root, "table": name, "hbase.columns.mapping": KAB_MAPPING, **extra}
