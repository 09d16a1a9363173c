"""The compiled kernels, when built and switched on.

``NATIVE`` is the extension module ``storage._native_ext`` (C sources under
``storage/_native/``), or None: when the install had no working C compiler
(the build then said so in one line), or when the environment variable
``REGIONSCAN_NATIVE`` is ``0`` (read once, at import: set it before the
process starts).  Every kernel has a pure-Python/NumPy twin, the reference,
which runs when ``NATIVE`` is None; tests hold the two to the same answers.
:func:`status` is what ``regionscan --version`` prints.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["NATIVE", "SWITCH", "status"]

SWITCH = "REGIONSCAN_NATIVE"
"""The environment variable that turns the compiled kernels off (``0``)."""

_OFF_VALUES = ("0", "false", "no", "off")


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get(SWITCH, "").strip().lower() in _OFF_VALUES:
        return None, f"off ({SWITCH}={os.environ[SWITCH]})"
    try:
        # by name: the extension is a compiled file beside this package's modules, not one of them
        module = importlib.import_module(f"{__package__}._native_ext")
    except ImportError:
        return None, "off (not built)"
    return module, "on"


NATIVE, _STATUS = _load()


def status() -> str:
    """``on``, ``off (REGIONSCAN_NATIVE=0)`` or ``off (not built)``: which kernels this process uses."""
    return _STATUS
