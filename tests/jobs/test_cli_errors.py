"""Every mistake a newcomer makes on the command line is one line, before the work, with a non-zero exit.

Run through ``regionscan``'s own entry point (:func:`jobs.cli.main`); the
jobs here fail before Spark starts, so none of these tests starts Spark
(``spark_session`` is replaced by a function that fails the test if a job
gets that far).  Also: the HBase spellings each job accepts or refuses.
"""

from __future__ import annotations

import argparse

import pytest

import storage
from jobs import cli, export
from storage.errors import TableNotFound

UNWRITABLE = "/proc/regionscan-no/out"  # /proc refuses new entries, even for root


@pytest.fixture
def root(tmp_path):
    path = str(tmp_path / "tables")
    conn = storage.connect(path)
    table = conn.create_table("t", {"cf": {}})
    table.put(b"r1", {b"cf:a": b"1"})
    table.flush()
    conn.close()
    return path


@pytest.fixture(autouse=True)
def no_spark(monkeypatch):
    """A job that reaches Spark here has skipped a check it should have made first."""

    def refuse(*args, **kwargs):
        raise AssertionError("the job started Spark before refusing its arguments")

    import jobs._spark

    for module in ("row_counter", "cell_counter", "export", "import_", "import_tsv", "copy_table", "pe_distributed"):
        mod = __import__(f"jobs.{module}", fromlist=["spark_session"])
        monkeypatch.setattr(mod, "spark_session", refuse)
    monkeypatch.setattr(jobs._spark, "spark_session", refuse)


def _fails(argv, capsys, status):
    assert cli.main(argv) == status
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    return lines[0]


def test_unwritable_output_paths_are_refused_before_the_work(root, tmp_path, capsys):
    tsv = tmp_path / "in.tsv"
    tsv.write_bytes(b"r1\t1\n")
    cases = [
        ["export", "--root", root, "t", UNWRITABLE],
        ["cell_counter", "--root", root, "t", UNWRITABLE],
        ["import_tsv", "--root", UNWRITABLE, "-Dimporttsv.columns=HBASE_ROW_KEY,cf:a", "t", str(tsv)],
        ["pe", "--root", root, "--rows", "10", "--json", UNWRITABLE + ".json", "sequentialWrite"],
        ["pe", "--root", root, "--rows", "10", "--chart", UNWRITABLE + ".html", "sequentialWrite"],
        ["profile-serde", "--root", root, "t", "--mapping", "k STRING :key", "--chart", UNWRITABLE + ".html"],
    ]
    for argv in cases:
        line = _fails(argv, capsys, 2)
        assert UNWRITABLE in line and line.startswith(f"regionscan {argv[0]}: error: cannot write"), line
    # a file where a folder must go, and a folder where a file must go
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = _fails(["export", "--root", root, "t", str(blocker)], capsys, 2)
    assert "exists and is not a folder" in line
    line = _fails(["pe", "--root", root, "--json", str(tmp_path), "sequentialWrite"], capsys, 2)
    assert "it is a folder" in line


def test_a_file_where_a_folder_must_go_is_one_line_before_the_work(root, tmp_path, capsys):
    """A parent of the output or of --root that is a file (NotADirectoryError once, deep in the job)."""
    tsv = tmp_path / "in.tsv"
    tsv.write_bytes(b"r1\t1\n")
    under_file = str(tsv / "sub")
    cases = [
        (["export", "--root", root, "t", under_file], "output folder"),
        (["demo", "--root", under_file, "--rows", "10"], "--root"),
        (["pe", "--root", under_file, "--rows", "10", "sequentialWrite"], "--root"),
        (["demo", "--root", UNWRITABLE, "--rows", "10"], "--root"),
        (["pe", "--root", UNWRITABLE, "--rows", "10", "sequentialWrite"], "--root"),
    ]
    for argv, what in cases:
        line = _fails(argv, capsys, 2)
        assert line.startswith(f"regionscan {argv[0]}: error: cannot write {what} "), line
        assert argv[argv.index("--root") + 1 if what == "--root" else 4] in line, line
    assert tsv.read_bytes() == b"r1\t1\n"  # the file in the way is left as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.tsv", "tables"]


def test_pe_distributed_refuses_a_write_to_a_table_folder_before_spark(root, capsys):
    line = _fails(["pe-distributed", "--root", root, "--rows", "10", "randomRead", "sequentialWrite"], capsys, 2)
    assert line.startswith("regionscan pe-distributed: error: sequentialWrite writes from many processes at once")


