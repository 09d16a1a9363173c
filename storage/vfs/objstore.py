"""S3-compatible object stores under the filesystem layer.

An ``s3://bucket/prefix`` root is read through pyarrow's ``S3FileSystem``
(ranged GETs for store-file blocks, listings) and written through boto3,
because commits need what pyarrow cannot do: conditional puts
(``If-None-Match: *`` to create an object only if it is absent, ``If-Match:
<etag>`` to replace it only if nobody else did), and because pyarrow's
multipart uploads do not complete against every S3-compatible server (with
moto 5.2, pyarrow 26 reads the completion as an error embedded in a 200
response and retries it with back-off for about 30 s before failing, which
looks like a hang).  Objects are written whole:
a small one with one PUT, a large one as a multipart upload completed on
``close``, so an object is either absent, the old one or the new one.

Configuration comes the way pyarrow and the AWS tools take it:

- credentials from the environment (``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``), an AWS profile or an
  instance role, never from the root URI printed in plans and logs;
- URI query parameters ``endpoint_override`` (``host:port``, or with its
  scheme, ``http://host:port``, URL-encoded or not), ``scheme``
  (``http``/``https``) and ``region``, as ``pyarrow.fs.S3FileSystem.from_uri``
  spells them, else ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` and
  ``AWS_REGION`` / ``AWS_DEFAULT_REGION``;
- engine parameters ``connect_timeout`` and ``request_timeout`` (seconds),
  ``max_attempts`` (per call, retries included) and ``lease_seconds`` (the
  writer lease), so a failing call raises within a bounded time instead of
  hanging.

boto3 is an optional dependency (the ``s3`` extra), imported only for
``s3://`` roots.
"""

from __future__ import annotations

import io
import os
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pyarrow.fs as pafs

from ..errors import InvalidArgument, StorageError

__all__ = ["S3Settings", "ObjectStore", "PreconditionFailed", "redact_uri", "PART_SIZE"]

PART_SIZE = 16 << 20
"""Bytes per multipart-upload part; smaller objects go up in one PUT."""

_ENGINE_PARAMS = {"connect_timeout": float, "request_timeout": float, "max_attempts": int, "lease_seconds": float}
_ARROW_PARAMS = ("endpoint_override", "scheme", "region")


class PreconditionFailed(StorageError):
    """A conditional put lost: the object exists (If-None-Match) or changed (If-Match)."""


def redact_uri(uri: str) -> str:
    """``uri`` without a ``user:secret@`` part, for messages, plans and logs."""
    if "://" not in uri or "@" not in uri.split("://", 1)[1].split("/", 1)[0]:
        return uri
    scheme, rest = uri.split("://", 1)
    netloc, _, tail = rest.partition("/")
    host = netloc.rsplit("@", 1)[1]
    return f"{scheme}://***@{host}" + (f"/{tail}" if tail or rest.endswith("/") else "")


def _split_endpoint(value: str, source: str) -> tuple[str, str | None]:
    """``host:port`` or ``http(s)://host:port[/]`` -> (``host:port``, scheme or None).

    Both forms are what pyarrow's ``endpoint_override`` and the AWS tools'
    ``AWS_ENDPOINT_URL`` accept; anything else (a path, a query, another
    scheme) is refused here, at connect, not by a mangled URL at the first
    request.
    """
    text = value.strip()
    scheme = None
    if "://" in text:
        scheme, _, text = text.partition("://")
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            raise InvalidArgument(f"{source} {value!r}: the endpoint's scheme must be http or https")
    host, _, rest = text.partition("/")
    if rest or not host or any(c in host for c in "?#@ "):
        raise InvalidArgument(f"{source} must be host:port or http(s)://host:port, got {value!r}")
    return host, scheme


