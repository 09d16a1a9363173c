"""Enabled and disabled tables: HBase's table state, kept by the gateway.

The engine has no notion of a disabled table, so the gateway keeps it: a
table is disabled while a marker file ``DISABLED`` sits in its directory
(written atomically through the filesystem layer, so it works on object
stores too).  The state therefore survives gateway restarts, is shared by
every gateway serving the root, and disappears with the table.  Only the
gateway honours it; the embedded API and the region server ignore it.

The state is cached per table after the first look and updated by this
gateway's own enable and disable calls.
"""

from __future__ import annotations

import threading

from ..namespaces import table_dir
from ..vfs.fs import FileSystem

__all__ = ["TableStates", "DISABLED_MARKER"]

DISABLED_MARKER = "DISABLED"
_MARKER_TEXT = b"disabled through the HBase Thrift gateway; enableTable removes this file\n"


class TableStates:
    """Enabled/disabled state of the tables under a root."""

    def __init__(self, fs: FileSystem):
        self._fs = fs
        self._enabled: dict[str, bool] = {}
        self._mutex = threading.Lock()

    def is_enabled(self, name: str) -> bool:
        hit = self._enabled.get(name)
        if hit is None:
            hit = not self._fs.exists(f"{table_dir(name)}/{DISABLED_MARKER}")
            with self._mutex:
                self._enabled[name] = hit
        return hit

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Persist the state of ``name`` (the table must exist)."""
        with self._mutex:
            if enabled:
                self._fs.delete(f"{table_dir(name)}/{DISABLED_MARKER}", missing_ok=True)
            else:
                self._fs.write_atomic(f"{table_dir(name)}/{DISABLED_MARKER}", _MARKER_TEXT)
            self._enabled[name] = enabled

    def forget(self, name: str) -> None:
        """Drop the cached state (the table was created or deleted)."""
        with self._mutex:
            self._enabled.pop(name, None)
