"""An output directory written by many tasks and committed once, as Hadoop's FileOutputCommitter.

Tasks write their part files under ``<out>/_temporary/<job id>/``; only
when every task has succeeded does the driver move them into ``<out>`` and
write ``_SUCCESS``.  A failed job deletes its ``_temporary`` folder (and
``<out>`` itself when the job created it), so readers never see a partial
result.  The object is picklable: tasks get it in their closure and open
the filesystem themselves.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Iterable

from storage import InvalidArgument
from storage.engine import FileSystem

from jobs._writable import check_writable_folder

__all__ = ["OutputDir", "SUCCESS", "Sink"]

SUCCESS = "_SUCCESS"
_TEMP = "_temporary"


class Sink:
    """A file-like writer over :meth:`storage.vfs.fs.FileSystem.create` for pyarrow and fastavro writers."""

    def __init__(self, fs: FileSystem, path: str):
        self._file = fs.create(path)
        self.closed = False
        self.written = 0

    def write(self, data) -> int:
        n = self._file.write(bytes(data) if not isinstance(data, bytes) else data)
        self.written += len(data)
        return n if n is not None else len(data)

    def flush(self) -> None:
        """Nothing to do: the data is handed to the file on each write."""

    def tell(self) -> int:
        return self.written

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._file.close()

    def __enter__(self) -> "Sink":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class OutputDir:
    """The output folder of one job (a path or filesystem URI)."""

    uri: str
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    created: bool = False

    def fs(self) -> FileSystem:
        return FileSystem(self.uri)

    def prepare(self, overwrite: bool = False) -> None:
        """Check the folder on the driver: absent or empty, or ``overwrite``; create it."""
        fs = self.fs()
        try:
            if fs.exists("") and not fs.is_dir(""):
                raise InvalidArgument(f"output {self.uri!r} exists and is not a folder")
            # a file where a parent folder must go, a read-only place: said before the job runs
            check_writable_folder(self.uri, "output folder")
            existing = [name for name in fs.listdir("") if name != _TEMP] if fs.exists("") else []
            if existing and not overwrite:
                raise InvalidArgument(f"output folder {self.uri!r} is not empty ({', '.join(existing[:3])}"
                                      f"{' ...' if len(existing) > 3 else ''}); choose another or pass --overwrite")
            self.created = not fs.exists("")
            fs.makedirs(self.temp_dir)
        except OSError as exc:
            raise InvalidArgument(f"cannot write output folder {self.uri}: {exc.strerror or exc}") from None

    @property
    def temp_dir(self) -> str:
        return f"{_TEMP}/{self.job_id}"

    def task_path(self, name: str) -> str:
        """Where a task writes part file ``name`` (relative to the output folder)."""
        if "/" in name or not name:
            raise InvalidArgument(f"part file names are plain names, got {name!r}")
        return f"{self.temp_dir}/{name}"

    def commit(self, names: Iterable[str], overwrite: bool = False) -> list[str]:
        """Move the parts into place, replacing older parts when ``overwrite``; write ``_SUCCESS``."""
        fs = self.fs()
        names = sorted(set(names))
        if overwrite:
            for old in fs.listdir(""):
                if old != _TEMP and old not in names:
                    if fs.is_dir(old):
                        fs.delete_dir(old)
                    else:
                        fs.delete(old, missing_ok=True)
        for name in names:
            fs.rename(self.task_path(name), name)
        fs.delete_dir(self.temp_dir)
        if not fs.listdir(_TEMP):
            fs.delete_dir(_TEMP)
        fs.write_bytes(SUCCESS, b"")
        return names

    def abort(self) -> None:
        """Delete what the tasks wrote; the folder too if this job created it."""
        fs = self.fs()
        fs.delete_dir(self.temp_dir)
        if fs.exists(_TEMP) and not fs.listdir(_TEMP):
            fs.delete_dir(_TEMP)
        if self.created and fs.exists("") and not fs.listdir(""):
            fs.delete_dir("")
