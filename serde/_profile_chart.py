"""The SerDe profile's chart: one matplotlib figure, as PNG, SVG or an HTML page with the hotspot tables.

The figure has a totals panel (one bar per path) and one panel per path
(a bar per stage and column), all on one shared time axis, so bar lengths
compare across paths.  See :mod:`serde.charts` for how it is written.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from serde._profile_output import PATH_TITLES, STAGE_COLOURS, label
from serde.charts import pyplot, write_figure

if TYPE_CHECKING:  # imported for annotations only; the profiler imports this module
    from serde.profiler import ProfileReport

__all__ = ["profile_figure", "write_profile_chart"]


def profile_figure(report: "ProfileReport", what: str = "chart") -> Any:
    """The figure: total time per path, then each path's stages and columns, on one shared axis (ms)."""
    plt = pyplot(what)
    names = list(report.paths)
    fig, axes = plt.subplots(len(names) + 1, 1, figsize=(9, 2 + 2.2 * (len(names) + 1)), squeeze=False, sharex=True)
    totals = axes[0, 0]
    bars = totals.barh([PATH_TITLES.get(n, n) for n in names][::-1],
                       [report.paths[n].total_seconds * 1e3 for n in names][::-1], color="#4e79a7")
    totals.bar_label(bars, labels=[f"{report.paths[n].total_seconds * 1e3:.2f} ms, "
                                   f"{report.paths[n].rows_per_second:,.0f} rows/s" for n in names][::-1],
                     padding=3, fontsize=8)
    totals.set_title("total time per path (every panel shares this axis)")
    for ax, name in zip(axes[1:, 0], names):
        spots = report.hotspots(name)[::-1]  # barh draws bottom-up: the biggest ends on top
        bars = ax.barh([label(report, h.stage, h.column) for h in spots], [h.seconds * 1e3 for h in spots],
                       color=[STAGE_COLOURS.get(h.stage, "#bab0ac") for h in spots])
        ax.bar_label(bars, labels=[f"{h.seconds * 1e3:.2f} ms ({h.share * 100:.1f}%)" for h in spots],
                     padding=3, fontsize=8)
        ax.set_title(PATH_TITLES.get(name, name))
    axes[-1, 0].set_xlabel("ms")
    axes[0, 0].margins(x=0.3)  # room for the value labels (the axis is shared)
    fig.tight_layout()
    return fig


def _page(report: "ProfileReport", svg: str) -> str:
    body = [
        f"<h1>SerDe profile: {html.escape(report.serde)}</h1>",
        "<p>Columns: " + html.escape(", ".join(f"{c} {report.column_types.get(c, '?')}" for c in report.columns))
        + "</p>",
        "<table><tr><th>path</th><th>rows</th><th>batches</th><th>total ms</th><th>rows/s</th></tr>",
    ]
    for name, p in report.paths.items():
        body.append(f"<tr><td>{html.escape(name)}</td><td>{p.rows}</td><td>{p.batches}</td>"
                    f"<td>{p.total_seconds * 1e3:.2f}</td><td>{p.rows_per_second:,.0f}</td></tr>")
    body.append("</table>")
    body.append(svg)
    for name in report.paths:
        body.append(f"<h2>{html.escape(PATH_TITLES.get(name, name))}</h2>")
        body.append("<table><tr><th>rank</th><th>stage / column</th><th>ms</th><th>share</th><th>us/row</th></tr>")
        for rank, h in enumerate(report.hotspots(name), 1):
            body.append(f"<tr><td>{rank}</td><td>{html.escape(label(report, h.stage, h.column))}</td>"
                        f"<td>{h.seconds * 1e3:.2f}</td><td>{h.share * 100:.1f}%</td><td>{h.micros_per_row:.3f}</td></tr>")
        body.append("</table>")
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>regionscan SerDe profile</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
            "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:nth-child(2){text-align:left}</style>"
            "</head><body>" + "\n".join(body) + "</body></html>\n")


def write_profile_chart(report: "ProfileReport", path: str, what: str = "chart") -> str | None:
    """Write the chart to ``path`` (``.png``, ``.svg``, ``.html``); the SVG or page written, None for PNG."""
    return write_figure(profile_figure(report, what), path, page=lambda svg: _page(report, svg))
