"""What a report plot shows, for tests: the figures :mod:`connmgr_evidence.bench.report.plots` draws
(caught
as they are saved) and the PNG files they become (read back with matplotlib).

A plot test checks values, not that a file exists: each series a figure draws holds the
points its table holds, and the PNG has the figure's pixel size and the colour of every
series it must show (a blank or empty plot has none of them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from connmgr_evidence.bench.report import plots

DPI = 100
"""The resolution :mod:`connmgr_evidence.bench.report.plots` saves at."""

MIN_PIXELS = 20
"""Pixels of a series' exact colour that count as drawn: a 6-pixel marker alone has more;
anti-aliased edges blend into other colours and do not count."""


@contextmanager
def figures_drawn() -> Iterator[dict[str, Any]]:
    """The figures :mod:`connmgr_evidence.bench.report.plots` saves meanwhile, by file stem
    (``linger.png`` → ``"linger"``)."""
    drawn: dict[str, Any] = {}
    save = plots.save

    def keep(fig: Any, path: Path) -> Path:
        drawn[path.stem] = fig
        return save(fig, path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "save", keep)
        yield drawn


def colour_pixels(image: Any, colour: str) -> int:
    """Pixels of ``image`` (as :func:`matplotlib.image.imread` reads a PNG) that are exactly
    ``colour`` (to within rounding to 8 bits)."""
    rgb = np.array(to_rgb(colour))
    return int(np.all(np.abs(image[..., :3] - rgb) < 0.5 / 255, axis=-1).sum())


def check_png(path: Path, fig: Any, colours: Iterable[str], absent: Iterable[str] = ()) -> None:
    """``path`` is ``fig`` drawn at :data:`DPI`, and shows each of ``colours`` (and none of
    ``absent``)."""
    image = imread(path)
    width, height = fig.get_size_inches() * DPI
    assert image.shape[:2] == (round(height), round(width)), path
    for colour in colours:
        assert colour_pixels(image, colour) >= MIN_PIXELS, (path.name, colour)
    for colour in absent:
        assert colour_pixels(image, colour) == 0, (path.name, colour)


def visible_axes(fig: Any) -> list[Any]:
    return [ax for ax in fig.axes if ax.get_visible()]


def labelled(ax: Any) -> dict[str, tuple[list[float], list[float]]]:
    """The labelled lines of ``ax`` (those in its legend): label -> (xs, ys)."""
    return {
        str(line.get_label()): (
            [float(x) for x in line.get_xdata()],
            [float(y) for y in line.get_ydata()],
        )
        for line in ax.get_lines()
        if not str(line.get_label()).startswith("_")
    }


# What makes a plot legible at a glance, checked on the figure as drawn. Each function
# returns what it found wrong (empty: nothing), so a failing assert names it.

FLATTENING = 20.0
"""On a linear y axis, a value in view more than this many times the panel's (low) median
value flattens the rest of the panel to a few pixels."""

HEADROOM = 1.1
"""A bar in view needs the axis to reach this many times its top (matplotlib's default
margin is 1.05: the tallest bar then touches the frame)."""


def drawn_renderer(fig: Any) -> Any:
    """A renderer ``fig`` has just been drawn with (its layout final, its ticks placed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _ticks_in_view(axis: Any) -> Iterator[Any]:
    """The tick labels ``axis`` draws: visible, not empty, at a tick inside the view."""
    lo, hi = sorted(axis.get_view_interval())
    slack = 1e-9 * max(abs(lo), abs(hi), 1.0)
    for minor in (False, True):
        locs = axis.get_minorticklocs() if minor else axis.get_majorticklocs()
        ticks = axis.get_minor_ticks(len(locs)) if minor else axis.get_major_ticks(len(locs))
        for loc, tick in zip(locs, ticks, strict=True):
            if lo - slack <= loc <= hi + slack:
                for label in (tick.label1, tick.label2):
                    if label.get_visible() and label.get_text().strip():
                        yield label


def legends(fig: Any) -> list[Any]:
    """The figure's legends and those of its visible axes."""
    found = list(fig.legends)
    found += [ax.get_legend() for ax in visible_axes(fig) if ax.get_legend() is not None]
    return found


def drawn_texts(fig: Any) -> list[Any]:
    """Every text ``fig`` draws: suptitle, titles, axis and tick labels, annotations and
    legend entries (visible and not empty)."""
    from matplotlib.text import Text

    texts: list[Any] = list(fig.texts)  # the suptitle among them
    for ax in visible_axes(fig):
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        texts += ax.texts
        for axis in (ax.xaxis, ax.yaxis):
            texts += _ticks_in_view(axis)
            texts.append(axis.get_offset_text())
    for legend in legends(fig):
        texts += legend.get_texts()
        texts.append(legend.get_title())
    unique = {id(t): t for t in texts}.values()
    return [t for t in unique if isinstance(t, Text) and t.get_visible() and t.get_text().strip()]


def _corners(text: Any, renderer: Any) -> np.ndarray:
    """The four corners, in pixels, of the rectangle ``text`` covers (turned with it: a
    rotated label's axis-aligned box is larger than what it covers)."""
    box = text.get_window_extent(renderer)
    angle = np.deg2rad(text.get_rotation() % 180.0)
    c, s = abs(np.cos(angle)), abs(np.sin(angle))
    if abs(c - s) < 1e-3:  # 45 degrees: the box alone cannot be unturned
        w, h = box.width, box.height
        angle = 0.0
    else:
        # box.width = w c + h s and box.height = w s + h c; solve for the text's own w, h.
        det = c * c - s * s
        w = (box.width * c - box.height * s) / det
        h = (box.height * c - box.width * s) / det
    half = np.array([[-w, -h], [w, -h], [w, h], [-w, h]]) / 2.0
    turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    centre = np.array([(box.x0 + box.x1) / 2.0, (box.y0 + box.y1) / 2.0])
    corners: np.ndarray = half @ turn.T + centre
    return corners


def _separated(a: np.ndarray, b: np.ndarray, gap: float = 1.0) -> bool:
    """Two convex quadrilaterals (corners in order) are apart by more than ``gap`` pixels
    along some edge normal of either (the separating axis test)."""
    for poly in (a, b):
        for i in range(4):
            edge = poly[(i + 1) % 4] - poly[i]
            norm = np.hypot(*edge)
            if norm == 0:
                continue
            normal = np.array([-edge[1], edge[0]]) / norm
            pa, pb = a @ normal, b @ normal
            if pa.max() <= pb.min() + gap or pb.max() <= pa.min() + gap:
                return True
    return False


def overlapping_texts(fig: Any) -> list[tuple[str, str]]:
    """Pairs of drawn texts that print over each other (by more than a pixel)."""
    renderer = drawn_renderer(fig)
    texts = drawn_texts(fig)
    shapes = [_corners(t, renderer) for t in texts]
    return [
        (texts[i].get_text(), texts[j].get_text())
        for i in range(len(texts))
        for j in range(i + 1, len(texts))
        if not _separated(shapes[i], shapes[j])
    ]


def legends_over_data(fig: Any) -> list[tuple[str, str]]:
    """(legend entries, axes title) for every legend drawn over a visible axes' data area."""
    renderer = drawn_renderer(fig)
    found = []
    for legend in legends(fig):
        box = legend.get_window_extent(renderer)
        for ax in visible_axes(fig):
            area = ax.get_window_extent(renderer)
            if box.overlaps(area):
                entries = ", ".join(t.get_text() for t in legend.get_texts())
                found.append((entries, ax.get_title()))
    return found


def repeated_labels(fig: Any) -> list[str]:
    """Tick labels repeated on one axis, and legend entries repeated in one legend."""
    drawn_renderer(fig)
    found = []
    groups = [[t.get_text() for t in legend.get_texts()] for legend in legends(fig)]
    for ax in visible_axes(fig):
        groups += [[t.get_text() for t in _ticks_in_view(a)] for a in (ax.xaxis, ax.yaxis)]
    for labels in groups:
        found += sorted({label for label in labels if labels.count(label) > 1})
    return found


def bar_tops(ax: Any) -> list[float]:
    """The top of each bar (of each stack of bars at one x) drawn on ``ax``."""
    tops: dict[float, float] = {}
    for container in ax.containers:
        for patch in getattr(container, "patches", ()):
            x = round(float(patch.get_x() + patch.get_width() / 2.0), 9)
            top = float(patch.get_y() + patch.get_height())
            tops[x] = max(tops.get(x, top), top)
    return list(tops.values())


def plotted_values(ax: Any) -> list[float]:
    """The y values of ``ax``: its lines' finite points (those in data coordinates) and the
    tops of its bars."""
    values = [
        float(y)
        for line in ax.get_lines()
        if line.get_transform().contains_branch(ax.transData)
        for y in np.asarray(line.get_ydata(), dtype=float)
        if np.isfinite(y)
    ]
    return values + bar_tops(ax)


def flattened(ax: Any) -> list[float]:
    """On a linear y axis, the values in view that are more than :data:`FLATTENING` times the
    panel's low median of positive values in view (they squash the rest to the floor)."""
    if ax.get_yscale() != "linear":
        return []
    lo, hi = sorted(ax.get_ylim())
    shown = sorted(v for v in plotted_values(ax) if v > 0 and lo <= v <= hi)
    if not shown:
        return []
    low_median = shown[(len(shown) - 1) // 2]
    return [v for v in shown if v > FLATTENING * low_median]


def crowded_bars(ax: Any) -> list[float]:
    """Bar tops with less than :data:`HEADROOM` above them. A bar cut off by the axis (its
    top above the view) is allowed when a text on the axes gives its height."""
    top = max(ax.get_ylim())
    said = " ".join(t.get_text() for t in ax.texts)
    found = []
    for bar in bar_tops(ax):
        if bar > top:
            if f"{bar:,.0f}" not in said:
                found.append(bar)
        elif bar > 0 and bar * HEADROOM > top:
            found.append(bar)
    return found


def colour_in_axes(path: Path, fig: Any, ax: Any, colour: str) -> int:
    """Pixels of ``colour`` in ``ax``'s data area of the PNG ``fig`` was saved as (the legend
    aside: a series that shows only in the legend has none)."""
    image = imread(path)
    box = ax.get_window_extent(drawn_renderer(fig))
    height = image.shape[0]
    rows = slice(max(0, round(height - box.y1)), round(height - box.y0))
    cols = slice(max(0, round(box.x0)), round(box.x1))
    return colour_pixels(image[rows, cols], colour)
