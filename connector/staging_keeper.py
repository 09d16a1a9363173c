"""The staging lock of a Python-source write job, held for the driver by a small process of its own.

A bulk-load job holds its staging lock (:func:`storage.engine.hold_staging`) from its start
to its commit or abort, so that a job whose driver dies mid-write leaves a folder the next
writer to open the table deletes.  The JVM source's engine worker holds its jobs' locks
(:mod:`connector.worker.writes`).  pyspark runs a Python data source writer's driver-side
calls in short-lived Python workers of the driver JVM instead: ``writer()`` in one, ``commit()``
or ``abort()`` in another, maybe minutes later, and no Python process of the driver lives from
the write's start to its end.  So ``writer()`` starts a keeper (:func:`start`, which runs
``python -m connector.staging_keeper``): it takes the job's staging lock, says so on its first
line of output, and holds the lock until

* the job's commit or abort asks it to give it back (:func:`release`: a loopback connection
  carrying the job's token); it releases the lock and deletes the lock file, then exits;
* or the process that started the driver's Python workers (pyspark's daemon or the driver JVM,
  both of which end with the driver) is gone: the driver died mid-write.  The keeper then exits
  without giving anything back; its lock dies with it, and the job's staging folder is stale
  (:func:`storage.region.load_journal.drop_stale_staging`).

The keeper stays in its starter's process group, so pyspark's daemon, which hangs up its group
when the driver JVM ends, ends it at once; watching its starter's parent covers Spark set up
without the daemon.
"""

from __future__ import annotations

import hmac
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from storage import StorageError
from storage.engine import FileSystem, drop_free_staging_lock, hold_staging, release_staging, table_files

__all__ = ["StagingKeeper", "start", "release", "main", "TOKEN_ENV"]

TOKEN_ENV = "REGIONSCAN_STAGING_KEEPER_TOKEN"
"""Where the keeper finds the job's token (the environment, not its command line, which anyone may read)."""

_READY_TIMEOUT_S = 120.0  # taking an object store's lease may wait for a lapsed holder's lease
_POLL_S = 0.5  # how soon a keeper notices that the driver is gone


@dataclass(frozen=True)
class StagingKeeper:
    """Where a job's keeper listens (127.0.0.1), the token that makes it let go, and its pid."""

    job_id: str
    port: int
    token: str
    pid: int


def _table_fs(root: str, table: str) -> FileSystem:
    return table_files(root, table)


def start(root: str, table: str, job_id: str) -> StagingKeeper:
    """Start job ``job_id``'s keeper on this host and return once it holds the staging lock.

    Raises :class:`StorageError` with the keeper's one line if it could not take the lock.
    """
    token = secrets.token_hex(16)
    # the folder holding the project's packages (connector.session.code_root, which imports this
    # module's importer): the keeper imports the code this process runs
    path = [str(Path(__file__).resolve().parents[1])]
    path += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, TOKEN_ENV: token, "PYTHONPATH": os.pathsep.join(path)}
    # the watched process: pyspark's daemon, or the driver JVM where Spark runs no daemon
    proc = subprocess.Popen([sys.executable, "-m", "connector.staging_keeper", root, table, job_id,
                             str(os.getppid())], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env,
                            text=True)
    with proc.stdout:  # type: ignore[union-attr]  # a pipe: stdout=PIPE
        ready, _, _ = select.select([proc.stdout], [], [], _READY_TIMEOUT_S)
        line = proc.stdout.readline().strip() if ready else ""  # type: ignore[union-attr]
    if not line.startswith("held port="):
        proc.kill()
        proc.wait()
        raise StorageError(f"bulk load {job_id} cannot hold its staging lock: "
                           f"{line or f'its keeper said nothing in {_READY_TIMEOUT_S:.0f} s'}")
    return StagingKeeper(job_id, int(line.split("=", 1)[1]), token, proc.pid)


def release(keeper: StagingKeeper, root: str, table: str) -> bool:
    """Ask ``keeper`` to give back its job's staging lock (after the commit or abort); True if it
    did.  A keeper already gone leaves a lock file that nobody holds: it is deleted here."""
    try:
        with socket.create_connection(("127.0.0.1", keeper.port), timeout=30) as conn:
            conn.sendall(f"{keeper.token}\n".encode())
            answer = conn.makefile("rb").readline()
    except OSError:
        answer = b""
    if answer.strip() == b"released":
        return True
    drop_free_staging_lock(_table_fs(root, table), keeper.job_id)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (its parent has not reaped it) has ended too
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _serve(table_fs: FileSystem, job_id: str, lock, watched: int, token: bytes) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(_POLL_S)
        print(f"held port={server.getsockname()[1]}", flush=True)
        sys.stdout.close()  # the starter reads one line
        while _alive(watched):
            try:
                conn, _ = server.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(10)
                try:
                    line = conn.makefile("rb").readline(256).strip()
                except OSError:
                    continue
                if not hmac.compare_digest(line, token):
                    continue  # not this job's commit or abort
                release_staging(table_fs, job_id, lock)
                conn.sendall(b"released\n")
                return 0
    return 0  # the driver is gone: the lock goes with this process, the folder is stale


def main(argv: list[str] | None = None) -> int:
    """``python -m connector.staging_keeper <root> <table> <job id> <pid to watch>``."""
    root, table, job_id, watched = argv if argv is not None else sys.argv[1:]
    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # the daemon's hang-up at the driver's end ends it
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the terminal is the driver's to handle
    token = os.environ.get(TOKEN_ENV, "").encode()
    if not token:
        print(f"InvalidArgument: the keeper needs the job's token in {TOKEN_ENV}", flush=True)
        return 2
    table_fs = _table_fs(root, table)
    try:
        lock = hold_staging(table_fs, job_id)
    except Exception as exc:  # noqa: BLE001 - the starter raises it, in one line
        text = str(exc).strip().splitlines()
        print(f"{type(exc).__name__}: {text[0] if text else ''}", flush=True)
        return 1
    return _serve(table_fs, job_id, lock, int(watched), token)


if __name__ == "__main__":
    sys.exit(main())
