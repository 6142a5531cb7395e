"""The report's plots are legible at a glance: no text printed over another, legends beside
the data rather than on it, one huge value not flattening a panel, headroom above the bars,
and labels that tell their points apart. The rows have the shapes of a real report's (a
policy that dials every one of 10,000 brokers beside ones that dial four, seven real
clients with long names, the A/B points differing only in RTT)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from connmgr_evidence.bench.report import plots
from connmgr_evidence.bench.report.summaries import BrokerSockets, ClientTimings, RoleSockets
from connmgr_evidence.bench.results.schema import LIFE_COLUMNS, ROLES
from plotcheck import (
    check_png,
    colour_in_axes,
    crowded_bars,
    figures_drawn,
    flattened,
    labelled,
    legends_over_data,
    overlapping_texts,
    repeated_labels,
    visible_axes,
)

REAL = ["aiokafka", "java-2.1.0", "java-4.3.1", "java-4.3.1-patched", "java-4.4.0", "librdkafka"]
SIM = ["java-described", "java-today", "aiokafka-today"]
SIZES = [3, 10, 100, 1000, 10000]


def broker_rows() -> list[BrokerSockets]:
    """Sockets by cluster size: java-described dials every broker (10,000 at 10,000), the
    others a handful; the real clients at 3 and 1,000 brokers."""
    peaks: dict[str, list[float]] = {
        "proposed": [2, 2, 3, 3, 3],
        "java-today": [3, 4, 4, 4, 4],
        "aiokafka-today": [3, 6, 9, 10, 10],
        "java-described": [3, 10, 100, 1000, 10000],
    }
    rows = [
        BrokerSockets("sim", "big-producer", p, b, 1, 2, peak, peak, peak / 2)
        for p, series in peaks.items()
        for b, peak in zip(SIZES, series, strict=True)
    ]
    real = {"proposed": 4, "aiokafka": 6, "java-2.1.0": 7, "java-4.3.1": 6}
    real |= {"java-4.3.1-patched": 6, "java-4.4.0": 6, "librdkafka": 5}
    rows += [
        BrokerSockets("real", "big-consumer", p, b, 1, 1, peak, peak if b > 3 else 4, 4)
        for p, peak in real.items()
        for b in (3, 1000)
    ]
    return rows


def role_row(kind: str, scenario: str, policy: str, *opened: float) -> RoleSockets:
    return RoleSockets(
        kind,
        scenario,
        f"{scenario}[]",
        policy,
        3,
        1,
        dict(zip(ROLES, opened, strict=True)),
        dict(zip(ROLES, opened, strict=True)),
        dict.fromkeys(LIFE_COLUMNS),
    )


def role_rows() -> list[RoleSockets]:
    """Sockets opened by role: one panel where java-described opens 14,848 and the others
    four or five, one with the seven real clients, one where every bar is in range."""
    return [
        role_row("sim", "big-producer", "proposed", 1, 3, 0),
        role_row("sim", "big-producer", "aiokafka-today", 1, 3.5, 0),
        role_row("sim", "big-producer", "java-described", 2, 14846, 0),
        role_row("sim", "big-producer", "java-today", 1, 3, 0),
        role_row("sim", "idle-disabled", "proposed", 1, 3, 0),
        role_row("sim", "idle-disabled", "aiokafka-today", 1, 12, 0),
        role_row("sim", "idle-disabled", "java-described", 3, 30, 0),
        role_row("sim", "idle-disabled", "java-today", 1, 3, 0),
        role_row("real", "big-consumer", "proposed", 1, 3, 1),
        *(role_row("real", "big-consumer", c, 2, 3, 1) for c in REAL),
    ]


RTTS = (0.0, 5.0, 20.0)


def ab_point(rtt: float) -> str:
    return f"throughput-ab[brokers=3,linger_ms=5,records=10000,rtt_ms={rtt}]"


def throughput_rows() -> list[ClientTimings]:
    """Two A/B turns of each producer at each RTT: the points differ only in ``rtt_ms``,
    after the same 28 characters."""
    return [
        ClientTimings(
            "real",
            "throughput-ab",
            "producer",
            rtt,
            ab_point(rtt),
            policy,
            repeat,
            None,
            None,
            40_000.0 / (1 + rtt / 10) + 1000 * repeat + (500 if policy == "proposed" else 0),
        )
        for rtt in RTTS
        for policy in ("proposed", "aiokafka")
        for repeat in range(2)
    ]


def legible(fig: Any) -> None:
    """Nothing printed over anything, every legend beside the data, no repeated label."""
    assert overlapping_texts(fig) == []
    assert legends_over_data(fig) == []
    assert repeated_labels(fig) == []


def test_sockets_against_brokers_are_legible(tmp_path: Path) -> None:
    rows = broker_rows()
    with figures_drawn() as drawn:
        path = plots.sockets_vs_brokers(rows, tmp_path / "sockets-vs-brokers.png")
    assert path is not None
    fig = drawn["sockets-vs-brokers"]
    legible(fig)
    axes = visible_axes(fig)
    assert [ax.get_title() for ax in axes] == ["big-producer (sim)", "big-consumer (real)"]
    for ax in axes:
        assert ax.get_xscale() == "log"
        assert flattened(ax) == [], ax.get_title()
        # Each line is still its policy's peaks, by broker count.
        kind = ax.get_title().split("(")[1].rstrip(")")
        for policy, line in labelled(ax).items():
            mine = sorted((r.brokers, r.peak) for r in rows if (r.kind, r.policy) == (kind, policy))
            assert line == ([b for b, _ in mine], [p for _, p in mine]), policy
    # 10,000 sockets beside 2 to 10: the y axis is logarithmic there, and linear where the
    # counts are alike.
    sim, real = axes
    assert (sim.get_yscale(), real.get_yscale()) == ("log", "linear")
    check_png(path, fig, [plots.colour(p) for p in ("proposed", *SIM, *REAL)])


def test_sockets_by_role_are_legible(tmp_path: Path) -> None:
    with figures_drawn() as drawn:
        path = plots.sockets_by_role(role_rows(), tmp_path / "sockets-by-role.png")
    assert path is not None
    fig = drawn["sockets-by-role"]
    legible(fig)
    axes = {ax.get_title(): ax for ax in visible_axes(fig)}
    assert set(axes) == {"big-producer (sim)", "idle-disabled (sim)", "big-consumer (real)"}
    for title, ax in axes.items():
        assert flattened(ax) == [], title
        assert crowded_bars(ax) == [], title
    # java-described's 14,848 is cut off at the top of a panel scaled to the other bars,
    # and its height is printed on it; the panel of bars alike cuts none.
    producer = axes["big-producer (sim)"]
    assert 4.5 * plots.HEADROOM <= max(producer.get_ylim()) < 10
    assert [t.get_text() for t in producer.texts] == ["14,848"]
    assert list(axes["idle-disabled (sim)"].texts) == []
    assert max(axes["idle-disabled (sim)"].get_ylim()) >= 33 * plots.HEADROOM
    check_png(path, fig, ["tab:gray", "tab:blue", "tab:orange"])


def test_throughput_labels_name_what_differs(tmp_path: Path) -> None:
    with figures_drawn() as drawn:
        path = plots.throughput(throughput_rows(), tmp_path / "throughput.png")
    assert path is not None
    fig = drawn["throughput"]
    legible(fig)
    (ax,) = visible_axes(fig)
    assert crowded_bars(ax) == []
    # The points in RTT order, each labelled by its RTT; what they share, once, below.
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["RTT 0 ms", "RTT 5 ms", "RTT 20 ms"]
    assert ax.get_xlabel() == "throughput-ab: brokers=3, linger_ms=5, records=10000"
    check_png(path, fig, [plots.colour("proposed"), plots.colour("aiokafka")])


def test_latency_of_one_repeat_shows_each_clients_colour(tmp_path: Path) -> None:
    """One start per client and RTT (a quick run): a box of one value is a flat black line,
    so each is marked in its client's colour."""
    clients = ["proposed", *REAL]
    rows = [
        ClientTimings(
            "real",
            "big-producer",
            "producer",
            rtt,
            f"p[rtt_ms={rtt}]",
            c,
            0,
            10.0 + 100 * i,
            None,
            None,
        )
        for rtt in (0.0, 20.0)
        for i, c in enumerate(clients)
    ]
    with figures_drawn() as drawn:
        path = plots.latency(rows, tmp_path / "latency.png")
    assert path is not None
    fig = drawn["latency"]
    legible(fig)
    (ax,) = visible_axes(fig)
    for client in clients:
        assert colour_in_axes(path, fig, ax, plots.colour(client)) >= 20, client


@pytest.mark.parametrize(
    ("points", "labels", "shared"),
    [
        (
            [ab_point(20.0), ab_point(5.0), ab_point(0.0)],
            ["RTT 0 ms", "RTT 5 ms", "RTT 20 ms"],
            "throughput-ab: brokers=3, linger_ms=5, records=10000",
        ),
        (
            ["ab[brokers=3,rtt_ms=0.0]", "ab[brokers=10,rtt_ms=0.0]", "ab[brokers=3,rtt_ms=5.0]"],
            ["brokers=3, RTT 0 ms", "brokers=3, RTT 5 ms", "brokers=10, RTT 0 ms"],
            "ab",
        ),
        (["ab[rtt_ms=0.0]"], ["RTT 0 ms"], "ab"),
        (["a[x=1]", "b[x=1]"], ["a", "b"], "x=1"),
        (["odd", "ab[x=1]"], ["ab, x=1", "odd"], ""),
    ],
)
def test_points_are_told_apart_by_what_differs(
    points: list[str], labels: list[str], shared: str
) -> None:
    ordered, shown, common = plots.point_labels(points)
    assert shown == labels
    assert common == shared
    assert sorted(ordered) == sorted(points)
    assert len(set(shown)) == len(shown)