def test_pe_writes_nothing_when_its_output_is_unwritable(tmp_path, capsys):
    root = tmp_path / "pe"
    _fails(["pe", "--root", str(root), "--rows", "10", "--json", UNWRITABLE, "sequentialWrite"], capsys, 2)
    assert not root.exists()


@pytest.mark.parametrize("command", ["row_counter", "row-counter", "cell_counter", "cell-counter"])
def test_a_missing_table_or_root_fails_before_spark(root, tmp_path, command, capsys):
    line = _fails([command, "--root", root, "nope"], capsys, 1)
    assert line == f"regionscan {command.replace('-', '_')}: failed: table nope does not exist under {root} (tables: t)"
    typo = str(tmp_path / "tabels")
    line = _fails([command, "--root", typo, "t"], capsys, 1)
    assert "does not exist" in line and typo in line
    assert not (tmp_path / "tabels").exists()


def test_connect_creates_no_root_until_a_table_is_created(tmp_path):
    typo = tmp_path / "typo"
    conn = storage.connect(str(typo))
    assert conn.tables() == []
    with pytest.raises(TableNotFound, match="there is no root folder .*a mistyped root"):
        conn.table("t")
    assert not typo.exists()
    conn.create_table("t", {"cf": {}})
    conn.close()
    assert (typo / "t").is_dir()


def test_importtsv_and_import_refuse_misspelled_or_foreign_settings(root, tmp_path, capsys):
    tsv = tmp_path / "in.tsv"
    tsv.write_bytes(b"r1,1\n")
    line = _fails(["import_tsv", "--root", root, "-Dimporttsv.columns=HBASE_ROW_KEY,cf:a",
                   "-Dimporttsv.seperator=,", "t", str(tsv)], capsys, 2)
    assert line == ("regionscan import_tsv: error: unknown setting -D 'importtsv.seperator'; "
                    "did you mean 'importtsv.separator'?")
    line = _fails(["import", "--root", root, "-Dimport.bulk.output=/tmp/x", "t", str(tsv), "--format", "csv"],
                  capsys, 2)
    assert "-Dimport.bulk.output is not supported" in line


def test_hbase_spellings_refused_with_a_pointer(root, capsys):
    cases = [
        (["copy_table", "--root", root, "--new.name=u", "--all.cells", "--versions=0", "t"], "--versions must be"),
        (["pe", "--root", root, "--oneCon=false", "randomRead"], "--oneCon=false is not supported"),
        (["pe", "--root", root, "--columns", "3", "randomRead"], "--columns=3 is not supported"),
        (["export", "--root", root, "t", "out", "2", "--versions", "3"], "versions is given twice"),
        (["export", "--root", root, "t", "out", "1", "2", "3", "4"], "at most VERSIONS STARTTIME ENDTIME"),
        (["export", "--root", root, "t", "out", "-Dhbase.mapreduce.scan.row.start=a", "--startrow", "b"],
         "not both"),
    ]
    for argv, message in cases:
        line = _fails(argv, capsys, 2)
        assert message in line, line


def test_export_takes_hbase_positional_times_and_row_bounds_without_a_mapping():
    parser = argparse.ArgumentParser()
    export.add_arguments(parser)
    args = parser.parse_args(["t", "out", "3", "100", "200", "-Dhbase.mapreduce.scan.row.start=a",
                              "-Dhbase.mapreduce.scan.row.stop=m"])
    export._merge_hbase_forms(args)
    assert (args.versions, args.starttime, args.endtime) == (3, "100", "200")
    assert (args.startrow, args.stoprow, args.defines) == ("a", "m", [])
    args = parser.parse_args(["t", "out"])
    export._merge_hbase_forms(args)
    assert (args.versions, args.starttime, args.endtime) == (1, None, None)


def test_every_command_answers_to_both_spellings(capsys):
    parser = cli.build_parser()
    for name in cli.COMMANDS:
        for spelling in {name, name.replace("_", "-"), name.replace("-", "_")}:
            with pytest.raises(SystemExit) as done:
                parser.parse_args([spelling, "--help"])
            assert done.value.code == 0
    capsys.readouterr()


@pytest.mark.parametrize("command", ["serve", "thrift"])
def test_servers_refuse_a_root_that_does_not_exist_unless_told_to_create_it(tmp_path, command, capsys):
    """A mistyped --root would be served as an empty root, every table "not found"; --create makes it."""
    from storage.server.process import ServerProcess

    typo = tmp_path / "tabels"
    line = _fails([command, "--root", str(typo), "--port", "0"], capsys, 2)
    assert line == (f"regionscan {command}: error: --root {typo} does not exist (a mistyped path?); "
                    "pass --create to serve a new, empty root")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    line = _fails([command, "--root", str(blocker), "--port", "0"], capsys, 2)
    assert line == f"regionscan {command}: error: --root {blocker} is a file, not a folder of tables"
    assert not typo.exists()
    with ServerProcess(str(typo), "--create", module=("jobs.cli", command), create=False) as proc:
        assert proc.location.startswith(("grpc://127.0.0.1:", "thrift://127.0.0.1:"))
        assert typo.is_dir()


