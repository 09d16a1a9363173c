"""The region server: the tables under a root, served over Arrow Flight.

``python -m storage.server --root PATH`` (or ``regionscan serve``) runs one;
``storage.connect("grpc://host:port")`` is its client (:mod:`storage.server.client`).
Importing the package starts nothing; :class:`RegionServer` is loaded on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import ServerConfig
from .remote_errors import (
    LeaseExpired,
    LimitExceeded,
    MalformedRequest,
    OutOfOrderScannerNext,
    RemoteError,
    RequestFieldError,
    Unauthenticated,
    UnknownScanner,
)

if TYPE_CHECKING:
    from .service import RegionServer

__all__ = [
    "RegionServer",
    "ServerConfig",
    "serve_main",
    "Unauthenticated",
    "LimitExceeded",
    "MalformedRequest",
    "RequestFieldError",
    "UnknownScanner",
    "LeaseExpired",
    "OutOfOrderScannerNext",
    "RemoteError",
]


def serve_main(argv: list[str] | None = None) -> int:
    """Run a region server from command-line arguments (see :mod:`storage.server.cli`)."""
    from .cli import serve_main as _main

    return _main(argv)


def __getattr__(name: str) -> Any:
    if name == "RegionServer":
        from .service import RegionServer

        return RegionServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
