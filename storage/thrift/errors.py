"""Engine errors as the Thrift exceptions HBase's gateway raises.

Each call declares which exceptions it may throw (``IOError`` always;
``IllegalArgument`` and ``AlreadyExists`` for some).  A caller's mistake
becomes ``IllegalArgument`` where the call declares it and ``IOError``
elsewhere, as HBase does; a table that already exists becomes
``AlreadyExists``.  Messages are one line.
"""

from __future__ import annotations

import logging

from ..errors import InvalidArgument, StorageError, TableExists
from ..filters.parser import FilterSyntaxError
from .idl import hbase

__all__ = ["GatewayIOError", "GatewayIllegalArgument", "to_thrift", "one_line"]

log = logging.getLogger("storage.thrift")

GatewayIOError = hbase.IOError
GatewayIllegalArgument = hbase.IllegalArgument

_DECLARED: dict[str, tuple[type, ...]] = {}


def _declared(api: str) -> tuple[type, ...]:
    """The exception classes the IDL lets ``api`` throw."""
    hit = _DECLARED.get(api)
    if hit is None:
        spec = getattr(hbase.Hbase, api + "_result").thrift_spec
        hit = tuple(entry[2] for fid, entry in spec.items() if fid != 0)
        _DECLARED[api] = hit
    return hit


def one_line(exc: BaseException) -> str:
    """The error's message on one line (a filter syntax error keeps its reason and position)."""
    if isinstance(exc, FilterSyntaxError):
        return f"invalid filter string {exc.text!r}: {exc.reason} at character {exc.position}"
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def to_thrift(exc: BaseException, api: str) -> Exception:
    """The Thrift exception ``api`` should send for ``exc``."""
    declared = _declared(api)
    if isinstance(exc, declared):
        return exc
    message = one_line(exc)
    if isinstance(exc, TableExists) and hbase.AlreadyExists in declared:
        return hbase.AlreadyExists(message=message)
    if isinstance(exc, InvalidArgument) and hbase.IllegalArgument in declared:
        return hbase.IllegalArgument(message=message)
    if isinstance(exc, hbase.IllegalArgument):  # raised by the gateway where the call only declares IOError
        return hbase.IOError(message=exc.message)
    if isinstance(exc, (StorageError, ValueError, LookupError, OSError)):
        return hbase.IOError(message=message)
    log.error("internal error in %s", api, exc_info=exc)
    return hbase.IOError(message=f"internal error in {api}: {type(exc).__name__}: {message}")
