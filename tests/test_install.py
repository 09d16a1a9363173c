"""``format("regionscan")`` is found after ``pip install -e`` and after a plain install, from outside the checkout.

Spark finds Python data sources by listing the entries of its workers'
``sys.path`` for ``pyspark_*`` modules (``pkgutil.iter_modules``), which
cannot see an import hook; the project's editable install is therefore a
plain path entry (``package-dir = {"" = "."}`` in pyproject.toml).  Each
case installs the project into a fresh virtual environment, offline
(``--no-build-isolation --no-deps``), then
runs a script with that environment's Python from a temporary folder, with
``PYTHONPATH`` unset: it imports ``connector`` before or after starting a
plain local SparkSession, writes a small table and counts it through
``spark.read.format("regionscan")``.  The script reports which copy of the
package it imported, so the test knows the install under test is the one
in use (and not, say, another editable install in the system site-packages).

The fresh environment sees the packages of the interpreter running the
tests (what ``pip install -e '.[test]'`` put there: pyspark, setuptools,
wheel), through a ``.pth`` file naming its site folders, and never the
base interpreter's: ``--system-site-packages`` would make the test pass or
fail on whatever the machine's own Python happens to have.  The ``.pth``
lists plain folders, so the ``.pth`` files inside them (an editable
install of this project among them) are not run.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sysconfig
import sys
import textwrap
from pathlib import Path

import pytest

from suite_paths import REPO as REPO_ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = textwrap.dedent("""
    import sys
    order = sys.argv[1]
    if order == "import-first":
        import connector
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    if order == "session-first":
        import connector
    import pyspark_regionscan
    import storage
    db = storage.connect("./data")
    table = db.create_table("t", {"cf": {}})
    for i in range(5):
        table.put(b"row%d" % i, {b"cf:a": str(i).encode()})
    db.close()
    df = (spark.read.format("regionscan").option("root", "./data").option("table", "t")
          .option("hbase.columns.mapping", "key STRING :key, a INT cf:a").option("serde", "string").load())
    print("MODULES", connector.__file__, pyspark_regionscan.__file__)
    from storage.native import status
    print("NATIVE", status())
    print("COUNTS", df.count(), df.where("a >= 3").count())
    spark.stop()
""")


def _test_site_folders() -> list[str]:
    """The site folders of the interpreter running the tests (a virtualenv's own, or the system's)."""
    folders = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    folders += [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    unique = []
    for folder in folders:
        if os.path.isdir(folder) and folder not in unique:
            unique.append(folder)
    return unique


def _venv(path: Path) -> Path:
    """A fresh virtual environment at ``path`` that also sees the test interpreter's packages; its Python."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, timeout=300)
    python = path / "bin" / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    # after the environment's own site folder: its pip and setuptools come first, the rest from the tests'
    Path(own, "regionscan_test_packages.pth").write_text("\n".join(_test_site_folders()) + "\n")
    return python


def _pip_install(python: Path, *args: str) -> None:
    # offline, against the setuptools (and wheel, which setuptools before 70.1 needs for PEP 660)
    # of the environment or of the test interpreter
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                           "--no-index", "-q", *args], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def _start(python: Path, tmp_path: Path, order: str) -> tuple[subprocess.Popen, Path]:
    """Run SCRIPT with ``python`` in a fresh folder outside the checkout."""
    work = tmp_path / f"work-{order}"
    work.mkdir()
    (work / "story.py").write_text(SCRIPT)
    env = dict(os.environ)
    for key in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON"):
        env.pop(key, None)
    env["PYSPARK_PYTHON"] = str(python)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PATH"] = str(python.parent) + os.pathsep + env.get("PATH", "")
    proc = subprocess.Popen([str(python), "story.py", order], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, work


def _check(proc: subprocess.Popen, package_dir: Path) -> None:
    try:
        out, err = proc.communicate(timeout=900)  # a fresh JVM and Python workers, on a loaded machine
    except subprocess.TimeoutExpired:
        proc.kill()  # not left running after the test
        out, err = proc.communicate()
        raise AssertionError(f"the story did not finish within 900 s:\n{err[-2000:]}") from None
    first_error = next((line for line in err.splitlines() if "Error" in line or "Exception" in line), "")
    assert proc.returncode == 0, first_error + "\n" + err[-2000:]
    lines = dict(line.split(" ", 1) for line in out.splitlines() if line.startswith(("MODULES ", "COUNTS ", "NATIVE ")))
    # where the platform's C compiler exists, the install built the compiled kernels
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) and "REGIONSCAN_NATIVE" not in os.environ:
        assert lines["NATIVE"] == "on", lines
    connector_file, hook_file = (Path(p) for p in lines["MODULES"].split())
    assert connector_file == package_dir / "connector" / "__init__.py"
    assert hook_file == package_dir / "pyspark_regionscan.py"
    assert lines["COUNTS"] == "5 2"
    assert "DATA_SOURCE_NOT_FOUND" not in err


def test_an_editable_install_registers_the_source_in_both_orders(tmp_path):
    python = _venv(tmp_path / "venv")
    _pip_install(python, "-e", str(REPO_ROOT))
    runs = [_start(python, tmp_path, order) for order in ("import-first", "session-first")]
    for proc, _work in runs:
        _check(proc, Path(REPO_ROOT).resolve())


def _copy_source(tmp_path: Path) -> Path:
    """The checkout without build products (an in-tree build would leave build/ behind in it)."""
    source = tmp_path / "src"
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", "bench-*",
        "regionscan-data", "*.so"))
    return source


def test_an_install_without_a_c_compiler_says_so_and_works(tmp_path):
    """``CC=false``: the compiled kernels fail to build, the build says so in one line, the
    install succeeds, and the package runs the pure-Python path and says so."""
    source = _copy_source(tmp_path)
    python = _venv(tmp_path / "venv")
    env = dict(os.environ, CC="false")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(python), "-m", "pip", "install", "-v", "--no-build-isolation", "--no-deps",
                           "--no-index", str(source)], capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    said = [line.strip() for line in (proc.stdout + proc.stderr).splitlines()
            if "regionscan: native kernels not built" in line]
    assert len(said) == 1 and said[0].startswith(
        "regionscan: native kernels not built (no C compiler): using the pure-Python path"), said
    check = textwrap.dedent("""
        import storage
        from jobs.cli import version_line
        db = storage.connect("./data")
        table = db.create_table("t", {"cf": {}})
        table.put(b"k", {b"cf:a": b"1"})
        print(version_line()); print(table.row(b"k"))
    """)
    run = subprocess.run([str(python), "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REGIONSCAN_NATIVE")})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines()[-2:] == ["regionscan 0.1.0, native kernels: off (not built)", "{b'cf:a': b'1'}"]


def test_a_plain_install_registers_the_source(tmp_path):
    source = _copy_source(tmp_path)
    python = _venv(tmp_path / "venv")
    _pip_install(python, str(source))
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    proc, _work = _start(python, tmp_path, "import-first")
    _check(proc, site)
