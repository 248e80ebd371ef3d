"""The report's charts: small matplotlib SVGs embedded as data URIs, so the HTML stays one offline file.

Figures are drawn on the SVG canvas directly (no pyplot state); text is drawn as paths, so a chart looks
the same without the fonts. Only charts whose data the model holds, and that compare at least two
things, are drawn; timings are labelled host timings unless they were measured on Trainium.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass
from typing import Any, Callable

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

DPI = 100
SEVERITY_COLORS = {"ok": "#2e7d32", "info": "#1f6fb2", "warn": "#c77700", "blocker": "#c62828"}
NATIVE_COLOR, OTHER_COLOR, NEUTRAL_COLOR = "#1f6fb2", "#c77700", "#6b7280"
_TOP_OPS = 12
# Figures are drawn 460 px wide with 10 pt text (9 pt bar labels, 12.5 px): a phone column of ~340 px
# shrinks them by at most ~0.74, so the smallest text stays above 9 px.
FIGURE_WIDTH_IN = 4.6
_STYLE = {"font.size": 10, "axes.spines.top": False, "axes.spines.right": False, "svg.fonttype": "path",
          "svg.hashsalt": "neuronkit"}  # a fixed salt: the same data gives the same SVG
_HOST = " (host timing)"


@dataclass(frozen=True)
class Chart:
    """A rendered chart: what it shows (`title`, `alt`), the SVG as a `data:` URI and its pixel size."""

    name: str
    title: str
    alt: str
    uri: str
    width: int
    height: int


def render_charts(data: dict[str, Any], host_timing: bool = True) -> list[Chart]:
    """Draw every chart whose data is present and has at least two bars, in report order; with
    `host_timing` (any run but one on Trainium) the timing charts say their times are host timings."""
    charts = []
    for name, (title, draw, timing) in _CHARTS.items():
        if data.get(name) and (not isinstance(data[name], list) or len(data[name]) > 1):
            with matplotlib.rc_context(_STYLE):
                fig, alt = draw(data[name])
                width, height = (round(inches * DPI) for inches in fig.get_size_inches())
                suffix = _HOST if timing and host_timing else ""
                charts.append(Chart(name, title + suffix, alt + suffix, _data_uri(fig), width, height))
    return charts


def _axes(bars: int) -> tuple[Figure, Axes]:
    """A FIGURE_WIDTH_IN wide figure whose height follows the number of bars, so bars keep a readable
    thickness."""
    fig = Figure(figsize=(FIGURE_WIDTH_IN, min(4.6, max(1.9, 0.9 + 0.3 * bars))), dpi=DPI, layout="constrained")
    return fig, fig.add_subplot()


def _data_uri(fig: Figure) -> str:
    buffer = io.BytesIO()
    FigureCanvasSVG(fig).print_svg(buffer, metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _barh(ax: Axes, labels: list[str], values: list[float], colors: list[str], unit: str) -> None:
    """Horizontal bars, largest on top, each labelled with its value."""
    y = list(range(len(labels)))[::-1]
    bars = ax.barh(y, values, color=colors, height=0.65)
    ax.set_yticks(y, [_short(label) for label in labels], parse_math=False)  # names are data, not mathtext
    ax.bar_label(bars, [f"{v:,.4g}{unit}" for v in values], padding=3, fontsize=9)
    ax.margins(x=0.15)


def _short(label: str, width: int = 30) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def _op_categories(rows: list[dict[str, Any]]) -> tuple[Figure, str]:
    rows = sorted(rows, key=lambda r: -r["ops"])
    fig, ax = _axes(len(rows))
    _barh(ax, [r["category"] for r in rows], [r["ops"] for r in rows],
          [SEVERITY_COLORS[r["severity"]] for r in rows], "")
    ax.set_xlabel("distinct ops (colour = severity)")
    return fig, "Distinct ops per category: " + ", ".join(f"{r['category']} {r['ops']}" for r in rows)


def _top_ops(rows: list[dict[str, Any]]) -> tuple[Figure, str]:
    rows = sorted(rows, key=lambda r: -r["device_time_us"])[:_TOP_OPS]
    fig, ax = _axes(len(rows))
    _barh(ax, [r["name"] for r in rows], [r["device_time_us"] for r in rows],
          [NATIVE_COLOR if r["classification"] == "native" else OTHER_COLOR for r in rows], " µs")
    ax.set_xlabel("device time, µs (blue = native, amber = fallback or other)")
    times = ", ".join(f"{r['name']} {r['device_time_us']:,.4g} µs" for r in rows)
    return fig, f"Top ops by device time: {times}"


def _step_time(data: dict[str, float]) -> tuple[Figure, str]:
    fig, ax = _axes(2)
    eager, compiled = data["eager_step_ms"], data["compiled_step_ms"]
    _barh(ax, ["eager", "torch.compile"], [eager, compiled], [NEUTRAL_COLOR, NATIVE_COLOR], " ms")
    speedup = eager / compiled if compiled else float("nan")
    ax.set_xlabel(f"forward time, ms, median (speed-up {speedup:.2f}×)")
    return fig, f"Eager forward {eager:.4g} ms, compiled forward {compiled:.4g} ms, speed-up {speedup:.2f}×"


def _parity(rows: list[dict[str, Any]]) -> tuple[Figure, str]:
    """Each output's largest error on a log axis; an exact match (0) has no bar, only the word "exact" at
    the axis' left edge (a log axis has no zero, so a bar would claim some tiny error)."""
    fig, ax = _axes(len(rows))
    labels = [f"{r['run']}: {r.get('name', '?')}" for r in rows]
    y = list(range(len(rows)))[::-1]
    errors = [float(r["max_abs_err"]) for r in rows]
    drawn = [(yy, err, r) for yy, err, r in zip(y, errors, rows) if err > 0]
    tolerances = [(yy, r["atol"]) for yy, r in zip(y, rows)
                  if isinstance(r.get("atol"), (int, float)) and r["atol"] > 0]
    positive = [err for _, err, _ in drawn] + [t for _, t in tolerances]
    left = 10 ** (math.floor(math.log10(min(positive))) - 1) if positive else 1e-8
    ax.barh([yy for yy, _, _ in drawn], [err - left for _, err, _ in drawn], left=left, height=0.65,
            color=[SEVERITY_COLORS["ok" if r.get("ok") else "blocker"] for _, _, r in drawn])
    for yy, err in zip(y, errors):
        if err == 0:
            ax.annotate("exact", (0, yy), xycoords=("axes fraction", "data"), xytext=(3, 0),
                        textcoords="offset points", va="center", fontsize=9)
    ax.scatter([t for _, t in tolerances], [yy for yy, _ in tolerances], marker="|", s=300, color="black",
               zorder=3)
    ax.set_xscale("log")
    ax.set_xlim(left=left)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(y, [_short(label) for label in labels], parse_math=False)
    ax.set_xlabel("max abs error, log scale (green = within tolerance, red = not; | = atol)")
    return fig, "Parity: " + "; ".join(
        f"{label} " + ("exact" if err == 0 else f"max abs err {err:.2e}") + f" ({'ok' if r.get('ok') else 'not ok'})"
        for label, r, err in zip(labels, rows, errors))


# name → (title, draw, whether it shows timings)
_CHARTS: dict[str, tuple[str, Callable[[Any], tuple[Figure, str]], bool]] = {
    "op_categories": ("Op categories", _op_categories, False),
    "top_ops": ("Top ops by device time", _top_ops, True),
    "step_time": ("Eager vs compiled forward time", _step_time, True),
    "parity": ("Parity errors against the CPU reference (eager and compiled)", _parity, False),
}
