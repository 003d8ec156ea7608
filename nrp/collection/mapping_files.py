"""YAML and TOML files read strictly: manifests and experiment files.

PyYAML's safe loader keeps the last of two equal keys in a mapping, so a dimension or source
option declared twice silently overrides the first; here a key given twice is an error naming
the line of the second and of the first. TOML refuses duplicates by itself; its errors are
turned into the same one-line ``InputError`` with the file and line.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

from nrp.errors import InputError, clip, quote

_TOML_WHERE = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_MERGE_TAG = "tag:yaml.org,2002:merge"


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


def parse_yaml(text: str) -> Any:
    """The YAML document in ``text``; ``yaml.YAMLError`` (with its mark) when it is not valid
    or gives a key twice in one mapping."""
    return yaml.load(text, Loader=StrictLoader)  # a SafeLoader: no arbitrary objects


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
