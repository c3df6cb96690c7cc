"""Charts as inline SVG, drawn by matplotlib: the report page and notebooks use the same
ones (:mod:`markerstore.render.figures` says which chart shows what).

Why matplotlib's SVG: one ``<svg>`` element per chart, written into the page, needs no
script, no font and no request to open (a file, an S3 console download, an e-mail
attachment), prints, and stays small (text is kept as text). Each chart carries a
``<title>`` and a ``<desc>`` (read by screen readers: ``role="img"``), axis labels, and
the Okabe-Ito palette (told apart with any colour vision). Text, axes and grid are drawn
in ``currentColor`` and a CSS variable, so the chart follows the page's light or dark
colours (``prefers-color-scheme``) and a notebook's theme.

Each bar is an SVG group with the id ``mark-<chart>-<series>-<i>``, each event line
``event-<chart>-<i>``, so a test counts what was drawn. matplotlib is imported when a
chart is drawn (``pip install 'markerstore[report]'``).
"""

from __future__ import annotations

import html
import io
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from markerstore.render.text import visible

# Okabe & Ito (2008), "Color Universal Design": distinguishable with any colour vision.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
EVENT_COLORS = {"rolled back": "#D55E00", "in flight": "#CC79A7", "corrupt": "#E69F00",
                "rolled forward": "#009E73"}
# Drawn in these, then rewritten so the page's colours apply.
_FOREGROUND = "#010203"
_GRID = "#040506"
_REWRITE = {_FOREGROUND: "currentColor", _GRID: "var(--ms-grid, #8884)"}
MAX_TICKS = 8
LABEL_CHARS = 32  # a legend name or category label is cut to this (in full in the alt text)
WIDTH = 7.6  # inches (matplotlib's unit; the page scales the SVG to its width)
_ID = re.compile(r"^[a-z][a-z0-9-]*$")


@dataclass
class Series:
    name: str
    values: Sequence[float | None]
    color: str | None = None


