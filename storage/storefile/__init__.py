"""Block-structured store files (HFile-like): writer, reader, scanner, block cache.

A store file holds the cells of one column family in sort order, cut into
data blocks whose bodies are Arrow IPC record batches, followed by a block
index, an optional row bloom filter, file info and a fixed trailer.  The
format is specified in ``docs/formats/storefile.md``.

* :class:`StoreFileWriter` -- append cells in order, then ``finish()`` or ``abandon()``.
* :class:`StoreFileReader` -- verified, cached, thread-safe block reads,
  ``scan_batches`` (the batch path) and ``scanner()`` (the cell path).
* :class:`StoreFileScanner` -- seek / reseek / peek / next / seek_to_previous_row.
* :class:`BlockCache` -- the LRU block cache shared by a connection's readers.
"""

from .cache import BlockCache
from .codecs import CODECS, codec_names
from .counters import ReadCounters
from .fileinfo import FileInfo
from .format import FORMAT_VERSION
from .reader import PREFETCH_MODES, StoreFileReader
from .scanner import StoreFileScanner
from .writer import StoreFileWriter

__all__ = [
    "StoreFileWriter",
    "StoreFileReader",
    "StoreFileScanner",
    "FileInfo",
    "BlockCache",
    "ReadCounters",
    "FORMAT_VERSION",
    "PREFETCH_MODES",
    "CODECS",
    "codec_names",
]
