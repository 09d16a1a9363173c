"""``python -m connector.engine_worker``: the command that runs the engine worker process.

The JVM source's ``WorkerProcess.java`` starts it, one per JVM; the process
serves that JVM's requests with :class:`connector.worker.server.WorkerServer`
(connector/java/PROTOCOL.md).
"""

import sys

from connector.worker.server import main

if __name__ == "__main__":
    sys.exit(main())
