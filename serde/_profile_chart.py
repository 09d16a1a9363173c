"""The SerDe profile's chart: one matplotlib figure, as PNG, SVG or an HTML page with the hotspot tables.

The figure has a totals panel (one bar per path) and one panel per path
(a bar per stage and column), all on one shared time axis, so bar lengths
compare across paths.  See :mod:`serde.charts` for how it is written.
"""

from __future__ import annotations

import html
from typing import Any

from serde._profile_output import PATH_TITLES, STAGE_COLOURS, ProfileData, label
from serde.charts import pyplot, write_figure

__all__ = ["profile_figure", "write_profile_chart"]


_TOTAL_COLOUR = "#6b6b6b"  # the totals panel: a colour no stage has


def profile_figure(report: ProfileData, what: str = "chart") -> Any:
    """The figure: total time per path, then each path's stages and columns, on one shared axis (ms).

    The bars of the path panels take their stage's colour, named in a legend
    under the axis; every value label lies inside the figure (the shared axis
    is widened until the longest one fits, measured by the renderer).
    """
    plt = pyplot(what)
    from matplotlib.patches import Patch

    names = list(report.paths)
    fig, axes = plt.subplots(len(names) + 1, 1, figsize=(9, 2.6 + 2.2 * (len(names) + 1)), squeeze=False, sharex=True)
    totals = axes[0, 0]
    bars = totals.barh([PATH_TITLES.get(n, n) for n in names][::-1],
                       [report.paths[n].total_seconds * 1e3 for n in names][::-1], color=_TOTAL_COLOUR)
    value_labels = list(totals.bar_label(bars, labels=[f"{report.paths[n].total_seconds * 1e3:.2f} ms, "
                                                       f"{report.paths[n].rows_per_second:,.0f} rows/s"
                                                       for n in names][::-1], padding=3, fontsize=8))
    totals.set_title("total time per path (every panel shares this axis)")
    stages_drawn: set[str] = set()
    for ax, name in zip(axes[1:, 0], names):
        spots = report.hotspots(name)[::-1]  # barh draws bottom-up: the biggest ends on top
        stages_drawn.update(h.stage for h in spots)
        bars = ax.barh([label(report, h.stage, h.column) for h in spots], [h.seconds * 1e3 for h in spots],
                       color=[STAGE_COLOURS.get(h.stage, _OTHER_STAGE) for h in spots])
        value_labels += ax.bar_label(bars, labels=[f"{h.seconds * 1e3:.2f} ms ({h.share * 100:.1f}%)" for h in spots],
                                     padding=3, fontsize=8)
        ax.set_title(PATH_TITLES.get(name, name))
    axes[-1, 0].set_xlabel("ms")
    stages = [s for s in STAGE_COLOURS if s in stages_drawn] + sorted(stages_drawn - set(STAGE_COLOURS))
    legend = fig.legend(handles=[Patch(color=STAGE_COLOURS.get(s, _OTHER_STAGE), label=s) for s in stages],
                        loc="lower center", ncol=min(len(stages), 6), fontsize=8, title="stage", title_fontsize=8,
                        frameon=False)
    _fit(fig, axes[0, 0], value_labels, legend)
    return fig


_OTHER_STAGE = "#bab0ac"  # a stage without a colour of its own


def _fit(fig: Any, ax: Any, texts: list, legend: Any) -> None:
    """Lay the figure out with ``legend`` under the panels, widening the shared x
    axis until every one of ``texts`` (the value labels) ends inside its panel.

    A label's width in data units depends on the axis range, so the range is
    set from the measured extents and measured again (a few rounds settle it).
    """
    renderer = fig.canvas.get_renderer()
    for _ in range(5):
        height = legend.get_window_extent(renderer).height / fig.bbox.height
        fig.tight_layout(rect=(0, height + 0.01, 1, 1))
        left, right = ax.get_xlim()
        needed = max((t.axes.transData.inverted().transform((t.get_window_extent(renderer).x1, 0))[0]
                      for t in texts), default=right)
        if needed <= right:
            return
        ax.set_xlim(left, left + (needed - left) * 1.04)  # shared: every panel follows


def _page(report: ProfileData, svg: str) -> str:
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


def write_profile_chart(report: ProfileData, path: str, what: str = "chart") -> str | None:
    """Write the chart to ``path`` (``.png``, ``.svg``, ``.html``); the SVG or page written, None for PNG."""
    return write_figure(profile_figure(report, what), path, page=lambda svg: _page(report, svg))
