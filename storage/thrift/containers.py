"""Request decoding with every container header checked before its entries are read.

thriftpy2's pure-Python decoders read (or skip) a list, set or map one
entry at a time, trusting the count in its header.  The request-size bound
of :class:`~storage.thrift.transport.BoundedReader` stops entries that carry
bytes, but an entry of a type that carries none (``stop``, ``void``, or an
id no Thrift type has, which the decoders skip without reading) costs no
bytes: a 20-byte request declaring 2**31 of them would keep a worker busy
for half an hour.  So, before any entry is read, :func:`check_container`
refuses a header whose entry types are not value types, whose count is
negative or above ``max_container_entries``, or whose count is more than
the bytes the request still holds (every entry of a value type takes at
least one byte; a map entry two).  The refusal is a protocol error, which
closes that connection only.

The decoding itself stays thriftpy2's: the compact protocol reads headers
through two methods, overridden here; the binary protocol reads them
through module-level functions, so :data:`CheckedBinaryProtocol` comes
from a private instance of thriftpy2's own binary module whose two header
readers are wrapped (the shared module, used by clients in the same
process, is left as it is).
"""

from __future__ import annotations

import importlib.util

from thriftpy2.protocol.compact import TCompactProtocol
from thriftpy2.protocol.exc import TProtocolException
from thriftpy2.thrift import TType

__all__ = ["BadContainer", "CheckedBinaryProtocol", "CheckedCompactProtocol", "check_container", "VALUE_TYPES"]

#: Type ids of values that occupy at least one byte on the wire in both protocols.
VALUE_TYPES = frozenset({
    TType.BOOL, TType.BYTE, TType.DOUBLE, TType.I16, TType.I32, TType.I64, TType.STRING,
    TType.BINARY, TType.STRUCT, TType.MAP, TType.SET, TType.LIST,
})


class BadContainer(TProtocolException):
    """A list, set or map header that cannot describe a real request; its connection is closed."""


def check_container(trans, size: int, *types: int) -> None:
    """Refuse a container header of ``size`` entries of ``types`` (one for a list or set, two for a map).

    ``trans`` is the request's reader: ``trans.left()`` is how many bytes
    the request can still hold, ``trans.max_container_entries`` the cap.
    An empty container is accepted whatever its type ids (writers leave
    them unset); it costs nothing to decode.
    """
    if size == 0:
        return
    if size < 0:
        raise BadContainer(TProtocolException.NEGATIVE_SIZE, f"a container declares {size} entries")
    for t in types:
        if t not in VALUE_TYPES:
            raise BadContainer(TProtocolException.INVALID_DATA,
                               f"a container of {size} entries declares entry type id {t}, which is not a value type")
    if size > trans.max_container_entries:
        raise BadContainer(TProtocolException.SIZE_LIMIT,
                           f"a container declares {size} entries, more than max_container_entries "
                           f"({trans.max_container_entries})")
    left = trans.left()
    if size * len(types) > left:
        raise BadContainer(TProtocolException.SIZE_LIMIT,
                           f"a container declares {size} entries but the request holds at most {left} more bytes")


class CheckedCompactProtocol(TCompactProtocol):
    """thriftpy2's pure-Python compact protocol, container headers checked by :func:`check_container`."""

    def _read_collection_begin(self):
        etype, size = super()._read_collection_begin()
        check_container(self.trans, size, etype)
        return etype, size

    def _read_map_begin(self):
        ktype, vtype, size = super()._read_map_begin()
        check_container(self.trans, size, ktype, vtype)
        return ktype, vtype, size


def _checked_binary_module():
    """A private instance of ``thriftpy2.protocol.binary`` whose list/set/map header readers check."""
    spec = importlib.util.find_spec("thriftpy2.protocol.binary")
    module = importlib.util.module_from_spec(spec)  # not registered in sys.modules
    spec.loader.exec_module(module)
    read_list_begin, read_map_begin = module.read_list_begin, module.read_map_begin

    def checked_list_begin(inbuf):
        etype, size = read_list_begin(inbuf)
        check_container(inbuf, size, etype)
        return etype, size

    def checked_map_begin(inbuf):
        ktype, vtype, size = read_map_begin(inbuf)
        check_container(inbuf, size, ktype, vtype)
        return ktype, vtype, size

    # read_val, read_struct and skip look these names up in the module at each call
    module.read_list_begin = checked_list_begin
    module.read_map_begin = checked_map_begin
    return module


CheckedBinaryProtocol = _checked_binary_module().TBinaryProtocol
CheckedBinaryProtocol.__doc__ = (
    "thriftpy2's pure-Python binary protocol, container headers checked by :func:`check_container`."
)
