"""Collection manifests (YAML or TOML): files, formats, dimensions, label scales, policies.

See docs/manifests.md. Everything a manifest gets wrong is a ``ConfigError`` naming the manifest
file and the key, raised before any input is read.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from nrp.collection.formats import get_format
from nrp.collection.labels import LabelScale
from nrp.errors import ConfigError, InputError

# The name of the rows holding an answer's weighted sum over dimensions in NRP results. Not
# "combined": that is a real ArgQuality quality dimension. A collection may not declare a
# dimension of this name.
COMBINED = "weighted"
#: what names an ir_datasets collection where a manifest path is expected (``irds:vaswani``)
DATASET_PREFIX = "irds:"

REPEATED_JUDGMENT_POLICIES = ("error", "max", "min", "mean", "first", "last")
_TOP_LEVEL_KEYS = {
    "name",
    "description",
    "citation",
    "data_root",
    "repeated_judgments",
    "dimensions",
    "sources",
}


@dataclass(frozen=True)
class SourceSpec:
    """One input of a collection: a format, a resolved path, and the format's full options."""

    position: int
    format: str
    path: Path
    options: Mapping[str, Any]

    def describe(self) -> str:
        return f"sources[{self.position}] ({self.format}: {self.path})"


@dataclass(frozen=True)
class Manifest:
    path: Path
    text: str
    name: str
    description: str
    citation: str
    data_root: Path
    dimensions: Mapping[str, LabelScale]
    sources: tuple[SourceSpec, ...]
    repeated_policy: str
    repeated_reason: str
    #: built in memory (``nrp ingest irds:ID``), not read from a file: ``path`` names its source
    generated: bool = False

    @property
    def location(self) -> str:
        """Where the manifest came from: its file (absolute), or what it was built from."""
        return str(self.path) if self.generated else str(Path(self.path).resolve())

    @classmethod
    def load(cls, path: str | Path, data_root: str | Path | None = None) -> Manifest:
        """Read and check a manifest. ``data_root`` (the CLI's --data-root) replaces the
        manifest's own; a relative manifest ``data_root`` is taken from the manifest's folder.
        ``irds:DATASET_ID`` builds the manifest of an ir_datasets collection instead
        (``nrp.collection.formats.irds.irds_manifest``, its dimension ``relevance``)."""
        if str(path).startswith(DATASET_PREFIX):
            from nrp.collection.formats.irds import irds_manifest

            if data_root is not None:
                raise ConfigError(f"{path}: --data-root does not apply to an ir_datasets id")
            return irds_manifest(str(path))
        path = Path(path)
        raw, text = _read_mapping(path)
        return cls.from_mapping(raw, text, path, data_root)

    @classmethod
    def from_mapping(
        cls,
        raw: Mapping[str, Any],
        text: str,
        path: Path,
        data_root: str | Path | None = None,
        generated: bool = False,
    ) -> Manifest:
        """Check a manifest already parsed (``raw``, from ``text``); ``path`` names it in
        errors and is the base of a relative ``data_root``."""
        where = str(path)
        unknown = set(raw) - _TOP_LEVEL_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}")
        if data_root is not None:
            root = Path(data_root)
        else:
            root = path.parent / str(raw.get("data_root", "."))
        dimensions = raw.get("dimensions")
        if not isinstance(dimensions, Mapping) or not dimensions:
            raise ConfigError(f"{where}: `dimensions` must declare at least one quality dimension")
        if COMBINED in dimensions:
            raise ConfigError(
                f"{where}: a dimension may not be named {COMBINED!r}: NRP results use that name "
                "for the weighted sum over dimensions"
            )
        scales = {
            str(name): LabelScale.from_manifest(str(name), spec, where)
            for name, spec in dimensions.items()
        }
        sources = raw.get("sources")
        if not isinstance(sources, list) or not sources:
            raise ConfigError(f"{where}: `sources` must list at least one input file")
        policy, reason = _repeated_policy(raw.get("repeated_judgments"), where)
        name = str(raw.get("name") or path.stem)
        return cls(
            path=path,
            text=text,
            name=name,
            description=str(raw.get("description", "")),
            citation=str(raw.get("citation", "")),
            data_root=root,
            dimensions=scales,
            sources=tuple(_source(i, s, root, where) for i, s in enumerate(sources)),
            repeated_policy=policy,
            repeated_reason=reason,
            generated=generated,
        )


def _read_mapping(path: Path) -> tuple[dict[str, Any], str]:
    if not path.is_file():
        raise InputError(path, None, "manifest not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(path, None, "manifest is not valid UTF-8") from None
    if not text.strip():
        raise InputError(path, None, "manifest is empty")
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else yaml.safe_load(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(path, None, f"malformed TOML: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(err, "problem", None) or str(err)
        raise InputError(path, line, f"malformed YAML: {problem}") from None
    if not isinstance(data, dict):
        raise InputError(path, None, "a manifest must be a mapping at the top level")
    return data, text


def _repeated_policy(spec: Any, where: str) -> tuple[str, str]:
    if spec is None:
        return "error", ""
    if isinstance(spec, str):
        spec = {"policy": spec}
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where}: repeated_judgments must be a mapping with policy and reason")
    policy = str(spec.get("policy", "error"))
    reason = str(spec.get("reason", "")).strip()
    if policy not in REPEATED_JUDGMENT_POLICIES:
        raise ConfigError(
            f"{where}: repeated_judgments.policy {policy!r} is not one of "
            f"{', '.join(REPEATED_JUDGMENT_POLICIES)}"
        )
    if policy != "error" and not reason:
        raise ConfigError(f"{where}: repeated_judgments.policy {policy!r} needs a `reason`")
    return policy, reason


def _source(position: int, spec: Any, root: Path, where: str) -> SourceSpec:
    at = f"{where}: sources[{position}]"
    if not isinstance(spec, Mapping) or "format" not in spec:
        raise ConfigError(f"{at} needs `format` and `path`")
    try:
        fmt = get_format(str(spec["format"]))
    except ConfigError as err:
        raise ConfigError(f"{at}: {err}") from None
    if fmt.reads_files and "path" not in spec:
        raise ConfigError(f"{at} needs `format` and `path`")
    if not fmt.reads_files and "path" in spec:
        raise ConfigError(f"{at} ({fmt.name}): reads no file, so it takes no `path`")
    given = {k: v for k, v in spec.items() if k not in ("format", "path")}
    unknown = set(given) - set(fmt.options)
    if unknown:
        known = ", ".join(fmt.options) or "none"
        raise ConfigError(f"{at} ({fmt.name}): unknown option(s) {sorted(unknown)}; known: {known}")
    options: dict[str, Any] = {}
    for key, option in fmt.options.items():
        if key in given:
            value = given[key]
            expected = option.type if isinstance(option.type, tuple) else (option.type,)
            if float in expected and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, expected):
                names = " or ".join(t.__name__ for t in expected)
                raise ConfigError(
                    f"{at} ({fmt.name}): option {key!r} must be {names}, got {value!r}"
                )
            options[key] = value
        elif option.required:
            raise ConfigError(
                f"{at} ({fmt.name}): option {key!r} is required: {option.description}"
            )
        else:
            options[key] = option.default
    if fmt.locator is not None:
        return SourceSpec(position, fmt.name, Path(fmt.locator(options)), options)
    return SourceSpec(position, fmt.name, root / str(spec["path"]), options)
