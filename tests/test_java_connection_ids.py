"""Java connection ids in both group-coordinator forms: ``2147483647 - B`` (kafka-clients up
to 4.3) and ``+B`` (4.4's ``GroupCoordinatorNode``), read the way the Java patch's
``CoordinatorIds`` reads them."""

from __future__ import annotations

import pytest

from connmgr.core.identity import COORDINATOR_ID_BASE, Role
from connmgr.javalog import node_id_of
from connmgr_evidence.java.accounting import role_of


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        ("-1", (Role.BOOTSTRAP, None)),
        ("-3", (Role.BOOTSTRAP, None)),
        ("0", (Role.DATA, 0)),
        ("3", (Role.DATA, 3)),
        ("+0", (Role.COORDINATION, 0)),
        ("+3", (Role.COORDINATION, 3)),
        (str(COORDINATOR_ID_BASE), (Role.COORDINATION, 0)),
        (str(COORDINATOR_ID_BASE - 3), (Role.COORDINATION, 3)),
        # the Java threshold: above Integer.MAX_VALUE / 2 an id is a coordinator's
        (str(COORDINATOR_ID_BASE // 2), (Role.DATA, COORDINATOR_ID_BASE // 2)),
        (str(COORDINATOR_ID_BASE // 2 + 1), (Role.COORDINATION, COORDINATOR_ID_BASE // 2)),
    ],
)
def test_role_of_reads_either_coordinator_form(
    node: str, expected: tuple[Role, int | None]
) -> None:
    assert role_of(node) == expected


def test_both_forms_of_one_coordinator_are_one_node_id() -> None:
    assert node_id_of("+3") == node_id_of(str(COORDINATOR_ID_BASE - 3)) == COORDINATOR_ID_BASE - 3
    assert node_id_of("-1") == -1
    assert node_id_of("2") == 2


@pytest.mark.parametrize("node", ["+", "+-1", "++1", "+x", "x", ""])
def test_ids_in_neither_form_are_refused(node: str) -> None:
    with pytest.raises(ValueError):
        node_id_of(node)
    with pytest.raises(ValueError):
        role_of(node)