@dataclass(frozen=True)
class S3Settings:
    """Where and how to reach an S3-compatible store (no secrets are printed)."""

    endpoint_override: str | None = None
    scheme: str = "https"
    region: str | None = None
    connect_timeout: float = 5.0
    request_timeout: float = 30.0
    max_attempts: int = 3
    lease_seconds: float = 30.0
    access_key: str | None = None
    secret_key: str | None = None

    @classmethod
    def from_uri(cls, uri: str) -> tuple["S3Settings", str]:
        """Parse ``s3://[key:secret@]bucket/prefix?params``; returns (settings, "bucket/prefix")."""
        parts = urlsplit(uri)
        if parts.scheme != "s3":
            raise InvalidArgument(f"not an s3:// root: {redact_uri(uri)}")
        bucket = parts.hostname or ""
        if not bucket:
            raise InvalidArgument(f"s3 root {redact_uri(uri)} names no bucket")
        values: dict[str, Any] = {}
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key in _ENGINE_PARAMS:
                try:
                    values[key] = _ENGINE_PARAMS[key](value)
                except ValueError:
                    raise InvalidArgument(f"s3 root parameter {key}={value!r} is not a number") from None
                if values[key] <= 0:
                    raise InvalidArgument(f"s3 root parameter {key} must be positive, got {value!r}")
            elif key in _ARROW_PARAMS:
                values[key] = value
            else:
                known = ", ".join(sorted((*_ARROW_PARAMS, *_ENGINE_PARAMS)))
                raise InvalidArgument(f"unknown s3 root parameter {key!r} (known: {known})")
        if "endpoint_override" in values:
            source = "s3 root parameter endpoint_override"
            endpoint = values["endpoint_override"]
        else:
            source = "AWS_ENDPOINT_URL_S3" if os.environ.get("AWS_ENDPOINT_URL_S3") else "AWS_ENDPOINT_URL"
            endpoint = os.environ.get(source)
        if endpoint:
            host, endpoint_scheme = _split_endpoint(endpoint, source)
            values["endpoint_override"] = host
            if endpoint_scheme is not None:
                if values.setdefault("scheme", endpoint_scheme) != endpoint_scheme:
                    raise InvalidArgument(f"s3 root: {source} {endpoint!r} says {endpoint_scheme} but the "
                                          f"scheme parameter says {values['scheme']}")
        if values.get("scheme", "https") not in ("http", "https"):
            raise InvalidArgument(f"s3 root parameter scheme must be http or https, got {values['scheme']!r}")
        if "region" not in values:
            region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            if region:
                values["region"] = region
        if parts.username:
            values["access_key"] = parts.username
            values["secret_key"] = parts.password or ""
        path = bucket + parts.path.rstrip("/")
        return cls(**values), path

    @property
    def endpoint_url(self) -> str | None:
        return f"{self.scheme}://{self.endpoint_override}" if self.endpoint_override else None


