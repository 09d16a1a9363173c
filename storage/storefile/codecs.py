"""Compression codecs for data block bodies: a registry from name to codec.

The name a family is configured with (``"lz4"``, ``"zstd"``...) is written
into the file info, and the matching :class:`CompressionType` code into the
trailer and every block header.  Codecs come from ``pyarrow.Codec``; a pyarrow
built without one gets a stub that raises an error naming what is missing
when a file needs it, so files that do not use it stay readable.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import pyarrow as pa

from ..errors import InvalidArgument, StorageError
from .format import CompressionType

__all__ = ["BlockCodec", "CODECS", "AUTO", "auto_codec", "codec_names", "get_codec", "codec_for_code",
           "normalize_compression"]


@lru_cache(maxsize=None)
def _arrow_codec(name: str, level: int | None = None) -> pa.Codec:
    # One-shot compress/decompress calls keep no state, so one Codec object
    # serves every thread.
    return pa.Codec(name) if level is None else pa.Codec(name, level)


KEY_CHUNK_ZSTD_LEVEL = 3
"""The zstd level of a data block's key chunk (its value chunks keep the codec's default, 1).
Measured (docs/decisions/2026-12-06-wide-keys-and-key-chunk-level.md): on key chunks level 3
was never slower to compress or to decompress than level 1 and never larger, and on a chunk
of per-row timestamps (rows re-put at another time, then compacted) 170x smaller and 8x faster
to decompress; on value chunks it compresses 20-35% slower for 4-7% fewer bytes."""


@dataclass(frozen=True)
class BlockCodec:
    """Compresses and decompresses whole block bodies."""

    name: str
    code: CompressionType
    arrow_name: str | None  # the pyarrow.Codec name; None for no compression
    magic: bytes | None = None
    """The first bytes of everything the codec writes (its frame format's magic number), when no
    version 3 value chunk encoding's bytes can begin with them: then a value chunk may be stored
    as is in a file of this codec, told apart by its first bytes (docs/formats/storefile.md,
    "Value chunks stored as is").  None for a codec without such a magic (snappy has none, gzip's
    two bytes can begin a FIXED chunk) and for no compression."""

    @property
    def available(self) -> bool:
        """True when this pyarrow can run the codec."""
        if self.arrow_name is None:
            return True
        try:
            return pa.Codec.is_available(self.arrow_name)
        except ValueError:  # a name this pyarrow does not even know
            return False

    def require(self) -> None:
        """Raise :class:`StorageError` naming what is missing if the codec cannot run here."""
        if not self.available:
            raise StorageError(
                f"compression {self.name!r} is not available: this pyarrow was built without "
                f"{self.arrow_name} support (pyarrow.Codec.is_available({self.arrow_name!r}) is False); "
                f"install a pyarrow wheel that includes it"
            )

    def _codec(self) -> pa.Codec:
        # no availability check per call: it cost 2% of a narrow scan (one call per chunk);
        # a codec this pyarrow lacks fails to construct, and is never cached
        try:
            return _arrow_codec(self.arrow_name)
        except (pa.ArrowException, ValueError):
            self.require()
            raise

    def compress(self, body: pa.Buffer, *, keys: bool = False) -> pa.Buffer:
        """The stored form of ``body``; ``keys``: a key chunk (zstd compresses it at
        :data:`KEY_CHUNK_ZSTD_LEVEL`).  A reader needs no level: the frame is the same kind."""
        if self.arrow_name is None:
            return body
        codec = _arrow_codec(self.arrow_name, KEY_CHUNK_ZSTD_LEVEL) if keys and self.name == "zstd" else self._codec()
        out = codec.compress(body, asbytes=False)
        # A ResizableBuffer exports its capacity through the buffer protocol;
        # a plain slice exports exactly the compressed bytes.
        return out.slice(0, out.size)

    def decompress(self, stored: pa.Buffer, size: int) -> pa.Buffer:
        """The body of ``size`` bytes from its stored form."""
        if self.arrow_name is None:
            return stored
        return self._codec().decompress(stored, decompressed_size=size, asbytes=False)


CODECS: dict[str, BlockCodec] = {
    c.name: c
    for c in (
        BlockCodec("none", CompressionType.NONE, None),
        BlockCodec("lz4", CompressionType.LZ4, "lz4", b"\x04\x22\x4d\x18"),  # LZ4 frame: 0x184D2204, little-endian
        BlockCodec("zstd", CompressionType.ZSTD, "zstd", b"\x28\xb5\x2f\xfd"),  # zstd frame: 0xFD2FB528, little-endian
        BlockCodec("snappy", CompressionType.SNAPPY, "snappy"),
        BlockCodec("gzip", CompressionType.GZIP, "gzip"),
    )
}
"""Every codec a store file may name, by name (lower case)."""

_BY_CODE = {c.code: c for c in CODECS.values()}


AUTO = "auto"
"""The compression of a family that does not set one: each file takes the codec its first
block calls for (:func:`auto_codec`).  Never on disk: a file names the codec it took."""

AUTO_DENSE_CODEC = "zstd"
"""Files that start with a dense block (row groups, single-version flushes): zstd keeps
TPC-H-shaped tables within 1.3x Parquet's size (docs/decisions/2026-12-05-column-chunks-sweep.md)."""

AUTO_CELLS_CODEC = "lz4"
"""Files that start with a block of cells (several versions of a row, delete markers): every
scan that does not cache blocks and every cold point read decompresses such blocks whole, and
lz4 decompresses them about 4x faster than zstd for about 1.3x the bytes (22.2 MiB against
17.3 MiB on bench_live's versions table; docs/decisions/2026-12-05-benchmark-regressions.md)."""


def auto_codec(dense: bool) -> "BlockCodec":
    """The codec an :data:`AUTO` file takes when its first block is ``dense`` or of cells."""
    return get_codec(AUTO_DENSE_CODEC if dense else AUTO_CELLS_CODEC)


def codec_names() -> list[str]:
    """Names of the codecs this installation can write (``"none"`` included)."""
    return [name for name, c in CODECS.items() if c.available]


def normalize_compression(name: str | None) -> str:
    """Map a user spelling (``None``, ``"NONE"``, ``"LZ4"``) to a registry name."""
    if name is None:
        return "none"
    if not isinstance(name, str) or name.lower() not in CODECS:
        raise InvalidArgument(f"compression must be one of {sorted(CODECS)} or None, got {name!r}")
    return name.lower()


def get_codec(name: str | None) -> BlockCodec:
    """The codec for a configured name; raises if unknown or unavailable here."""
    codec = CODECS[normalize_compression(name)]
    codec.require()  # fail when the writer is created, not at its first block
    return codec


def codec_for_code(code: int) -> BlockCodec | None:
    """The codec for an on-disk code, or None when the code is unknown."""
    try:
        return _BY_CODE[CompressionType(code)]
    except ValueError:
        return None
