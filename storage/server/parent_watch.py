"""Run a server module as a child that stops when its parent process ends.

``python -m storage.server.parent_watch MODULE [ARGS...]`` runs ``MODULE`` as
``python -m MODULE ARGS...`` would, with one thread reading its standard
input: at end of input (the parent closed its end of the pipe, or died and
the system closed it) the child sends itself SIGTERM, which the region server
and the Thrift gateway handle as a clean shutdown.

:class:`~storage.server.process.ServerProcess` starts its children this way,
so a test run or script that is killed leaves no server behind holding its
root, its port and a core.  A server run by hand (``regionscan serve``) is
not affected.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import threading

__all__ = ["main"]


def _stop_at_end_of_input(fd: int) -> None:
    # the raw descriptor, not sys.stdin: a thread blocked in a buffered read holds
    # the buffer's lock, and the interpreter aborts when it cannot take it at exit
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass  # stdin closed or unreadable: the parent is gone just the same
    os.kill(os.getpid(), signal.SIGTERM)


def main() -> None:
    """Start the watcher, then run the module named by ``sys.argv[1]`` as ``__main__``."""
    if len(sys.argv) < 2:
        sys.exit("usage: python -m storage.server.parent_watch MODULE [ARGS...]")
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    fd = os.dup(sys.stdin.fileno())
    threading.Thread(target=_stop_at_end_of_input, args=(fd,), name="parent-watch", daemon=True).start()
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
