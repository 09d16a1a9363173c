"""The writer lease of a table on an object store.

Object stores have no advisory locks, so a table's single writer holds a
lease: a small JSON object (``{"owner", "token", "expires_ms"}``) at the
table's lock path.

- Acquire: create it with a conditional put (``If-None-Match: *``).  If it
  exists and has not expired, raise :class:`TableLocked` naming the holder.
  If it has expired (its holder died), take it over with ``If-Match`` on the
  ETag just read, so of two contenders exactly one wins.
- Hold: a daemon thread renews it every third of the lease time with
  ``If-Match`` on the ETag of its own last write.  A renewal that loses
  (somebody took the lease over) marks the lease lost.
- Fence: before the writer commits anything under the table (a WAL segment,
  a manifest, a journal) it calls :meth:`Lease.check`, which raises unless
  the lease is held and more than :data:`SAFETY_MARGIN` of it is left by the
  local clock.  A writer that stalled past its expiry therefore stops before
  a new holder (which waits for the expiry by its own clock) starts; clocks
  must agree to within the margin.
- Release: stop renewing and delete the object if it still holds our token.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid

from .. import clock
from ..errors import TableLocked
from .objstore import ObjectStore, PreconditionFailed

__all__ = ["Lease", "SAFETY_MARGIN"]

SAFETY_MARGIN = 0.25
"""Fraction of the lease time a writer keeps in reserve: it stops committing
once less than this much of its lease is left."""


class Lease:
    """A lease on ``full`` (the lock object's path in the store); see the module docstring."""

    def __init__(self, store: ObjectStore, full: str, seconds: float):
        self._store = store
        self.path = full
        self.scope = full.rsplit("/", 1)[0] + "/"  # the table directory the lease covers
        self.seconds = seconds
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self.token = uuid.uuid4().hex
        self._etag: str | None = None
        self._expires_ms = 0
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.renewals = 0

    # -- life cycle ----------------------------------------------------------
    def acquire(self) -> "Lease":
        """Take the lease or raise :class:`TableLocked` naming its holder."""
        data, expires = self._document()
        try:
            self._etag = self._store.put(self.path, data, if_absent=True)
        except PreconditionFailed:
            self._take_over(data, expires)
        self._expires_ms = expires
        self._store.leases.append(self)
        self._thread = threading.Thread(target=self._renew_loop, name=f"lease:{self.path}", daemon=True)
        self._thread.start()
        return self

    def _take_over(self, data: bytes, expires: int) -> None:
        try:
            current = self._store.get(self.path)
        except FileNotFoundError:  # released while we looked: try once more
            try:
                self._etag = self._store.put(self.path, data, if_absent=True)
                return
            except PreconditionFailed:
                raise TableLocked(f"s3://{self.path} was taken by another writer meanwhile") from None
        holder, held_until, _token = _parse(current)
        now = clock.now_ms()
        if held_until > now:
            raise TableLocked(
                f"s3://{self.path} is locked by another writer ({holder}, lease valid for "
                f"{(held_until - now) / 1000:.1f} s more)"
            )
        seen = self._store.etag(self.path)
        try:
            self._etag = self._store.put(self.path, data, if_match=seen) if seen else None
        except PreconditionFailed:
            raise TableLocked(f"s3://{self.path}: another writer took over the expired lease first") from None
        if self._etag is None:
            raise TableLocked(f"s3://{self.path}: the expired lease could not be read back for a take-over")

    def release(self) -> None:
        """Stop renewing and delete the lease object if it is still ours; safe to call twice."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self in self._store.leases:
            self._store.leases.remove(self)
        if self._lost is None:
            try:
                if _parse(self._store.get(self.path))[2] == self.token:
                    self._store.delete(self.path)
            except Exception:  # best effort: it expires anyway
                pass

    # -- holding ---------------------------------------------------------------
    def check(self) -> None:
        """Raise :class:`TableLocked` unless the lease is held with margin to spare."""
        if self._lost is not None:
            raise TableLocked(f"this writer lost its lease on s3://{self.path}: {self._lost}")
        left = self._expires_ms - clock.now_ms()
        if left < self.seconds * 1000 * SAFETY_MARGIN:
            raise TableLocked(
                f"this writer's lease on s3://{self.path} runs out in {left / 1000:.1f} s "
                "(renewals failing): not committing"
            )

    @property
    def expires_ms(self) -> int:
        return self._expires_ms

    def _renew_loop(self) -> None:
        interval = self.seconds / 3
        while not self._stop.wait(interval):
            data, expires = self._document()
            try:
                self._etag = self._store.put(self.path, data, if_match=self._etag)
            except PreconditionFailed:
                self._lost = "another writer took it over"
                return
            except Exception:  # transient: try again next round; check() fences meanwhile
                continue
            self._expires_ms = expires
            self.renewals += 1

    def _document(self) -> tuple[bytes, int]:
        expires = clock.now_ms() + int(self.seconds * 1000)
        doc = {"owner": self.owner, "token": self.token, "expires_ms": expires}
        return json.dumps(doc, sort_keys=True).encode(), expires


def _parse(data: bytes) -> tuple[str, int, str]:
    """(owner, expires_ms, token) of a lease object; an unreadable one counts as expired."""
    try:
        doc = json.loads(data)
        return str(doc["owner"]), int(doc["expires_ms"]), str(doc["token"])
    except (ValueError, KeyError, TypeError):
        return "unknown", 0, ""
