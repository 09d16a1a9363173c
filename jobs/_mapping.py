"""Column mappings given on a command line, and the SerDe they make.

``--mapping`` takes any form the SerDe layer parses (Hive
``:key,cf:a#b``, hbase-spark ``"k STRING :key, a INT cf:a"``, a JSON
catalog) or ``@FILE`` to read it from a file.  The SerDe is built the way
the Spark source builds it (:class:`connector.source_config.SourceConfig`: the
same default SerDe per mapping form, the same properties), so a job and
``spark.read.format("regionscan")`` decode a table identically.
"""

from __future__ import annotations

from typing import Mapping

from connector.source_config import SourceConfig
from serde import SerDe
from storage import InvalidArgument

__all__ = ["mapping_text", "source_config", "serde_of"]


def mapping_text(value: str | None) -> str | None:
    """The mapping itself: ``@path`` reads it from a file."""
    if value is None:
        return None
    if value.startswith("@"):
        path = value[1:]
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except OSError as exc:
            raise InvalidArgument(f"--mapping {value}: cannot read {path}: {exc.strerror}") from None
    if not value.strip():
        raise InvalidArgument("--mapping is empty")
    return value


def source_config(root: str, table: str, mapping: str, serde: str | None = None,
                  properties: Mapping[str, str] | None = None) -> SourceConfig:
    """The data source's configuration for a mapping (validated: a bad mapping fails here)."""
    options = dict(properties or {})
    options.update({"root": root, "table": table, "hbase.columns.mapping": mapping})
    if serde:
        options["serde"] = serde
    return SourceConfig.from_options(options)


def serde_of(config: SourceConfig) -> SerDe:
    """The SerDe of the whole mapping (cached per configuration in each process)."""
    return config.write_serde()
