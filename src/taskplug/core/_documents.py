"""Reading a JSON or YAML document from bytes someone else wrote, with bounds.

A YAML file of a few hundred bytes can expand to gigabytes through aliases (the "billion laughs"), or nest deep
enough to exhaust the stack. :func:`load_document` composes the YAML node graph first (aliases are shared
nodes there, so composing is cheap), counts the nodes the document would *expand* to and its depth, and only
then builds Python values — refusing, with a clear error, a document over either bound. Only the YAML safe
schema is accepted (no Python tags), and the bytes must be UTF-8.
"""

from __future__ import annotations

from typing import Any, Final

import orjson
import yaml

from taskplug.core._errors import SpecError

__all__ = ["MAX_DEPTH", "MAX_NODES", "DocumentError", "load_document"]

MAX_NODES: Final = 1_000_000
"""Most values a document may expand to (aliases counted every time they are used)."""
MAX_DEPTH: Final = 200
"""Deepest nesting of lists and maps a document may have."""


class DocumentError(SpecError):
    """A document that cannot be read: not UTF-8, not JSON/YAML, or over a bound. ``path`` names the source."""


def _check_bounds(root: yaml.Node, source: str, max_nodes: int, max_depth: int) -> None:
    # Iterative walk over the expanded tree, so a deep document cannot exhaust the stack here either.
    count = 0
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > max_nodes:
            raise DocumentError(source, f"expands to more than {max_nodes} values (YAML aliases?)")
        if depth > max_depth:
            raise DocumentError(source, f"nests deeper than {max_depth} levels")
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def load_document(
    data: bytes,
    source: str,
    *,
    yaml_allowed: bool = True,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """The value of ``data`` (JSON, or YAML when ``yaml_allowed``); ``source`` names it in errors."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DocumentError(source, f"is not UTF-8 text (byte {e.start})") from None
    if not yaml_allowed:
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise DocumentError(source, f"is not valid JSON: {e}") from None
        _check_json_depth(value, source, max_depth)
        return value
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_bounds(root, source, max_nodes, max_depth)
        return loader.construct_document(root)
    except yaml.YAMLError as e:
        raise DocumentError(source, f"is not valid YAML: {e}") from None
    except RecursionError:
        # PyYAML's composer recurses once per level: a document this deep never reaches the bounds check.
        raise DocumentError(source, f"nests deeper than {max_depth} levels") from None
    finally:
        loader.dispose()


def _check_json_depth(value: Any, source: str, max_depth: int) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise DocumentError(source, f"nests deeper than {max_depth} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
