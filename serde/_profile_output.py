"""Renderers of a SerDe profile: text table, speedscope JSON, HTML chart, PNG.

The speedscope file holds one ``sampled`` profile per path; each sample is
the stack ``path > stage > column`` weighted by its nanoseconds, so the
flame graph's widths are the measured times
(https://www.speedscope.app/file-format-schema.json).
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from storage.errors import InvalidArgument

if TYPE_CHECKING:  # imported for annotations only; the profiler imports this module
    from serde.profiler import ProfileReport

__all__ = ["render_text", "render_speedscope", "render_html", "render_png", "SPEEDSCOPE_SCHEMA"]

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"

_PATH_TITLES = {
    "row": "row-wise",
    "naive": "row-wise, naive dates (strptime per row)",
    "batch": "vectorized (Arrow batches)",
}

_STAGE_COLOURS = {
    "fetch cells": "#4e79a7",
    "assemble rows": "#f28e2b",
    "decode": "#e15759",
    "build rows": "#76b7b2",
    "predicate": "#59a14f",
    "hand-off": "#edc948",
}


def _label(report: "ProfileReport", stage: str, column: str | None) -> str:
    if column is None:
        return stage
    kind = report.column_types.get(column)
    return f"{stage} {column} ({kind})" if kind else f"{stage} {column}"


def render_text(report: "ProfileReport", top: int | None = 15) -> str:
    """Per-path totals, then each path's stages and columns ranked by time."""
    lines = [
        f"SerDe profile: serde={report.serde}, columns: "
        + ", ".join(f"{c} {report.column_types.get(c, '?')}" for c in report.columns),
        "",
        f"{'path':<8} {'rows':>9} {'batches':>8} {'total ms':>10} {'rows/s':>12}",
    ]
    for name, p in report.paths.items():
        lines.append(f"{name:<8} {p.rows:>9} {p.batches:>8} {p.total_seconds * 1e3:>10.2f} {p.rows_per_second:>12,.0f}")
    if "batch" in report.paths and report.paths["batch"].rows_per_second:
        fast = report.paths["batch"].rows_per_second
        for name, p in report.paths.items():
            if name != "batch" and p.rows_per_second:
                lines.append(f"  batch path is {fast / p.rows_per_second:.1f}x the {name} path")
    for name in report.paths:
        spots = report.hotspots(name)
        if top is not None:
            spots = spots[:top]
        lines += [
            "",
            f"hotspots: {_PATH_TITLES.get(name, name)}",
            f"{'rank':>4}  {'stage / column':<40} {'ms':>10} {'share':>7} {'us/row':>8}",
        ]
        for rank, h in enumerate(spots, 1):
            label = _label(report, h.stage, h.column)
            lines.append(f"{rank:>4}  {label:<40} {h.seconds * 1e3:>10.2f} {h.share * 100:>6.1f}% {h.micros_per_row:>8.3f}")
    return "\n".join(lines) + "\n"


def speedscope_document(report: "ProfileReport") -> dict[str, Any]:
    """The speedscope JSON document of a report."""
    frames: list[dict[str, str]] = []
    index: dict[str, int] = {}

    def frame(name: str) -> int:
        if name not in index:
            index[name] = len(frames)
            frames.append({"name": name})
        return index[name]

    profiles = []
    for name, p in report.paths.items():
        root = frame(f"scan via {report.serde} SerDe ({_PATH_TITLES.get(name, name)})")
        samples, weights = [], []
        for t in p.timings:
            stack = [root, frame(t.stage)]
            if t.column is not None:
                stack.append(frame(_label(report, t.stage, t.column)))
            samples.append(stack)
            weights.append(int(t.seconds * 1e9))
        profiles.append(
            {
                "type": "sampled",
                "name": f"{name}: {p.rows} rows",
                "unit": "nanoseconds",
                "startValue": 0,
                "endValue": sum(weights),
                "samples": samples,
                "weights": weights,
            }
        )
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "name": f"regionscan SerDe profile ({report.serde})",
        "exporter": "regionscan serde.profiler",
        "activeProfileIndex": 0,
        "shared": {"frames": frames},
        "profiles": profiles,
    }


def render_speedscope(report: "ProfileReport", path: str) -> dict[str, Any]:
    """Write the speedscope document to ``path``; return it."""
    document = speedscope_document(report)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1)
    return document


