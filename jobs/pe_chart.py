"""Charts of ``regionscan pe`` results: latency percentiles and throughput per command.

One matplotlib figure (see :mod:`serde.charts`), written as ``.png``,
``.svg`` or an ``.html`` page around the SVG.  Latencies span orders of
magnitude between commands (a scanner ``next()`` against a full filtered
scan), so each command gets its own latency panel with its own scale, and
that scale is logarithmic: p50 to p99.9 stay readable next to a max that is
often 100x larger.  Bars come in percentile order from the top (min, p50 ...
p99.9, max, then the mean), each labelled with its value.
"""

from __future__ import annotations

import html
from typing import Any, Sequence

from serde.charts import pyplot, write_figure
from storage import InvalidArgument

from .pe_stats import CommandResult

__all__ = ["write_chart", "figure"]

_BARS = (("min", "min"), ("p50", "50th"), ("p95", "95th"), ("p99", "99th"), ("p999", "99.9th"),
         ("max", "max"), ("mean", "mean"))
_COLOUR = "#4a78b5"


def figure(results: Sequence[CommandResult]) -> Any:
    """The chart: a throughput panel, then one latency panel (log scale) per command."""
    if not results:
        raise InvalidArgument("--chart: there are no results to chart")
    plt = pyplot("--chart")
    n = len(results)
    fig, axes = plt.subplots(n + 1, 1, figsize=(8, 2.2 * (n + 1)), squeeze=False)
    aggs = [r.to_dict()["aggregate"] for r in results]
    ax = axes[0][0]
    # barh draws bottom-up: reversed lists put the first command (and min) on top
    bars = ax.barh([r.command for r in results][::-1], [a["ops_per_s"] for a in aggs][::-1], color=_COLOUR)
    ax.bar_label(bars, labels=[f"{a['ops_per_s']:,.0f} ops/s, {a['rows_per_s']:,.0f} rows/s" for a in aggs][::-1],
                 padding=3, fontsize=8)
    ax.set_title("Throughput (ops/s, all clients)")
    ax.margins(x=0.35)  # room for the value labels
    for i, (r, a) in enumerate(zip(results, aggs)):
        ax = axes[i + 1][0]
        lat = a["latency_us"]
        labels = [label for _, label in _BARS][::-1]
        values = [max(lat[key], 1e-3) for key, _ in _BARS][::-1]  # a log axis has no 0
        bars = ax.barh(labels, values, color=_COLOUR)
        ax.set_xscale("log")
        ax.bar_label(bars, labels=[f"{lat[key]:,.1f} us" for key, _ in _BARS][::-1], padding=3, fontsize=8)
        ax.set_title(f"{r.command}: latency (us, log scale), {a['ops']:,} ops over {a['clients']} client(s)")
    fig.tight_layout()
    return fig


def write_chart(results: Sequence[CommandResult], path: str) -> None:
    """Write the chart of ``results`` to ``path`` (``.png``, ``.svg``, ``.html``)."""
    write_figure(figure(results), path, page=lambda svg: (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>regionscan pe</title></head>\n"
        "<body style=\"font-family:sans-serif\">\n<h1>regionscan pe</h1>\n"
        f"<p>{html.escape(', '.join(r.command for r in results))}</p>\n{svg}\n</body></html>\n"))
