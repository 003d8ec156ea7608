"""Collection manifests (YAML or TOML): files, formats, dimensions, label scales, policies.

See docs/manifests.md. Everything a manifest gets wrong is a ``ConfigError`` naming the manifest
file and the key, raised before any input is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nrp.collection.formats import get_format
from nrp.collection.labels import LabelScale
from nrp.collection.mapping_files import (
    config_error_at,
    read_mapping_text,
    string_field,
)
from nrp.errors import ConfigError, InputError, quote

# The name of the rows holding an answer's weighted sum over dimensions in NRP results. Not
# "combined": that is a real ArgQuality quality dimension. A collection may not declare a
# dimension of this name.
COMBINED = "weighted"
#: what names an ir_datasets collection where a manifest path is expected (``irds:vaswani``)
DATASET_PREFIX = "irds:"

REPEATED_JUDGMENT_POLICIES = ("error", "max", "min", "mean", "first", "last")
#: top-level keys whose value is a string (or absent)
STRING_KEYS = ("name", "description", "citation")
_TOP_LEVEL_KEYS = {
    "name",
    "description",
    "citation",
    "data_root",
    "repeated_judgments",
    "dimensions",
    "sources",
    "allow_outside_root",
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

    def files(self) -> list[Path]:
        """Every file the source names: its path, and the files its path options name
        (relative to the source's folder, e.g. trec-topics-xml's ``narratives``); none for a
        source that reads no file (``irds``: ir_datasets' own cache)."""
        fmt = get_format(self.format)
        if not fmt.reads_files:
            return []
        named = [
            self.path.parent / str(self.options[key])
            for key, option in fmt.options.items()
            if option.path and self.options.get(key)
        ]
        return [self.path, *named]


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
    allow_outside_root: bool = False
    #: built in memory (``nrp ingest irds:ID``), not read from a file: ``path`` names its source
    generated: bool = False

    @property
    def location(self) -> str:
        """Where the manifest came from: its file (absolute), or what it was built from."""
        return str(self.path) if self.generated else str(Path(self.path).resolve())

    @classmethod
    def load(cls, path: str | Path, data_root: str | Path | None = None) -> Manifest:
        """Read and check a manifest file. ``data_root`` (the CLI's --data-root) replaces the
        manifest's own; a relative manifest ``data_root`` is taken from the manifest's folder.
        (``irds:DATASET_ID`` is no file: ``ingest`` builds its manifest with
        ``nrp.collection.formats.irds.irds_manifest``.)"""
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
            raise ConfigError(f"{where}: unknown key(s) {quote(sorted(map(str, unknown)))}")
        if data_root is not None:
            root = Path(data_root)
        else:
            root = path.parent / _path_text(raw.get("data_root", "."), f"{where}: data_root")
        outside = raw.get("allow_outside_root", False)
        if not isinstance(outside, bool):
            raise ConfigError(f"{where}: allow_outside_root must be true or false")
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
        if len(scales) != len(dimensions):
            raise ConfigError(f"{where}: a dimension is declared twice (once as a number)")
        sources = raw.get("sources")
        if not isinstance(sources, list) or not sources:
            raise ConfigError(f"{where}: `sources` must list at least one input file")
        specs = tuple(_source(i, s, root, path.parent, where) for i, s in enumerate(sources))
        if not outside:
            _confine(specs, root, where)
        policy, reason = _repeated_policy(raw.get("repeated_judgments"), where)
        fail = config_error_at(where)
        texts = {key: string_field(raw.get(key), key, fail) for key in STRING_KEYS}
        return cls(
            path=path,
            text=text,
            name=texts["name"] or path.stem,
            description=texts["description"],
            citation=texts["citation"],
            data_root=root,
            dimensions=scales,
            sources=specs,
            repeated_policy=policy,
            repeated_reason=reason,
            allow_outside_root=outside,
            generated=generated,
        )


def inside_roots(path: Path, roots: Iterable[Path]) -> bool:
    """Whether ``path`` lies inside one of ``roots`` once all are resolved (``..`` and links
    followed): the one rule that keeps the files a manifest (CLI) or a request (service) names
    under their data roots."""
    resolved = Path(path).resolve()
    return any(resolved.is_relative_to(Path(root).resolve()) for root in roots)


def first_outside(
    sources: Iterable[SourceSpec], roots: Iterable[Path]
) -> tuple[SourceSpec, Path] | None:
    """The first source, and the file it reads (its path or a file a path option names), that
    lies inside none of ``roots``; None when every file does."""
    roots = tuple(roots)
    for source in sources:
        for file in source.files():
            if not inside_roots(file, roots):
                return source, file
    return None


def _confine(sources: tuple[SourceSpec, ...], root: Path, where: str) -> None:
    """Every file the sources name lies inside the data root, or a ConfigError names the first
    that does not (a manifest says ``allow_outside_root: true`` to read files elsewhere)."""
    found = first_outside(sources, (root,))
    if found is not None:
        source, file = found
        raise ConfigError(
            f"{where}: sources[{source.position}] reads {quote(str(file))}, outside the "
            f"data root {root}; say `allow_outside_root: true` in the manifest to allow it"
        )


def _path_text(value: Any, what: str) -> str:
    """A path as written in the manifest; a NUL character (which no file name holds) refused."""
    text = str(value)
    if "\0" in text:
        raise ConfigError(f"{what}: a path cannot hold a NUL character")
    return text


def _read_mapping(path: Path) -> tuple[dict[str, Any], str]:
    if not path.is_file():
        raise InputError(path, None, "manifest not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(path, None, "manifest is not valid UTF-8") from None
    if not text.strip():
        raise InputError(path, None, "manifest is empty")
    data = read_mapping_text(path, text)
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
    fail = config_error_at(f"{where}: repeated_judgments")
    policy = string_field(spec.get("policy"), "policy", fail, "error")
    reason = string_field(spec.get("reason"), "reason", fail).strip()
    if policy not in REPEATED_JUDGMENT_POLICIES:
        raise ConfigError(
            f"{where}: repeated_judgments.policy {quote(policy)} is not one of "
            f"{', '.join(REPEATED_JUDGMENT_POLICIES)}"
        )
    if policy != "error" and not reason:
        raise ConfigError(f"{where}: repeated_judgments.policy {quote(policy)} needs a `reason`")
    return policy, reason


#: a source's ``relative_to``: what its relative ``path`` starts from (default: the data root,
#: which ``--data-root`` moves; ``manifest``: the manifest's folder, for files that stay beside
#: the manifest wherever the data is, such as documents a script restored into the repository)
RELATIVE_TO = ("data_root", "manifest")


def _source(position: int, spec: Any, root: Path, folder: Path, where: str) -> SourceSpec:
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
    relative_to = spec.get("relative_to", RELATIVE_TO[0])
    if relative_to not in RELATIVE_TO:
        raise ConfigError(
            f"{at}: relative_to must be {' or '.join(RELATIVE_TO)}, got {quote(relative_to)}"
        )
    if relative_to != RELATIVE_TO[0] and not fmt.reads_files:
        raise ConfigError(f"{at} ({fmt.name}): reads no file, so it takes no `relative_to`")
    given = {k: v for k, v in spec.items() if k not in ("format", "path", "relative_to")}
    unknown = set(given) - set(fmt.options)
    if unknown:
        known = ", ".join(fmt.options) or "none"
        listed = quote(sorted(map(str, unknown)))
        raise ConfigError(f"{at} ({fmt.name}): unknown option(s) {listed}; known: {known}")
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
                    f"{at} ({fmt.name}): option {quote(key)} must be {names}, got {quote(value)}"
                )
            if option.path:
                _path_text(value, f"{at} ({fmt.name}): option {quote(key)}")
            options[key] = value
        elif option.required:
            raise ConfigError(
                f"{at} ({fmt.name}): option {quote(key)} is required: {option.description}"
            )
        else:
            options[key] = option.default
    if fmt.locator is not None:
        return SourceSpec(position, fmt.name, Path(fmt.locator(options)), options)
    base = folder if relative_to == "manifest" else root
    return SourceSpec(position, fmt.name, base / _path_text(spec["path"], f"{at}: path"), options)
