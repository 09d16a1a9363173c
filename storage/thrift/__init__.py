"""An HBase Thrift 1 gateway: happybase and other Thrift 1 clients, unchanged, on regionscan tables.

``regionscan thrift --root PATH`` (or ``python -m storage.thrift``) runs
one; :class:`ThriftGateway` embeds one; ``Hbase.thrift`` beside this
module is the interface it serves.  Importing the package starts nothing
and loads thriftpy2 only when a gateway is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import DEFAULT_PORT, GatewayConfig

if TYPE_CHECKING:
    from .server import ThriftGateway

__all__ = ["ThriftGateway", "GatewayConfig", "DEFAULT_PORT", "thrift_main"]


def thrift_main(argv: list[str] | None = None) -> int:
    """Run a gateway from command-line arguments (see :mod:`storage.thrift.cli`)."""
    from .cli import thrift_main as _main

    return _main(argv)


def __getattr__(name: str) -> Any:
    if name == "ThriftGateway":
        from .server import ThriftGateway

        return ThriftGateway
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
