"""Namespaces and table names, as HBase has them since 0.96: ``namespace:qualifier``.

A table name is ``qualifier`` or ``namespace:qualifier``; a bare name is in the
``default`` namespace, and ``default:t`` names the same table as ``t``.  Every
front end (the embedded API, the region server, the Thrift gateway, the Spark
source and the jobs) reads a table name through :func:`canonical_table_name`,
so ``t`` and ``default:t`` are one key everywhere.

On disk (see docs/formats/manifest.md, "Layout of a root"):

- a ``default`` table lives in ``<root>/<qualifier>/``, as tables did before
  namespaces existed, so existing roots keep working unchanged;
- namespace ``ns`` is the folder ``<root>/@ns/`` holding a marker file
  ``.namespace``; its tables live in ``<root>/@ns/<qualifier>/``.

``@`` cannot start a table name, so a namespace folder never collides with a
default table of the same name (HBase too allows a table ``ns`` beside a
namespace ``ns``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .errors import InvalidArgument, clip

__all__ = [
    "DEFAULT_NAMESPACE",
    "NAMESPACE_MARKER",
    "TableName",
    "canonical_table_name",
    "is_namespace_dir",
    "namespace_dir",
    "parse_table_name",
    "table_dir",
    "validate_namespace",
]

DEFAULT_NAMESPACE = "default"
NAMESPACE_MARKER = ".namespace"
NAMESPACE_PREFIX = "@"

_QUALIFIER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
# HBase's legal namespace characters: letters, digits and '_'.
_NAMESPACE_RE = re.compile(r"[A-Za-z0-9_]{1,128}")
# HBase reserves ``hbase`` for its system tables; the engine keeps the name free
# of user tables so that a root never holds what an HBase user reads as system state.
_RESERVED_NAMESPACES = frozenset({"hbase"})


class TableName(NamedTuple):
    """A parsed table name: its namespace (``default`` for a bare name) and qualifier."""

    namespace: str
    qualifier: str

    def __str__(self) -> str:
        if self.namespace == DEFAULT_NAMESPACE:
            return self.qualifier
        return f"{self.namespace}:{self.qualifier}"


def _text(name: object, what: str) -> str:
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    if not isinstance(name, str):
        raise InvalidArgument(f"invalid {what} {clip(repr(name))}: expected str or bytes")
    return name


def validate_namespace(name: str | bytes, *, creating: bool = False) -> str:
    """Return ``name`` as ``str`` if it is a legal namespace name, else raise InvalidArgument.

    ``creating`` also refuses the reserved ``hbase`` namespace and ``default``,
    which always exists.
    """
    text = _text(name, "namespace")
    if not _NAMESPACE_RE.fullmatch(text):
        raise InvalidArgument(f"invalid namespace {clip(repr(text))}: use 1-128 letters, digits or '_'")
    if text in _RESERVED_NAMESPACES:
        raise InvalidArgument(f"namespace {text!r} is reserved (HBase keeps its system tables there)")
    if creating and text == DEFAULT_NAMESPACE:
        raise InvalidArgument("namespace 'default' always exists")
    return text


def parse_table_name(name: str | bytes) -> TableName:
    """Split ``ns:qualifier`` (or a bare ``qualifier``) into a :class:`TableName`.

    Raises InvalidArgument, naming the part that is wrong, for anything else.
    """
    text = _text(name, "table name")
    namespace, sep, qualifier = text.rpartition(":")
    if not sep:
        namespace = DEFAULT_NAMESPACE
    elif ":" in namespace:
        raise InvalidArgument(f"invalid table name {clip(repr(text))}: more than one ':' (use namespace:table)")
    else:
        try:
            namespace = validate_namespace(namespace)
        except InvalidArgument as exc:
            raise InvalidArgument(f"invalid table name {clip(repr(text))}: {exc}") from None
    if not _QUALIFIER_RE.fullmatch(qualifier):
        raise InvalidArgument(
            f"invalid table name {clip(repr(text))}: use 1-128 letters, digits, '_', '-' or '.', "
            "not starting with '.' or '-' (and namespace:table for a namespace)"
        )
    return TableName(namespace, qualifier)


def canonical_table_name(name: str | bytes) -> str:
    """The one spelling of a table name: ``t`` for ``default:t``, ``ns:t`` otherwise."""
    return str(parse_table_name(name))


def namespace_dir(namespace: str) -> str:
    """The folder of a namespace's tables, relative to the root (``""`` for ``default``)."""
    if namespace == DEFAULT_NAMESPACE:
        return ""
    return NAMESPACE_PREFIX + namespace


def table_dir(name: str | bytes) -> str:
    """The folder of a table, relative to the root: ``t`` or ``@ns/t``."""
    parsed = parse_table_name(name)
    folder = namespace_dir(parsed.namespace)
    return f"{folder}/{parsed.qualifier}" if folder else parsed.qualifier


def is_namespace_dir(entry: str) -> bool:
    """Whether a root entry's name is a namespace folder (``@ns``)."""
    return entry.startswith(NAMESPACE_PREFIX) and bool(_NAMESPACE_RE.fullmatch(entry[1:]))
