"""The grid built from the stages' own settings equals the grid as it was built before the
stages declared them (``grid.py``'s own table of sections): every section, key and value of
the full and the quick grid, the points (count and digest) and the description, compared
against values captured before that change. The report's numbers need the same settings."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from connmgr_evidence.bench.grid import load_grid, sections

SECTIONS: dict[str, dict[str, tuple[str, bool]]] = {
    "sim": {
        "scenarios": ("str", True),
        "policies": ("str", True),
        "brokers": ("int", True),
        "bootstrap_size": ("int", True),
        "leaders": ("int", True),
        "partitions": ("int", True),
        "topics": ("int", True),
        "coordinator": ("str", True),
        "idle": ("str", True),
        "duration_ms": ("int", False),
        "repeats": ("int", False),
        "seed": ("int", False),
        "named": ("str", True),
        "workers": ("int", False),
    },
    "real": {
        "scenarios": ("str", True),
        "clients": ("str", True),
        "brokers": ("int", True),
        "coordinator": ("str", True),
        "rtt_ms": ("float", True),
        "records": ("int", False),
        "repeats": ("int", False),
        "seed": ("int", False),
    },
    "throughput": {
        "brokers": ("int", False),
        "records": ("int", False),
        "rounds": ("int", False),
        "rtt_ms": ("float", True),
        "linger_ms": ("int", False),
    },
    "micro": {"rounds": ("int", False)},
    "sweep": {"sizes": ("int", True), "seed": ("int", False)},
    "linger": {
        "scenarios": ("str", True),
        "values_ms": ("int", True),
        "baselines": ("str", True),
        "duration_ms": ("int", False),
        "repeats": ("int", False),
        "seed": ("int", False),
    },
    "fleet": {
        "clients": ("int", False),
        "brokers": ("int", False),
        "restarts": ("int", False),
        "down_ms": ("int", False),
        "bucket_ms": ("int", False),
        "seed": ("int", False),
    },
    "tls": {
        "brokers": ("int", False),
        "rtt_ms": ("float", True),
        "connections": ("int", False),
        "starts": ("int", False),
        "java": ("int", False),
    },
    "life": {
        "scenarios": ("str", True),
        "clients": ("str", True),
        "life_s": ("int", False),
        "time_scale": ("int", False),
        "records": ("int", False),
        "repeats": ("int", False),
        "concurrency": ("int", False),
        "seed": ("int", False),
    },
    "properties": {
        "baselines": ("str", True),
        "examples": ("int", False),
        "steps": ("int", False),
        "mutants": ("str", True),
        "mutant_examples": ("int", False),
        "shrink": ("str", False),
        "workers": ("int", False),
    },
}
VALUES: dict[str, dict[str, dict[str, Any]]] = {
    "full": {
        "sim": {
            "scenarios": ["big-producer", "big-consumer"],
            "policies": ["proposed", "java-described", "java-today", "aiokafka-today"],
            "brokers": [3, 10, 100, 1000, 10000],
            "bootstrap_size": [1, 3],
            "leaders": [3],
            "partitions": [0],
            "topics": [1],
            "coordinator": ["separate", "shared"],
            "idle": ["default", "disabled"],
            "duration_ms": 3600000,
            "repeats": 3,
            "seed": 0,
            "named": [
                "seed-producer",
                "seed-consumer",
                "k8s-endpoint-change",
                "shared-endpoint",
                "idle-disabled",
                "rolling-restart",
                "reassignment",
                "rebalance",
                "short-lived",
                "ip-change",
            ],
            "workers": 2,
        },
        "real": {
            "scenarios": ["big-producer", "big-consumer"],
            "clients": [
                "proposed",
                "aiokafka",
                "java-2.1.0",
                "java-4.4.0",
                "java-4.3.1",
                "java-4.3.1-patched",
                "librdkafka",
            ],
            "brokers": [3, 1000],
            "coordinator": ["auto"],
            "rtt_ms": [0, 20],
            "records": 300,
            "repeats": 3,
            "seed": 0,
        },
        "throughput": {
            "brokers": 3,
            "records": 50000,
            "rounds": 5,
            "rtt_ms": [0, 5, 20],
            "linger_ms": 5,
        },
        "micro": {"rounds": 30},
        "sweep": {"sizes": [500, 2000, 10000], "seed": 0},
        "linger": {
            "scenarios": [
                "seed-producer",
                "seed-consumer",
                "txn-producer",
                "ctp-producer",
                "k8s-endpoint-change",
                "big-producer brokers=100",
                "big-consumer brokers=100",
                "rolling-restart",
                "rolling-restart client=transactional",
                "reassignment",
                "rebalance",
                "rebalance rebalance_interval_ms=120000",
                "ip-change",
                "ip-change client=producer",
            ],
            "values_ms": [0, 100, 1000, 3000, 30000, 540000],
            "baselines": ["java-today", "aiokafka-today"],
            "duration_ms": 3600000,
            "repeats": 2,
            "seed": 0,
        },
        "fleet": {
            "clients": 10000,
            "brokers": 1000,
            "restarts": 10,
            "down_ms": 30000,
            "bucket_ms": 10000,
            "seed": 0,
        },
        "tls": {"brokers": 3, "rtt_ms": [0, 5, 20], "connections": 100, "starts": 3, "java": 1},
        "life": {
            "scenarios": [
                "big-producer brokers=3",
                "big-consumer brokers=3",
                "big-consumer brokers=3 rolling_restart=1 down_ms=2000",
            ],
            "clients": ["proposed", "aiokafka", "java-4.4.0", "librdkafka"],
            "life_s": 60,
            "time_scale": 60,
            "records": 20,
            "repeats": 1,
            "concurrency": 6,
            "seed": 0,
        },
        "properties": {
            "baselines": ["java-described", "java-today", "aiokafka-today"],
            "examples": 100,
            "steps": 50,
            "mutants": [
                "KeyedByHostPort",
                "EagerDialer",
                "Thrashing",
                "NeverClose",
                "MergeByHostPort",
                "StaleEndpoint",
                "IgnoresBudget",
                "SharedCursor",
            ],
            "mutant_examples": 2000,
            "shrink": "full",
            "workers": 2,
        },
    },
    "quick": {
        "sim": {
            "scenarios": ["big-producer", "big-consumer"],
            "policies": ["proposed", "java-described", "java-today", "aiokafka-today"],
            "brokers": [3, 100, 1000],
            "bootstrap_size": [1, 3],
            "leaders": [3],
            "partitions": [0],
            "topics": [1],
            "coordinator": ["separate", "shared"],
            "idle": ["default", "disabled"],
            "duration_ms": 600000,
            "repeats": 2,
            "seed": 0,
            "named": [
                "seed-producer",
                "seed-consumer",
                "k8s-endpoint-change",
                "shared-endpoint",
                "idle-disabled",
                "rebalance",
            ],
            "workers": 2,
        },
        "real": {
            "scenarios": ["big-producer", "big-consumer"],
            "clients": [
                "proposed",
                "aiokafka",
                "java-2.1.0",
                "java-4.4.0",
                "java-4.3.1",
                "java-4.3.1-patched",
                "librdkafka",
            ],
            "brokers": [3],
            "coordinator": ["auto"],
            "rtt_ms": [0, 20],
            "records": 100,
            "repeats": 1,
            "seed": 0,
        },
        "throughput": {
            "brokers": 3,
            "records": 10000,
            "rounds": 2,
            "rtt_ms": [0, 20],
            "linger_ms": 5,
        },
        "micro": {"rounds": 5},
        "sweep": {"sizes": [250, 1000], "seed": 0},
        "linger": {
            "scenarios": ["k8s-endpoint-change", "reassignment", "rebalance", "ip-change"],
            "values_ms": [0, 3000, 30000, 540000],
            "baselines": ["java-today", "aiokafka-today"],
            "duration_ms": 3600000,
            "repeats": 1,
            "seed": 0,
        },
        "fleet": {
            "clients": 500,
            "brokers": 100,
            "restarts": 5,
            "down_ms": 30000,
            "bucket_ms": 10000,
            "seed": 0,
        },
        "tls": {"brokers": 3, "rtt_ms": [0, 20], "connections": 10, "starts": 1, "java": 0},
        "life": {
            "scenarios": [
                "big-producer brokers=3",
                "big-consumer brokers=3 rolling_restart=1 down_ms=1000",
            ],
            "clients": ["proposed", "aiokafka", "java-4.4.0", "librdkafka"],
            "life_s": 12,
            "time_scale": 60,
            "records": 20,
            "repeats": 1,
            "concurrency": 8,
            "seed": 0,
        },
        "properties": {
            "baselines": ["java-described", "java-today", "aiokafka-today"],
            "examples": 20,
            "steps": 20,
            "mutants": [
                "KeyedByHostPort",
                "EagerDialer",
                "Thrashing",
                "NeverClose",
                "MergeByHostPort",
                "StaleEndpoint",
                "IgnoresBudget",
                "SharedCursor",
            ],
            "mutant_examples": 2000,
            "shrink": "until readable",
            "workers": 2,
        },
    },
}
POINTS: dict[str, dict[str, Any]] = {
    "full": {
        "sim_points": (82, "8828acb1be641a72effe36e292ffe7a3bddd21312b0ed4447c9ffe63004e9327"),
        "real_points": (8, "1e7ddcab10d2c58c86a663e97c9a6f958067cdb969c63d2acee25fa245026fd0"),
        "skipped": (8, "f65adc032de882aae3b1ef92759ab78a921f7442f493675b3ba29d76b5eb6d93"),
        "describe": "grid benchmarks/grid.toml: 82 simulated points x 4 policies x 3 repeats "
        "= 984 simulations; 8 real points x 7 clients x 3 repeats = 168 real "
        "runs; 30 throughput turns; sweep sizes [500, 2000, 10000]; property "
        "runs 3 x 100 examples, 8 mutant searches; linger 14 scenarios x (6 "
        "values + 2 baselines) x 2 repeats; fleet 10,000 clients x 1,000 "
        "brokers, 10 restarted; TLS 100 handshakes x 3 protocols x 3 RTTs on 3 "
        "real brokers; life 3 scenarios x 4 clients x 1 repeats, 60 s each at "
        "scale 60; 8 impossible points skipped",
    },
    "quick": {
        "sim_points": (46, "29ac599450e40059d41cbccba35f63800bd456d8ec1dd0ffaabbf26f20c28540"),
        "real_points": (4, "0c956ca73b5ea7763e6ea2faaf478e1398c4af0d323b663297f488835b184b03"),
        "skipped": (8, "ab14d112e90544dcd093dfc331589495dd7134bc2296b789bd6a6d0374d90ef6"),
        "describe": "grid benchmarks/grid.toml (--quick): 46 simulated points x 4 policies "
        "x 2 repeats = 368 simulations; 4 real points x 7 clients x 1 repeats = "
        "28 real runs; 8 throughput turns; sweep sizes [250, 1000]; property "
        "runs 3 x 20 examples, 8 mutant searches; linger 4 scenarios x (4 "
        "values + 2 baselines) x 1 repeats; fleet 500 clients x 100 brokers, 5 "
        "restarted; TLS 10 handshakes x 3 protocols x 2 RTTs on 3 real brokers; "
        "life 2 scenarios x 4 clients x 1 repeats, 12 s each at scale 60; 8 "
        "impossible points skipped",
    },
}


def _digest(x: Any) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True).encode()).hexdigest()


def test_the_sections_and_their_keys_are_as_before() -> None:
    got = {
        s: {k: (t.kind.__name__, t.axis) for k, t in keys.items()} for s, keys in sections().items()
    }
    assert set(got) == set(SECTIONS)
    for section, keys in SECTIONS.items():
        assert got[section] == keys, section


@pytest.mark.parametrize("which", ["full", "quick"])
def test_the_grid_is_as_before_field_by_field(which: str) -> None:
    grid = load_grid(quick=which == "quick")
    assert set(grid.values) == set(VALUES[which])
    for section, keys in VALUES[which].items():
        assert set(grid.values[section]) == set(keys), section
        for key, value in keys.items():
            assert grid.values[section][key] == value, f"{section}.{key}"
    sim = [(p.scenario, dict(p.params), p.idle_disabled) for p in grid.sim_points]
    real = [(p.scenario, dict(p.params), p.rtt_ms) for p in grid.real_points]
    assert (len(sim), _digest(sim)) == tuple(POINTS[which]["sim_points"])
    assert (len(real), _digest(real)) == tuple(POINTS[which]["real_points"])
    skipped = list(grid.skipped)
    assert (len(skipped), _digest(skipped)) == tuple(POINTS[which]["skipped"])
    assert grid.describe() == POINTS[which]["describe"]
