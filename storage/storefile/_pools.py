"""Thread pools of the store file reader, started on first use.

A pool object outlives a ``fork``, its threads do not: a forked child
(Spark's Python workers are forked from a daemon) that submitted to its
parent's pool would wait forever.  So every pool here is forgotten in the
child and started again there on first use.
"""

from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

__all__ = ["LazyPool", "prefetch_pool"]

_POOLS: "weakref.WeakSet[LazyPool]" = weakref.WeakSet()


class LazyPool:
    """A :class:`ThreadPoolExecutor` of ``workers`` threads named
    ``name-N``, started by the first :meth:`get`."""

    def __init__(self, workers: int, name: str) -> None:
        self._workers = workers
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        _POOLS.add(self)

    def get(self) -> ThreadPoolExecutor:
        """The pool, started now if this process has none yet."""
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix=self._name)
        return self._pool

    def _forget(self) -> None:
        self._pool = None
        self._lock = threading.Lock()  # it may have been held by a parent's thread


def _forget_all() -> None:
    for pool in list(_POOLS):
        pool._forget()


os.register_at_fork(after_in_child=_forget_all)


_PREFETCH_POOL = LazyPool(8, "block-prefetch")


def prefetch_pool() -> ThreadPoolExecutor:
    """The threads that read the next block of remote files ahead of their scanners."""
    return _PREFETCH_POOL.get()
