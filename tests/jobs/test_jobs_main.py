"""The README's main job, profile-serde and pe in distributed mode, on small tables."""

from __future__ import annotations

import json

import pytest

import storage

from jobs import main_job, pe_distributed, profile_serde

pytestmark = pytest.mark.spark


def test_main_job_reads_one_partition_per_region_and_checks_its_answer(spark, tmp_path, capsys):
    root = str(tmp_path / "tables")
    chart = str(tmp_path / "profile.html")
    argv = ["--root", root, "--rows", "4000", "--regions", "4", "--profile-rows", "2000", "--chart", chart]
    assert main_job.main(argv) == 0
    out = capsys.readouterr().out
    assert "4 partition(s) for 4 region(s)" in out
    assert "ok: Spark's answers match the ones computed without it" in out
    for step in ("load 4 regions", "flush to store files", "start Spark", "filtered aggregate", "count(*)",
                 "SerDe profile"):
        assert step in out
    # each long step announces itself; the first query is start-up, not throughput
    for n in range(1, 7):
        assert f"[{n}/6] " in out
    startup = next(line for line in out.splitlines() if "first query (Python worker start-up)" in line)
    assert "rows/s" not in startup
    assert "rows/s" in next(line for line in out.splitlines() if "filtered aggregate (warm)" in line)
    assert "hotspots: row-wise, naive dates" in out and "decode d (date)" in out
    page = open(chart, encoding="utf-8").read()
    assert "<svg" in page and "decode d" in page
    # the aggregate the job printed is the one computed without Spark
    expected = main_job.expected_answer(4000)
    assert sum(c for c, _ in expected.values()) == 1000
    assert main_job.main(argv + ["--keep"]) == 0  # reuses the table
    assert "reusing table main_sample" in capsys.readouterr().out


def test_main_job_rejects_bad_sizes(tmp_path, capsys):
    assert main_job.main(["--root", str(tmp_path), "--rows", "10", "--regions", "11"]) == 2
    assert "--regions" in capsys.readouterr().err


def _sample(root: str, rows: int = 3000) -> None:
    conn = storage.connect(root)
    main_job.load_table(conn, "sample", rows, 3).flush()
    conn.close()


def test_profile_serde_prints_hotspots_and_writes_charts(tmp_path, capsys):
    root = str(tmp_path / "tables")
    _sample(root)
    files = {name: str(tmp_path / name) for name in ("p.speedscope.json", "p.html", "p.json")}
    argv = ["--root", root, "sample", "--mapping", main_job.MAPPING, "--rows", "1500", "--predicate", "n >= 100",
            "--speedscope", files["p.speedscope.json"], "--chart", files["p.html"], "--json", files["p.json"]]
    assert profile_serde.main(argv) == 0
    out = capsys.readouterr().out
    assert "hotspots: vectorized (Arrow batches)" in out and "decode d (date)" in out
    scope = json.load(open(files["p.speedscope.json"]))
    assert scope["$schema"].startswith("https://www.speedscope.app") and len(scope["profiles"]) == 3
    doc = json.load(open(files["p.json"]))
    assert doc["paths"]["batch"]["rows"] == 1500
    kept = sum(1 for i in range(1500) if 7 * i - 1000 >= 100)  # the first 1500 rows, n = 7i - 1000
    assert doc["paths"]["batch"]["rows_kept"] == doc["paths"]["row"]["rows_kept"] == kept
    assert "<svg" in open(files["p.html"]).read()
    assert profile_serde.main(["--root", root, "missing", "--mapping", main_job.MAPPING]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_pe_distributed_runs_each_client_as_a_spark_task(spark, tmp_path, capsys):
    root = str(tmp_path / "tables")
    report = str(tmp_path / "pe.json")
    chart = str(tmp_path / "pe.html")
    argv = ["--root", root, "--rows=300", "--presplit=3", "--valueSize=64", "--seed=5", f"--json={report}",
            f"--chart={chart}", "randomRead", "scan", "3"]
    assert pe_distributed.main(argv) == 0
    out = capsys.readouterr().out
    assert "loading 900 rows" in out
    for i in range(3):
        assert f"[RandomReadTest] client {i}: finished" in out
    assert "clients ran as Spark tasks" in out
    doc = json.load(open(report))
    assert [r["command"] for r in doc["results"]] == ["randomRead", "scan"]
    for result in doc["results"]:
        assert [c["client"] for c in result["clients"]] == [0, 1, 2]
        assert result["aggregate"]["ops"] == 900 and result["aggregate"]["rows"] == 900
    assert "<svg" in open(chart).read() or "<html" in open(chart).read().lower()
    assert pe_distributed.main(["--root", root, "--rows=10", "sequentialWrite", "2"]) == 2
    assert "grpc://" in capsys.readouterr().err


def test_pe_nomapred_false_runs_the_distributed_mode(spark, tmp_path, capsys):
    from jobs import pe

    root = str(tmp_path / "tables")
    assert pe.main(["--root", root, "--nomapred=false", "--rows=50", "--presplit=2", "scan", "2"]) == 0
    out = capsys.readouterr().out
    assert "regionscan pe-distributed" in out and "clients ran as Spark tasks" in out
