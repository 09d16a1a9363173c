"""Fixtures of the storage tests.

``conn``: an embedded connection to a fresh root, closed after the test.  ``fs``: a
:class:`FileSystem` on the test's own directory, for store files, WAL segments and manifests
written without a table.  ``one_row_root``: a root whose table ``t`` holds one row
(``row``, ``cf:a`` = ``1``), for the servers the probes attack.  ``remote``: a client
connection to the region server of the module's own ``server`` fixture.
"""

from __future__ import annotations

import pytest

import storage
from storage.vfs.fs import FileSystem


@pytest.fixture
def conn(tmp_path):
    """An embedded connection to a fresh root (``<tmp_path>/root``), closed after the test."""
    with storage.connect(str(tmp_path / "root")) as c:
        yield c


@pytest.fixture
def fs(tmp_path) -> FileSystem:
    """A file system on the test's own directory."""
    return FileSystem(str(tmp_path))


@pytest.fixture(scope="module")
def one_row_root(tmp_path_factory) -> str:
    """A root whose table ``t`` holds one row, ``row`` with ``cf:a`` = ``1`` (one per module)."""
    path = str(tmp_path_factory.mktemp("one_row") / "root")
    with storage.connect(path) as c:
        c.create_table("t", {"cf": {}}).put(b"row", {b"cf:a": b"1"})
    return path


@pytest.fixture(scope="module")
def remote(server):
    """A client connection to ``server``, the region server (a ServerProcess) the module starts."""
    with storage.connect(server.location) as c:
        yield c
