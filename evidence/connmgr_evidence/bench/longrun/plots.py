"""The long run's plots, drawn headless (matplotlib's Agg canvas, no pyplot state): sockets
over time at each broker and per client kind, stock against patched, and the handshakes as
they accumulate, with the rolling restart shaded and the port move marked on every panel.
Each function writes one PNG and returns its path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from connmgr_evidence.bench.longrun.drive import PhaseEvent
from connmgr_evidence.bench.report import plots as bench_plots

__all__ = ["VARIANT_COLOURS", "handshakes_over_time", "sockets_by_broker", "sockets_by_client"]

VARIANT_COLOURS: Final = {"stock": "tab:red", "patched": "tab:green"}
BROKER_COLOUR: Final = "tab:gray"
Series = Sequence[tuple[float, float]]


def _style(variant: str) -> dict[str, Any]:
    """Stock wide and pale, patched narrow on top: where they are equal both stay visible."""
    colour = VARIANT_COLOURS.get(variant, "tab:blue")
    if variant == "stock":
        return {"color": colour, "lw": 3.0, "alpha": 0.55}
    return {"color": colour, "lw": 1.3}


def _mark_phases(ax: Any, events: Sequence[PhaseEvent]) -> None:
    """Shade each broker's time down in the rolling restart, and draw the move as a band
    from its start to its end."""
    down: dict[int, float] = {}
    for e in events:
        if e.what == "broker-stopped" and e.broker is not None:
            down[e.broker] = e.t_s
        elif e.what == "broker-started" and e.broker in down:
            ax.axvspan(down.pop(e.broker), e.t_s, color="tab:orange", alpha=0.15, lw=0)
    begin = next((e.t_s for e in events if e.what == "move-begin"), None)
    end = next((e.t_s for e in events if e.what == "move-end"), None)
    if begin is not None:
        ax.axvspan(begin, end if end is not None else begin, color="tab:purple", alpha=0.2, lw=0)
        ax.axvline(begin, color="tab:purple", lw=1, ls=":")


def _figure(panels: int, width: float = 6.0, height: float = 3.2) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height * panels))
    axes = fig.subplots(panels, 1, squeeze=False, sharex=True).ravel().tolist()
    return fig, axes


def _steps(ax: Any, series: Series, **kwargs: Any) -> None:
    if series:
        ax.step([t for t, _ in series], [n for _, n in series], where="post", **kwargs)


def sockets_by_broker(
    series: Mapping[str, Mapping[int, Series]],
    broker_counts: Mapping[int, Sequence[tuple[float, float | None]]],
    events: Sequence[PhaseEvent],
    path: Path,
) -> Path:
    """One panel per broker: the sockets each variant's clients held to it (the kernel;
    ``series`` is variant -> broker -> (t_s, sockets)) and the broker's own SASL_SSL
    connection count (JMX, both variants; gaps while it was down)."""
    brokers = sorted({b for per in series.values() for b in per} | set(broker_counts))
    fig, axes = _figure(len(brokers))
    for ax, broker in zip(axes, brokers, strict=True):
        for variant, per in series.items():
            _steps(ax, per.get(broker, []), label=f"{variant} (kernel)", **_style(variant))
        counts = broker_counts.get(broker, [])
        ax.plot(
            [t for t, _ in counts],
            [float("nan") if v is None else v for _, v in counts],
            color=BROKER_COLOUR,
            ls="--",
            lw=1,
            label="broker's count, both (JMX)",
        )
        _mark_phases(ax, events)
        ax.set_title(f"broker {broker}", fontsize=9)
        ax.set_ylabel("sockets")
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize=7, loc="upper left")
    axes[-1].set_xlabel(
        "seconds since the clients' launch (orange: a broker down; purple: the move)"
    )
    return bench_plots.save(fig, path)


def sockets_by_client(
    series: Mapping[str, Mapping[str, Series]], events: Sequence[PhaseEvent], path: Path
) -> Path:
    """One panel per client kind (``series`` is variant -> kind -> (t_s, sockets held to
    every broker by that kind's clients))."""
    kinds = list(dict.fromkeys(k for per in series.values() for k in per))
    fig, axes = _figure(len(kinds), height=2.4)
    for ax, kind in zip(axes, kinds, strict=True):
        for variant, per in series.items():
            _steps(ax, per.get(kind, []), label=variant, **_style(variant))
        _mark_phases(ax, events)
        ax.set_title(kind, fontsize=9)
        ax.set_ylabel("sockets")
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize=7, loc="upper left")
    axes[-1].set_xlabel("seconds since the clients' launch")
    return bench_plots.save(fig, path)


def handshakes_over_time(
    ready: Mapping[str, Sequence[float]],
    events: Sequence[PhaseEvent],
    path: Path,
    until_s: float,
) -> Path:
    """TLS+SASL handshakes completed so far, per variant (``ready`` is variant -> the
    instants its connections became ready), from 0 to ``until_s``."""
    fig, (ax,) = _figure(1, height=3.6)
    for variant, times in ready.items():
        ordered = sorted(times)
        _steps(
            ax,
            [(0.0, 0), *((t, i + 1) for i, t in enumerate(ordered)), (until_s, len(ordered))],
            label=variant,
            **_style(variant),
        )
    _mark_phases(ax, events)
    ax.set_ylabel("handshakes so far")
    ax.set_xlabel("seconds since the clients' launch")
    ax.legend(fontsize=7, loc="upper left")
    return bench_plots.save(fig, path)