class ObjectStore:
    """One S3-compatible store: pyarrow for reads and listings, boto3 for writes.

    Shared by a root and every sub-root of it, so the ETags it remembers (of
    objects this process last read or wrote through :meth:`get` / :meth:`put`)
    and the leases it holds are seen by all of them.  Thread-safe.
    """

    def __init__(self, settings: S3Settings):
        self.settings = settings
        kwargs: dict[str, Any] = {
            "scheme": settings.scheme,
            "connect_timeout": settings.connect_timeout,
            "request_timeout": settings.request_timeout,
            "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=settings.max_attempts),
            # pyarrow writes only directory markers and copies here; never a
            # multipart upload for those (some S3-compatible servers reject
            # pyarrow's multipart completion)
            "allow_delayed_open": True,
        }
        if settings.endpoint_override:
            kwargs["endpoint_override"] = settings.endpoint_override
        if settings.region:
            kwargs["region"] = settings.region
        if settings.access_key is not None:
            kwargs["access_key"] = settings.access_key
            kwargs["secret_key"] = settings.secret_key
        self.arrow = pafs.S3FileSystem(**kwargs)
        self._client = None
        self._client_lock = threading.Lock()
        self._etags: dict[str, str] = {}
        self._etag_lock = threading.Lock()
        self.leases: list = []  # storage.vfs.writer_lease.Lease objects held through this store

    # -- the boto3 client --------------------------------------------------
    @property
    def client(self):
        """The boto3 S3 client (created on first use; boto3 clients are thread-safe)."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    try:
                        import boto3
                        from botocore.config import Config
                    except ImportError:
                        raise StorageError(
                            "s3:// roots need boto3 for commits: pip install 'regionscan[s3]'"
                        ) from None
                    s = self.settings
                    config = Config(
                        connect_timeout=s.connect_timeout,
                        read_timeout=s.request_timeout,
                        retries={"max_attempts": s.max_attempts, "mode": "standard"},
                        s3={"addressing_style": "path"} if s.endpoint_override else None,
                    )
                    kwargs: dict[str, Any] = {"config": config}
                    if s.endpoint_url:
                        kwargs["endpoint_url"] = s.endpoint_url
                    if s.region:
                        kwargs["region_name"] = s.region
                    if s.access_key is not None:
                        kwargs["aws_access_key_id"] = s.access_key
                        kwargs["aws_secret_access_key"] = s.secret_key
                    self._client = boto3.session.Session().client("s3", **kwargs)
        return self._client

    @staticmethod
    def split(full: str) -> tuple[str, str]:
        bucket, _, key = full.partition("/")
        return bucket, key

    # -- whole-object calls ------------------------------------------------
    def get(self, full: str) -> bytes:
        """The object's bytes; remembers its ETag for a later conditional :meth:`put`."""
        bucket, key = self.split(full)
        try:
            response = self.client.get_object(Bucket=bucket, Key=key)
            data = response["Body"].read()
        except Exception as exc:
            raise self._error("read", full, exc) from None
        self._remember(full, response.get("ETag"))
        return data

    def put(self, full: str, data: bytes, *, if_absent: bool = False, if_match: str | None = None) -> str:
        """Write the object in one PUT; returns its ETag.

        ``if_absent`` sends ``If-None-Match: *``; ``if_match`` sends
        ``If-Match``.  Either raises :class:`PreconditionFailed` when the
        condition does not hold; nothing is written then.
        """
        bucket, key = self.split(full)
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": data}
        if if_absent:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        try:
            etag = self.client.put_object(**kwargs)["ETag"]
        except Exception as exc:
            raise self._error("write", full, exc) from None
        self._remember(full, etag)
        return etag

    def put_cas(self, full: str, data: bytes) -> str:
        """Replace the object only if it is still the version this process last saw.

        The ETag remembered from the last :meth:`get` or :meth:`put` of
        ``full`` is the condition; an object never seen must not exist yet.
        This is how manifests are committed without rename: a writer whose
        view is stale (another writer committed meanwhile) fails instead of
        overwriting.
        """
        with self._etag_lock:
            etag = self._etags.get(full)
        if etag is None:
            return self.put(full, data, if_absent=True)
        return self.put(full, data, if_match=etag)

    def delete(self, full: str) -> None:
        bucket, key = self.split(full)
        try:
            self.client.delete_object(Bucket=bucket, Key=key)
        except Exception as exc:
            raise self._error("delete", full, exc) from None
        self.forget(full)

    def etag(self, full: str) -> str | None:
        """The ETag this process last saw for ``full``, if any."""
        with self._etag_lock:
            return self._etags.get(full)

    def forget(self, full: str, prefix: bool = False) -> None:
        """Drop remembered ETags of ``full`` (and everything under it with ``prefix``)."""
        with self._etag_lock:
            if prefix:
                for k in [k for k in self._etags if k == full or k.startswith(full.rstrip("/") + "/")]:
                    del self._etags[k]
            else:
                self._etags.pop(full, None)

    def _remember(self, full: str, etag: str | None) -> None:
        if etag:
            with self._etag_lock:
                self._etags[full] = etag

    def _error(self, what: str, full: str, exc: Exception) -> Exception:
        """Translate a boto3 failure: FileNotFoundError, PreconditionFailed or StorageError."""
        response = getattr(exc, "response", None) or {}
        code = str(response.get("Error", {}).get("Code", ""))
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("NoSuchKey", "404", "NotFound"):
            return FileNotFoundError(f"s3://{full}")
        if code == "PreconditionFailed" or status == 412:
            return PreconditionFailed(f"conditional {what} of s3://{full} failed: it changed meanwhile")
        if code == "ConditionalRequestConflict" or status == 409:
            return PreconditionFailed(f"conditional {what} of s3://{full} raced another writer")
        return StorageError(f"cannot {what} s3://{full}: {exc}")

    # -- leases --------------------------------------------------------------
    def check_leases(self, full: str) -> None:
        """Raise TableLocked if a lease covering ``full`` is lost or about to expire."""
        for lease in list(self.leases):
            if full.startswith(lease.scope):
                lease.check()

    # -- streaming writes ------------------------------------------------------
    def writer(self, full: str) -> "ObjectWriter":
        return ObjectWriter(self, full)


