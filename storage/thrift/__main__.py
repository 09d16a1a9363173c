"""``python -m storage.thrift --root PATH``: run the HBase Thrift gateway."""

import sys

from .cli import thrift_main

sys.exit(thrift_main())
