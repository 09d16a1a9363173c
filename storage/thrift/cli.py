"""``regionscan thrift`` / ``python -m storage.thrift``: run the HBase Thrift gateway in the foreground.

On startup it prints ``listening on thrift://HOST:PORT`` (the bound port,
so ``--port 0`` works for tests); SIGINT or SIGTERM shut it down cleanly.
HBase's own spellings are accepted: ``-p`` for the port, ``-f`` framed,
``-c`` compact.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys

from ..server.cli import add_create_argument, module_main, prepare_root, run_in_foreground
from .config import DEFAULT_PORT, GatewayConfig
from ..filters.registry import register_filter_specs

__all__ = ["add_arguments", "run", "thrift_main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``thrift`` options to ``parser``."""
    d = GatewayConfig()
    parser.add_argument("--root", required=True, help="the directory (or filesystem URI) whose tables are served")
    parser.add_argument("--host", "--bind", dest="host", default=d.host,
                        help="address to bind (default: loopback only; others need --allow-remote)")
    parser.add_argument("-p", "--port", type=int, default=DEFAULT_PORT, help="port (default %(default)s; 0: any free port)")
    parser.add_argument("-f", "--framed", action="store_true", help="framed transport (default: buffered)")
    parser.add_argument("-c", "--compact", action="store_true", help="compact protocol (default: binary)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a non-loopback --host (Thrift 1 has no authentication: anyone who reaches the port can read and write)")
    parser.add_argument("--read-only", action="store_true", help="serve reads only (takes no table locks)")
    parser.add_argument("--workers", type=int, default=d.workers,
                        help="worker threads answering connections that sent a request (default %(default)s)")
    parser.add_argument("--max-queued", type=int, default=d.max_queued,
                        help="connections with a request waiting for a worker; more wait unread (default %(default)s)")
    parser.add_argument("--max-connections", type=int, default=d.max_connections,
                        help="open connections, idle or served; more are closed at once (default %(default)s)")
    parser.add_argument("--max-request-bytes", type=int, default=d.max_request_bytes,
                        help="largest request accepted; a larger one closes its connection (default %(default)s)")
    parser.add_argument("--max-container-entries", type=int, default=d.max_container_entries,
                        help="most entries one list, set or map of a request may declare; more closes the "
                             "connection (default %(default)s)")
    parser.add_argument("--max-connections-per-host", type=int, default=None,
                        help="connections one peer host may hold open; more are closed at once "
                             "(default: max-connections)")
    parser.add_argument("--max-rows-per-call", type=int, default=d.max_rows_per_call,
                        help="most rows one scannerGetList returns (default %(default)s)")
    parser.add_argument("--max-scanners-per-connection", type=int, default=d.max_scanners_per_connection,
                        help="open scanners per connection (default %(default)s)")
    parser.add_argument("--max-scanners", type=int, default=d.max_scanners,
                        help="open scanners in all (default %(default)s)")
    parser.add_argument("--scanner-lease-timeout", type=float, default=d.scanner_lease_timeout,
                        help="seconds an idle scanner lives (default %(default)s)")
    parser.add_argument("--idle-timeout", type=float, default=d.idle_timeout,
                        help="close a connection silent this many seconds, between requests or in one "
                             "(0: never; default %(default)s, as HBase)")
    parser.add_argument("--no-prefetch", dest="prefetch", action="store_false",
                        help="do not read a scanner's next batch while the client handles the last")
    parser.add_argument("--block-cache-size", type=int, default=d.block_cache_size,
                        help="block cache bytes (0 disables it; default %(default)s)")
    parser.add_argument("--filter", dest="filter_classes", action="append", default=[], metavar="NAME=MODULE:CLASS",
                        help="let filter strings call NAME, a user filter class (repeatable; HBase's registerFilter)")
    add_create_argument(parser)


def _config(args: argparse.Namespace) -> GatewayConfig:
    return GatewayConfig(
        host=args.host,
        port=args.port,
        framed=args.framed,
        compact=args.compact,
        allow_remote=args.allow_remote,
        read_only=args.read_only,
        workers=args.workers,
        max_queued=args.max_queued,
        max_connections=args.max_connections,
        max_request_bytes=args.max_request_bytes,
        max_container_entries=args.max_container_entries,
        max_connections_per_host=args.max_connections_per_host,
        max_rows_per_call=args.max_rows_per_call,
        max_scanners_per_connection=args.max_scanners_per_connection,
        max_scanners=args.max_scanners,
        scanner_lease_timeout=args.scanner_lease_timeout,
        prefetch=args.prefetch,
        idle_timeout=args.idle_timeout,
        block_cache_size=args.block_cache_size,
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM; return the exit status."""
    from .server import ThriftGateway

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    register_filter_specs(args.filter_classes)  # a bad class is refused before the port opens
    config = _config(args)
    prepare_root(args.root, args.create)
    if not config.loopback:
        print(f"warning: serving {config.host} to the network (--allow-remote): Thrift 1 carries no credentials, "
              "so anyone who can reach the port can read and write every table", file=sys.stderr, flush=True)
    gateway = ThriftGateway(args.root, config)
    # A scan answer allocates two objects per cell (TCell, and the row's
    # dict entry) that all die together once the answer is written.  With
    # the default first-generation threshold (700) the collector runs
    # hundreds of times per answer and, measured, building the answer takes
    # 1.5x-2x longer; this process owns its heap, so collect less often.
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    print(f"{config.transport_name} transport, {config.protocol_name} protocol"
          f"{', read-only' if config.read_only else ''}", flush=True)
    return run_in_foreground(gateway, "thrift gateway stopped")


def thrift_main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m storage.thrift``."""
    return module_main(argv, "python -m storage.thrift", "Run regionscan's HBase Thrift gateway.", "thrift",
                       sys.modules[__name__])
