"""Each policy option is declared once (a field of PolicyConfig or PolicyOptions); parsing,
the drop-in keywords, the CLI's help and the docs' tables all follow from that declaration."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from connmgr.aio import ProposedProducer
from connmgr.aio.options import (
    CLIENT_OPTIONS,
    DROP_IN_OPTIONS,
    POLICY_OPTION_NAMES,
    PolicyOptions,
    doc_tables,
)
from connmgr.cli import main
from connmgr.core.config import (
    CONFIG_OPTIONS,
    DROP_IN_POLICY_OPTIONS,
    ClientKind,
    PolicyConfig,
    coerce_option,
)
from connmgr.core.endpoint import Endpoint
from connmgr.core.options import INT, Reach, declared_options, option
from connmgr.docblocks import block, options_help, options_markdown
from connmgr.errors import ConfigError, UnknownName
from connmgr.policies.recorded import RECORDED_OPTIONS, split_recorded
from connmgr.sim.run import POLICY_OPTIONS, simulate
from connmgr_evidence.cli import main as evidence_main

DOC = Path(__file__).parent.parent / "docs" / "drop-in-clients.md"
BASE = PolicyConfig(bootstrap=(Endpoint("a", 1), Endpoint("b", 2)))


def test_every_config_field_is_a_declared_option() -> None:
    names = [f.name for f in dataclasses.fields(PolicyConfig)]
    assert [s.name for s in CONFIG_OPTIONS] == names
    assert {s.name: s.default for s in CONFIG_OPTIONS if not s.required} == {
        n: getattr(BASE, n) for n in names if n != "bootstrap"
    }
    assert set(POLICY_OPTIONS) == (set(names) - {"client"}) | {s.name for s in RECORDED_OPTIONS}


def test_a_policy_config_is_a_hashable_value() -> None:
    settings = {"max_connections": "3", "expected_cluster_id": "c1"}
    same = BASE.with_settings(settings)
    assert hash(same) == hash(BASE.with_settings(settings))
    assert {same: 1}[BASE.with_settings(settings)] == 1
    assert same != BASE


def test_the_drop_in_keywords_are_the_declared_ones() -> None:
    assert set(POLICY_OPTION_NAMES) == {
        "warm_up",
        "share_coordinator",
        "connection_linger_ms",
        "max_connections",
        "expected_cluster_id",
        "adopt_unverified",
        "bootstrap_offset",
    }
    assert [(s.keyword, s.name, s.default) for s in CLIENT_OPTIONS] == [
        ("policy_seed", "seed", None),
        ("dns_ttl_ms", "dns_ttl_ms", 30_000),
        ("connection_policy", "policy", "proposed"),
    ]
    assert DROP_IN_OPTIONS == DROP_IN_POLICY_OPTIONS + CLIENT_OPTIONS


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("warm_up", " Yes", True),
        ("adopt_unverified", "off", False),
        ("connection_linger_ms", "250", 250),
        ("max_connections", "none", None),
        ("max_connections", "4", 4),
        ("bootstrap_offset", "", None),
        ("expected_cluster_id", "abc", "abc"),
        ("expected_cluster_id", "null", None),
        ("client", "Producer", ClientKind.PRODUCER),
        ("bootstrap", "x:9,y:10", (Endpoint("x", 9), Endpoint("y", 10))),
    ],
)
def test_settings_parse_by_the_declared_type(name: str, text: str, value: object) -> None:
    assert coerce_option(name, getattr(BASE, name), text) == value
    assert getattr(BASE.with_settings({name: text}), name) == value


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("warm_up", "maybe", "warm_up='maybe': expected true or false"),
        ("connection_linger_ms", "none", "connection_linger_ms='none': expected an integer"),
        ("max_connections", "many", "max_connections='many': expected an integer"),
        ("client", "admin", "client='admin': expected producer or consumer"),
    ],
)
def test_bad_settings_say_what_was_expected(name: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        BASE.with_settings({name: text})
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("replay_choices", "3,1,-2", (3, 1, -2)),
        ("replay_telemetry", "", ()),
        ("replay_lookups", "-3", (-3,)),
    ],
)
def test_recorded_choices_parse_apart_from_the_policy_config(
    name: str, text: str, value: object
) -> None:
    rest, recorded = split_recorded({name: text, "max_connections": "2"})
    assert rest == {"max_connections": "2"}
    assert getattr(recorded, name) == value
    assert name not in {f.name for f in dataclasses.fields(PolicyConfig)}
    with pytest.raises(UnknownName, match=name):
        BASE.with_settings({name: text})


def test_only_the_models_of_todays_clients_replay_recorded_choices() -> None:
    replayed = simulate("seed-consumer", "aiokafka-today", {"replay_choices": "1"})
    assert replayed.opened >= 1
    with pytest.raises(ConfigError, match="'proposed' replays no recorded choices"):
        simulate("seed-consumer", "proposed", {"replay_choices": "1"})


def test_a_malformed_recorded_choice_says_what_was_expected() -> None:
    with pytest.raises(ConfigError) as info:
        split_recorded({"replay_choices": "3,x"})
    assert str(info.value) == "replay_choices='3,x': expected node ids like 3,1,-2"


def test_unknown_settings_list_the_options() -> None:
    known = r"unknown policy option 'lingr_ms'; known: .*connection_linger_ms"
    with pytest.raises(UnknownName, match=known):
        BASE.with_settings({"lingr_ms": "1"})


def test_scenario_parameters_coerce_by_their_current_value() -> None:
    assert coerce_option("brokers", 3, "100") == 100
    assert coerce_option("flag", False, "on") is True
    with pytest.raises(ConfigError, match="brokers='x': expected an integer"):
        coerce_option("brokers", 3, "x")


def test_drop_in_keywords_reach_the_policy_config() -> None:
    kwargs: dict[str, object] = {
        "bootstrap_servers": "127.0.0.1:1",
        "linger_ms": 50,
        "connection_linger_ms": 5,
        "policy_seed": 3,
        "connection_policy": "aiokafka-today",
    }
    options = PolicyOptions.take(kwargs)
    # aiokafka's own linger_ms stays aiokafka's: only the drop-in keywords are taken.
    assert kwargs == {"bootstrap_servers": "127.0.0.1:1", "linger_ms": 50}
    assert options == PolicyOptions({"connection_linger_ms": 5}, seed=3, policy="aiokafka-today")

    async def build() -> PolicyConfig:
        producer = ProposedProducer(
            bootstrap_servers="127.0.0.1:1", connection_linger_ms=5, warm_up=True
        )
        await producer.stop()
        return producer.client.policy_config

    config = asyncio.run(build())
    assert (config.connection_linger_ms, config.warm_up, config.max_connections) == (5, True, None)


def test_an_option_the_drop_in_clients_do_not_take_is_refused() -> None:
    with pytest.raises(UnknownName, match="replay_choices"):
        PolicyOptions({"replay_choices": (1,)})


def test_cli_help_lists_every_settable_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    out = capsys.readouterr().out
    for spec in CONFIG_OPTIONS:
        assert (f"  {spec.name}=" in out) == (spec.name in POLICY_OPTIONS)
    assert all(f"  {spec.name}=" in out for spec in RECORDED_OPTIONS)
    with pytest.raises(SystemExit):
        evidence_main(["run", "--help"])
    out = capsys.readouterr().out
    assert all(f"  {name}=" in out for name in POLICY_OPTION_NAMES)
    assert "  replay_choices=" not in out


def test_the_docs_tables_are_generated_from_the_declarations() -> None:
    text = DOC.read_text()
    for name, content in doc_tables().items():
        assert block(text, name) == content, f"regenerate {DOC} (see its note)"


@dataclass(frozen=True, slots=True)
class _WithTrial(PolicyConfig):
    trial_option: int = field(default=7, metadata=option("a trial", reach=Reach.DROP_IN))


def test_a_new_field_is_all_it_takes_to_add_an_option() -> None:
    specs = declared_options(_WithTrial)
    trial = specs[-1]
    assert specs[:-1] == CONFIG_OPTIONS
    assert (trial.name, trial.kind, trial.default, trial.keyword) == (
        "trial_option",
        INT,
        7,
        "trial_option",
    )
    assert trial.parse("8") == 8
    with pytest.raises(ConfigError, match="trial_option='x': expected an integer"):
        trial.parse("x")
    with pytest.raises(ConfigError, match=r"trial_option=True \(bool\): expected int"):
        trial.check(True)
    assert "  trial_option=7" in options_help(specs)
    assert "| `trial_option` | `7` | a trial |" in options_markdown(specs).splitlines()


def test_an_annotation_without_a_value_kind_is_named() -> None:
    @dataclass(frozen=True)
    class Odd:
        ratio: float = field(default=0.5, metadata=option("a float"))

    with pytest.raises(TypeError, match=r"option Odd\.ratio: no value kind for annotation"):
        declared_options(Odd)