def _svg_bars(rows: list[tuple[str, float, str, str]], scale: float) -> str:
    """Horizontal bars (label, seconds, colour, value text); ``scale`` seconds fill the full width.

    Every chart of a page shares one ``scale`` (the slowest path's total),
    so bar lengths compare across paths.
    """
    bar_height, gap, label_width, width = 18, 6, 300, 420
    height = len(rows) * (bar_height + gap) + gap
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_width + width + 160}" height="{height}" role="img">']
    for i, (label, seconds, colour, text) in enumerate(rows):
        y = gap + i * (bar_height + gap)
        length = max(1.0, seconds / scale * width) if scale > 0 else 1.0
        label = html.escape(label)
        parts.append(
            f'<text x="{label_width - 6}" y="{y + bar_height - 5}" text-anchor="end" font-size="12">{label}</text>'
            f'<rect x="{label_width}" y="{y}" width="{length:.1f}" height="{bar_height}" fill="{colour}">'
            f"<title>{label}: {seconds * 1e3:.2f} ms</title></rect>"
            f'<text x="{label_width + length + 4:.1f}" y="{y + bar_height - 5}" font-size="12">{html.escape(text)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _shared_scale(report: "ProfileReport") -> float:
    return max((p.total_seconds for p in report.paths.values()), default=0.0)


def _svg_totals(report: "ProfileReport") -> str:
    """One bar per path: its total time, on the page's shared axis."""
    rows = [(_PATH_TITLES.get(name, name), p.total_seconds, "#4e79a7",
             f"{p.total_seconds * 1e3:.2f} ms, {p.rows_per_second:,.0f} rows/s") for name, p in report.paths.items()]
    return _svg_bars(rows, _shared_scale(report))


def _svg_chart(report: "ProfileReport", name: str) -> str:
    """A horizontal bar per stage/column of one path, in ms on the page's shared axis."""
    rows = [(_label(report, h.stage, h.column), h.seconds, _STAGE_COLOURS.get(h.stage, "#bab0ac"),
             f"{h.seconds * 1e3:.2f} ms ({h.share * 100:.1f}%)") for h in report.hotspots(name)]
    return _svg_bars(rows, _shared_scale(report))


def render_html(report: "ProfileReport", path: str) -> str:
    """Write a self-contained HTML page (inline SVG charts, hotspot tables); return it."""
    body = [
        f"<h1>SerDe profile: {html.escape(report.serde)}</h1>",
        "<p>Columns: " + html.escape(", ".join(f"{c} {report.column_types.get(c, '?')}" for c in report.columns)) + "</p>",
        "<table><tr><th>path</th><th>rows</th><th>batches</th><th>total ms</th><th>rows/s</th></tr>",
    ]
    for name, p in report.paths.items():
        body.append(
            f"<tr><td>{html.escape(name)}</td><td>{p.rows}</td><td>{p.batches}</td>"
            f"<td>{p.total_seconds * 1e3:.2f}</td><td>{p.rows_per_second:,.0f}</td></tr>"
        )
    body.append("</table>")
    body.append("<h2>Total time per path</h2><p>Every bar on this page uses the same axis: the slowest "
                "path's total fills the width.</p>")
    body.append(_svg_totals(report))
    for name, p in report.paths.items():
        body.append(f"<h2>{html.escape(_PATH_TITLES.get(name, name))}</h2>")
        body.append(_svg_chart(report, name))
        body.append("<table><tr><th>rank</th><th>stage / column</th><th>ms</th><th>share</th><th>us/row</th></tr>")
        for rank, h in enumerate(report.hotspots(name), 1):
            body.append(
                f"<tr><td>{rank}</td><td>{html.escape(_label(report, h.stage, h.column))}</td>"
                f"<td>{h.seconds * 1e3:.2f}</td><td>{h.share * 100:.1f}%</td><td>{h.micros_per_row:.3f}</td></tr>"
            )
        body.append("</table>")
    page = (
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>regionscan SerDe profile</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:nth-child(2){text-align:left}</style>"
        "</head><body>" + "\n".join(body) + "</body></html>\n"
    )
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(page)
    return page


def render_png(report: "ProfileReport", path: str) -> None:
    """Write a PNG bar chart with matplotlib; a clear error names the extra when it is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InvalidArgument("PNG output needs matplotlib (pip install 'regionscan[bench]'); use to_html instead") from None
    names = list(report.paths)
    # one shared x axis (ms): the totals panel first, then each path's stages, all comparable
    fig, axes = plt.subplots(len(names) + 1, 1, figsize=(9, 2 + 2.2 * (len(names) + 1)), squeeze=False, sharex=True)
    totals = axes[0, 0]
    bars = totals.barh([_PATH_TITLES.get(n, n) for n in names][::-1],
                       [report.paths[n].total_seconds * 1e3 for n in names][::-1], color="#4e79a7")
    totals.bar_label(bars, fmt="%.2f ms", padding=3, fontsize=8)
    totals.set_title("total time per path")
    for ax, name in zip(axes[1:, 0], names):
        spots = report.hotspots(name)[::-1]
        ax.barh(
            [_label(report, h.stage, h.column) for h in spots],
            [h.seconds * 1e3 for h in spots],
            color=[_STAGE_COLOURS.get(h.stage, "#bab0ac") for h in spots],
        )
        ax.set_title(_PATH_TITLES.get(name, name))
        ax.set_xlabel("ms")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
