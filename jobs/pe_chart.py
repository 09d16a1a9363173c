"""Charts of ``regionscan pe`` results: latency percentiles and throughput per command.

``.html`` gives a self-contained page of inline SVG bars (no scripts, no
external files); ``.png`` uses matplotlib when it is installed (the
``bench`` extra).  Latencies span orders of magnitude between commands (a
scanner ``next()`` against a full filtered scan), so each command gets its
own latency panel with its own scale, and that scale is logarithmic: p50 to
p99.9 stay readable next to a max that is often 100x larger.  Bars come in
percentile order (min, p50 ... p99.9, max, then the mean), each labelled
with its value.
"""

from __future__ import annotations

import html
import math
from typing import Sequence

from storage.errors import InvalidArgument

from .pe_stats import CommandResult

__all__ = ["write_chart"]

_BARS = (("min", "min"), ("p50", "50th"), ("p95", "95th"), ("p99", "99th"), ("p999", "99.9th"),
         ("max", "max"), ("mean", "mean"))
_WIDTH = 720
_ROW_H = 20
_CHAR_W = 7  # average glyph width of 12px sans-serif, to size the label column


def write_chart(results: Sequence[CommandResult], path: str) -> None:
    """Write a chart of ``results`` to ``path`` (``.html`` or ``.png``)."""
    if not results:
        raise InvalidArgument("--chart: there are no results to chart")
    lower = path.lower()
    if lower.endswith((".html", ".htm")):
        with open(path, "w", encoding="utf-8") as out:
            out.write(render_html(results))
    elif lower.endswith(".png"):
        _write_png(results, path)
    else:
        raise InvalidArgument(f"--chart must name a .html or .png file, got {path!r}")


def _log_scale(values: list[float]) -> "callable":
    """value -> bar fraction on a log axis from half the smallest positive value to the largest."""
    positive = [v for v in values if v > 0]
    if not positive:
        return lambda v: 0.0
    floor, top = min(positive) / 2, max(positive)
    decades = math.log10(top / floor)
    return lambda v: math.log10(v / floor) / decades if v > 0 else 0.0


def _bar_panel(title: str, items: list[tuple[str, float, str]], log: bool = False) -> str:
    """An SVG of horizontal bars: (label, value, value text) scaled to the largest value (``log``: on a log axis)."""
    top = max((v for _, v, _ in items), default=0.0) or 1.0
    fraction = _log_scale([v for _, v, _ in items]) if log else (lambda v: v / top)
    height = 28 + _ROW_H * len(items)
    label_w = 12 + _CHAR_W * max((len(label) for label, _, _ in items), default=4)
    text_w = 12 + _CHAR_W * max((len(text) for _, _, text in items), default=4)
    span = max(100, _WIDTH - label_w - text_w)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<text x="4" y="16" font-weight="bold">{html.escape(title)}</text>',
    ]
    for i, (label, value, text) in enumerate(items):
        y = 26 + i * _ROW_H
        w = max(1.0, span * fraction(value))
        parts.append(f'<text x="4" y="{y + 13}">{html.escape(label)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{_ROW_H - 5}" fill="#4a78b5"/>')
        parts.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 13}">{html.escape(text)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(results: Sequence[CommandResult]) -> str:
    """The chart page as a string."""
    aggs = [(r, r.to_dict()["aggregate"]) for r in results]
    throughput = _bar_panel(
        "Throughput (ops/s, all clients)",
        [(r.command, a["ops_per_s"], f"{a['ops_per_s']:,.0f} ops/s, {a['rows_per_s']:,.0f} rows/s") for r, a in aggs],
    )
    panels = []
    for r, a in aggs:
        lat = a["latency_us"]
        title = f"{r.command}: latency (us, log scale), {a['ops']:,} ops over {a['clients']} client(s)"
        panels.append(_bar_panel(title, [(label, lat[key], f"{lat[key]:,.1f} us") for key, label in _BARS], log=True))
    body = "\n".join(f"<div>{p}</div>" for p in [throughput] + panels)
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>regionscan pe</title></head>\n"
        "<body style=\"font-family:sans-serif\">\n<h1>regionscan pe</h1>\n"
        f"{body}\n</body></html>\n"
    )


def _write_png(results: Sequence[CommandResult], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display is needed, or wanted, for a file
        import matplotlib.pyplot as plt
    except ImportError:
        raise InvalidArgument(
            "--chart: a .png chart needs matplotlib (pip install 'regionscan[bench]'); use a .html path instead"
        ) from None
    n = len(results)
    fig, axes = plt.subplots(n + 1, 1, figsize=(8, 2.2 * (n + 1)), squeeze=False)
    aggs = [r.to_dict()["aggregate"] for r in results]
    ax = axes[0][0]
    ax.barh([r.command for r in results], [a["ops_per_s"] for a in aggs], color="#4a78b5")
    ax.set_title("Throughput (ops/s, all clients)")
    for i, (r, a) in enumerate(zip(results, aggs)):
        ax = axes[i + 1][0]
        lat = a["latency_us"]
        labels = [label for _, label in _BARS][::-1]  # barh draws bottom-up: min ends on top
        values = [lat[key] for key, _ in _BARS][::-1]
        bars = ax.barh(labels, values, color="#4a78b5")
        ax.set_xscale("log")
        ax.bar_label(bars, labels=[f"{v:,.1f} us" for v in values], padding=3, fontsize=8)
        ax.set_title(f"{r.command}: latency (us, log scale)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
