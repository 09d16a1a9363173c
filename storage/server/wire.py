"""The region server's wire format: framed messages of a tagged-JSON header and Arrow IPC.

Every action body, action result and do_get ticket is one *message*
(specified in docs/formats/wire.md)::

    | magic "RSWP" (4B) | version u16 BE | flags u16 BE | header_len u32 BE |
    | header (header_len bytes, UTF-8 JSON) | payload (rest: Arrow IPC stream or empty) |

The header is JSON in which the values JSON cannot carry are tagged:
``{"$b": "<base64>"}`` is ``bytes`` and ``{"$m": [[key, value], ...]}`` a
dict whose keys are not plain strings (row data ``{b"cf:q": b"v"}``).
Tuples travel as lists.  Scan results travel in the payload as an Arrow IPC
stream, so a batch is never turned into Python objects on either side.

Versions: a side reads every version in :data:`PROTOCOL_VERSIONS` and writes
each message in the lowest version that carries it (:func:`message_version`):
version 2 is version 1 plus raw scans (a ``scan`` object with ``raw``), so
only a raw scan's ticket or ``scan_open`` goes out as version 2, and a
version 1 peer refuses it in one line while everything else still works.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any, Iterable

import pyarrow as pa

from ..errors import InvalidArgument
from ..jsonlimits import loads_bounded
from ..read.scan_request import WIRE_OPTIONS
from .remote_errors import MalformedRequest, RequestFieldError

__all__ = [
    "MAGIC",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSIONS",
    "RAW_SCAN_VERSION",
    "PRELUDE",
    "message_version",
    "check_message_version",
    "Message",
    "encode_message",
    "decode_message",
    "to_wire",
    "from_wire",
    "batches_to_ipc",
    "ipc_to_batches",
    "ACTIONS",
    "SCAN_OPTIONS",
    "MAX_HEADER_DEPTH",
]

# DO NOT CHANGE: these bytes are the protocol; bump PROTOCOL_VERSION instead.
MAGIC = b"RSWP"
PROTOCOL_VERSION = 2
"""The newest version this side speaks (``server_info``'s ``protocol``)."""
PROTOCOL_VERSIONS = (1, 2)
"""The versions this side reads: 1, and 2 (1 plus raw scans: docs/formats/wire.md)."""
RAW_SCAN_VERSION = 2
"""The first version whose ``scan`` object may carry ``raw`` (markers, deleted cells, max_versions counting puts)."""
PRELUDE = struct.Struct(">4sHHI")  # magic, version, flags, header_len

MAX_HEADER_DEPTH = 32
"""Deepest JSON nesting of a header (the deepest real message, a put in a mutate, is 7)."""

_BYTES_TAG = "$b"
_MAP_TAG = "$m"

ACTIONS: dict[str, str] = {
    "server_info": "protocol version, server limits and lease timeout",
    "list_tables": "names of the tables under the root",
    "create_namespace": "create a namespace (tables in it are ns:table)",
    "list_namespaces": "names of the namespaces under the root, default first",
    "delete_namespace": "drop an empty namespace",
    "create_table": "create a pre-split table",
    "delete_table": "drop a table",
    "is_table_available": "whether a table exists",
    "table_regions": "the table's regions (Table.regions())",
    "table_families": "the table's column families (Table.families())",
    "mutate": "a batch of puts and deletes",
    "row": "one row",
    "rows": "several rows",
    "cells": "the versions of one cell",
    "counter_get": "read a counter",
    "counter_set": "set a counter",
    "counter_inc": "add to a counter atomically, return the new value",
    "count": "rows in a row range (Table.count(): block indexes where they answer)",
    "flush": "flush every region's memstore",
    "compact": "compact every region",
    "split": "split one region or every region",
    "scan_open": "open a server-side scanner; returns its id and lease",
    "scan_next": "up to n rows of an open scanner (sequence-numbered)",
    "scan_close": "close a scanner",
    "scan_renew": "renew a scanner's lease without reading",
    "list_scanners": "open RPC scanners and streams (admin)",
    "read_counters": "store file read counters of a table (admin)",
}
"""Every action type the server answers, with what it does."""

SCAN_OPTIONS = WIRE_OPTIONS
"""Scan options accepted by scan_open and do_get: the wire fields of
:class:`~storage.read.scan_request.ScanRequest` (the keywords of Table.scan_batches)."""


class Message:
    """A decoded message: a header dict and an optional Arrow IPC payload."""

    __slots__ = ("header", "payload", "version")

    def __init__(self, header: dict, payload: memoryview | bytes = b"", version: int = 1):
        self.header = header
        self.payload = payload
        self.version = version  # the protocol version it was written in

    def batches(self) -> list[pa.RecordBatch]:
        """The payload's record batches ([] when there is none)."""
        return ipc_to_batches(self.payload)


def to_wire(value: Any) -> Any:
    """Turn a Python value into JSON-ready data, tagging bytes and non-string-keyed dicts."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {_BYTES_TAG: base64.b64encode(value).decode("ascii")}
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: to_wire(v) for k, v in value.items()}
        return {_MAP_TAG: [[to_wire(k), to_wire(v)] for k, v in value.items()]}
    raise InvalidArgument(f"cannot send a {type(value).__name__} over the wire: {value!r:.80}")


def from_wire(value: Any) -> Any:
    """Undo :func:`to_wire`."""
    if isinstance(value, list):
        return [from_wire(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            if _BYTES_TAG in value:
                return base64.b64decode(value[_BYTES_TAG], validate=True)
            if _MAP_TAG in value:
                pairs = value[_MAP_TAG]
                if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
                    raise TypeError(f"{_MAP_TAG} must hold [key, value] pairs")
                return {_hashable(from_wire(k)): from_wire(v) for k, v in pairs}
        return {k: from_wire(v) for k, v in value.items()}
    return value


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def message_version(header: dict) -> int:
    """The lowest version that carries ``header``: 2 for a raw scan (a ``scan``
    object with ``raw`` set, as a do_get ticket or ``scan_open`` holds), else 1."""
    scan = header.get("scan")
    if isinstance(scan, dict) and scan.get("raw"):
        return RAW_SCAN_VERSION
    return 1


def check_message_version(message: "Message", what: str) -> None:
    """Refuse, in one line, a message asking for more than its version carries
    (a raw scan in a version 1 message: a client from before version 2 cannot mean it)."""
    needed = message_version(message.header)
    if message.version < needed:
        raise RequestFieldError(
            f"{what} asks for a raw scan, which needs wire protocol version {needed}, but is version"
            f" {message.version}: upgrade the client (raw scans through the server came with version {needed})"
        )


def encode_message(header: dict, payload: bytes | pa.Buffer = b"", version: int | None = None) -> bytes:
    """Frame ``header`` (tagged JSON) and ``payload`` (an IPC stream or b"") into one message,
    in ``version`` (default: :func:`message_version`, the lowest that carries it)."""
    if version is None:
        version = message_version(header)
    elif version not in PROTOCOL_VERSIONS:
        raise InvalidArgument(f"wire protocol version {version} is not one of {PROTOCOL_VERSIONS}")
    text = json.dumps(to_wire(header), separators=(",", ":")).encode("utf-8")
    prelude = PRELUDE.pack(MAGIC, version, 0, len(text))
    if isinstance(payload, pa.Buffer):
        payload = payload.to_pybytes()
    return b"".join((prelude, text, payload))


def decode_message(data: bytes | memoryview | pa.Buffer, what: str = "message") -> Message:
    """Parse one message, naming ``what`` in the error when it is malformed."""
    view = memoryview(data) if not isinstance(data, memoryview) else data
    if len(view) < PRELUDE.size:
        raise MalformedRequest(f"{what} is {len(view)} bytes, shorter than the {PRELUDE.size}-byte prelude")
    magic, version, flags, header_len = PRELUDE.unpack_from(view, 0)
    if magic != MAGIC:
        raise MalformedRequest(f"{what} does not start with the {MAGIC!r} magic (got {bytes(magic)!r})")
    if version not in PROTOCOL_VERSIONS:
        raise MalformedRequest(
            f"{what} uses wire protocol version {version}; this side speaks versions"
            f" {PROTOCOL_VERSIONS[0]} to {PROTOCOL_VERSION}"
        )
    if flags:
        raise MalformedRequest(f"{what} has flags {flags:#06x}; wire protocol version {version} defines none")
    end = PRELUDE.size + header_len
    if end > len(view):
        raise MalformedRequest(f"{what} header length {header_len} runs past the end ({len(view)} bytes)")
    try:
        # nesting and number sizes are checked before json builds anything
        header = from_wire(loads_bounded(bytes(view[PRELUDE.size:end]), MAX_HEADER_DEPTH))
    except (ValueError, TypeError) as exc:  # JsonLimitError is a ValueError; so is a bad base64 tag
        raise MalformedRequest(f"{what} header is not valid tagged JSON: {exc}") from None
    if not isinstance(header, dict):
        raise MalformedRequest(f"{what} header must be a JSON object, got {type(header).__name__}")
    return Message(header, view[end:], version)


def batches_to_ipc(batches: Iterable[pa.RecordBatch], schema: pa.Schema | None = None) -> bytes:
    """Write record batches as one Arrow IPC stream (b"" when there are none and no schema)."""
    batches = list(batches)
    if schema is None:
        if not batches:
            return b""
        schema = batches[0].schema
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def ipc_to_batches(payload: bytes | memoryview) -> list[pa.RecordBatch]:
    """Read every record batch of an IPC stream payload (zero-copy over ``payload``)."""
    if len(payload) == 0:
        return []
    try:
        return list(pa.ipc.open_stream(pa.py_buffer(payload)))
    except (pa.ArrowException, OSError) as exc:  # cut or damaged: one line, not Arrow's traceback
        raise MalformedRequest(f"message payload is not a complete Arrow IPC stream: {exc}") from None
