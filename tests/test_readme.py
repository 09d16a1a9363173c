"""The README's Python snippets run as written, as one story, from a folder outside the checkout.

One subprocess (Spark start-up is the cost) starts a plain SparkSession (no
regionscan settings: Python filter pushdown off), reads a table through it
before anything imports ``connector`` (Spark must find the source by itself,
and filters must be right with pushdown off), then runs the README's
snippets exactly as extracted from README.md, and checks what they printed,
that the Python source (a plain session has no JVM source jar) pushed nothing
down and said in one line that it serves, and that nothing was logged about
replacing a registered data source.  The subprocess sees the checkout only on
``PYTHONPATH`` (as a plain install does), its working folder is a temporary
one.
"""

from __future__ import annotations

import code
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from suite_paths import REPO as REPO_ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def readme_snippets() -> list[str]:
    """The ```python blocks of README.md, in order."""
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_has_an_embedded_and_a_spark_snippet():
    snippets = readme_snippets()
    assert len(snippets) == 2
    assert "storage.connect" in snippets[0] and 'format("regionscan")' in snippets[1]


class _Prompt(code.InteractiveConsole):
    """The ``>>>`` prompt fed one line at a time, as a paste reaches it; it records
    what the prompt would print as an error instead of printing it."""

    def __init__(self, run: bool):
        super().__init__({"__name__": "__console__"})
        self.run = run
        self.errors: list[str] = []

    def runcode(self, code_object) -> None:
        if self.run:
            try:
                exec(code_object, self.locals)
            except Exception as exc:  # noqa: BLE001 - the prompt prints it and goes on
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def showsyntaxerror(self, filename=None, **kwargs) -> None:
        self.errors.append(f"SyntaxError: {sys.exc_info()[1]}")

    def paste(self, snippet: str) -> list[str]:
        for line in snippet.splitlines():
            self.push(line)
        self.push("")  # the Enter after the paste
        return self.errors


def test_readme_snippets_paste_at_the_interactive_prompt(tmp_path, monkeypatch, capsys):
    """Each snippet, fed line by line to an interactive console, parses as it does in a
    script (a compound statement ends at a blank line there, so one must follow each
    block); the embedded one also runs there and prints what its comments say."""
    embedded, spark = readme_snippets()
    for snippet in (embedded, spark):
        assert _Prompt(run=False).paste(snippet) == [], snippet
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert _Prompt(run=True).paste(embedded) == []
    printed = capsys.readouterr().out.splitlines()
    # then the prompt echoes the value of table.flush(); table.compact(); table.split(b"k")
    assert printed[:4] == ["{b'cf:a': b'1', b'cf:b': b'x'}", "b'row1' {b'cf:a': b'', b'cf:b': b''}", "101", "1"]


def test_ci_runs_the_readme_test_command_as_written_in_a_fresh_venv():
    """.ci/run is what a new user does: ``python3 -m venv``, activate, then the README's command word for word."""
    readme = open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8").read()
    commands = [line.strip() for line in readme.splitlines() if "pip install" in line and "[test]" in line]
    # the whole suite with the compiled kernels, then the kernel and read-semantics tests without them
    assert commands == ["python3 -m pip install -q -e '.[test]' && python3 -m pytest -q && REGIONSCAN_NATIVE=0 "
                        "python3 -m pytest -q tests/storage/test_native_kernels.py tests/storage/test_native_rows.py "
                        "tests/storage/test_native_resolve.py tests/storage/test_native_writes.py "
                        "tests/storage/test_point_native.py tests/storage/test_point_multi.py "
                        "tests/serde/test_worker_decode.py tests/storage/test_live_kernels.py tests/storage/test_wal_decode.py "
                        "tests/storage/test_resolve_rows.py "
                        "tests/storage/test_row_merge.py tests/storage/test_live_tables.py "
                        "tests/storage/test_read_semantics.py tests/storage/test_live_stamps.py "
                        "tests/storage/test_wal_decode_rows.py tests/storage/test_live_connector_rows.py "
                        "tests/storage/test_chunk_keys.py tests/storage/test_dict_codes.py "
                        "tests/storage/test_chunk_narrow.py tests/storage/test_memstore_deferred_order.py"]
    ci = open(os.path.join(REPO_ROOT, ".ci", "run"), encoding="utf-8").read().splitlines()
    steps = [line.strip() for line in ci if line.strip() and not line.lstrip().startswith("#")]
    assert "set -euo pipefail" in steps  # pytest's own status is CI's: "no tests collected" (5) fails too
    venv = next(i for i, line in enumerate(steps) if line.startswith('python3 -m venv "$venv"'))
    activate = steps.index('. "$venv/bin/activate"')
    assert venv < activate < steps.index(commands[0]) == len(steps) - 1


def test_readme_story_runs_on_a_plain_session_outside_the_checkout(tmp_path):
    snippets = readme_snippets()
    prelude = textwrap.dedent("""
        import sys
        from pyspark.sql import SparkSession
        plain = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
        assert plain.conf.get("spark.sql.python.filterPushdown.enabled") == "false"
        # before anything imports connector: Spark finds the source by itself, and a filtered
        # read is right with pushdown off
        import storage
        setup = storage.connect("./before")
        setup.create_table("p", {"cf": {}}).put(b"k1", {b"cf:a": b"7"})
        setup.close()
        assert "connector" not in sys.modules
        early = (plain.read.format("regionscan").option("root", "./before").option("table", "p")
                 .option("hbase.columns.mapping", "key STRING :key, a INT cf:a").option("serde", "string").load())
        print("EARLY", early.where("a > 5").count(), early.where("a > 7").count())
    """)
    checks = textwrap.dedent("""
        import json
        assert spark is plain
        pushed = connector.explain(df.where("key >= 'u' AND a > 10"))
        print("RESULT " + json.dumps({
            "pushdown": spark.conf.get("spark.sql.python.filterPushdown.enabled"),
            "ranges": [list(r) for r in pushed.key_ranges or []],
            "rows": [list(r) for r in df.where("a < 2").orderBy("key").collect()],
        }))
    """)
    script = tmp_path / "story.py"
    script.write_text("\n".join([prelude, *snippets, checks]))
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT)
    for key in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        env.pop(key, None)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run([sys.executable, str(script)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.splitlines()
    assert out[0] == "EARLY 1 0"
    out = out[1:]
    assert out[:3] == ["{b'cf:a': b'1', b'cf:b': b'x'}", "b'row1' {b'cf:a': b'', b'cf:b': b''}", "101"]
    assert "89" in out
    result = json.loads(next(line for line in out if line.startswith("RESULT "))[len("RESULT "):])
    assert result["pushdown"] == "true"
    # a plain session carries no JVM source: the Python source serves, its pushdown off by default
    assert result["ranges"] == []
    assert "format('regionscan') is served by the Python source" in proc.stderr
    assert result["rows"] == [["row1", 1, "x"], ["user000", 0, "name-0"], ["user001", 1, "name-1"]]
    assert "statically registered" not in proc.stderr
    assert (work / "data" / "t").is_dir()
