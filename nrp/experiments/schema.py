"""The experiment file: one YAML document declaring a whole NRP run.

::

    name: demo-smollm2            # the report's title and the default output folder's name
    collection:                   # a built collection's name, or a manifest to build from
      manifest: manifest.yaml     #   relative to this file; built, or found up to date, first
      name: demo                  #   store name (default: the manifest's name)
    indexes: indexes              # where collections live (default: $NRP_INDEXES or ./indexes)
    out: runs/demo-smollm2        # output folder (default: runs/NAME)
    llms:                         # each: backend (local | openai), model, name, and backend keys
      - {name: smollm2, backend: local, model: ""}
    prompts: [short-qa, multimedqa]   # strategies (nrp.generation.prompts); NAME:chat too
    samples: 2
    limit_queries: 3              # optional: only the first N queries
    generation: {max_new_tokens: 48, temperature: 0.75, top_k: 50, top_p: 0.95,
                 repetition_penalty: 1.2, seed: 0}   # any omitted: the source study's value
    rankers:                      # validate: choose per dimension; or fixed: SPEC | {DIM: SPEC}
      validate: [tfidf, bm25]
    ties: mid
    evaluators: [bleu, rouge]     # optional (nrp.evaluators specs)

Paths: ``collection.manifest`` is relative to the experiment file (the data travels with
it); ``indexes`` and ``out`` are relative to the working directory, as every other nrp command's
outputs are, so a packaged experiment (``nrp/data/demo/experiment.yaml``) never writes into the
package. Unknown keys are errors (a misspelt ``sampels`` must not silently mean 10 samples).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from nrp.collection.mapping_files import parse_yaml, string_field, yaml_error
from nrp.errors import ConfigError, InputError, quote
from nrp.generation.generate import STUDY_OPTIONS, STUDY_SAMPLES, LlmSpec, parse_llm
from nrp.llm.backends import GenerationOptions
from nrp.ranks import DEFAULT_TIE_MODE
from nrp.spec import split_specs

KEYS = (
    "name", "collection", "indexes", "out", "llms", "prompts", "samples", "limit_queries",
    "generation", "rankers", "ties", "evaluators", "report",
)  # fmt: skip
GENERATION_KEYS = ("max_new_tokens", "temperature", "top_k", "top_p", "repetition_penalty", "seed")


@dataclass(frozen=True)
class Experiment:
    """A parsed, checked experiment file."""

    path: Path
    name: str
    collection: str
    manifest: Path | None
    indexes: Path | None
    out: Path
    llms: list[LlmSpec]
    prompts: list[str]
    samples: int
    limit_queries: int | None
    options: GenerationOptions
    validate_rankers: list[str] = field(default_factory=list)
    fixed_rankers: dict[str, str] | str | None = None
    ties: str = DEFAULT_TIE_MODE
    evaluators: list[str] = field(default_factory=list)
    report: bool = True


def _names(value: Any, key: str, path: Path) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return split_specs(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise InputError(path, None, f"{key} must be a list of strings or a comma-separated string")


def _failing(path: Path) -> Callable[[str], InputError]:
    """``fail`` for ``string_field``: an InputError naming the experiment file."""
    return lambda problem: InputError(path, None, problem)


def _int(value: Any, key: str, path: Path, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(path, None, f"{key} must be an integer >= {minimum}, got {quote(value)}")
    return value


def load_experiment(path: str | Path) -> Experiment:
    """Read and check an experiment file (errors name the file and the key)."""
    path = Path(path)
    data = _read(path)
    fail = _failing(path)
    name = string_field(data.get("name"), "name", fail) or path.stem
    if "/" in name:
        raise InputError(path, None, f"name {name!r} may not contain '/'")
    collection_name, manifest = _collection(data.get("collection"), path)
    llms = _llms(data.get("llms"), path)
    prompts = _names(data.get("prompts", "none,short-qa,long-qa,multimedqa"), "prompts", path)
    samples = _int(data.get("samples", STUDY_SAMPLES), "samples", path)
    limit = data.get("limit_queries")
    limit = None if limit is None else _int(limit, "limit_queries", path)
    options = _options(data.get("generation") or {}, path)
    validate_rankers, fixed = _rankers(data.get("rankers"), path)
    out = Path(string_field(data.get("out"), "out", fail) or Path("runs") / name)
    indexes_text = string_field(data.get("indexes"), "indexes", fail)
    indexes = Path(indexes_text) if indexes_text else None
    return Experiment(
        path=path,
        name=name,
        collection=collection_name,
        manifest=manifest,
        indexes=indexes,
        out=out,
        llms=llms,
        prompts=prompts,
        samples=samples,
        limit_queries=limit,
        options=options,
        validate_rankers=validate_rankers,
        fixed_rankers=fixed,
        ties=string_field(data.get("ties"), "ties", fail, DEFAULT_TIE_MODE),
        evaluators=_names(data.get("evaluators"), "evaluators", path),
        report=bool(data.get("report", True)),
    )


def _read(path: Path) -> Mapping[str, Any]:
    """The file's YAML mapping, its keys checked against ``KEYS``."""
    try:
        data = parse_yaml(path.read_text(encoding="utf-8"))  # a key given twice is an error
    except FileNotFoundError:
        raise InputError(path, None, "experiment file not found") from None
    except yaml.YAMLError as exc:  # its problem and line: never the whole snippet it quotes
        raise yaml_error(path, exc, "not YAML") from None
    except ValueError as exc:  # UnicodeDecodeError, a 5,000-digit number
        raise InputError(path, None, f"not YAML: {exc}") from None
    if not isinstance(data, Mapping):
        raise InputError(path, None, "an experiment file is a YAML mapping")
    unknown = sorted(map(str, set(data) - set(KEYS)))
    if unknown:
        raise InputError(
            path, None, f"unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})"
        )
    return data


