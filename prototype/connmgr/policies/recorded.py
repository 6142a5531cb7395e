"""What a recorded run of a real client chose that a model cannot know, for the model to
replay: not a policy option, an observation.

A real client's random draws and its timing-dependent picks (Java's ``leastLoadedNode`` with
"no active connection", aiokafka's ``random.choice`` of a broker) cannot be derived from the
model's own state. A comparison of a model with a recorded run
(:mod:`connmgr_evidence.realrun.record`,
the Java and embedded model-vs-real tests) gives the model what the run chose instead of
loosening the comparison. Only the models of today's clients
(:class:`~connmgr.policies.java_today.JavaTodayPolicy` and its variants,
:class:`~connmgr.policies.aiokafka_today.AiokafkaTodayPolicy`) take a :class:`RecordedChoices`.

The options keep their ``--set`` names; :func:`split_recorded` takes them out of a run's
settings before the rest become the :class:`~connmgr.core.config.PolicyConfig`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connmgr.core.options import OptionSpec, declared_options, option


@dataclass(frozen=True, slots=True)
class RecordedChoices:
    """A recorded run's choices, each an option declared once (``--set NAME=VALUE``)."""

    replay_choices: tuple[int, ...] = field(
        default=(),
        metadata=option(
            "broker ids a recorded run chose at random for any-node requests, in order; a "
            "model replays them instead of drawing (observing a real client's choices rather "
            "than loosening a comparison); empty: draw from the policy's random source"
        ),
    )
    replay_telemetry: tuple[int, ...] = field(
        default=(),
        metadata=option(
            "where a recorded Java run sent its GetTelemetrySubscriptions request (node ids), "
            "to replay; empty: the model picks with leastLoadedNode"
        ),
    )
    replay_lookups: tuple[int, ...] = field(
        default=(),
        metadata=option(
            "where a recorded Java run sent its FindCoordinator requests (node ids, in "
            "order), to replay a lookup that went to a node it already had a connection to; "
            "empty: the model picks with leastLoadedNode"
        ),
    )

    def __bool__(self) -> bool:
        """Whether anything was recorded."""
        return bool(self.replay_choices or self.replay_telemetry or self.replay_lookups)


NOTHING_RECORDED = RecordedChoices()
RECORDED_OPTIONS: tuple[OptionSpec, ...] = declared_options(RecordedChoices)
"""The options of :class:`RecordedChoices`, in field order."""
_RECORDED_NAMED: dict[str, OptionSpec] = {s.name: s for s in RECORDED_OPTIONS}


def split_recorded(settings: Mapping[str, str]) -> tuple[dict[str, str], RecordedChoices]:
    """``settings`` without the recorded choices, and those choices parsed (a malformed
    value raises :class:`~connmgr.errors.ConfigError` naming it)."""
    rest: dict[str, str] = {}
    values: dict[str, Any] = {}
    for name, text in settings.items():
        spec = _RECORDED_NAMED.get(name)
        if spec is None:
            rest[name] = text
        else:
            values[name] = spec.parse(text)
    return rest, dataclasses.replace(NOTHING_RECORDED, **values)
