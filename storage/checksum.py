"""CRC-32 of the formats' checksums, from the fastest implementation installed.

Every store-file block (three checksums: header, key section, value
section), every WAL record and every manifest frame carries a CRC-32 of
zlib's polynomial (``docs/formats/``).  Python's ``zlib.crc32`` computes it
table-driven, at about 2.5 GB/s on this project's machines; ISA-L (the
``isal`` package) computes the very same value with carry-less
multiplication at 30-50 GB/s.  A read of an uncached table checks every
byte it reads, and zlib's CRC was 12-25% of the connector's partition read
of such a table (docs/decisions/2026-12-04-checksums-by-isa-l.md).

So :func:`crc32` is ISA-L's where the package is installed (a dependency on
the platforms it ships wheels for) and zlib's elsewhere.  The values are the
same by definition, so a file written with one reads with the other;
``tests/storage/test_checksum.py`` holds the two equal.
"""

from __future__ import annotations

import zlib
from typing import Callable

__all__ = ["crc32", "IMPLEMENTATION"]

try:
    from isal.isal_zlib import crc32 as _isal_crc32
except ImportError:  # no wheel for this platform: zlib computes the same values, slower
    _isal_crc32 = None

crc32: Callable[..., int] = _isal_crc32 if _isal_crc32 is not None else zlib.crc32
"""``crc32(data, value=0)``: zlib's CRC-32 of ``data`` (any buffer: bytes,
memoryview, ``pyarrow.Buffer``), continuing from ``value``."""

IMPLEMENTATION = "isal" if _isal_crc32 is not None else "zlib"
"""Which implementation :func:`crc32` is (reported by the benchmarks)."""
