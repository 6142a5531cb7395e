"""The client library that hosts each policy, and what of a run's request pattern is the
library's rather than the connection policy's.

A policy decides where requests go; when they are sent is the hosting client's: aiokafka's
bootstrap metadata request names no topics, so a second one follows; a Java producer's
transaction manager asks for a producer id before the first metadata answer; kafka-clients
>= 3.7 asks some node for its telemetry subscription at start. The simulator's client models
read these facts here (:func:`library_of`), so the policy core carries none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from connmgr.core.policy import Policy
from connmgr.errors import UnknownName


@dataclass(frozen=True, slots=True)
class HostLibrary:
    """One client library's request pattern, as far as the simulator models it."""

    name: str
    """"java" or "aiokafka"."""
    find_coordinator_with_first_metadata: bool = False
    """Whether the consumer sends FindCoordinator with its first metadata request (the 2019
    Java consumer log; the drop-in client prefetches it, on the same connection), not after
    the answer (kafka-clients 4.x, stock aiokafka)."""
    pushes_telemetry: bool = False
    """Whether the client asks some node for its KIP-714 telemetry subscription when it
    starts (kafka-clients >= 3.7): one more any-node request."""

    @property
    def java(self) -> bool:
        return self.name == "java"

    @property
    def aiokafka(self) -> bool:
        return self.name == "aiokafka"


JAVA_2019 = HostLibrary("java", find_coordinator_with_first_metadata=True, pushes_telemetry=True)
JAVA = HostLibrary("java", pushes_telemetry=True)
AIOKAFKA = HostLibrary("aiokafka")
DROP_IN = HostLibrary("aiokafka", find_coordinator_with_first_metadata=True)

LIBRARIES: dict[str, HostLibrary] = {
    "java-described": JAVA_2019,
    "java-today": JAVA,
    "java-patched": JAVA,
    "aiokafka-today": AIOKAFKA,
    "proposed": DROP_IN,
}
"""Policy name -> the library that hosts it."""


def library_of(policy: Policy | type[Policy]) -> HostLibrary:
    """The library hosting ``policy``: its own name's, else the nearest registered base
    class's (a test's variant of a policy runs in that policy's client)."""
    cls = policy if isinstance(policy, type) else type(policy)
    for base in cls.__mro__:
        name = getattr(base, "name", None)
        if isinstance(name, str) and name in LIBRARIES:
            return LIBRARIES[name]
    raise UnknownName(
        f"no client library known for policy class {cls.__name__}; "
        f"register its name in connmgr.sim.library.LIBRARIES ({', '.join(LIBRARIES)})"
    )
