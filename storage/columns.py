"""Column specs: the one parser of ``columns=`` entries for every read and write path.

The rules are HBase's (``CellUtil.parseColumn`` / the Thrift gateway that
happybase talks to):

* ``b"cf"`` (no colon) names the whole family ``cf``;
* ``b"cf:q"`` names the column ``q`` of family ``cf``;
* ``b"cf:"`` names the column with the **empty** qualifier of ``cf`` (HBase
  supports empty qualifiers; ``addColumn(cf, b"")`` is a column, not the
  family).

Only the first colon separates: ``b"cf:a:b"`` is qualifier ``b"a:b"``.  A
``(family, qualifier)`` tuple is accepted too, with ``None`` as the
qualifier for a whole family; ``str`` parts are UTF-8 encoded.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .errors import InvalidArgument, clip

__all__ = ["ColumnRef", "parse_column"]


class ColumnRef(NamedTuple):
    """A parsed column spec: a reference to one column, or to a whole family
    when ``qualifier`` is ``None`` (unrelated to serde's ColumnSpec of a mapping).

    Unpacks as ``family, qualifier = parse_column(spec)``.
    """

    family: bytes
    qualifier: bytes | None

    @property
    def name(self) -> str:
        """The Arrow field name of the spec's row-batch column: ``"family:qualifier"``
        (``"family:"`` for the empty qualifier) or ``"family"`` for a whole family.

        Bytes that are not UTF-8 are written as ``\\xNN`` escapes
        (``backslashreplace``): Arrow field names must be valid UTF-8.
        """
        family = self.family.decode("utf-8", "backslashreplace")
        if self.qualifier is None:
            return family
        return f"{family}:{self.qualifier.decode('utf-8', 'backslashreplace')}"


def _as_bytes(part: Any) -> Any:
    if isinstance(part, str):
        return part.encode("utf-8", "surrogateescape")
    if isinstance(part, (bytearray, memoryview)):
        return bytes(part)
    return part


def parse_column(spec: Any) -> ColumnRef:
    """Parse one column spec (``b"cf"``, ``b"cf:q"``, ``b"cf:"`` or a
    ``(family, qualifier-or-None)`` tuple) into a :class:`ColumnRef`.

    Raises InvalidArgument for anything else and for an empty family.
    """
    spec = _as_bytes(spec)
    if isinstance(spec, bytes):
        family, sep, qualifier = spec.partition(b":")
        parsed = ColumnRef(family, qualifier if sep else None)
    elif isinstance(spec, tuple) and len(spec) == 2:
        family, qualifier = _as_bytes(spec[0]), _as_bytes(spec[1])
        if not isinstance(family, bytes) or not (qualifier is None or isinstance(qualifier, bytes)):
            raise InvalidArgument(f"column spec {clip(repr(spec))} must be (bytes family, bytes qualifier or None)")
        parsed = ColumnRef(family, qualifier)
    else:
        raise InvalidArgument(
            f"column spec {clip(repr(spec))} is neither b'family', b'family:qualifier' nor a (family, qualifier) tuple"
        )
    if not parsed.family:
        raise InvalidArgument(f"column spec {clip(repr(spec))} has an empty family")
    return parsed

