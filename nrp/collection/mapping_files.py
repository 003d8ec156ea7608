"""YAML and TOML files read strictly: manifests, experiment files, the service's settings, a
report's model sizes, the judge's criteria. ``StrictLoader`` is nrp's one YAML loader.

PyYAML's safe loader keeps the last of two equal keys in a mapping, so a dimension or source
option declared twice silently overrides the first; here a key given twice is an error naming
the line of the second and of the first. Aliases are bounded: a 2 KB file of nested aliases
("billion laughs") expands into millions of values, so a document whose aliases add more than
``MAX_ALIAS_NODES`` values to what is written is refused, at the line of the value that expands
too far (and a recursive alias is refused outright). TOML refuses duplicates by itself and has
no aliases; its errors are turned into the same one-line ``InputError`` with the file and line.
A field that must be a string (a name, a path, a description) is checked by ``string_field``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import CollectionNode, MappingNode, Node

from nrp.errors import ConfigError, InputError, clip, quote

_TOML_WHERE = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_MERGE_TAG = "tag:yaml.org,2002:merge"
#: the most values aliases may add to a YAML document beyond the values written in it: shared
#: option blocks reuse a few dozen; a "billion laughs" file adds millions
MAX_ALIAS_NODES = 10_000


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (``<<`` merges still
    let a mapping's own keys override the merged ones, as YAML says)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base loader says so
                    break
                if first is not None:
                    raise ConstructorError(
                        "while reading a mapping",
                        node.start_mark,
                        f"key {quote(key)} given twice (first at line {first})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)

    def get_single_node(self) -> Node | None:
        node = super().get_single_node()
        if node is not None:
            check_aliases(node)
        return node


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [item for pair in node.value for item in pair]
    return list(node.value) if isinstance(node, CollectionNode) else []


def check_aliases(root: Node, limit: int = MAX_ALIAS_NODES) -> None:
    """ComposerError (at the line of the value) when the document under ``root``, with every
    alias expanded, holds more than ``limit`` values beyond the distinct ones written, or when
    an alias refers to a value that holds it (recursion). Counted on the composed graph, where
    an alias is a node reached twice, without expanding anything."""
    expanded: dict[int, int] = {}  # id(node) -> its values, aliases expanded
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:  # depth first, post order, without recursion (a deep document is no error here)
        node, children_done = stack.pop()
        if id(node) in expanded:
            continue
        if children_done:
            open_nodes.discard(id(node))
            expanded[id(node)] = 1 + sum(expanded[id(child)] for child in _children(node))
            if expanded[id(node)] > len(expanded) + limit:
                raise ComposerError(
                    None, None,
                    f"aliases expand this value to {expanded[id(node)]:,} values, over the "
                    f"limit of {limit:,} beyond those written (an alias bomb?)",
                    node.start_mark,
                )  # fmt: skip
            continue
        if id(node) in open_nodes:
            raise ComposerError(
                None, None, "an alias refers to a value that holds it", node.start_mark
            )
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in expanded)


def parse_yaml(text: str) -> Any:
    """The YAML document in ``text``; ``yaml.YAMLError`` (with its mark) when it is not valid,
    gives a key twice in one mapping, or has aliases that expand too far."""
    return yaml.load(text, Loader=StrictLoader)  # a SafeLoader: no arbitrary objects


def compose_yaml(text: str) -> Node | None:
    """The YAML document in ``text`` as nodes (with their lines), checked as ``parse_yaml``
    checks aliases."""
    return yaml.compose(text, Loader=StrictLoader)


def yaml_error(path: Path, err: yaml.YAMLError, what: str = "malformed YAML") -> InputError:
    """The one-line error for ``err``: the file, the line of the problem, what is wrong."""
    mark = getattr(err, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    problem = getattr(err, "problem", None) or str(err)
    return InputError(path, line, f"{what}: {problem}")


def toml_error(path: Path, err: tomllib.TOMLDecodeError) -> InputError:
    """The one-line error for ``err``, its "(at line N, column C)" turned into FILE:N."""
    message = str(err)
    where = _TOML_WHERE.search(message)
    if where is None:
        return InputError(path, None, f"malformed TOML: {message}")
    problem = message[: where.start()]
    return InputError(path, int(where.group(1)), f"malformed TOML: {problem} (column {where[2]})")


def read_mapping_text(path: Path, text: str) -> Any:
    """``text`` (the content of ``path``) parsed as TOML (``.toml``) or YAML, strictly."""
    try:
        if path.suffix.lower() == ".toml":
            return tomllib.loads(text)
        return parse_yaml(text)
    except tomllib.TOMLDecodeError as err:
        raise toml_error(path, err) from None
    except yaml.YAMLError as err:
        raise yaml_error(path, err) from None
    except RecursionError:  # nesting deeper than the parser's stack
        raise InputError(path, None, "nested too deeply to read") from None
    except ValueError as err:  # YAML's int() of a number of over 4,300 digits
        raise InputError(path, None, f"cannot read a value: {clip(str(err))}") from None


def string_field(
    value: Any,
    key: str,
    fail: Callable[[str], Exception],
    default: str = "",
    scalars: bool = False,
) -> str:
    """A field that must be a string (a name, a path, a description): ``value``, or ``default``
    when it is absent (None); anything else raises ``fail(problem)``, since ``str()`` of a list
    or mapping (an alias bomb's millions of values) would become a name, a folder or a message.
    ``scalars``: a number or boolean is taken as its text too (a grade's meaning ``yes``, which
    YAML 1.1 reads as true, has always been read so)."""
    if value is None:
        return default
    if scalars and isinstance(value, int | float | bool):
        return str(value)
    if not isinstance(value, str):
        raise fail(f"{key} must be a string, found {type(value).__name__}")
    return value


def config_error_at(where: str) -> Callable[[str], ConfigError]:
    """``fail`` for ``string_field`` in a manifest: a ConfigError at ``where``."""
    return lambda problem: ConfigError(f"{where}: {problem}")
