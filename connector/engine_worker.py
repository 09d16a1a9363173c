"""``python -m connector.engine_worker``: the command that runs the engine worker process.

The JVM source's ``WorkerProcess.java`` starts it, one per JVM; the process
serves that JVM's requests with :class:`connector.worker.server.WorkerServer`
(connector/java/PROTOCOL.md).  Before it serves, the process keeps the column buffers a
read frees for its next batch (:mod:`connector.worker.allocator`).
"""

import sys

from connector.worker.allocator import keep_freed_memory
from connector.worker.server import main

if __name__ == "__main__":
    keep_freed_memory()
    sys.exit(main())