def test_a_chart_without_matplotlib_is_refused_before_the_work_naming_the_flag(root, tmp_path):
    """matplotlib made unimportable (a module of that name that raises ImportError, first on the path)."""
    import os
    import subprocess
    import sys

    from suite_paths import REPO as REPO_ROOT

    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('matplotlib is not installed here')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shadow.parent), str(REPO_ROOT)]))
    pe_root = tmp_path / "pe"
    cases = [
        ["profile-serde", "--root", root, "t", "--mapping", "k STRING :key, a STRING cf:a", "--chart",
         str(tmp_path / "x.png")],
        ["pe", "--root", str(pe_root), "--rows", "10", "--chart", str(tmp_path / "x.svg"), "sequentialWrite"],
        ["pe", "--root", str(pe_root), "--rows", "10", "--chart", str(tmp_path / "x.html"), "sequentialWrite"],
    ]
    for argv in cases:
        done = subprocess.run([sys.executable, "-m", "jobs.cli", *argv], capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines() == [
            f"regionscan {argv[0]}: error: --chart: charts are drawn with matplotlib, which is not installed "
            "(pip install 'regionscan[charts]')"]
        assert done.stdout == ""  # refused before the profile or the benchmark ran
    assert not pe_root.exists() and not list(tmp_path.glob("x.*"))


def _usage_error(argv, capsys, main=None) -> tuple[str, str]:
    """argparse's refusal of ``argv``: (the usage line's command, the error line)."""
    with pytest.raises(SystemExit) as done:
        (main or cli.main)(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    usage = " ".join(err.split(": error: ", 1)[0].split())  # the usage text, wrapped lines joined
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1, err
    return usage, errors[0]


def test_row_counter_columns_are_optional(capsys):
    """RowCounter's COLUMN list may be empty: a missing table is the only thing named."""
    from jobs import row_counter

    for main, argv in ((cli.main, ["row_counter"]), (row_counter.main, [])):
        _, line = _usage_error(argv, capsys, main)
        assert line.endswith("error: the following arguments are required: TABLE"), line
    export_usage, line = _usage_error(["export", "t"], capsys)
    assert line.endswith("required: OUTPUT_DIR"), line  # its optional positional list is not named either


def test_a_misspelled_flag_is_refused_by_its_command_with_the_closest_flag(capsys):
    from jobs import row_counter

    usage, line = _usage_error(["row_counter", "--rooot", "x", "t"], capsys)
    assert usage.startswith("usage: regionscan row_counter ") and "TABLE [COLUMN ...]" in usage
    assert line == "regionscan row_counter: error: unrecognized arguments: --rooot (did you mean --root?)"
    usage, line = _usage_error(["row-counter", "t", "--rangess=a,b"], capsys)
    assert line.endswith("unrecognized arguments: --rangess=a,b (did you mean --range?)"), line
    usage, line = _usage_error(["export", "t", "out", "--fromat", "csv"], capsys)
    assert usage.startswith("usage: regionscan export ") and "unrecognized arguments: --fromat (did you mean --format?)" in line
    _, line = _usage_error(["row_counter", "t", "--zzzz"], capsys)
    assert line.endswith("unrecognized arguments: --zzzz"), line  # nothing close: no guess
    # the spark-submit form (jobs/row_counter.py) says the same
    usage, line = _usage_error(["--rooot", "x", "t"], capsys, row_counter.main)
    assert line == "row_counter: error: unrecognized arguments: --rooot (did you mean --root?)", line


def test_a_reader_that_stops_early_ends_the_job_quietly(root):
    """``regionscan profile-serde ... | head -1``: the reader of the job's output has gone before
    the job writes (the pipe's read end is closed from the start, so every write fails, whatever
    the timing); the job stops with the shell's SIGPIPE status and no traceback."""
    import os
    import subprocess
    import sys

    argv = [sys.executable, "-m", "jobs.cli", "profile-serde", "--root", root, "--mapping", "k string :key, a string cf:a",
            "--rows", "10", "t"]
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `head -1` does once it has its line
    try:
        done = subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    err = done.stderr.decode()
    assert done.returncode == 141 and "Traceback" not in err and "BrokenPipe" not in err, err
