"""Framed, checksummed JSON documents (the container of table and region manifests).

Layout (spec in ``docs/formats/manifest.md``)::

    | kind (8) | version u16 | flags u16 | payload_len u32 | crc u32 | payload (JSON, UTF-8) |
      0          8             10          12                16        20

All integers are little-endian.  ``crc`` is the CRC-32 of bytes 0..16 (kind,
version, flags, length) followed by the payload, so a damaged header field is
caught as surely as a damaged payload.  ``kind`` is an 8-byte magic that names
the document type (``b"RSTABLE1"``); ``version`` is that document type's
format version, chosen by its owner.

Payload values are plain JSON values; tuples come back as lists and object
keys must be strings.  Binary values have one spelling in every document:
lowercase hex strings, written and read by the document's owner (the
manifests' row keys), so a ``bytes`` value is refused rather than given a
second spelling.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any, Collection

from ..checksum import crc32
from ..errors import CorruptionError, InvalidArgument
from ..vfs.fs import FileSystem

__all__ = [
    "FRAME_HEADER_SIZE",
    "MAX_PAYLOAD_BYTES",
    "Document",
    "encode_document",
    "decode_document",
    "decode_frame",
    "write_document",
    "read_document",
]

# DO NOT CHANGE: this layout is embedded in every manifest on disk.
_HEADER = struct.Struct("<8sHHII")  # kind, version, flags, payload_len, crc
FRAME_HEADER_SIZE = _HEADER.size
_CRC_OFFSET = 16

MAX_PAYLOAD_BYTES = (1 << 32) - 1


@dataclass(frozen=True)
class Document:
    """A decoded frame: its kind, its format version and its payload."""

    kind: bytes
    version: int
    payload: dict


# -- payload <-> JSON --------------------------------------------------------


def _to_json(value: Any, where: str) -> Any:
    """Return a JSON-ready copy of ``value``; raise InvalidArgument naming the bad part."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f"document value at {where} must be a finite number, got {value!r}")
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidArgument(
            f"document value at {where} is {type(value).__name__}: documents spell binary values as hex strings"
        )
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidArgument(f"document keys must be str, got {key!r} at {where}")
            out[key] = _to_json(item, f"{where}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [_to_json(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise InvalidArgument(f"document value at {where} has unsupported type {type(value).__name__}: {value!r}")


# -- frames ------------------------------------------------------------------


def _check_kind(kind: bytes) -> bytes:
    if not isinstance(kind, bytes) or len(kind) != 8:
        raise InvalidArgument(f"document kind must be 8 bytes, got {kind!r}")
    return kind


def encode_document(kind: bytes, version: int, payload: dict) -> bytes:
    """Frame ``payload`` as a document of ``kind`` (8 bytes) at format ``version``.

    The output is deterministic (keys sorted, compact separators), so equal
    payloads give equal bytes.
    """
    _check_kind(kind)
    if isinstance(version, bool) or not isinstance(version, int) or not 0 < version < 1 << 16:
        raise InvalidArgument(f"document version must be an int in [1, 65535], got {version!r}")
    if not isinstance(payload, dict):
        raise InvalidArgument(f"document payload must be a dict, got {type(payload).__name__}")
    text = json.dumps(_to_json(payload, "$"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates have no UTF-8 form
        raise InvalidArgument(f"document strings must be valid Unicode ({exc})") from None
    if len(body) > MAX_PAYLOAD_BYTES:
        raise InvalidArgument(f"document payload of {len(body)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    head = struct.pack("<8sHHI", kind, version, 0, len(body))
    crc = crc32(body, crc32(head))
    return head + struct.pack("<I", crc) + body


def decode_frame(
    data: bytes, kind: bytes, path: str, supported_versions: Collection[int] = (1,)
) -> Document:
    """Check and decode a framed document, returning its version with the payload.

    Raises :class:`CorruptionError` naming ``path`` and the offset for a
    truncated frame, a wrong kind, a length that disagrees with the data, a
    checksum mismatch, an unsupported version, unknown flags, or a payload
    that is not a JSON object.
    """
    _check_kind(kind)
    data = bytes(data)
    size = len(data)
    if size < FRAME_HEADER_SIZE:
        raise CorruptionError(
            f"document truncated: {size} bytes, its header alone needs {FRAME_HEADER_SIZE}", path, size
        )
    found, version, flags, length, crc = _HEADER.unpack_from(data, 0)
    if found != kind:
        raise CorruptionError(f"bad document magic {found!r}, expected {kind!r}", path, 0)
    end = FRAME_HEADER_SIZE + length
    if end > size:
        raise CorruptionError(
            f"document truncated: header promises {length} payload bytes, {size - FRAME_HEADER_SIZE} present",
            path,
            size,
        )
    if end < size:
        raise CorruptionError(
            f"document length mismatch: {size - end} bytes after the {length}-byte payload", path, end
        )
    if crc32(data[FRAME_HEADER_SIZE:], crc32(data[:_CRC_OFFSET])) != crc:
        raise CorruptionError("document checksum mismatch", path, 0)
    if version not in supported_versions:
        raise CorruptionError(
            f"unsupported {kind.decode('ascii', 'replace')} version {version} "
            f"(supported: {sorted(supported_versions)})",
            path,
            8,
        )
    if flags:
        raise CorruptionError(f"unknown document flags {flags:#x}", path, 10)
    try:
        payload = json.loads(data[FRAME_HEADER_SIZE:].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptionError(f"document payload is not valid JSON ({exc})", path, FRAME_HEADER_SIZE) from None
    if not isinstance(payload, dict):
        raise CorruptionError("document payload is not a JSON object", path, FRAME_HEADER_SIZE)
    return Document(found, version, payload)


def decode_document(
    data: bytes, kind: bytes, path: str, supported_versions: Collection[int] = (1,)
) -> dict:
    """Check and decode a framed document; return its payload (see :func:`decode_frame`)."""
    return decode_frame(data, kind, path, supported_versions).payload


def write_document(fs: FileSystem, path: str, kind: bytes, version: int, payload: dict) -> None:
    """Encode a document and replace ``path`` with it atomically."""
    fs.write_atomic(path, encode_document(kind, version, payload))


def read_document(
    fs: FileSystem, path: str, kind: bytes, supported_versions: Collection[int] = (1,)
) -> Document:
    """Read and decode the document at ``path``."""
    return decode_frame(fs.read_bytes(path), kind, fs.uri(path), supported_versions)
