"""A request the simulated client has made and not yet seen answered."""

from __future__ import annotations

from dataclasses import dataclass

from connmgr.core.coordinator import CoordinatorRef
from connmgr.core.events import Api
from connmgr.core.identity import Purpose
from connmgr.core.metadata import TopicPartition


@dataclass(slots=True)
class SimRequest:
    request_id: int
    api: Api
    broker_id: int | None
    purpose: Purpose
    partitions: tuple[TopicPartition, ...] = ()
    topics: tuple[str, ...] = ()
    bootstrap: bool = False
    target: str = "any"
    coordinator: CoordinatorRef | None = None
