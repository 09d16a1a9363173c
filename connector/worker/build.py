"""Build the JVM source (connector/java/src) into a jar with ``javac``, cached per user.

The jar is compiled against the jars the installed pyspark ships
(``pyspark/jars``: spark-sql, spark-catalyst, arrow-vector, jackson): no
Maven, no network.  It is cached under ``$REGIONSCAN_JVM_CACHE`` (default
``~/.cache/regionscan/jvm``) by the hash of the Java sources and the pyspark
version, so an edited source or another pyspark builds a new jar and a stale
one is never used.  A jar holds ``regionscan-build.properties`` (source hash,
Spark version); one that does not match its name is rebuilt, and the JVM
side refuses to run on a Spark other than the one it was built for.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

__all__ = ["JvmSourceUnavailable", "SOURCE_DIR", "PROVIDER", "build_jar", "jvm_source_jar", "jvm_source_problem",
           "source_hash", "pyspark_version", "cache_dir"]

_LOG = logging.getLogger("connector.worker")
SOURCE_DIR = Path(__file__).resolve().parents[1] / "java" / "src"
PROVIDER = "regionscan.spark.RegionScanProvider"
_SERVICE = "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"
_PROPERTIES = "regionscan-build.properties"
_reported: set[str] = set()


class JvmSourceUnavailable(RuntimeError):
    """The JVM source cannot be built here (no JDK, no pyspark jars, a failed compile)."""


def pyspark_version() -> str:
    """The installed pyspark's version (the Spark the jar is built for)."""
    import pyspark

    return pyspark.__version__


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def source_hash() -> str:
    """SHA-256 of the Java sources (paths and bytes), the cache key with the pyspark version."""
    h = hashlib.sha256()
    for path in sorted(SOURCE_DIR.rglob("*.java")):
        h.update(str(path.relative_to(SOURCE_DIR)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cache_dir() -> Path:
    """Where built jars are kept (``$REGIONSCAN_JVM_CACHE``, else ``~/.cache/regionscan/jvm``)."""
    given = os.environ.get("REGIONSCAN_JVM_CACHE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "regionscan" / "jvm"


def jvm_source_problem() -> str | None:
    """Why the JVM source cannot be built here (one line), or None."""
    if _javac() is None:
        return "no JDK found (javac is not on PATH and JAVA_HOME has none)"
    try:
        jars = _pyspark_jars()
    except ImportError:
        return "pyspark is not installed"
    if not any(jars.glob("spark-sql_*.jar")):
        return f"pyspark ships no spark-sql jar under {jars}"
    return None


def _expected(path: Path) -> str:
    return f"spark.version={pyspark_version()}\nsource.hash={source_hash()}\n"


def _jar_matches(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if _SERVICE not in names or _PROPERTIES not in names:
                return False
            return z.read(_PROPERTIES).decode() == _expected(path)
    except (OSError, zipfile.BadZipFile, KeyError, UnicodeDecodeError):
        return False


def _jar_path() -> Path:
    return cache_dir() / f"regionscan-spark-{pyspark_version()}-{source_hash()[:16]}.jar"


def build_jar(force: bool = False) -> Path:
    """The jar's path, compiling it first unless a matching one is cached.

    Raises :class:`JvmSourceUnavailable` (one line) when it cannot be built.
    """
    problem = jvm_source_problem()
    if problem:
        raise JvmSourceUnavailable(f"cannot build the regionscan JVM source: {problem}")
    path = _jar_path()
    if path.exists() and not force:
        if _jar_matches(path):
            return path
        _LOG.warning("the cached regionscan jar %s does not match its sources or pyspark %s: rebuilding it",
                     path, pyspark_version())
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="regionscan-jvm-", dir=path.parent) as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        sources = [str(p) for p in sorted(SOURCE_DIR.rglob("*.java"))]
        cmd = [_javac(), "-nowarn", "-encoding", "UTF-8", "--release", "17",
               "-cp", str(_pyspark_jars() / "*"), "-d", str(classes), *sources]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            first = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip()[:200])
            raise JvmSourceUnavailable(f"javac failed on the regionscan JVM source: {first}")
        staged = Path(tmp) / path.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as z:
            for cls in sorted(classes.rglob("*.class")):
                z.write(cls, str(cls.relative_to(classes)))
            z.writestr(_SERVICE, PROVIDER + "\n")
            z.writestr(_PROPERTIES, _expected(path))
        os.replace(staged, path)
    _LOG.info("built the regionscan JVM source: %s", path)
    return path


def jvm_source_jar() -> Path | None:
    """The jar (built if needed), or None where it cannot be built, which is said once in one line."""
    try:
        return build_jar()
    except JvmSourceUnavailable as exc:
        text = f"{exc}; format('regionscan') is served by the Python source"
        if text not in _reported:
            _reported.add(text)
            _LOG.warning("%s", text)
        return None
