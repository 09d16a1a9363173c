"""Damage done to a stored file on purpose, as a bad disk or a torn copy would do it."""

from __future__ import annotations

from pathlib import Path


def flip_byte(path: Path, offset: int) -> None:
    """Change the byte at ``offset`` of ``path`` (XOR 0x5A: never to itself), in place."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))
