"""The connection-cost calibration without a cluster: the fit, the pricing, the JSON form."""

from __future__ import annotations

import json

import pytest

from connmgr_evidence.handshake_cost import HandshakeCost, fit_handshake_cost, fit_line


def test_a_line_through_exact_points_is_recovered() -> None:
    intercept, slope = fit_line([(0.0, 3.0), (5.0, 28.0), (20.0, 103.0)])
    assert intercept == pytest.approx(3.0)
    assert slope == pytest.approx(5.0)


def test_least_squares_splits_the_difference_of_noisy_points() -> None:
    # y = 1 + 2x, the middle point 1 too high and the outer two ... balanced: slope stays 2.
    intercept, slope = fit_line([(0.0, 1.0), (1.0, 4.0), (2.0, 5.0)])
    assert slope == pytest.approx(2.0)
    assert intercept == pytest.approx(4.0 / 3.0)


def test_one_distinct_rtt_cannot_make_a_line() -> None:
    with pytest.raises(ValueError, match="two distinct"):
        fit_line([(5.0, 1.0), (5.0, 2.0)])


def test_the_fit_reads_medians_by_rtt_in_any_order() -> None:
    cost = fit_handshake_cost("SASL_SSL", {20.0: 134.0, 0.0: 34.0, 5.0: 59.0}, 25.0)
    assert cost.protocol == "SASL_SSL"
    assert cost.round_trips == pytest.approx(5.0)
    assert cost.fixed_ms == pytest.approx(34.0)
    assert cost.broker_cpu_ms == 25.0


def test_pricing_adds_the_tcp_round_trip_only_when_asked() -> None:
    cost = HandshakeCost("SSL", round_trips=2.0, fixed_ms=27.0)
    assert cost.time_ms(10.0) == pytest.approx(47.0)
    assert cost.time_ms(10.0, include_tcp=True) == pytest.approx(57.0)


@pytest.mark.parametrize("cpu", [None, 21.5])
def test_a_cost_survives_json(cpu: float | None) -> None:
    cost = HandshakeCost("PLAINTEXT", 1.04, 4.4, cpu)
    text = json.dumps(cost.to_dict())
    assert HandshakeCost.from_dict(json.loads(text)) == cost
