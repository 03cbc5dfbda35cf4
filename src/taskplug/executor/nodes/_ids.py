"""The ids propeller derives for a node while it runs: its unique id and a launch-plan child's execution name.

Follows flyteplugins/go/tasks/pluginmachinery/encoding/encoder.go (``FixedLengthUniqueIDForParts``),
flytepropeller/pkg/controller/nodes/common/utils.go (``GenerateUniqueID``) and
nodes/subworkflow/util.go with launchplan.go (``GetChildWorkflowExecutionID`` and its V2). The hash itself
is ``taskplug.k8s.fixed_length_unique_id`` (also used for pod names); this module is the one place that
joins parts into such an id. Every function is pure: the same ids come back on every round, so a restarted
executor finds what it started.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from taskplug.k8s import fixed_length_unique_id

__all__ = [
    "MAX_UNIQUE_ID_LENGTH",
    "child_execution_name",
    "fixed_length_unique_id_for_parts",
    "unique_node_id",
]

MAX_UNIQUE_ID_LENGTH: Final = 20  # GenerateUniqueID's and the child execution name's limit


def fixed_length_unique_id_for_parts(max_length: int, parts: Iterable[str], *, hash_bits: int = 32) -> str:
    """``FixedLengthUniqueIDForParts``: the parts joined by ``-`` (no ``-`` while the text is still empty, so
    leading empty parts vanish), replaced by ``f`` + base32(fnv1a) of the text when longer than
    ``max_length``. Raises ValueError when even the hash does not fit."""
    text = ""
    for part in parts:
        if text:
            text += "-"
        text += part
    return fixed_length_unique_id(text, max_length, hash_bits=hash_bits)


def unique_node_id(parent_unique_id: str | None, parent_attempt: int, node_id: str) -> str:
    """``GenerateUniqueID``: a node's id, unique within its execution. ``None`` for a top-level node (then
    the id is the node id, hashed only when longer than 20); otherwise the parent's unique id and the
    parent's current attempt (sub-workflow, branch and dynamic nodes) lead: ``n1-0-n0``."""
    if parent_unique_id is None:
        parts: tuple[str, ...] = ("", "", node_id)
    else:
        parts = (parent_unique_id, str(parent_attempt), node_id)
    return fixed_length_unique_id_for_parts(MAX_UNIQUE_ID_LENGTH, parts)


def child_execution_name(
    parent_execution_name: str, unique_node_id: str, attempt: int, *, definition_version: int = 1
) -> str:
    """The name of the execution a launch-plan node starts: ``<parent>-<U(node)>-<attempt>``, or ``f`` + 13
    characters of fnv64a when longer than 20 (workflow definition version 0 used fnv32a)."""
    return fixed_length_unique_id_for_parts(
        MAX_UNIQUE_ID_LENGTH,
        (parent_execution_name, unique_node_id, str(attempt)),
        hash_bits=32 if definition_version == 0 else 64,
    )
