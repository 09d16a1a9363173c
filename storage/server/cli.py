"""``regionscan serve`` / ``python -m storage.server``: run a region server in the foreground.

On startup it prints ``listening on grpc://HOST:PORT`` (the bound port, so
``--port 0`` works for tests); SIGINT or SIGTERM shut it down cleanly.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from ..errors import InvalidArgument
from .config import ServerConfig
from .service import RegionServer
from ..filters.registry import register_filter_specs

__all__ = ["add_arguments", "run", "serve_main", "read_token_file", "run_in_foreground", "module_main",
           "add_create_argument", "prepare_root"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``serve`` options to ``parser``."""
    defaults = ServerConfig()
    parser.add_argument("--root", required=True, help="the directory (or filesystem URI) whose tables are served")
    parser.add_argument("--host", default=defaults.host, help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=defaults.port, help="port to bind (0: any free port)")
    parser.add_argument("--token-file", help="file holding the token every call must present")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a non-loopback --host without a token (anyone who reaches it can read and write)")
    parser.add_argument("--tls-cert", help="PEM certificate (chain) of the server: serve grpc+tls")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument("--lease-timeout", type=float, default=defaults.lease_timeout,
                        help="seconds an idle RPC scanner lives (default %(default)s)")
    parser.add_argument("--max-request-bytes", type=int, default=defaults.max_request_bytes,
                        help="largest request body accepted (default %(default)s)")
    parser.add_argument("--max-next-rows", type=int, default=defaults.max_next_rows,
                        help="most rows one next() call may ask for (default %(default)s)")
    parser.add_argument("--max-scanners-per-client", type=int, default=defaults.max_scanners_per_client,
                        help="open scanners and streams allowed per client connection (default %(default)s)")
    parser.add_argument("--max-scanners", type=int, default=defaults.max_scanners,
                        help="open scanners and streams allowed in all (default %(default)s)")
    parser.add_argument("--max-connections", type=int, default=defaults.max_connections,
                        help="open client connections; more are closed when accepted (default %(default)s)")
    parser.add_argument("--idle-timeout", type=float, default=defaults.idle_timeout,
                        help="close a connection silent both ways this many seconds (0: never; default %(default)s)")
    parser.add_argument("--no-front-door", dest="front_door", action="store_false",
                        help="let gRPC hold the port itself: no relay cost, but no connection, idle or early"
                             " request-size limits (docs/server.md)")
    parser.add_argument("--block-cache-size", type=int, default=defaults.block_cache_size,
                        help="block cache bytes (0 disables it; default %(default)s)")
    parser.add_argument("--cache-results", action="store_true",
                        help="scans keep what they build in the block cache for the next scan of the same data"
                             " (docs/architecture.md, Caches)")
    parser.add_argument("--read-only", action="store_true", help="serve reads only (takes no table locks)")
    parser.add_argument("--filter", dest="filter_classes", action="append", default=[], metavar="NAME=MODULE:CLASS",
                        help="let filter strings call NAME, a user filter class (repeatable; HBase's registerFilter)")
    add_create_argument(parser)


def add_create_argument(parser: argparse.ArgumentParser) -> None:
    """``--create``: a root folder that does not exist is made instead of refused."""
    parser.add_argument("--create", action="store_true",
                        help="make the root folder when it does not exist (default: refuse, as a mistyped path)")


def prepare_root(root: str, create: bool) -> None:
    """Refuse a local root that does not exist unless ``create`` (then make it); refuse a file.

    Serving a mistyped path would answer every call with "no such table"
    and never say why.  URIs (``s3://``...) are left to their filesystem:
    an object store has no folders to find.
    """
    if "://" in root and not root.startswith("file://"):
        return
    path = os.path.abspath(root[len("file://"):] if root.startswith("file://") else root)
    if os.path.isdir(path):
        return
    if os.path.exists(path):
        raise InvalidArgument(f"--root {root} is a file, not a folder of tables")
    if not create:
        raise InvalidArgument(f"--root {root} does not exist (a mistyped path?); pass --create to serve a new, "
                              "empty root")
    try:
        os.makedirs(path)
    except OSError as exc:
        raise InvalidArgument(f"cannot create --root {root}: {exc.strerror or exc}") from None


def read_token_file(path: str) -> str:
    """The token in ``path`` (surrounding whitespace stripped); an empty file is an error."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as exc:
        raise InvalidArgument(f"cannot read token file {path}: {exc.strerror}") from None
    if not token:
        raise InvalidArgument(f"token file {path} is empty")
    return token


def _config(args: argparse.Namespace) -> ServerConfig:
    return ServerConfig(
        host=args.host,
        port=args.port,
        token=read_token_file(args.token_file) if args.token_file else None,
        lease_timeout=args.lease_timeout,
        max_request_bytes=args.max_request_bytes,
        max_next_rows=args.max_next_rows,
        max_scanners_per_client=args.max_scanners_per_client,
        max_scanners=args.max_scanners,
        max_connections=args.max_connections,
        idle_timeout=args.idle_timeout,
        front_door=args.front_door,
        block_cache_size=args.block_cache_size,
        cache_results=args.cache_results,
        allow_remote=args.allow_remote,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM; return the exit status."""
    register_filter_specs(args.filter_classes)  # a bad class is refused before the port opens
    config = _config(args)
    prepare_root(args.root, args.create)
    if not config.loopback and config.token is None:
        print(f"warning: serving {config.host} to the network without a token (--allow-remote): anyone who can"
              " reach the port can read and write every table", file=sys.stderr, flush=True)
    elif not config.loopback and not config.tls:
        print(f"warning: serving {config.host} without TLS: the token and the data cross the network in the"
              " clear (give --tls-cert and --tls-key)", file=sys.stderr, flush=True)
    server = RegionServer(args.root, config, read_only=args.read_only)

    return run_in_foreground(server, "region server stopped")


def run_in_foreground(server, stopped: str) -> int:
    """Print ``listening on LOCATION``, serve until SIGINT or SIGTERM, shut down, print ``stopped``.

    ``server`` has ``location``, ``serve()`` and ``shutdown()`` (the region
    server and the Thrift gateway both do).
    """

    def stop(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    print(f"listening on {server.location}", flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.shutdown()
    print(stopped, flush=True)
    return 0


def module_main(argv: list[str] | None, prog: str, description: str, command: str, module) -> int:
    """Entry point of ``python -m``: ``module.add_arguments``, then ``module.run``; errors as one line."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    module.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return module.run(args)
    except ValueError as exc:  # InvalidArgument: a clear message, no traceback
        print(f"regionscan {command}: error: {exc}", file=sys.stderr)
        return 2


def serve_main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m storage.server``."""
    return module_main(argv, "python -m storage.server", "Run a regionscan region server.", "serve",
                       sys.modules[__name__])
