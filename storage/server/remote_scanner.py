"""A server-side scanner seen from the client: HBase's open / next(caching) /
close protocol over Flight actions, with sequence numbers so a retried call
gets the same rows again."""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from .link import ServerLink
from .wire import ipc_to_batches

__all__ = ["RemoteScanner"]


class RemoteScanner:
    """A server-side scanner of the RPC scan API: ``next()`` calls, then ``close()``.

    Each :meth:`next` sends the next sequence number; ``next(seq=s)`` sends
    ``s`` instead (a retry of the last call sends the same number again and
    gets the same rows).  The server closes a scanner idle past its lease;
    a later call raises :class:`~storage.server.remote_errors.LeaseExpired`.
    """

    def __init__(self, connection: ServerLink, table_name: str, spec: dict, caching: int, max_bytes: int | None):
        self.connection = connection
        self.caching = caching
        self.max_bytes = max_bytes
        answer = connection._call("scan_open", {"table": table_name, "scan": spec}).header
        self.scanner_id: str = answer["scanner_id"]
        self.lease_ms: int = answer["lease_ms"]
        self.seq = 0
        self.more = True
        self.closed = False

    def next(self, rows: int | None = None, *, seq: int | None = None, retries: int = 1) -> list[pa.RecordBatch]:
        """Up to ``rows`` rows (default: ``caching``) as record batches of whole rows.

        A call that fails in transport (server unreachable, deadline) is
        retried ``retries`` times with the same sequence number.
        """
        send = self.seq if seq is None else seq
        header = {"scanner_id": self.scanner_id, "seq": send, "rows": rows or self.caching,
                  "max_bytes": self.max_bytes}
        # Same seq on a retry: the server answers it again from its cache.
        answer = self.connection._channel.call("scan_next", header, retries=retries)
        self.seq = max(self.seq, send + 1)
        self.more = bool(answer.header["more"])
        return ipc_to_batches(answer.payload)

    def renew(self) -> None:
        """Renew the lease without reading (HBase's renewLease)."""
        self.connection._call("scan_renew", {"scanner_id": self.scanner_id})

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            while self.more:
                yield from self.next()
        finally:
            self.close()

    def close(self) -> None:
        """Close the scanner on the server (harmless if the server already dropped it)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.connection._call("scan_close", {"scanner_id": self.scanner_id})
        except Exception:  # noqa: BLE001 - the lease frees it anyway; never mask the caller's error
            pass

    def __enter__(self) -> "RemoteScanner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
