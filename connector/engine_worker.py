"""``python -m connector.engine_worker``: the JVM source's engine worker (see connector.jvm_source.worker)."""

import sys

from connector.jvm_source.worker import main

if __name__ == "__main__":
    sys.exit(main())
