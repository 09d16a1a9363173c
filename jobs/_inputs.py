"""Input files of a job: paths or URIs, folders expanded, one Spark task per file.

A folder stands for the files directly inside it, skipping names that
start with ``_`` or ``.`` (``_SUCCESS``, ``_temporary``, hidden files), as
Hadoop's ``FileInputFormat`` does.  Files are read through the engine's
filesystem layer, so local paths and pyarrow URIs work alike.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator, Sequence

import pyarrow as pa

from storage import InvalidArgument
from storage.engine import FileSystem

__all__ = ["InputFile", "list_inputs", "read_line_chunks"]


@dataclass(frozen=True)
class InputFile:
    """One input file: the folder (path or URI) holding it, its name, size and task index."""

    root: str
    name: str
    size: int
    index: int

    @property
    def path(self) -> str:
        """Where the file is, for messages."""
        return f"{self.root.rstrip('/')}/{self.name}"

    def open(self) -> pa.NativeFile:
        return FileSystem(self.root).open_read(self.name)


def _split(path: str) -> tuple[str, str]:
    if "://" in path:
        head, _, tail = path.rstrip("/").rpartition("/")
        return head, tail
    full = os.path.abspath(path)
    return os.path.dirname(full), os.path.basename(full)


def list_inputs(paths: Sequence[str], suffixes: Sequence[str] | None = None) -> list[InputFile]:
    """The files the paths name (folders expanded), optionally only those ending in ``suffixes``."""
    found: list[tuple[str, str, int]] = []
    for path in paths:
        fs = FileSystem(path)
        if fs.is_dir(""):
            for name in fs.listdir(""):
                if name.startswith(("_", ".")) or fs.is_dir(name):
                    continue
                if suffixes and not name.lower().endswith(tuple(suffixes)):
                    continue
                found.append((path.rstrip("/") if "://" in path else os.path.abspath(path), name, fs.size(name)))
        elif fs.exists(""):
            root, name = _split(path)
            found.append((root, name, FileSystem(root).size(name)))
        else:
            raise InvalidArgument(f"input {path!r} does not exist")
    if not found:
        raise InvalidArgument(f"no input files under {', '.join(paths)}"
                              + (f" ending in {', '.join(suffixes)}" if suffixes else ""))
    return [InputFile(root, name, size, i) for i, (root, name, size) in enumerate(found)]


def read_line_chunks(source: pa.NativeFile, chunk_bytes: int = 32 << 20) -> Iterator[bytes]:
    """The file in pieces of about ``chunk_bytes`` that end at a line end (the last may not)."""
    carry = b""
    while True:
        block = source.read(chunk_bytes)
        if not block:
            if carry:
                yield carry
            return
        data = carry + block
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        carry = data[cut + 1:]
        yield data[: cut + 1]