def _collection(collection: Any, path: Path) -> tuple[str, Path | None]:
    """``collection:``: a built collection's name, or a manifest (relative to the file) and
    the name to store it under."""
    if isinstance(collection, str) and collection.strip():
        return collection.strip(), None
    if not isinstance(collection, Mapping):
        raise InputError(path, None, "collection: a collection name or {manifest, name}")
    extra = sorted(set(collection) - {"manifest", "name"})
    if extra:
        raise InputError(path, None, f"collection: unknown key(s) {', '.join(extra)}")
    manifest: Path | None = None
    fail = _failing(path)
    manifest_text = string_field(collection.get("manifest"), "collection.manifest", fail)
    if manifest_text:
        manifest = (path.parent / manifest_text).resolve()
        if not manifest.is_file():
            raise InputError(path, None, f"collection.manifest {manifest} not found")
    collection_name = string_field(collection.get("name"), "collection.name", fail)
    if not collection_name and manifest is None:
        raise InputError(path, None, "collection needs a name or a manifest")
    return collection_name, manifest


def _llms(value: Any, path: Path) -> list[LlmSpec]:
    """``llms:``: each parsed (``parse_llm``); their labels distinct."""
    if not isinstance(value, list) or not value:
        raise InputError(path, None, "llms: a list of LLMs ({name, backend, model, ...})")
    try:
        llms = [parse_llm(item if isinstance(item, Mapping) else str(item)) for item in value]
    except ConfigError as exc:
        raise InputError(path, None, f"llms: {exc}") from None
    labels = [llm.label for llm in llms]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise InputError(path, None, f"llms: name used twice: {', '.join(duplicates)}")
    return llms


def _options(generation: Any, path: Path) -> GenerationOptions:
    """``generation:``: decoding options; any omitted is the source study's value."""
    if not isinstance(generation, Mapping):
        raise InputError(path, None, "generation: a mapping of decoding options")
    unknown = sorted(set(generation) - set(GENERATION_KEYS))
    if unknown:
        raise InputError(
            path, None, f"generation: unknown key(s) {', '.join(unknown)} "
            f"(known: {', '.join(GENERATION_KEYS)})",
        )  # fmt: skip
    types = {f.name: f.type for f in fields(GenerationOptions)}
    try:
        return replace(
            STUDY_OPTIONS,
            **{k: (float if types[k] == "float" else int)(v) for k, v in generation.items()},
        ).check()
    except (TypeError, ValueError, ConfigError) as exc:
        raise InputError(path, None, f"generation: {exc}") from None


def _rankers(rankers: Any, path: Path) -> tuple[list[str], dict[str, str] | str | None]:
    """``rankers:``: the specs to validate, or the fixed ranker(s) (one for every dimension,
    or one per dimension); exactly one of the two."""
    if isinstance(rankers, str):
        return [], rankers
    if not (isinstance(rankers, Mapping) and set(rankers) <= {"validate", "fixed"} and rankers):
        raise InputError(path, None, "rankers: {validate: [SPECS]} or {fixed: SPEC | {DIM: SPEC}}")
    validate_rankers = _names(rankers.get("validate"), "rankers.validate", path)
    value = rankers.get("fixed")
    fixed: dict[str, str] | str | None = None
    fail = _failing(path)
    if isinstance(value, Mapping):
        fixed = {str(k): string_field(v, f"rankers.fixed.{k}", fail) for k, v in value.items()}
    elif value is not None:
        fixed = string_field(value, "rankers.fixed", fail)
    if bool(validate_rankers) == (fixed is not None):
        raise InputError(path, None, "rankers: give either validate or fixed")
    return validate_rankers, fixed
