"""Charts are matplotlib figures, written as PNG, SVG or an HTML page around the SVG.

Each chart of the project (the SerDe profile's, ``regionscan pe``'s) is
drawn once, as a figure; the file's suffix picks how it is written:
``.png``, ``.svg``, or ``.html`` / ``.htm`` (a self-contained page, the SVG
inline, no scripts).  SVG text stays text (``svg.fonttype = none``), so a
page can be searched and its labels read.  matplotlib is an optional
dependency (the ``charts`` extra); without it :func:`require_matplotlib`
raises one line naming what asked for the chart, before any work.
"""

from __future__ import annotations

import io
from typing import Any, Callable

from storage.errors import InvalidArgument

__all__ = ["CHART_SUFFIXES", "INSTALL_HINT", "require_matplotlib", "check_chart_path", "pyplot", "write_figure"]

CHART_SUFFIXES = (".png", ".svg", ".html", ".htm")
INSTALL_HINT = "pip install 'regionscan[charts]'"


def require_matplotlib(what: str) -> None:
    """Raise :class:`InvalidArgument` naming ``what`` (``--chart``, ``to_png``) when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401 - importing is the check: a broken install fails here too
    except ImportError:
        raise InvalidArgument(f"{what}: charts are drawn with matplotlib, which is not installed ({INSTALL_HINT})") \
            from None


def check_chart_path(path: str, what: str) -> None:
    """``path`` ends in a chart suffix and matplotlib is there to draw it."""
    if not path.lower().endswith(CHART_SUFFIXES):
        raise InvalidArgument(f"{what} must name a .png, .svg or .html file, got {path!r}")
    require_matplotlib(what)


def pyplot(what: str) -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend (no display is needed, or wanted)."""
    require_matplotlib(what)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _svg(fig: Any) -> str:
    import matplotlib

    out = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "regionscan"}):
        fig.savefig(out, format="svg", metadata={"Date": None})  # the same figure, the same bytes
    return out.getvalue()


def write_figure(fig: Any, path: str, page: Callable[[str], str] | None = None) -> str | None:
    """Write ``fig`` to ``path`` by its suffix and close it; for HTML, ``page(svg)`` builds the page.

    Returns the text written (SVG or HTML), None for a PNG.
    """
    import matplotlib.pyplot as plt

    lower = path.lower()
    try:
        if lower.endswith(".png"):
            fig.savefig(path, format="png")
            return None
        svg = _svg(fig)
        if lower.endswith(".svg"):
            text = svg
        elif lower.endswith((".html", ".htm")):
            inline = svg[svg.index("<svg"):]  # the XML prolog and doctype belong to a file, not a page
            text = page(inline) if page is not None else (
                "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head><body>" + inline + "</body></html>\n")
        else:
            raise InvalidArgument(f"a chart must be a .png, .svg or .html file, got {path!r}")
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
        return text
    finally:
        plt.close(fig)