class ObjectWriter:
    """A new object written as a stream; it appears whole when :meth:`close` returns.

    Up to :data:`PART_SIZE` bytes are buffered; an object that stays smaller
    goes up in one PUT on close, a larger one as a multipart upload whose
    parts are sent as the buffer fills and which is completed on close (and
    aborted if the writer fails).  ``sync`` does nothing: nothing of an
    object is durable or visible before it is complete.
    """

    def __init__(self, store: ObjectStore, full: str):
        self._store = store
        self.path = full
        self._bucket, self._key = store.split(full)
        self._buffer = io.BytesIO()
        self._pos = 0
        self._upload_id: str | None = None
        self._parts: list[dict] = []
        self._closed = False

    def write(self, data) -> int:
        n = self._buffer.write(data)
        self._pos += n
        if self._buffer.tell() >= PART_SIZE:
            self._send_part()
        return n

    def tell(self) -> int:
        return self._pos

    def sync(self) -> None:
        """No-op: an object becomes durable as a whole on close."""

    def _send_part(self) -> None:
        client = self._store.client
        try:
            if self._upload_id is None:
                self._upload_id = client.create_multipart_upload(Bucket=self._bucket, Key=self._key)["UploadId"]
            number = len(self._parts) + 1
            response = client.upload_part(
                Bucket=self._bucket, Key=self._key, UploadId=self._upload_id,
                PartNumber=number, Body=self._buffer.getvalue(),
            )
        except Exception as exc:
            self._abort()
            raise self._store._error("write", self.path, exc) from None
        self._parts.append({"PartNumber": number, "ETag": response["ETag"]})
        self._buffer = io.BytesIO()

    def _abort(self) -> None:
        if self._upload_id is not None:
            try:
                self._store.client.abort_multipart_upload(Bucket=self._bucket, Key=self._key, UploadId=self._upload_id)
            except Exception:  # best effort: a lifecycle rule removes stale uploads
                pass
            self._upload_id = None
        self._closed = True

    def abandon(self) -> None:
        """Drop the object: nothing becomes visible."""
        self._abort()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._upload_id is None:
            self._store.put(self.path, self._buffer.getvalue())
            return
        if self._buffer.tell():
            self._closed = False
            self._send_part()
            self._closed = True
        try:
            response = self._store.client.complete_multipart_upload(
                Bucket=self._bucket, Key=self._key, UploadId=self._upload_id,
                MultipartUpload={"Parts": self._parts},
            )
        except Exception as exc:
            self._abort()
            raise self._store._error("write", self.path, exc) from None
        self._store._remember(self.path, response.get("ETag"))
