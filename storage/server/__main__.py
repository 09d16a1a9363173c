"""``python -m storage.server --root PATH [--host H] [--port N] [--token-file F]``."""

import sys

from .cli import serve_main

sys.exit(serve_main())
