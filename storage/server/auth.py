"""Token authentication: every call must carry ``authorization: Bearer <token>``.

A Flight server middleware checks the header when a call starts, before any
handler runs, so a call without the right token does no work at all.
"""

from __future__ import annotations

import hmac

import pyarrow.flight as flight

from .remote_errors import Unauthenticated, to_flight_error

__all__ = ["TokenMiddlewareFactory", "AUTH_HEADER", "bearer"]

AUTH_HEADER = "authorization"


def bearer(token: str) -> bytes:
    """The header value a client sends for ``token``."""
    return f"Bearer {token}".encode()


class TokenMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Refuses every call whose bearer token differs from the server's (constant-time compare)."""

    def __init__(self, token: str):
        super().__init__()
        self._expected = bearer(token)

    def start_call(self, info, headers):  # noqa: D401 - Flight's hook name
        values = headers.get(AUTH_HEADER) or []
        given = values[0] if values else ""
        given = given.encode() if isinstance(given, str) else bytes(given)
        if not hmac.compare_digest(given, self._expected):
            reason = "no token given" if not values else "wrong token"
            raise to_flight_error(Unauthenticated(f"the region server requires a token: {reason}"))
        return None
