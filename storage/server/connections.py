"""Cancelling the calls of one client connection, the only lever Flight leaves a server.

A do_get handler thread blocked in a gRPC write (its client stopped reading,
so the stream's flow-control window is full) returns only when the write
fails, and pyarrow's ``ServerCallContext`` offers no way to cancel a call.
What does make the write fail is the transport going away: shutting down
the TCP socket of that client's connection makes gRPC fail every call on
it, so the blocked handler returns and its thread and slot are freed.  The
client sees ``Unavailable`` on those calls (never a silently short scan)
and its channel reconnects for the next call.

The socket is found among this process's descriptors by its addresses: the
local port is the server's, the remote address is the gRPC peer's.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
from urllib.parse import unquote

__all__ = ["normal_host", "peer_address", "shutdown_connection"]

_FD_DIR = "/dev/fd"  # Linux and macOS; elsewhere nothing is found and nothing is cancelled


def normal_host(host: str) -> str:
    """``host`` in one spelling: brackets dropped, IPv4-mapped IPv6 as IPv4."""
    host = host.strip("[]")
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def peer_address(peer: str) -> tuple[str, int] | None:
    """The (address, port) of a gRPC peer (``ipv4:127.0.0.1:51234``, ``ipv6:%5B::1%5D:51234``), or None."""
    kind, sep, rest = peer.partition(":")
    if not sep or kind not in ("ipv4", "ipv6"):
        return None
    host, sep, port = unquote(rest).rpartition(":")
    if not sep or not port.isdigit():
        return None
    return normal_host(host), int(port)


def shutdown_connection(peer: str, local_port: int) -> int:
    """Shut down this process's sockets connected to ``peer`` on ``local_port``; return how many.

    Only the socket's connection is shut down; the descriptor stays gRPC's,
    which closes it once it has seen the connection fail.
    """
    target = peer_address(peer)
    if target is None:
        return 0
    try:
        names = os.listdir(_FD_DIR)
    except OSError:
        return 0
    count = 0
    for name in names:
        if not name.isdigit():
            continue
        fd = int(name)
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(fd))  # a duplicate: closing it leaves gRPC's descriptor open
        except OSError:
            continue
        try:
            if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
                continue
            local, remote = sock.getsockname(), sock.getpeername()
            if local[1] == local_port and (normal_host(remote[0]), remote[1]) == target:
                sock.shutdown(socket.SHUT_RDWR)
                count += 1
        except OSError:  # not connected, or closed meanwhile
            continue
        finally:
            sock.close()
    return count
