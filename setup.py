"""Build of regionscan's optional compiled kernels (everything else is in pyproject.toml).

``storage._native_ext`` is one small C extension made of every ``.c`` file
under ``storage/_native/``.  It is optional, in the fastavro manner: where no
C compiler works, the build says so in one line and the install goes on; the
pure-Python/NumPy kernels (the reference) are then used, and
``regionscan --version`` reports ``native kernels: off (not built)``.
"""

from __future__ import annotations

import os
import sys
from glob import glob
from importlib.machinery import EXTENSION_SUFFIXES

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NOT_BUILT = "regionscan: native kernels not built (no C compiler): using the pure-Python path"

ALIGN_LOOPS = "-falign-loops=64"
"""Every loop at a 64-byte boundary: the kernels' tight loops took up to 40% more time by where
the linker happened to place them (a dictionary chunk's one-width expansion, the same code in
two builds: 0.46 against 0.33 ms for 570K rows), and a change to one kernel moved the others."""


class OptionalBuildExt(build_ext):
    """``build_ext`` whose failure (no compiler, a compiler that fails) is one line, not an error."""

    _said = False  # the one line is printed once, whichever step failed first

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - distutils raises several unrelated classes here
            self._not_built(exc)  # e.g. the in-place copy of a module that was not built

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - CompileError, LinkError, OSError, PlatformError...
            if ALIGN_LOOPS in ext.extra_compile_args:  # a compiler without the flag: build without it
                ext.extra_compile_args = [a for a in ext.extra_compile_args if a != ALIGN_LOOPS]
                try:
                    super().build_extension(ext)
                    return
                except Exception as again:  # noqa: BLE001 - as above
                    exc = again
            self._not_built(exc)

    def copy_file(self, infile, outfile, *args, **kwargs):
        """An in-place build (``pip install -e .``) replaces the module file by a rename: a
        process that has the old one loaded keeps reading it (a copy over it would not)."""
        if not str(outfile).endswith(tuple(EXTENSION_SUFFIXES)):
            return super().copy_file(infile, outfile, *args, **kwargs)
        staged = f"{outfile}.{os.getpid()}.tmp"
        result = super().copy_file(infile, staged, *args, **kwargs)
        os.replace(staged, outfile)
        return (outfile, result[1]) if isinstance(result, tuple) else result

    def _not_built(self, exc: Exception) -> None:
        if not self._said:
            print(f"{NOT_BUILT} ({type(exc).__name__})", file=sys.stderr)
            self._said = True


setup(
    ext_modules=[
        Extension(
            "storage._native_ext",
            sources=sorted(glob("storage/_native/*.c")),
            depends=sorted(glob("storage/_native/*.h")),
            extra_compile_args=["-O3", ALIGN_LOOPS] if sys.platform != "win32" else [],
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
