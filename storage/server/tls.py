"""TLS for the region server: reading PEM files, and the client's ``grpc+tls`` settings.

The server is given a certificate (chain) and its private key; the client
trusts the system's roots, or the root certificates it is given
(``storage.connect("grpc+tls://...", tls_root_certs=PATH_OR_PEM)``, or
``?tls_root_certs=PATH`` on the URI).  A file that cannot be read, or does
not hold PEM, is one error naming it, before anything is bound or sent.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ..errors import InvalidArgument

__all__ = ["read_pem", "root_certs", "split_location", "TLS_SCHEME"]

TLS_SCHEME = "grpc+tls"
_LOCATION_OPTIONS = ("tls_root_certs",)


def read_pem(path: str, what: str) -> bytes:
    """The PEM text in ``path``; ``what`` names it in the error (``--tls-cert``)."""
    if not isinstance(path, str) or not path:
        raise InvalidArgument(f"{what} must be a file path, got {path!r}")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {what} {path}: {exc.strerror}") from None
    if b"-----BEGIN " not in data:
        raise InvalidArgument(f"{what} {path} holds no PEM block (-----BEGIN ...)")
    return data


def root_certs(value: str | bytes) -> bytes:
    """Root certificates given as PEM bytes, or as the path of a PEM file."""
    if isinstance(value, bytes):
        if b"-----BEGIN " not in value:
            raise InvalidArgument("tls_root_certs bytes hold no PEM block (-----BEGIN ...)")
        return value
    if isinstance(value, str):
        return read_pem(value, "tls_root_certs")
    raise InvalidArgument(f"tls_root_certs must be PEM bytes or a file path, got {type(value).__name__}")


def split_location(location: str) -> tuple[str, dict]:
    """``grpc+tls://h:p?tls_root_certs=F`` -> (``grpc+tls://h:p``, ``{"tls_root_certs": "F"}``)."""
    parts = urlsplit(location)
    if not parts.query:
        return location, {}
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(options) - set(_LOCATION_OPTIONS))
    if unknown:
        raise InvalidArgument(f"unknown options {unknown} in {location}; a server URI takes {list(_LOCATION_OPTIONS)}")
    if parts.scheme != TLS_SCHEME:
        raise InvalidArgument(f"{location}: tls_root_certs needs a {TLS_SCHEME}:// URI")
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), options
