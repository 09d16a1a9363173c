"""A real small filesystem for the disk-full tests: an ext4 image the test makes
and loop-mounts, and a ballast file that fills it to a chosen free space.

Needs root (``mount -o loop``), as the suite runs here and in CI.  Not a test
module itself.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Iterator


def _run(*cmd: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")


@contextlib.contextmanager
def small_disk(where: Path, megabytes: int = 32) -> Iterator[Path]:
    """A freshly made ext4 filesystem of ``megabytes`` mounted under ``where``; unmounted after."""
    image, mount = where / "disk.img", where / "mnt"
    mount.mkdir(parents=True)
    with open(image, "wb") as f:
        f.truncate(megabytes << 20)
    _run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))
    _run("mount", "-o", "loop", str(image), str(mount))
    try:
        yield mount
    finally:
        # lazy: a process the test killed may still hold a file open for a moment
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=60)
        image.unlink(missing_ok=True)


def fill(mount: Path, leave: int) -> Path:
    """Write a ballast file until about ``leave`` bytes stay free; returns its path (delete it to free the space)."""
    ballast = mount / "ballast"
    chunk = b"\xa5" * (1 << 20)
    with open(ballast, "ab") as f:
        while True:
            free = free_bytes(mount)
            if free <= leave:
                break
            try:
                f.write(chunk[: min(len(chunk), free - leave)])
                f.flush()
            except OSError:
                break
        os.fsync(f.fileno())
    return ballast


def free_bytes(mount: Path) -> int:
    """Bytes an unprivileged writer may still use on the filesystem."""
    st = os.statvfs(mount)
    return st.f_bavail * st.f_frsize
