"""``{benchmark-chart} path.json``: a horizontal bar chart drawn as inline SVG when the
documentation is built, from a small data file, so the figures live in one place and
the chart needs neither network nor plotting library.

The file holds ``title``, ``runs`` (the names of the bars in each group),
``workloads``: each with ``name``, ``ratios`` (one per run) and an optional
``target``, drawn as a tick across its group; and an optional ``unit`` for the values
(default: a ratio, "x").
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

BAR_HEIGHT = 11
GROUP_GAP = 14
LABEL_WIDTH = 250
PLOT_WIDTH = 420
COLOURS = ("#4c72b0", "#55a868", "#c44e52", "#8172b2")
TIMES = "\u00d7"  # the multiplication sign of "1.5x"


def tick_step(scale_max: float, most: int = 10) -> float:
    """Half units up to 3, else 1, 2 or 5 times a power of ten: at most ``most`` ticks."""
    if scale_max <= 3:
        return 0.5
    step = 1.0
    while scale_max / step > most:
        for factor in (2.0, 2.5, 2.0):  # 1 -> 2 -> 5 -> 10
            step *= factor
            if scale_max / step <= most:
                break
    return step


def render_svg(data: dict[str, Any]) -> str:
    """The chart of ``data`` as an SVG document."""
    unit: str = data.get("unit", TIMES)
    runs: list[str] = data["runs"]
    workloads: list[dict[str, Any]] = data["workloads"]
    largest = max(max(w["ratios"]) for w in workloads)
    scale_max = float(int(largest) + 1)
    group_height = BAR_HEIGHT * len(runs) + GROUP_GAP
    top = 40
    height = top + group_height * len(workloads) + 30
    width = LABEL_WIDTH + PLOT_WIDTH + 60

    def x_of(value: float) -> float:
        return LABEL_WIDTH + PLOT_WIDTH * value / scale_max

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(data["title"])}" font-family="sans-serif" '
        'font-size="11">',
        f'<text x="{LABEL_WIDTH}" y="14" font-size="12" font-weight="bold">'
        f"{escape(data['title'])}</text>",
    ]
    legend_x = LABEL_WIDTH
    for i, run in enumerate(runs):
        parts.append(
            f'<rect x="{legend_x}" y="22" width="10" height="10" '
            f'fill="{COLOURS[i % len(COLOURS)]}"/>'
            f'<text x="{legend_x + 14}" y="31">{escape(run)}</text>'
        )
        legend_x += max(90, 14 + 7 * len(run) + 12)
    tick = 0.0
    while tick <= scale_max:
        x = x_of(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 26}" '
            'stroke="#ccc" stroke-width="0.5"/>'
            f'<text x="{x:.1f}" y="{height - 12}" text-anchor="middle">{tick:g}{unit}</text>'
        )
        # Ticks labelled with a unit are wider: half as many fit.
        tick += tick_step(scale_max, 10 if unit == TIMES else 5)
    for g, workload in enumerate(workloads):
        y0 = top + g * group_height
        label_y = y0 + BAR_HEIGHT * len(runs) / 2 + 4
        parts.append(
            f'<text x="{LABEL_WIDTH - 8}" y="{label_y:.1f}" text-anchor="end">'
            f"{escape(workload['name'])}</text>"
        )
        # Labels start past the target's tick, so the tick never crosses one.
        target_x = x_of(float(workload["target"])) if "target" in workload else LABEL_WIDTH
        for i, ratio in enumerate(workload["ratios"]):
            y = y0 + i * BAR_HEIGHT
            label_x = max(x_of(ratio), target_x) + 3
            parts.append(
                f'<rect x="{LABEL_WIDTH}" y="{y}" width="{x_of(ratio) - LABEL_WIDTH:.1f}" '
                f'height="{BAR_HEIGHT - 2}" fill="{COLOURS[i % len(COLOURS)]}">'
                f"<title>{escape(workload['name'])}, {escape(runs[i])}: {ratio:.2f}{unit}</title>"
                "</rect>"
                f'<text x="{label_x:.1f}" y="{y + BAR_HEIGHT - 3}" font-size="9">'
                f"{ratio:.2f}{unit}</text>"
            )
        if "target" in workload:
            x = x_of(float(workload["target"]))
            parts.append(
                f'<line x1="{x:.1f}" y1="{y0 - 2}" x2="{x:.1f}" '
                f'y2="{y0 + BAR_HEIGHT * len(runs)}" stroke="#222" stroke-width="2" '
                f'stroke-dasharray="3,2"><title>target {workload["target"]}{unit}</title></line>'
            )
    parts.append("</svg>")
    return "".join(parts)


class BenchmarkChart(SphinxDirective):
    """The directive: one argument, the data file relative to the page."""

    required_arguments = 1
    has_content = False
    option_spec: ClassVar[dict[str, Any]] = {}

    def run(self) -> list[nodes.Node]:
        relative, absolute = self.env.relfn2path(self.arguments[0])
        self.env.note_dependency(relative)
        data = json.loads(Path(absolute).read_text(encoding="utf-8"))
        svg = render_svg(data)
        return [nodes.raw("", f'<div class="benchmark-chart">{svg}</div>', format="html")]


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directive."""
    app.add_directive("benchmark-chart", BenchmarkChart)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
