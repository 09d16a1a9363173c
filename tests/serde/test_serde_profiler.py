"""The SerDe profiler: stage and column attribution, ranked report, speedscope and HTML output."""

from __future__ import annotations

import datetime as dt
import json
import random

import pytest

import storage
from serde import InMemoryRowSource, create_serde, profile_serde, record_batch_rows
from serde.profiler import STAGES
from storage.errors import InvalidArgument

MAPPING = "key STRING :key, n INT cf:n, s STRING cf:s, d DATE cf:d, t TIMESTAMP cf:t"
ROWS = 3000


def _values(count):
    rnd = random.Random(7)
    return [
        (
            f"r{i:06d}",
            rnd.randint(-100, 100),
            rnd.choice(["a", "bb", None]),
            dt.date(2001, 1, 1) + dt.timedelta(days=rnd.randint(0, 7000)),
            dt.datetime(2020, 1, 1) + dt.timedelta(seconds=rnd.randint(0, 10**8)),
        )
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def source():
    sd = create_serde("string", MAPPING)
    return InMemoryRowSource(sd.serialize(v) for v in _values(ROWS))


def _check_report(report, rows, kept):
    assert list(report.paths) == ["row", "naive", "batch"]
    for name, path in report.paths.items():
        assert path.rows == rows
        assert path.rows_kept == kept
        stages = {t.stage for t in path.timings}
        assert {"fetch cells", "decode", "build rows", "predicate", "hand-off"} <= stages <= set(STAGES)
        decoded = [t.column for t in path.timings if t.stage == "decode"]
        assert sorted(decoded) == sorted(report.columns)
        assert all(t.seconds >= 0 for t in path.timings)
        spots = report.hotspots(name)
        assert len(spots) == len(path.timings)
        assert [h.seconds for h in spots] == sorted((h.seconds for h in spots), reverse=True)
        assert sum(h.share for h in spots) == pytest.approx(1.0)
        assert report.top(name) == spots[0]
        assert path.stats["rows"] == rows and path.stats["nulls_from_errors"] == {}


def test_profile_in_memory_source(source, tmp_path):
    expected_kept = sum(1 for v in _values(ROWS) if v[1] > 10)
    report = profile_serde(source, MAPPING, serde="string", rows=ROWS, predicate=("n", ">", 10), batch_size=1000)
    _check_report(report, ROWS, expected_kept)
    assert report.paths["batch"].batches == 3
    text = report.render_text()
    for needle in ("hotspots: row-wise", "naive dates", "vectorized", "decode d (date)", "decode t (timestamp)", "share"):
        assert needle in text

    doc = report.to_speedscope(str(tmp_path / "profile.speedscope.json"))
    on_disk = json.loads((tmp_path / "profile.speedscope.json").read_text())
    assert on_disk == doc
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert len(doc["profiles"]) == 3
    for profile in doc["profiles"]:
        assert profile["type"] == "sampled" and profile["unit"] == "nanoseconds"
        assert len(profile["samples"]) == len(profile["weights"])
        assert profile["endValue"] == sum(profile["weights"])
        assert all(0 <= i < len(frames) for stack in profile["samples"] for i in stack)
    assert any(f["name"] == "decode d (date)" for f in frames)

    page = report.to_html(str(tmp_path / "profile.html"))
    assert (tmp_path / "profile.html").read_text() == page
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 1 and "<script" not in page
    assert "decode d (date)" in page  # in the hotspot tables and, as text, in the chart
    _check_shared_axis(report)
    data = report.as_dict()
    assert json.loads(json.dumps(data, default=str))["paths"]["row"]["rows"] == ROWS


def _check_shared_axis(report):
    """The totals panel comes first; every panel is on one time axis, bars as long as their time."""
    from serde._profile_chart import profile_figure

    fig = profile_figure(report)
    try:
        axes = fig.axes
        assert len(axes) == 1 + len(report.paths)
        assert axes[0].get_title().startswith("total time per path")
        assert len({ax.get_xlim() for ax in axes}) == 1
        totals = sorted(p.get_width() for p in axes[0].patches)
        assert totals == pytest.approx(sorted(p.total_seconds * 1e3 for p in report.paths.values()))
        for ax, name in zip(axes[1:], report.paths):
            widths = [p.get_width() for p in ax.patches][::-1]  # drawn bottom-up: the biggest on top
            assert widths == pytest.approx([h.seconds * 1e3 for h in report.hotspots(name)])
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_charts_are_png_svg_and_html_from_one_figure(source, tmp_path):
    report = profile_serde(source, MAPPING, serde="string", rows=200, paths=["batch"])
    report.to_png(str(tmp_path / "chart.png"))
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG")
    svg = report.to_svg(str(tmp_path / "chart.svg"))
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "vectorized (Arrow batches)" in svg
    page = report.write_chart(str(tmp_path / "chart.htm"))
    assert svg[svg.index("<svg"):] in page  # the page inlines the very SVG the .svg file holds
    with pytest.raises(InvalidArgument, match="must be a .png, .svg or .html file"):
        report.write_chart(str(tmp_path / "chart.gif"))


def test_chart_labels_fit_and_colours_have_a_legend(tmp_path):
    """Rendered to PNG: every value label (the longest bar's long "ms, rows/s" one
    included) lies inside its panel and the figure, and a legend names each stage's
    colour."""
    from matplotlib.colors import to_hex

    from serde._profile_chart import profile_figure
    from serde._profile_output import STAGE_COLOURS
    from serde.profiler import PathProfile, ProfileReport, StageTiming

    def path(name, rows, seconds):
        timings = [StageTiming(stage, column, s) for (stage, column), s in seconds.items()]
        return PathProfile(name, "string", rows=rows, batches=1, rows_kept=rows, timings=timings)

    report = ProfileReport("string", ["n", "d"], {"n": "int", "d": "date"}, None, {
        "row": path("row", 10**9, {("fetch cells", None): 0.01, ("decode", "n"): 0.02, ("assemble rows", None): 0.01}),
        "naive": path("naive", 10**9, {("fetch cells", None): 0.01, ("decode", "d"): 1.25, ("hand-off", None): 0.001}),
        "batch": path("batch", 10**9, {("decode", "n"): 0.004, ("predicate", None): 0.001}),
    })
    fig = profile_figure(report)
    try:
        fig.savefig(str(tmp_path / "chart.png"))
        renderer = fig.canvas.get_renderer()
        figure_box = fig.bbox
        labels = [t for ax in fig.axes for t in ax.texts]
        assert len(labels) == 3 + 3 + 3 + 2
        assert "1261.00 ms, 793,021,412 rows/s" in [t.get_text() for t in labels]  # the longest bar's
        for text in labels:
            box = text.get_window_extent(renderer)
            panel = text.axes.get_window_extent(renderer)
            assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1, text.get_text()
            assert box.x1 <= panel.x1, f"{text.get_text()!r} ends past its panel"
        assert len(fig.legends) == 1
        legend = fig.legends[0]
        drawn = ["fetch cells", "assemble rows", "decode", "predicate", "hand-off"]  # STAGE_COLOURS order
        assert [t.get_text() for t in legend.get_texts()] == drawn
        assert [to_hex(h.get_facecolor()) for h in legend.legend_handles] == [STAGE_COLOURS[s] for s in drawn]
        box = legend.get_window_extent(renderer)
        assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1 and figure_box.y0 <= box.y0
        assert all(box.y1 <= ax.get_tightbbox(renderer).y0 for ax in fig.axes[-1:])  # under the panels
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_consumer_sees_rows_and_batches(source):
    seen = []
    report = profile_serde(source, MAPPING, serde="string", rows=500, paths=["row", "batch"], consumer=seen.append, batch_size=200)
    rows = [x for x in seen if isinstance(x, tuple)]
    batches = [x for x in seen if not isinstance(x, tuple)]
    assert len(rows) == 500 and sum(b.num_rows for b in batches) == 500
    # Both paths hand over the same decoded values.
    assert [r for b in batches for r in record_batch_rows(b)] == rows
    assert report.paths["row"].batches == 3


def test_bad_arguments(source):
    with pytest.raises(InvalidArgument):
        profile_serde(source, MAPPING, serde="string", rows=0)
    with pytest.raises(InvalidArgument):
        profile_serde(source, MAPPING, serde="string", paths=["sideways"])
    with pytest.raises(InvalidArgument) as err:
        profile_serde(source, MAPPING, serde="string", predicate=("zz", ">", 1))
    assert "zz" in str(err.value)
    with pytest.raises(InvalidArgument):
        profile_serde(object(), MAPPING, serde="string")


def test_profile_real_table(tmp_path):
    conn = storage.connect(str(tmp_path / "db"))
    try:
        conn.create_table("events", {"cf": {}}, split_keys=[b"r000500"])
        table = conn.table("events")
        sd = create_serde("binary", MAPPING)
        values = _values(1000)
        with table.batch() as batch:
            for v in values:
                key, cells = sd.serialize(v)
                batch.put(key, cells)
        table.flush()
        report = profile_serde(table, MAPPING, serde="binary", rows=800, predicate=("s", "==", "a"), batch_size=256)
        _check_report(report, 800, sum(1 for v in values[:800] if v[2] == "a"))
        # The decoded scan equals what was written.
        decoded = [r for b in table.scan_batches(columns=sd.scan_columns) for r in record_batch_rows(sd.deserialize_batch(b))]
        assert decoded == values
    finally:
        conn.close()



def test_a_mapping_of_columns_no_row_has_is_refused(tmp_path, capsys):
    """A mapped column that no row holds would profile 0 rows on every path without a word:
    refused, naming the column and the closest one the rows hold; an empty table is no error
    here (the profile has 0 rows), and the command refuses that in one line."""
    from jobs import cli

    root = str(tmp_path / "db")
    conn = storage.connect(root)
    try:
        table = conn.create_table("events", {"cf": {}})
        table.put(b"r1", {b"cf:n": b"1", b"cf:s": b"x"})
        with pytest.raises(InvalidArgument) as err:
            profile_serde(table, "key STRING :key, n INT cf:nn", serde="string")
        assert str(err.value) == ("no row of table events has any of the mapping's columns: cf:nn "
                                  "(did you mean cf:n?); its rows hold cf:n, cf:s")
        empty = conn.create_table("empty", {"cf": {}})
        report = profile_serde(empty, "key STRING :key, n INT cf:n", serde="string", warmup=False)
        assert all(p.rows == 0 for p in report.paths.values())
    finally:
        conn.close()
    for name, mapping, message in (
        ("events", "key STRING :key, n INT cf:nn", "(did you mean cf:n?)"),
        ("empty", "key STRING :key, n INT cf:n", "table empty has no rows to profile"),
    ):
        capsys.readouterr()
        assert cli.main(["profile-serde", "--root", root, name, "--mapping", mapping, "--serde", "string"]) == 2
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], captured.err
        assert captured.out == ""  # no table of zeros
