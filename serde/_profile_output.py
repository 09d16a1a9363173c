"""Renderers of a SerDe profile: text table and speedscope JSON (charts: :mod:`serde._profile_chart`).

The speedscope file holds one ``sampled`` profile per path; each sample is
the stack ``path > stage > column`` weighted by its nanoseconds, so the
flame graph's widths are the measured times
(https://www.speedscope.app/file-format-schema.json).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Protocol

__all__ = ["ProfileData", "render_text", "render_speedscope", "SPEEDSCOPE_SCHEMA", "PATH_TITLES", "STAGE_COLOURS",
           "label"]


class ProfileData(Protocol):
    """What the renderers read of a profile: a :class:`serde.profiler.ProfileReport`
    (whose methods call them, so they name it through this protocol)."""

    serde: str
    columns: list[str]
    column_types: dict[str, str]
    paths: Mapping[str, Any]  # path name -> serde.profiler.PathProfile

    def hotspots(self, path: str | None = None) -> list[Any]:
        """Stages and columns ranked by time (serde.profiler.Hotspot each)."""
        ...

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"

PATH_TITLES = {
    "row": "row-wise",
    "naive": "row-wise, naive dates (strptime per row)",
    "batch": "vectorized (Arrow batches)",
}

STAGE_COLOURS = {
    "fetch cells": "#4e79a7",
    "assemble rows": "#f28e2b",
    "decode": "#e15759",
    "build rows": "#76b7b2",
    "predicate": "#59a14f",
    "hand-off": "#edc948",
}


def label(report: ProfileData, stage: str, column: str | None) -> str:
    """``decode d (date)``: a stage, and the column and type it worked on."""
    if column is None:
        return stage
    kind = report.column_types.get(column)
    return f"{stage} {column} ({kind})" if kind else f"{stage} {column}"


def render_text(report: ProfileData, top: int | None = 15) -> str:
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
            f"hotspots: {PATH_TITLES.get(name, name)}",
            f"{'rank':>4}  {'stage / column':<40} {'ms':>10} {'share':>7} {'us/row':>8}",
        ]
        for rank, h in enumerate(spots, 1):
            text = label(report, h.stage, h.column)
            lines.append(f"{rank:>4}  {text:<40} {h.seconds * 1e3:>10.2f} {h.share * 100:>6.1f}% {h.micros_per_row:>8.3f}")
    return "\n".join(lines) + "\n"


def speedscope_document(report: ProfileData) -> dict[str, Any]:
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
        root = frame(f"scan via {report.serde} SerDe ({PATH_TITLES.get(name, name)})")
        samples, weights = [], []
        for t in p.timings:
            stack = [root, frame(t.stage)]
            if t.column is not None:
                stack.append(frame(label(report, t.stage, t.column)))
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


def render_speedscope(report: ProfileData, path: str) -> dict[str, Any]:
    """Write the speedscope document to ``path``; return it."""
    document = speedscope_document(report)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1)
    return document
