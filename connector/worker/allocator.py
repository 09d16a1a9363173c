"""The engine worker process's C allocator: freed column buffers kept for the next batch.

A task's read allocates and frees a row group's columns at once: NumPy arrays of 42K values
(330 KiB for 8-byte dates and integers) for the stored dates' integers, the SerDe's decode,
masks and positions.  glibc's ``malloc`` returns the free top of its heap to the kernel once it
passes the trim threshold, which it sets by itself to twice the largest block it has served by
``mmap`` (under 1 MiB here).  So after nearly every batch the freed columns went back to the
kernel, and the next batch's columns faulted each page in again: zero-filled by the kernel,
about 0.25 us a 4 KiB page on an idle machine and several times that on a loaded one.

Measured with the worker's read alone (``read_ops.decoded_batches`` over SF 1 ``lineitem``,
CPU-s, alternating): TPC-H q21's read 0.63-0.67 before, 0.51-0.55 with the thresholds below.
A 42K-row batch's two date columns decoded took 0.67 ms before, 0.28 ms after: two thirds of
it had been page faults.

:func:`keep_freed_memory` fixes the thresholds for the worker process alone (it is its own
process: an application that embeds the engine keeps its allocator as it set it).  The heap
then keeps up to :data:`TRIM_THRESHOLD` free per arena, a bounded margin beside the block
cache, and blocks past :data:`MMAP_THRESHOLD` (decompression buffers of large chunks) still
come from ``mmap`` and go straight back.  Settings given in the environment
(``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``, ``GLIBC_TUNABLES``) are left as given.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from typing import Callable

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "PREFAULT_BYTES", "keep_freed_memory", "prefault_heaps"]

MMAP_THRESHOLD = 4 << 20
"""Blocks at least this large are served by ``mmap`` and unmapped when freed."""
TRIM_THRESHOLD = 16 << 20
"""The free top of a heap kept for later allocations before any is returned to the kernel."""

# glibc's malloc.h parameter numbers
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_ENVIRONMENT = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")
_libc: ctypes.CDLL | None = None  # set once keep_freed_memory() has set the thresholds

PREFAULT_BYTES = 64 << 20
"""What :func:`prefault_heaps` faults in per heap: about what one read thread's heap grows to
over a fresh worker's first TPC-H scan of SF 1 ``lineitem`` (its batches' NumPy columns, masks
and positions; 20K-31K page faults, 80-120 MiB, over the two read threads of q06, q12 and q19)."""
_PIECE = 1 << 20  # below MMAP_THRESHOLD: served from the heap, not by mmap


def keep_freed_memory() -> bool:
    """Set glibc ``malloc``'s trim and mmap thresholds to :data:`TRIM_THRESHOLD` and
    :data:`MMAP_THRESHOLD` in this process; True when set.  False (and nothing changed) off
    glibc, or when the environment sets the allocator's thresholds itself."""
    if not sys.platform.startswith("linux"):
        return False
    if any(name in os.environ for name in _ENVIRONMENT) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else ctypes.CDLL(None)
    except OSError:
        return False
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None or not hasattr(libc, "gnu_get_libc_version"):  # musl's mallopt does nothing
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # the mmap threshold first: setting either ends glibc's own adjustment of both
    kept = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if kept:
        global _libc
        libc.malloc.argtypes, libc.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
        libc.free.argtypes, libc.free.restype = [ctypes.c_void_p], None
        _libc = libc
    return kept


def _prefault_one(libc: ctypes.CDLL, size: int) -> None:
    pieces = [libc.malloc(_PIECE) for _ in range(size // _PIECE)]
    # A small block after the pieces stays allocated for the process's life: the pieces, freed,
    # merge into one free chunk below it instead of into the heap's top, which free() would
    # give back to the kernel (past TRIM_THRESHOLD) and the first read would fault in again.
    libc.malloc(4096)
    for p in pieces:
        if p:
            ctypes.memset(p, 0, _PIECE)  # a foreign call: the GIL is released while pages fault in
    for p in pieces:
        libc.free(p)


def prefault_heaps(threads: int, size: int = PREFAULT_BYTES, during: Callable[[], object] | None = None) -> int:
    """Fault in ``size`` bytes of heap in each of ``threads`` fresh glibc arenas and keep them
    free for the first reads; the bytes faulted in (0 unless :func:`keep_freed_memory` set the
    thresholds in this process).

    A fresh process's heap has no pages yet: its first reads' NumPy columns fault every page in
    (the kernel zero-fills each), which a warm worker's reads, reusing the freed heap, do not.
    Each thread here gets its own arena, faults ``size`` bytes in and frees them; when the
    thread ends its arena goes to glibc's free list, where the next threads (the requests'
    read threads) take it.  Nothing of any table is read: only the heap is made ready.
    ``during`` runs in the calling thread meanwhile (the threads fault pages with the GIL
    released)."""
    libc = _libc
    if libc is None or threads <= 0 or size < _PIECE:
        if during is not None:
            during()
        return 0
    workers = [threading.Thread(target=_prefault_one, args=(libc, size), name=f"heap-prefault-{i}", daemon=True)
               for i in range(threads)]
    for t in workers:
        t.start()
    try:
        if during is not None:
            during()
    finally:
        for t in workers:
            t.join()
    return threads * (size // _PIECE) * _PIECE