@dataclass
class Chart:
    """One bar chart: `labels` on the category axis, one bar per label and series.

    `horizontal` draws the categories down the side (long names: partitions). `stacked`
    piles the series. `events` are vertical lines (position, kind, label) between bars.
    `description` is the alt text: what the chart shows, with its main numbers."""

    id: str
    title: str
    labels: Sequence[str]
    series: Sequence[Series]
    value_label: str
    category_label: str = ""
    description: str = ""
    horizontal: bool = False
    stacked: bool = False
    percent: bool = False
    floor: float | None = None  # where the value axis starts (percent charts end at 100%)
    events: Sequence[tuple[float, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not _ID.match(self.id):
            raise ValueError(f"chart id {self.id!r}: lower-case letters, digits and dashes")

    @property
    def marks(self) -> int:
        """Bars drawn: one per label and series."""
        return len(self.labels) * len(self.series)


def short(text: str, limit: int = LABEL_CHARS) -> str:
    """`text` made visible and cut to `limit` characters (an ellipsis at the cut): the
    layout holds any name."""
    shown = visible(text)
    return shown if len(shown) <= limit else shown[:limit - 1] + "…"


def alt_text(chart: Chart) -> str:
    """The chart's description, then the names it shows cut (legend and categories) in
    full."""
    names = [s.name for s in chart.series if len(visible(s.name)) > LABEL_CHARS] + \
        [label for label in chart.labels if len(visible(label)) > LABEL_CHARS]
    full = f"In full: {'; '.join(visible(n) for n in names)}." if names else ""
    return " ".join(t for t in (visible(chart.description), full) if t)


def _rc(chart: Chart) -> dict[str, Any]:
    return {"svg.fonttype": "none", "svg.hashsalt": chart.id, "font.size": 9,
            "font.family": "DejaVu Sans",
            "text.color": _FOREGROUND, "axes.labelcolor": _FOREGROUND,
            "axes.edgecolor": _FOREGROUND, "xtick.color": _FOREGROUND,
            "ytick.color": _FOREGROUND, "axes.titlesize": 10, "axes.titleweight": "bold",
            "legend.frameon": False, "legend.fontsize": 8, "axes.spines.top": False,
            "axes.spines.right": False, "grid.color": _GRID, "grid.linewidth": 0.5,
            "text.parse_math": False, "path.simplify": True}


def _number(value: float, _pos: Any = None) -> str:
    """Axis numbers short: 950, 12k, 3.4M."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def _percent(value: float, _pos: Any = None) -> str:
    return f"{value * 100:.4g}%"


def _ticks(count: int) -> list[int]:
    """At most MAX_TICKS evenly spread positions of `count` categories."""
    if count <= MAX_TICKS:
        return list(range(count))
    step = (count - 1) / (MAX_TICKS - 1)
    return sorted({round(i * step) for i in range(MAX_TICKS)})


def _draw(chart: Chart, ax: Any) -> None:
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    count = len(chart.labels)
    positions = list(range(count))
    stacked_base = [0.0] * count
    width = 0.8 if chart.stacked or len(chart.series) == 1 else 0.8 / len(chart.series)
    for s_index, series in enumerate(chart.series):
        values = [0.0 if v is None else float(v) for v in series.values]
        offset = 0.0 if chart.stacked else (s_index - (len(chart.series) - 1) / 2) * width
        where = [p + offset for p in positions]
        color = series.color or PALETTE[s_index % len(PALETTE)]
        draw = ax.barh if chart.horizontal else ax.bar
        base_key = "left" if chart.horizontal else "bottom"
        bars = draw(where, values, width, **{base_key: list(stacked_base)}, color=color,
                    label=short(series.name), linewidth=0)
        for i, bar in enumerate(bars):
            bar.set_gid(f"mark-{chart.id}-{s_index}-{i}")
        if chart.stacked:
            stacked_base = [b + v for b, v in zip(stacked_base, values)]
    for e_index, (position, kind, _label) in enumerate(chart.events):
        line = ax.axvline(position - 0.5, color=EVENT_COLORS.get(kind, PALETTE[5]),
                          linestyle=(0, (3, 2)), linewidth=1)
        line.set_gid(f"event-{chart.id}-{e_index}")
    value_axis, category_axis = (ax.xaxis, ax.yaxis) if chart.horizontal else \
        (ax.yaxis, ax.xaxis)
    value_axis.set_major_formatter(FuncFormatter(_percent if chart.percent else _number))
    ticks = positions if chart.horizontal else _ticks(count)
    category_axis.set_ticks(ticks, [short(chart.labels[i]) for i in ticks])
    if chart.horizontal:
        ax.invert_yaxis()  # the first label on top
        ax.set_xlabel(chart.value_label)
        ax.set_ylabel(chart.category_label)
    else:
        ax.set_ylabel(chart.value_label)
        ax.set_xlabel(chart.category_label)
        ax.set_xlim(-0.6, max(count, 1) - 0.4)
    top = max((v or 0 for s in chart.series for v in s.values), default=0)
    limits = ax.set_xlim if chart.horizontal else ax.set_ylim
    if chart.floor is not None:
        limits(chart.floor, 1.0)
    else:
        limits(0, None if top > 0 else 1)
    if not chart.percent:
        counts = all(float(v or 0).is_integer() for s in chart.series for v in s.values)
        value_axis.set_major_locator(MaxNLocator(nbins=5, integer=counts, min_n_ticks=3))
    ax.grid(True, axis="x" if chart.horizontal else "y")
    ax.set_axisbelow(True)
    ax.set_title(visible(chart.title), loc="left")
    kinds = sorted({kind for _, kind, _ in chart.events})
    if len(chart.series) > 1 or kinds:
        from matplotlib.lines import Line2D

        handles, names = ax.get_legend_handles_labels()
        handles += [Line2D([], [], color=EVENT_COLORS.get(k, PALETTE[5]),
                           linestyle=(0, (3, 2))) for k in kinds]
        ax.legend(handles, names + kinds, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _margins(chart: Chart, figure: Any, height: float) -> None:
    """Fixed margins (a layout engine draws each chart twice): room for the tick labels,
    the axis labels, the title and a legend on the right."""
    legend = len(chart.series) > 1 or bool(chart.events)
    names = [len(short(s.name)) for s in chart.series] + [len(k) for _, k, _ in chart.events]
    right = 1 - (0.03 + 0.0095 * max(names)) * 7.6 / WIDTH if legend else 0.98
    if chart.horizontal:
        longest = max((len(short(label)) for label in chart.labels), default=4)
        left = min(0.5, (0.35 + 0.075 * min(longest, 40)) / WIDTH)
    else:
        left = 0.75 / WIDTH
    figure.subplots_adjust(left=left, right=right, top=1 - 0.42 / height,
                           bottom=0.55 / height)


def svg(chart: Chart) -> str:
    """The chart as one ``<svg>`` element (no XML prolog), with its title and alt text."""
    import matplotlib
    from matplotlib.figure import Figure

    height = (1.0 + 0.22 * len(chart.labels)) if chart.horizontal else 2.6
    with matplotlib.rc_context(_rc(chart)):  # type: ignore[arg-type]
        figure = Figure(figsize=(WIDTH, max(height, 1.6)))
        _draw(chart, figure.subplots())
        _margins(chart, figure, max(height, 1.6))
        out = io.StringIO()
        figure.savefig(out, format="svg", transparent=True,
                       metadata={"Date": None, "Creator": None, "Format": None,
                                 "Type": None})
    text = out.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    for color, replacement in _REWRITE.items():
        text = text.replace(color, replacement)
    title_id, desc_id = f"{chart.id}-title", f"{chart.id}-desc"
    root_end = text.index(">") + 1
    root = text[:root_end].replace(
        "<svg ", f'<svg role="img" aria-labelledby="{title_id} {desc_id}" class="ms-svg" ', 1)
    root = re.sub(r' width="[^"]*" height="[^"]*"', "", root, count=1)
    return (f"{root}<title id=\"{title_id}\">{html.escape(visible(chart.title))}</title>"
            f"<desc id=\"{desc_id}\">"
            f"{html.escape(alt_text(chart))}</desc>"
            f"{text[root_end:]}")


def figure_html(chart: Chart) -> str:
    """The chart in a ``<figure>`` with its description as caption; ``data-marks`` says
    how many bars it draws."""
    return (f'<figure class="ms-chart" id="chart-{chart.id}" data-chart="{chart.id}" '
            f'data-marks="{chart.marks}" data-events="{len(chart.events)}">{svg(chart)}'
            f"<figcaption>{html.escape(alt_text(chart))}"
            "</figcaption></figure>")


def available() -> bool:
    """Whether charts can be drawn here (matplotlib installed)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def charts_html(charts: Sequence[Chart | None], *, unique: bool = False) -> str:
    """The charts that exist (None is no chart) as figures; nothing where matplotlib is
    not installed. `unique` gives each chart's ids a random suffix (a notebook shows many
    outputs in one page)."""
    drawn = [c for c in charts if c is not None]
    if not drawn or not available():
        return ""
    if unique:
        token = secrets.token_hex(3)
        drawn = [replace(c, id=f"{c.id}-{token}") for c in drawn]
    return "".join(figure_html(c) for c in drawn)
