"""Run a region server as a child process (for tests, benchmarks and scripts).

``ServerProcess(root, "--lease-timeout", "2")`` starts
``python -m storage.server --root ROOT --port 0 ...``, waits for the
``listening on grpc://...`` line and exposes :attr:`location`; ``stop()``
(or leaving the ``with`` block) terminates it, killing it if it lingers.
``module="storage.thrift"`` runs the HBase Thrift gateway the same way, and
``module=("jobs.cli", "thrift")`` runs it as the ``regionscan thrift`` command.
A root folder that does not exist yet is made (``--create``); ``create=False``
leaves that to the caller's own arguments.

The child runs under :mod:`storage.server.parent_watch`: it stops when this
process ends, killed or not, instead of serving on with nobody to stop it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

from ..errors import StorageError

__all__ = ["ServerProcess"]

_READY = "listening on "


class ServerProcess:
    """A region server child process on an ephemeral loopback port."""

    def __init__(self, root: str, *args: str, start_timeout: float = 30.0, env: dict | None = None,
                 module: str | tuple[str, ...] = "storage.server", create: bool = True):
        self.root = root
        command = (module,) if isinstance(module, str) else tuple(module)
        cmd = [sys.executable, "-m", "storage.server.parent_watch", *command, "--root", str(root), "--port", "0",
               *(["--create"] if create else []), *map(str, args)]
        child_env = dict(os.environ if env is None else env)
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in (here, child_env.get("PYTHONPATH")) if p)
        # the child reads its stdin until this process closes it or ends (parent_watch)
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env,
            bufsize=1,
        )
        self.output: list[str] = []
        self.location = self._wait_ready(start_timeout)
        # Keep draining stdout so the child never blocks on a full pipe.
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _wait_ready(self, timeout: float) -> str:
        found: list[str] = []

        def read() -> None:
            for line in self.proc.stdout:
                self.output.append(line)
                if line.startswith(_READY):
                    found.append(line[len(_READY):].strip())
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if not found:
            self.stop()
            raise StorageError(f"region server did not start within {timeout:g} s: {''.join(self.output)[-2000:]}")
        return found[0]

    def _read_rest(self) -> None:
        for line in self.proc.stdout:
            self.output.append(line)

    @property
    def port(self) -> int:
        return int(self.location.rsplit(":", 1)[1])

    def stop(self, timeout: float = 10.0) -> int | None:
        """Terminate the server (SIGTERM, then SIGKILL after ``timeout``); return its exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.proc.returncode

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
