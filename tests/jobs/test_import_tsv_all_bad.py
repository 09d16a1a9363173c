"""import_tsv where every line is bad: non-zero exit, one line, and nothing left behind."""

from __future__ import annotations

import pytest

import storage
from jobs import cli

pytestmark = pytest.mark.spark


def test_an_import_of_only_bad_lines_fails_and_leaves_nothing(spark, tmp_path, capsys):
    root = tmp_path / "tables"
    tsv = tmp_path / "in.csv"
    tsv.write_bytes(b"r1,1,extra\nr2,2,extra\n")  # three fields for two columns: every line is bad
    argv = ["import_tsv", "--root", str(root), "-Dimporttsv.columns=HBASE_ROW_KEY,cf:a",
            "-Dimporttsv.separator=,", "t", str(tsv)]
    assert cli.main(argv) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1
    assert err[0].startswith("regionscan import_tsv: failed: all 2 line(s) are bad, nothing was loaded")
    assert "Excessive columns" in err[0]
    conn = storage.connect(str(root))
    assert conn.tables() == []  # the table the job created is gone
    conn.close()
