"""What a report plot shows, for tests: the figures :mod:`connmgr.bench.report.plots` draws (caught
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
from connmgr.bench.report import plots
from matplotlib.colors import to_rgb
from matplotlib.image import imread

DPI = 100
"""The resolution :mod:`connmgr.bench.report.plots` saves at."""

MIN_PIXELS = 20
"""Pixels of a series' exact colour that count as drawn: a 6-pixel marker alone has more;
anti-aliased edges blend into other colours and do not count."""


@contextmanager
def figures_drawn() -> Iterator[dict[str, Any]]:
    """The figures :mod:`connmgr.bench.report.plots` saves meanwhile, by file stem
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
