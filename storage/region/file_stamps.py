"""What ``stat`` says of a file, and whether that is enough to know its bytes later.

A result built from a local file and kept between reads (an open store-file
reader: :mod:`storage.region.reader_cache`; a region's decoded WAL records:
:mod:`storage.region.replay_memo`) is served again only while the file's
stamp is the one taken when the result was built.  Device, inode, size, mtime
and ctime together name one version of one file: a file deleted and created
again has a later ctime, one replaced by a rename another inode.

A rewrite in place can keep the mtime when it lands within the coarse clock
the kernel stamps files from, so a result built less than one clock granule
after the file's last change is not kept at all (git's "racily clean" rule):
:func:`racily_clean`.

Only plain local filesystems are stamped (:func:`stampable`): an object
store's HEAD gives a size and a modification time to the second, which a
same-size replacement can share.
"""

from __future__ import annotations

from typing import NamedTuple

from ..vfs.fs import FileSystem

__all__ = ["FileStamp", "file_stamp", "racily_clean", "stampable", "RACY_NS", "COARSE_RACY_NS"]

RACY_NS = 20_000_000
"""The clock granule allowed for (kernels stamp mtimes from a one-jiffy clock: 1-10 ms on Linux)."""

COARSE_RACY_NS = 3_000_000_000
"""The same for filesystems keeping whole seconds (FAT keeps 2 s): an mtime on a whole millisecond."""


class FileStamp(NamedTuple):
    """What ``os.stat`` says of a file; any difference means another file or other bytes."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int


def file_stamp(fs: FileSystem, path: str) -> FileStamp:
    """The stamp of ``path`` under a local ``fs`` (the stat a store file reader
    names its file by); ``FileNotFoundError`` when it is gone."""
    size, (dev, ino, mtime_ns, ctime_ns) = fs.size_and_version(path)
    return FileStamp(dev, ino, size, mtime_ns, ctime_ns)


def racily_clean(stamp: FileStamp, before_ns: int) -> bool:
    """True when the file was written too shortly before ``before_ns`` (a clock
    reading taken before its stat) for an in-place rewrite to change its mtime:
    what was built from it must not be kept."""
    window = COARSE_RACY_NS if stamp.mtime_ns % 1_000_000 == 0 else RACY_NS
    return before_ns - max(stamp.mtime_ns, stamp.ctime_ns) < window


def stampable(fs: FileSystem) -> bool:
    """True for a plain local filesystem (not a subclass: the fault-injecting one
    of the tests reads through hooks that a result built through another
    instance would bypass)."""
    return type(fs) is FileSystem and fs.is_local
