"""What a remote table and its scanners ask of the connection they came from.

:class:`~storage.server.client.RemoteConnection` makes remote tables, and
remote tables make scanners; they name their connection through this
protocol, so the client module is the only one that knows them all.
"""

from __future__ import annotations

from typing import Any, Protocol

from .wire import Message

__all__ = ["ServerLink"]


class ServerLink(Protocol):
    """A connection to a region server, as its tables and scanners use it."""

    root: str
    """The server's location (``grpc://host:port``), for messages."""

    _channel: Any
    """The Flight channel: ``call(action, header, retries=...)`` and ``stream(header)``."""

    def _call(self, action: str, header: dict | None = None) -> Message:
        """One request and its answer (refused once the connection is closed)."""
        ...

    def server_info(self) -> dict:
        """The server's protocol version and limits."""
        ...
