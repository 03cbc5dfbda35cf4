"""Reading a JSON or YAML document from bytes or a file someone else wrote, with bounds.

Every spec, config, pod template, kubeconfig, observed object and HTTP body taskplug reads comes in here, so
that one set of rules holds for all of them:

* **Size.** :func:`load_document` (and :func:`load_documents`, for a multi-document stream) reads at most ``max_bytes`` + 1 bytes of a file (``/dev/zero`` is refused
  at once, not read until memory runs out); bytes given to it are held to the same bound.
* **Text.** The bytes must be UTF-8; the error names the file and the offset of the first bad byte.
* **Bounded YAML.** A YAML file of a few hundred bytes can expand to gigabytes through aliases (the "billion
  laughs"), or nest deep enough to exhaust the stack. The YAML node graph is composed first, counting nodes
  and depth *as they are built* (libyaml parses, a Python composer builds), so a long or deep document is
  refused as soon as it passes a bound, with the line and column where it did. Aliases are shared nodes in
  that graph; before any Python value is built, the size and depth the document would *expand* to are
  computed over the graph (once per distinct node), and a recursive alias is refused.
* **JSON's values only.** The YAML safe schema without its Python-only types: a timestamp stays the string
  it was written as (as Kubernetes and Flyte read YAML: through JSON), and ``!!binary``, ``!!set``,
  ``!!omap`` and ``!!pairs`` are refused, as are Python tags. The result holds ``dict``, ``list``, ``str``,
  ``int``, ``float``, ``bool`` and ``None`` only; whoever reads a field decides its type and range.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import orjson
import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from taskplug.core._errors import SpecError

try:  # libyaml's parser: scanning and parsing at C speed, with its own nesting limit (1000)
    from yaml._yaml import CParser

    _LIBYAML = True
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    CParser = object  # type: ignore[misc,assignment]
    _LIBYAML = False

__all__ = ["MAX_DEPTH", "MAX_DOCUMENT_BYTES", "MAX_NODES", "DocumentError", "load_document", "load_documents"]

MAX_NODES: Final = 250_000
"""Most values a document may hold, aliases counted every time they are used. About 300 bytes of memory per
value while composing: the bound keeps a document under ~100 MB and a second or two, far above any spec,
config or Kubernetes object (a map task over 100,000 scalar inputs is 100,000 values)."""
MAX_DEPTH: Final = 200
"""Deepest nesting of lists and maps a document may have."""
MAX_DOCUMENT_BYTES: Final = 4 * 1024 * 1024
"""Largest document :func:`load_document` reads: 4 MiB. What a spec or config describes ends up in Kubernetes
objects and Flyte's literals, and the Kubernetes API server refuses request bodies over 3 MiB (etcd objects
over 1.5 MiB); 4 MiB leaves room for a spec's inline inputs while refusing ``/dev/zero`` or a mistaken
binary at once."""


class DocumentError(SpecError):
    """A document that cannot be read: not UTF-8, not JSON/YAML, or over a bound. ``path`` names the source."""


class _BoundedComposer(Composer):
    """PyYAML's composer, counting the nodes it builds and the depth it is at: it refuses a document as soon
    as it passes a bound, before the rest is built (and before Python's recursion limit is near)."""

    max_nodes: int
    max_depth: int
    source: str

    def _start_bounds(self, source: str, max_nodes: int, max_depth: int) -> None:
        self.source, self.max_nodes, self.max_depth = source, max_nodes, max_depth
        self._built = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        self._built += 1
        if self._built > self.max_nodes:
            raise DocumentError(self.source, f"holds more than {self.max_nodes} values{self._where()}")
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                raise DocumentError(self.source, f"nests deeper than {self.max_depth} levels{self._where()}")
            node: yaml.Node | None = super().compose_node(parent, index)
            assert node is not None  # None only for an empty document, which get_single_node handles
            return node
        finally:
            self._depth -= 1

    def _where(self) -> str:
        try:
            return _at(self.peek_event().start_mark)  # type: ignore[attr-defined]  # the parser's
        except yaml.YAMLError:
            return ""


def _at(mark: Any) -> str:
    if mark is None:
        return ""
    return f" (line {mark.line + 1}, column {mark.column + 1})"


class _JsonValuesConstructor(SafeConstructor):
    """The safe schema's constructors for JSON's values; a timestamp is kept as the text it was written as."""

    def _refuse(self, node: yaml.Node) -> Any:
        raise ConstructorError(
            None, None, f"the YAML type {node.tag!r} is not a JSON value (quote it)", node.start_mark
        )


_JsonValuesConstructor.add_constructor(
    "tag:yaml.org,2002:timestamp",
    SafeConstructor.construct_yaml_str,  # type: ignore[type-var]
)
for _tag in ("binary", "set", "omap", "pairs"):
    _JsonValuesConstructor.add_constructor(
        f"tag:yaml.org,2002:{_tag}",
        _JsonValuesConstructor._refuse,  # type: ignore[type-var]
    )


class _CLoader(_BoundedComposer, CParser, _JsonValuesConstructor, Resolver):
    def __init__(self, text: str) -> None:
        CParser.__init__(self, text)
        Composer.__init__(self)
        _JsonValuesConstructor.__init__(self)
        Resolver.__init__(self)


class _PyLoader(Reader, Scanner, Parser, _BoundedComposer, _JsonValuesConstructor, Resolver):
    def __init__(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _JsonValuesConstructor.__init__(self)
        Resolver.__init__(self)


def _loader(text: str) -> _CLoader | _PyLoader:
    return _CLoader(text) if _LIBYAML else _PyLoader(text)


def load_document(
    data: bytes | os.PathLike[str],
    source: str | None = None,
    *,
    what: str = "document",
    yaml_allowed: bool = True,
    max_bytes: int = MAX_DOCUMENT_BYTES,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """The value of ``data`` (JSON, or YAML when ``yaml_allowed``): bytes, or the file at a path, of which at
    most ``max_bytes`` are read. ``source`` names it in errors (the path by default), ``what`` says what a
    file was to be ("execution spec", "config file"); every error is a :class:`DocumentError` whose
    ``path`` is the source."""
    raw, text, source = _read(data, source, what, max_bytes)
    if not yaml_allowed:
        return _load_json(raw, source, max_nodes, max_depth)
    loader = _loader(text)
    loader._start_bounds(source, max_nodes, max_depth)
    with _yaml_errors(source, max_depth):
        try:
            root = loader.get_single_node()
            if root is None:
                return None
            _check_expansion(root, source, max_nodes, max_depth)
            return loader.construct_document(root)
        finally:
            loader.dispose()


def load_documents(
    data: bytes | os.PathLike[str],
    source: str | None = None,
    *,
    what: str = "document",
    yaml_allowed: bool = True,
    max_bytes: int = MAX_DOCUMENT_BYTES,
    max_nodes: int = MAX_NODES,
    max_depth: int = MAX_DEPTH,
) -> list[Any]:
    """The values of a multi-document YAML stream (documents separated by ``---``, as ``kubectl apply -f``
    reads a manifest file), within the bounds of :func:`load_document`: ``max_bytes`` for the whole file,
    ``max_nodes`` for all its documents together (aliases expanded), ``max_depth`` for each. An empty
    document is ``None``; errors give the line and column in the whole file. Without ``yaml_allowed`` the
    data is one JSON value, returned as the only document."""
    raw, text, source = _read(data, source, what, max_bytes)
    if not yaml_allowed:
        return [_load_json(raw, source, max_nodes, max_depth)]
    loader = _loader(text)
    loader._start_bounds(source, max_nodes, max_depth)
    documents: list[Any] = []
    expanded = 0
    with _yaml_errors(source, max_depth):
        try:
            while loader.check_node():
                root = loader.get_node()
                assert root is not None  # check_node said a document follows
                expanded += _check_expansion(root, source, max_nodes, max_depth, before=expanded)
                documents.append(loader.construct_document(root))
        finally:
            loader.dispose()
    return documents


def _read(
    data: bytes | os.PathLike[str], source: str | None, what: str, max_bytes: int
) -> tuple[bytes, str, str]:
    """The bytes (at most ``max_bytes``), their text (strict UTF-8) and the source to name in errors."""
    if not isinstance(data, bytes | bytearray | memoryview):
        path = os.fspath(data)
        source = path if source is None else source
        try:
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError as e:
            raise DocumentError(source, f"cannot read {what}: {e.strerror or e}") from None
    source = "document" if source is None else source
    raw = bytes(data)
    if len(raw) > max_bytes:
        raise DocumentError(source, f"{what} is larger than {max_bytes} bytes (the most taskplug reads)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DocumentError(source, f"is not UTF-8 text (byte {e.start} is {raw[e.start]:#04x})") from None
    return raw, text, source


def _load_json(raw: bytes, source: str, max_nodes: int, max_depth: int) -> Any:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise DocumentError(source, f"is not valid JSON: {e}") from None
    _check_json_bounds(value, source, max_nodes, max_depth)
    return value


@contextmanager
def _yaml_errors(source: str, max_depth: int) -> Iterator[None]:
    """PyYAML's errors as DocumentErrors naming the source, the line and the column."""
    try:
        yield
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        if "maximum nesting depth" in str(e):  # libyaml's own limit, met while scanning ahead
            raise DocumentError(source, f"nests deeper than {max_depth} levels{_at(mark)}") from None
        text = str(e).replace('in "<unicode string>", ', "at ")
        raise DocumentError(source, f"is not valid YAML: {text}") from None
    except RecursionError:  # pragma: no cover - the bounds above stop well before Python's limit
        raise DocumentError(source, f"nests deeper than {max_depth} levels") from None


def _check_expansion(root: yaml.Node, source: str, max_nodes: int, max_depth: int, *, before: int = 0) -> int:
    """Refuse a graph that expands (aliases followed) to more than ``max_nodes`` values or ``max_depth``
    levels, or that refers to itself; return the number of values it expands to. Each distinct node is
    visited once: its expanded size and height are computed from its children's, so an alias bomb costs
    what its few nodes cost. ``before`` values of earlier documents of the stream count against the bound."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    in_progress: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            in_progress.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            height[key] = 1 + max((height[id(k)] for k in kids), default=0)
            if before + size[key] > max_nodes:
                together = " with the documents before it" if before else ""
                raise DocumentError(
                    source,
                    f"expands to more than {max_nodes} values{together} (YAML aliases?){_at(node.start_mark)}",
                )
            if height[key] > max_depth:
                raise DocumentError(
                    source, f"nests deeper than {max_depth} levels (YAML aliases?){_at(node.start_mark)}"
                )
            continue
        if key in size:
            continue
        if key in in_progress:
            raise DocumentError(source, f"refers to itself (a recursive YAML alias){_at(node.start_mark)}")
        in_progress.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in size)
    return size[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_json_bounds(value: Any, source: str, max_nodes: int, max_depth: int) -> None:
    count = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > max_nodes:
            raise DocumentError(source, f"holds more than {max_nodes} values")
        if depth > max_depth:
            raise DocumentError(source, f"nests deeper than {max_depth} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
