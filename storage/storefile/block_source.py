"""The blocks of one open store file, as the batched key-run reader sees them.

:mod:`storage.storefile._key_runs` reads and decodes runs of keys-only blocks
together.  It needs the file's block index, codec, cache identity and raw
reads, not the reader itself: a :class:`BlockSource` names exactly those, so
the key-run reader depends on this small object and the reader builds one when
it opens (the reader, its range scans and the key-run reader no longer import
each other).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import pyarrow as pa

    from .cache import BlockCache
    from .codecs import BlockCodec
    from .counters import ReadCounters
    from .index import BlockIndex

__all__ = ["BlockSource"]


class BlockSource:
    """One open store file's block access: index, codec, cache and raw reads.

    ``read(offset, nbytes, block)`` reads bytes of the file,
    ``load_keys(i, cache_blocks)`` the key columns of block ``i`` alone and
    ``header_v2(raw, i)`` checks a format-2 block header; ``mapped()`` is the
    file's memory mapping (None when not mapped or once closed),
    ``closed()`` whether the reader was closed and ``pipelined`` whether
    reads are slow enough (a remote file) to be issued from a thread pool.
    """

    __slots__ = ("where", "index", "codec", "cache", "counters", "file_id", "family",
                 "read", "load_keys", "header_v2", "mapped", "closed", "pipelined")

    def __init__(self, *, where: str, index: "BlockIndex", codec: "BlockCodec", cache: "BlockCache | None",
                 counters: "ReadCounters", file_id: tuple, family: bytes, read: Callable, load_keys: Callable,
                 header_v2: Callable, mapped: "Callable[[], pa.Buffer | None]", closed: Callable[[], bool],
                 pipelined: bool = True):
        self.where = where
        self.index = index
        self.codec = codec
        self.cache = cache
        self.counters = counters
        self.file_id = file_id
        self.family = family
        self.read = read
        self.load_keys = load_keys
        self.header_v2 = header_v2
        self.mapped = mapped
        self.closed = closed
        self.pipelined = pipelined
