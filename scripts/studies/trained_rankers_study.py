#!/usr/bin/env python3
"""The trained-rankers study: the figures of issue 13, from the shared collections, resumable.

For every dimension of MEDIQA 2019 test, the LiveQA-Med MedQuAD pool, Webis-ArgQuality-20,
CLEF eHealth 2021 and Cranfield, a cross-encoder and the dense bi-encoder (``--rankers``) are
trained on the collection's own judgments with query-disjoint folds (``nrp.api.train_ranker``,
the defaults of ``nrp train``), and their cross-fitted scores (``cross:model=DIR`` and
``dense:model=DIR``, fold=cross) are compared with the zoo:

- leave-one-out agreement (``nrp.api.agreement``): per-query Kendall tau-b mean with its 95%
  t-interval and the pooled tau-b, of each trained ranker, its fusion with dense (weights fitted
  on training folds), dense, tfidf and random;
- paired comparisons over the same queries: each trained ranker's per-query tau-b minus each
  baseline's (dense, tfidf, random), mean difference with its 95% t-interval and the paired
  randomization test (``nrp.statistics``), Holm-corrected per (trained ranker, collection,
  dimension); every comparison where a trained ranker is not significantly above is listed;
- validation (``nrp.api.validate``): nDCG@10 with 95% CI of the trained rankers and fusions,
  the fusion of dense and bm25 (weights=fit), query-field variants (dense and bm25 on another
  topic field) beside tfidf, bm25, dense and random.

Transfer: one ranker trained on the MEDIQA 2019 training and validation sets
(manifests/mediqa-2019-train.yaml) with the evaluation collections held out (their questions
are left out of training; 2 folds, whose models are not read), evaluated with fold=all on the
LiveQA pool and the MEDIQA test set (agreement, paired comparisons and validation as above); the
overlap checks come from its ``training.json``.

Output in ``--out DIR``: ``indexes/`` (unless ``--indexes``), ``models/RANKER/`` (the trained
folders, each with a ``.timing.json`` beside it), ``tables/*.csv`` and ``tables/*.json`` (trainings,
agreement, paired, validation, overlap) and ``study.md``, which is printed at the end. Tables
are rewritten after each collection and dimension, so a long run shows its figures as they come.
A run that is stopped continues where it was: a complete trained folder is used again (after
checking that it was trained with the same settings), and scores come from the score cache.
Runs of parts add up: the rows an earlier run wrote for parts this run does not select are kept
in the tables and the summary.

    .venv/bin/python scripts/studies/trained_rankers_study.py --out runs/study
    .venv/bin/python scripts/studies/trained_rankers_study.py --out runs/smoke \\
        --only clef-ehealth-2021/readability --max-steps 2
    .venv/bin/python scripts/studies/trained_rankers_study.py --out runs/study --only transfer

``--only`` takes ``COLLECTION``, ``COLLECTION/DIMENSION`` or ``transfer`` (several allowed).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchkit, beside the benchmarks
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other studies
from benchkit import ROOT, machine

from nrp import api
from nrp.analysis.agreement import paired_taus
from nrp.errors import NrpError
from nrp.models.device import resolve_device
from nrp.rankers.trained import TRAINING_FILE, normalise_query
from nrp.statistics import correct
from nrp.tables import (
    format_interval,
    format_number,
    format_p,
    json_export,
    records,
    write_text,
)
from nrp.training.data import NEAR_DUPLICATE, same_question
from nrp.training.model import resolve_base
from nrp.validation.validity import HELD_OUT_FAMILY

PROG = "trained_rankers_study"
MANIFESTS = ROOT / "manifests"
MEASURE = "nDCG@10"
ALPHA = 0.05
#: the rankers the trained one is compared with, per query, in the agreement
COMPARED = ("dense", "tfidf", "random")
TRANSFER = "transfer"
#: what ``nrp train --ranker`` trains, each studied (``--rankers``)
TRAINED_RANKERS = ("cross", "dense")
#: folds of the transfer training: its fold models are never read (evaluation is fold=all), so
#: the fewest that train_ranker takes, to spend the time on the all-queries model
TRANSFER_FOLDS = 2
TABLES = ("trainings", "agreement", "paired", "validation", "overlap")
#: with ``--guard``: the default validation candidate, the guard over dense with its content
#: weight (``nrp.rankers.guard``), and the trained ranker through the same guard
GUARD_ROLE = "guard (dense)"
GUARD_CONTENT = 0.06
#: training options of the command line, passed to ``train_ranker`` (``TrainSettings`` fields)
TRAINING_OPTIONS = ("base", "lr", "train_layers", "also", "held_out", "also_query")
CROSS_FITTED, TRANSFERRED = "cross-fitted (fold=cross)", "transfer (fold=all)"
#: the issue's goals: (collection, dimension, baseline) the trained ranker should beat
GOALS = (
    ("liveqa-med-2017", "relevance", "dense"),
    ("mediqa-2019", "relevance", "dense"),
    *(("argquality-20", d, "random") for d in ("rhetorical", "logical", "dialectical", "combined")),
)


class StudyError(NrpError):
    """A problem with the study's arguments or output folder (one line, exit 2)."""


# -- what is studied -------------------------------------------------------------------------------
@dataclass(frozen=True)
class StudyCollection:
    """A collection of the study: its manifest and the topic fields validated as query-field
    variants of dense and bm25 (besides ``query``)."""

    name: str
    manifest: Path
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class TransferPlan:
    """``train``'s ``dimension`` trained with ``evaluate`` held out (their questions left out of
    training), then evaluated on each of ``evaluate`` with fold=all."""

    train: StudyCollection
    dimension: str
    evaluate: tuple[str, ...]


COLLECTIONS = (
    StudyCollection("mediqa-2019", MANIFESTS / "mediqa-2019.yaml"),
    StudyCollection(
        "liveqa-med-2017", MANIFESTS / "liveqa-med-2017.yaml", ("paraphrase", "summary")
    ),
    StudyCollection("argquality-20", MANIFESTS / "argquality-20.yaml", ("short",)),
    StudyCollection("clef-ehealth-2021", MANIFESTS / "clef-ehealth-2021.yaml", ("narrative",)),
    StudyCollection("cranfield", MANIFESTS / "cranfield.yaml"),
)
MEDIQA_TRAIN = StudyCollection("mediqa-2019-train", MANIFESTS / "mediqa-2019-train.yaml")
TRANSFER_PLAN = TransferPlan(MEDIQA_TRAIN, "relevance", ("liveqa-med-2017", "mediqa-2019"))


@dataclass(frozen=True)
class StudyOptions:
    """The run: ``out`` folder, ``indexes`` (default ``out/indexes``), ``only`` (selections,
    empty: everything), the training settings given on the command line (``epochs`` None: the
    library's default), ``device`` for training and the neural rankers, ``training``: further
    ``TrainSettings`` fields (tests: a tiny base; ``--train-layers``, ``--also``, ``--held-out``,
    ``--also-query``), ``dense``: the dense ranker's spec, ``guard``: also measure each trained
    ranker through the guard (``GUARD_ROLE``) and validity, and what is studied
    (``collections``, ``transfer``)."""

    out: Path
    indexes: Path | None = None
    only: tuple[str, ...] = ()
    epochs: int | None = None
    folds: int = 5
    seed: int = 0
    device: str = "cpu"
    max_steps: int = 0
    training: Mapping[str, Any] = field(default_factory=dict)
    rankers: tuple[str, ...] = TRAINED_RANKERS
    dense: str = "dense"
    guard: bool = False
    collections: tuple[StudyCollection, ...] = COLLECTIONS
    transfer: TransferPlan = TRANSFER_PLAN

    @property
    def indexes_dir(self) -> Path:
        return self.indexes if self.indexes is not None else self.out / "indexes"

    def train_settings(self, ranker: str = "cross", held_out: Sequence[str] = ()) -> dict[str, Any]:
        """Keyword settings of ``api.train_ranker`` for ``ranker`` (those not given keep its
        defaults)."""
        given = {"ranker": ranker, "folds": self.folds, "seed": self.seed, "device": self.device}
        given.update(max_steps=self.max_steps, held_out=tuple(held_out), verbose=False)
        if self.epochs is not None:
            given["epochs"] = self.epochs
        return {**given, **self.training}


@dataclass
class Selection:
    """What ``--only`` selects: collection -> its dimensions (None: all), and the transfer."""

    targets: dict[str, list[str] | None]
    transfer: bool


def select(options: StudyOptions) -> Selection:
    """The collections, dimensions and transfer that ``options.only`` names (all when empty)."""
    known = {c.name: c for c in options.collections}
    if not options.only:
        return Selection({name: None for name in known}, True)
    targets: dict[str, list[str] | None] = {}
    transfer = False
    for item in options.only:
        name, _, dimension = item.partition("/")
        if item == TRANSFER:
            transfer = True
        elif name not in known:
            choices = ", ".join([*known, TRANSFER])
            raise StudyError(f"--only {item}: no collection {name!r} in the study ({choices})")
        elif not dimension or (name in targets and targets[name] is None):
            targets[name] = None  # every dimension
        else:
            targets[name] = [*(targets.get(name) or []), dimension]
    return Selection(targets, transfer)


# -- logging ---------------------------------------------------------------------------------------
_START = time.perf_counter()


def log(message: str) -> None:
    """A progress line on stderr, with the minutes since the start."""
    print(f"[{(time.perf_counter() - _START) / 60:6.1f} min] {message}", file=sys.stderr)


# -- ingest ----------------------------------------------------------------------------------------
def ingest(options: StudyOptions, selection: Selection) -> dict[str, Any]:
    """Ingest what the selection needs (nothing is rebuilt that is unchanged); name ->
    ``Collection`` of every studied collection, each selected dimension checked."""
    wanted = [c for c in options.collections if c.name in selection.targets]
    if selection.transfer:
        plan = options.transfer
        wanted += [plan.train] + [c for c in options.collections if c.name in plan.evaluate]
    wanted += training_collections(options)
    loaded = {}
    for item in dict.fromkeys(wanted):
        built = api.ingest(item.manifest, indexes_dir=options.indexes_dir)
        log(f"{'ingested' if built.rebuilt else 'up to date'}: {built.name} ({built.path})")
        loaded[item.name] = api.Collection.load(item.name, options.indexes_dir)
    for name, dimensions in selection.targets.items():
        unknown = [d for d in dimensions or [] if d not in loaded[name].dimensions]
        if unknown:
            raise StudyError(
                f"--only {name}/{unknown[0]}: no such dimension "
                f"(it has: {', '.join(loaded[name].dimensions)})"
            )
    return loaded


def training_collections(options: StudyOptions) -> list[StudyCollection]:
    """The collections the training options name (``--also``, ``--held-out``): ingested too."""
    known = {c.name: c for c in [*options.collections, options.transfer.train]}
    names = [*options.training.get("also", ()), *options.training.get("held_out", ())]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise StudyError(f"training collection {unknown[0]!r} is not one of {', '.join(known)}")
    return [known[name] for name in names]


# -- training --------------------------------------------------------------------------------------
@dataclass
class Training:
    """A trained folder of the study and how it came to be (``status``: trained now or
    reused from an earlier run); ``timing``: wall time and rates, when known."""

    ranker: str
    collection: str
    dimension: str
    folder: Path
    record: dict[str, Any]
    status: str
    timing: dict[str, Any]

    def row(self, role: str) -> dict[str, Any]:
        record = self.record
        return {
            "role": role,
            "ranker": self.ranker,
            "collection": self.collection,
            "dimension": self.dimension,
            "pairs": record["data"]["pairs"],
            "queries": record["data"]["queries"],
            "folds": record["folds"]["k"],
            "epochs": record["hyper_parameters"]["epochs"],
            "max_steps": record["hyper_parameters"]["max_steps"],
            "device": record["environment"]["device"],
            "status": self.status,
            "wall_seconds": self.timing.get("seconds"),
            "pairs_per_second": self.timing.get("pairs_per_second"),
            "folder": str(self.folder),
        }


def timing_file(folder: Path) -> Path:
    return folder.with_name(f"{folder.name}.timing.json")


def train(
    options: StudyOptions,
    ranker: str,
    collection: str,
    dimension: str,
    folder: Path,
    held_out: Sequence[str] = (),
) -> Training:
    """Train ``collection``'s ``dimension`` into ``folder``, or reuse the complete folder an
    earlier run left there (a folder ``train_ranker`` wrote is complete: it is renamed into
    place at the end)."""
    settings = options.train_settings(ranker, held_out)
    if held_out:  # evaluated with fold=all only: the fold models are not read
        settings["folds"] = min(settings["folds"], TRANSFER_FOLDS)
    record_file = folder / TRAINING_FILE
    if record_file.exists():
        record = json.loads(record_file.read_text(encoding="utf-8"))
        check_reusable(folder, record, settings)
        check_data(folder, record, options.indexes_dir)
        timing = timing_file(folder)
        known = json.loads(timing.read_text(encoding="utf-8")) if timing.exists() else {}
        log(f"reusing {folder} (trained by an earlier run)")
        return Training(ranker, collection, dimension, folder, record, "reused", known)
    if folder.exists():
        raise StudyError(f"{folder} exists but has no {TRAINING_FILE}: remove it")
    for partial in folder.parent.glob(f".{folder.name}.partial-*"):  # a killed run's staging
        shutil.rmtree(partial, ignore_errors=True)
    log(f"training {ranker} on {collection} / {dimension} into {folder}")
    result = api.train_ranker(
        collection, dimension, folder, indexes_dir=options.indexes_dir, progress=log, **settings
    )
    log(result.format())
    timing = {
        "seconds": result.seconds,
        "feature_seconds": result.feature_seconds,
        "training_seconds": result.training_seconds,
        "pairs_per_second": result.pairs_per_second,
    }
    write_text(timing_file(folder), json.dumps(timing, indent=1) + "\n")
    return Training(ranker, collection, dimension, folder, result.record, "trained", timing)


def check_reusable(folder: Path, record: dict[str, Any], settings: Mapping[str, Any]) -> None:
    """Refuse a trained folder whose record says other settings than this run asks for."""
    wanted = api.TrainSettings(**settings).checked()
    hyper = wanted.hyper_parameters()
    recorded = record["hyper_parameters"]
    differ = [k for k in hyper if k != "max_length" and recorded.get(k) != hyper[k]]
    sources = record["data"]["sources"]
    held_out = [s["name"] for s in sources if s["role"].startswith("held out")]
    also = [s["name"] for s in sources if s["role"].startswith("also")]
    checks = {
        "ranker": (record.get("ranker", "cross"), wanted.ranker),
        "folds": (record["folds"]["k"], wanted.folds),
        "seed": (record["folds"]["seed"], wanted.seed),
        "base": (record["base"]["model"], wanted.base),
        "held_out": (held_out, list(wanted.held_out)),
        "also": (also, list(wanted.also)),
        "also_query": (record["data"].get("also_query", []), list(wanted.also_query)),
    }
    differ += [name for name, (was, now) in checks.items() if was != now]
    if differ:
        raise StudyError(
            f"{folder} was trained with other settings ({', '.join(differ)} differ): give "
            "another --out, or remove it to train again"
        )


def check_data(folder: Path, record: dict[str, Any], indexes: Path) -> None:
    """Refuse a trained folder whose collections were ingested again since (other data)."""
    for source in record["data"]["sources"]:
        now = api.Collection.load(source["name"], indexes).meta.get("fingerprint", "")
        if str(now) != source["fingerprint"]:
            raise StudyError(
                f"{folder} was trained on collection {source['name']!r} as it was before it "
                "was ingested again (other data): remove it to train again"
            )


# -- ranker specs ----------------------------------------------------------------------------------
def with_params(spec: str, **params: Any) -> str:
    """``spec`` with ``params`` added (``dense`` -> ``dense:device=cpu``)."""
    joined = ",".join(f"{key}={value}" for key, value in params.items())
    return f"{spec}{',' if ':' in spec else ':'}{joined}"


def fuse_spec(specs: Sequence[str], dimension: str, options: StudyOptions) -> str:
    """The fusion of ``specs`` with weights fitted per fold on the other folds' queries."""
    rankers = "+".join(spec.replace(",", ";") for spec in specs)
    return (
        f"fuse:rankers={rankers},weights=fit,dimension={dimension},folds={options.folds},"
        f"seed={options.seed}"
    )


def trained_role(ranker: str, fold: str) -> str:
    """The display name of a trained ranker (``trained dense (fold=cross)``)."""
    return f"trained {ranker} (fold={fold})"


def ranker_roles(
    options: StudyOptions,
    folders: Mapping[str, Path],
    dimension: str,
    fold: str,
    fields: Sequence[str] = (),
) -> dict[str, str]:
    """Display name -> spec of every ranker of one (collection, dimension): the trained ones
    (ranker -> its trained folder, read with ``fold``) first, then each one's fusion with dense,
    the baselines of the agreement, and those of validation only: bm25, the fusion of dense and
    bm25, and dense and bm25 on each topic field of ``fields``."""
    dense = with_params(options.dense, device=options.device)
    trained = {}
    for ranker, folder in folders.items():
        if any(c in str(folder) for c in ",+;"):
            raise StudyError(f"{folder}: a folder name with , + or ; cannot stand in a ranker spec")
        spec = with_params(f"{ranker}:model={folder},fold={fold}", device=options.device)
        trained[trained_role(ranker, fold)] = spec
    roles = dict(trained)
    for ranker, spec in zip(folders, trained.values(), strict=True):
        roles[f"trained {ranker}+dense (fit)"] = fuse_spec([spec, dense], dimension, options)
    roles |= {
        "dense": dense,
        "tfidf": "tfidf",
        "random": "random",
        "bm25": "bm25",
        "dense+bm25 (fit)": fuse_spec([dense, "bm25"], dimension, options),
    }
    for name in fields:
        roles[f"dense:query={name}"] = with_params(dense, query=name)
        roles[f"bm25:query={name}"] = f"bm25:query={name}"
    if options.guard:
        roles[GUARD_ROLE] = guard_spec(dense)
        for name, spec in trained.items():
            roles[f"{name} guarded"] = guard_spec(spec)
    return roles


def guard_spec(spec: str) -> str:
    """The guard over ``spec`` with the default candidate's content weight."""
    return f"guard:ranker={spec.replace(',', ';')},content={GUARD_CONTENT}"


def trained_roles(roles: Mapping[str, str]) -> list[str]:
    """The trained rankers among ``roles`` (not their fusions)."""
    return [name for name in roles if name.startswith("trained ") and "+" not in name]


def agreement_roles(roles: Mapping[str, str]) -> dict[str, str]:
    """The rankers of the agreement tables: the trained ones, their fusions, ``COMPARED`` (and
    the guard over dense with ``--guard``)."""
    keep = [name for name in roles if name.startswith("trained ")] + list(compared(roles))
    return {name: roles[name] for name in keep}


def compared(roles: Mapping[str, Any]) -> tuple[str, ...]:
    """The baselines of the paired comparisons: ``COMPARED``, and the guard over dense when
    it is among ``roles``."""
    return COMPARED + ((GUARD_ROLE,) if GUARD_ROLE in roles else ())


def spec_names(roles: Mapping[str, str]) -> dict[str, str]:
    """Display name -> the name result tables give the ranker (its short spec)."""
    return {role: api.make_ranker(spec).spec() for role, spec in roles.items()}


# -- agreement -------------------------------------------------------------------------------------
def agreement_rows(
    collection: Any, dimension: str, roles: Mapping[str, str], where: Mapping[str, str]
) -> tuple[list[dict], list[dict]]:
    """Leave-one-out agreement of ``roles`` (``agreement_roles``) in ``dimension``: one summary
    row per ranker, and the paired comparisons of the trained ranker (the first) with
    ``COMPARED``."""
    names = spec_names(roles)
    log(f"agreement: {collection.name} / {dimension}")
    result = api.agreement(collection, list(roles.values()), dimensions=[dimension], progress=log)
    summary = result.summary.set_index("ranker")
    rows = []
    for role, name in names.items():
        row = summary.loc[name]
        rows.append(
            {
                **where,
                "ranker": role,
                "spec": name,
                "tau_mean": row["tau_mean"],
                "tau_ci_low": row["tau_ci_low"],
                "tau_ci_high": row["tau_ci_high"],
                "tau_pooled": row["tau_pooled"],
                "queries_used": int(row["queries_used"]),
                "queries_judged": int(row["queries_judged"]),
                "documents": int(row["docs"]),
            }
        )
    return rows, paired_rows(result.per_query, names, where)


def paired_rows(
    per_query: pd.DataFrame, names: Mapping[str, str], where: Mapping[str, str]
) -> list[dict]:
    """Each trained ranker of ``names`` against each of ``COMPARED`` over the same queries
    (``nrp.analysis.agreement.paired_taus``): mean per-query tau-b difference, its t-interval,
    the paired randomization test's p-value, Holm-corrected over the comparisons of that
    trained ranker, and the verdict."""
    rows = []
    for trained_name in trained_roles(names):
        own = []
        for role in compared(names):
            paired = paired_taus(per_query, names[trained_name], names[role])
            own.append(
                {
                    **where,
                    "trained": trained_name,
                    "baseline": role,
                    "queries": paired["queries"],
                    "trained_tau": paired["tau"],
                    "baseline_tau": paired["against_tau"],
                    "difference": paired["difference"],
                    "ci_low": paired["ci_low"],
                    "ci_high": paired["ci_high"],
                    "p": paired["p"],
                }
            )
        for row, corrected in zip(own, correct([r["p"] for r in own], "holm"), strict=True):
            row["p_holm"] = corrected
            row["verdict"] = verdict(row["difference"], corrected)
        rows += own
    return rows


def verdict(difference: float, p: float) -> str:
    if p < ALPHA and difference > 0:
        return "significantly above"
    if p < ALPHA and difference < 0:
        return "significantly below"
    return "not significantly different"


# -- validation ------------------------------------------------------------------------------------
def validation_rows(
    collection: Any,
    dimension: str,
    roles: Mapping[str, str],
    where: Mapping[str, str],
    validity: bool = False,
) -> list[dict]:
    """nDCG@10 with its 95% CI of every ranker of ``roles`` in ``dimension``, which one
    validation chooses, and the Holm-corrected p-value of each against the first trained one
    (``compared_with``); with ``validity``, each ranker's validity too (``validity_columns``)."""
    names = spec_names(roles)
    log(f"validation: {collection.name} / {dimension} ({len(roles)} rankers)")
    # validity off unless --guard: the study compares agreement and nDCG@10 (docs/validity.md)
    result = api.validate(
        collection, list(roles.values()), dimensions=[dimension], progress=log, validity=validity
    )
    found = result.dimensions[dimension]
    best = found.choice.best if found.choice is not None else None
    first = trained_roles(names)[0]
    trained = names[first]
    rows = []
    for role, name in names.items():
        summary = found.summary[name][MEASURE]
        rows.append(
            {
                **where,
                "ranker": role,
                "spec": name,
                "ndcg10": summary.mean,
                "ci_low": summary.ci_low,
                "ci_high": summary.ci_high,
                "queries": summary.n,
                "chosen": name == best,
                "compared_with": first,
                "p_holm_vs_trained": None if name == trained else found.p_against(trained, name),
                **(validity_columns(found.validity.get(name)) if validity else {}),
            }
        )
    return rows


def validity_columns(measured: Any) -> dict[str, Any]:
    """A ranker's validity (``nrp.validation.validity.Validity``): the share of (relevant judged
    document, degenerate text) pairs the document wins, over all texts and over the family held
    out of the guard's fitting, and whether it passes."""
    if measured is None or measured.overall is None:
        return {"wins": None, "wins_held_out": None, "validity": "not measured"}
    family = measured.families.get(measured.held_out_family)
    return {
        "wins": measured.overall.wins,
        "wins_held_out": None if family is None else family.wins,
        "validity": "pass" if measured.passed else "FAIL",
    }


# -- the study -------------------------------------------------------------------------------------
@dataclass
class StudyTables:
    """Every table of the study, as lists of rows (one list per name of ``TABLES``)."""

    trainings: list[dict] = field(default_factory=list)
    agreement: list[dict] = field(default_factory=list)
    paired: list[dict] = field(default_factory=list)
    validation: list[dict] = field(default_factory=list)
    overlap: list[dict] = field(default_factory=list)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {name: pd.DataFrame(getattr(self, name)) for name in TABLES}


def study_dimension(
    options: StudyOptions,
    collection: Any,
    item: StudyCollection,
    dimension: str,
    tables: StudyTables,
) -> None:
    """Train each ranker of ``options.rankers`` on ``dimension`` of ``collection``
    (cross-fitted) and add their figures to ``tables``."""
    folders = {}
    for ranker in options.rankers:
        folder = options.out / "models" / ranker / collection.name / dimension
        training = train(options, ranker, collection.name, dimension, folder)
        tables.trainings.append(training.row("cross-fitted"))
        folders[ranker] = folder
    where = {"setting": CROSS_FITTED, "trained_on": collection.name}
    where |= {"collection": collection.name, "dimension": dimension}
    roles = ranker_roles(options, folders, dimension, "cross", item.fields)
    agreement, paired = agreement_rows(collection, dimension, agreement_roles(roles), where)
    tables.agreement += agreement
    tables.paired += paired
    tables.validation += validation_rows(collection, dimension, roles, where, options.guard)


def study_transfer(options: StudyOptions, loaded: Mapping[str, Any], tables: StudyTables) -> None:
    """Train on the transfer collection with the evaluation collections held out; evaluate the
    all-queries model (fold=all) on each of them; record the overlap checks."""
    plan = options.transfer
    folders = {}
    for ranker in options.rankers:
        folder = options.out / "models" / ranker / TRANSFER / f"{plan.train.name}-{plan.dimension}"
        training = train(options, ranker, plan.train.name, plan.dimension, folder, plan.evaluate)
        tables.trainings.append(training.row(TRANSFER))
        folders[ranker] = folder
    tables.overlap += overlap_rows(training.record, plan, loaded)
    for name in plan.evaluate:
        collection = loaded[name]
        where = {"setting": TRANSFERRED, "trained_on": plan.train.name}
        where |= {"collection": name, "dimension": plan.dimension}
        roles = ranker_roles(options, folders, plan.dimension, "all")
        agreement, paired = agreement_rows(
            collection, plan.dimension, agreement_roles(roles), where
        )
        tables.agreement += agreement
        tables.paired += paired
        tables.validation += validation_rows(collection, plan.dimension, roles, where)


def overlap_rows(
    record: Mapping[str, Any], plan: TransferPlan, loaded: Mapping[str, Any]
) -> list[dict]:
    """The overlap checks of a transfer training: the training queries ``training.json`` says
    were left out for asking an evaluation collection's question (exact normalised text), per
    collection, its totals, and the check that none is left (``near_duplicates``)."""
    overlap = record["overlap"]
    reasons = list(overlap["excluded"].values())
    trained = plan.train.name
    rows = [
        {
            "trained_on": trained,
            "check": f"questions also asked in {name} (left out of training)",
            "count": sum(f"held-out query {name}/" in reason for reason in reasons),
            "details": "",
        }
        for name in plan.evaluate
    ]
    rows += [
        {"trained_on": trained, "check": f"total {key.replace('_', ' ')}", "count": value}
        | {"details": ""}
        for key, value in overlap["counts"].items()
    ]
    kept = record["models"]["all"]["trained_queries"]
    for name in plan.evaluate:
        found = near_duplicates(loaded[trained], kept, loaded[name])
        rows.append(
            {
                "trained_on": trained,
                "check": f"questions of {name} still asked in training (equal or word-set "
                f"Jaccard >= {NEAR_DUPLICATE}: must be 0)",
                "count": len(found),
                "details": "; ".join(found),
            }
        )
    return rows


def near_duplicates(train: Any, kept: Sequence[str], other: Any) -> list[str]:
    """``kept`` training queries that still ask a question of ``other`` by the library's rule
    (``nrp.training.data.same_question``: equal normalised texts, or word sets at Jaccard
    similarity >= ``NEAR_DUPLICATE``), as ``qid ~ other/qid``: the check that the rule left none
    in training (the list is empty when it holds)."""
    texts = dict(zip(train.topics["qid"].astype(str), train.topics["query"], strict=True))
    questions = [
        (qid, {normalise_query(text)})
        for qid, text in zip(other.topics["qid"].astype(str), other.topics["query"], strict=True)
    ]
    found = []
    for key in kept:
        mine = {normalise_query(texts.get(key, ""))} - {""}
        found += [
            f"{key} ~ {other.name}/{qid}"
            for qid, theirs in questions
            if same_question(mine, theirs)
        ]
    return found


def run_study(options: StudyOptions) -> StudyTables:
    """Ingest, train, evaluate; the tables are written after each step."""
    selection = select(options)
    loaded = ingest(options, selection)
    tables = earlier_tables(options, selection)
    for item in options.collections:
        if item.name not in selection.targets:
            continue
        collection = loaded[item.name]
        for dimension in selection.targets[item.name] or list(collection.dimensions):
            study_dimension(options, collection, item, dimension, tables)
            write_outputs(options, tables)
    if selection.transfer:
        study_transfer(options, loaded, tables)
    write_outputs(options, tables)
    return tables


def earlier_tables(options: StudyOptions, selection: Selection) -> StudyTables:
    """The rows an earlier run wrote to ``out/tables`` for what this run does not select, so
    that runs of parts (``--only``) add up to one study; the selected parts are computed anew."""
    kept = StudyTables()
    for name in TABLES:
        path = options.out / "tables" / f"{name}.json"
        if path.exists():
            rows = json.loads(path.read_text(encoding="utf-8"))
            setattr(kept, name, [r for r in rows if not _selected(r, selection, options)])
    return kept


def _selected(row: Mapping[str, Any], selection: Selection, options: StudyOptions) -> bool:
    """Whether this run computes ``row`` again (its collection and dimension, or the transfer)."""
    transfer = row.get("role") == TRANSFER or row.get("setting") == TRANSFERRED
    transfer = transfer or ("check" in row and row.get("trained_on") == options.transfer.train.name)
    if transfer:
        return selection.transfer
    collection = row.get("collection", row.get("trained_on"))
    if collection not in selection.targets:
        return False
    dimensions = selection.targets[collection]
    return dimensions is None or row.get("dimension") in dimensions


# -- output ----------------------------------------------------------------------------------------
def write_outputs(options: StudyOptions, tables: StudyTables) -> str:
    """Every table as CSV and JSON under ``out/tables``, and ``out/study.md``; its text."""
    folder = options.out / "tables"
    for name, frame in tables.frames().items():
        write_text(folder / f"{name}.csv", frame.to_csv(index=False))
        json_export(records(frame), folder / f"{name}.json")
    text = summary(options, tables)
    write_text(options.out / "study.md", text)
    return text


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _where(row: Mapping[str, Any]) -> str:
    return f"{row['collection']} / {row['dimension']}"


def _of(rows: Sequence[dict], setting: str) -> list[dict]:
    return [row for row in rows if row["setting"] == setting]


def _seconds(value: Any) -> str:
    return "unknown" if value is None else f"{value:.1f}"


def summary(options: StudyOptions, tables: StudyTables) -> str:
    """The study's figures as one markdown text."""
    settings = api.TrainSettings(**options.train_settings()).checked()
    parts = [
        "# Trained rankers per dimension: the study (issue 13)",
        f"Training (`nrp train` defaults unless given): base {settings.base}, epochs "
        f"{settings.epochs}, batch {settings.batch}, lr {settings.lr:g}, max length "
        f"{settings.max_length}, train layers {settings.train_layers}, {settings.folds} folds, "
        f"seed {settings.seed}, device {settings.device}; trained rankers: "
        f"{', '.join(options.rankers)}. {machine()}; written "
        f"{time.strftime('%Y-%m-%d %H:%M')}.",
    ]
    if options.max_steps:
        parts.append(
            f"**Smoke run: every model stopped after {options.max_steps} steps. These figures "
            "check the pipeline; they are not the study's results.**"
        )
    parts += trainings_section(tables.trainings)
    titles = {
        CROSS_FITTED: "Rankers trained on each collection, cross-fitted (fold=cross)",
        TRANSFERRED: f"Transfer: trained on {options.transfer.train.name}, evaluated with fold=all",
    }
    for setting, title in titles.items():
        if not _of(tables.agreement, setting):
            continue
        parts.append(f"## {title}")
        if setting == TRANSFERRED:
            parts += overlap_section(tables.overlap)
        parts += agreement_section(_of(tables.agreement, setting))
        parts += paired_section(_of(tables.paired, setting), setting)
        parts += validation_section(_of(tables.validation, setting))
    return "\n\n".join(parts) + "\n"


def trainings_section(rows: Sequence[dict]) -> list[str]:
    header = ["trained", "ranker", "role", "pairs", "queries", "folds", "epochs", "device"]
    header += ["status"]
    header += ["wall time (s)", "pairs/s"]
    body = [
        [
            _where(r),
            r.get("ranker", "cross"),
            r["role"],
            r["pairs"],
            r["queries"],
            r["folds"],
            r["epochs"],
            r["device"],
            r["status"],
            _seconds(r["wall_seconds"]),
            "unknown" if r["pairs_per_second"] is None else f"{r['pairs_per_second']:.1f}",
        ]
        for r in rows
    ]
    note = "Wall time: the whole `train_ranker` call (k fold models and the all-queries model)."
    return ["## Trainings", md_table(header, body), note]


def agreement_section(rows: Sequence[dict]) -> list[str]:
    header = ["collection / dimension", "ranker", "tau-b mean [95% CI]", "tau-b pooled"]
    header += ["queries used", "documents"]
    body = [
        [
            _where(r),
            r["ranker"],
            f"{format_number(r['tau_mean'])} {format_interval(r['tau_ci_low'], r['tau_ci_high'])}",
            format_number(r["tau_pooled"]),
            r["queries_used"],
            r["documents"],
        ]
        for r in rows
    ]
    return [
        "### Leave-one-out agreement (Kendall tau-b of NRP and grade)",
        md_table(header, body),
    ]


def paired_section(rows: Sequence[dict], setting: str) -> list[str]:
    header = ["collection / dimension", "trained - baseline", "queries"]
    header += ["mean difference [95% CI]", "p", "p (Holm)", "verdict"]
    body = [
        [
            _where(r),
            f"{r['trained']} - {r['baseline']}",
            r["queries"],
            f"{format_number(r['difference'])} {format_interval(r['ci_low'], r['ci_high'])}",
            format_p(r["p"]),
            format_p(r["p_holm"]),
            r["verdict"],
        ]
        for r in rows
    ]
    lines = [
        "### Paired comparisons: per-query tau-b, trained minus baseline (same queries; "
        "paired randomization test, Holm over the baselines of each dimension)",
        md_table(header, body),
        "Where the trained ranker is **not** significantly above:",
    ]
    below = [r for r in rows if r["verdict"] != "significantly above"]
    lines.append(
        "\n".join(
            f"- {_where(r)}: {r['trained']} vs {r['baseline']}: difference "
            f"{format_number(r['difference'])} {format_interval(r['ci_low'], r['ci_high'])}, "
            f"p (Holm) {format_p(r['p_holm'])}: {r['verdict']}"
            for r in below
        )
        or "- nowhere"
    )
    if setting == CROSS_FITTED:
        lines += goals_section(rows)
    return lines


def goals_section(rows: Sequence[dict]) -> list[str]:
    """The issue's goals, met or not, for the comparisons this run made: a line per trained
    ranker compared (with ``--guard`` the trained ranker alone and through the guard), each
    named."""
    lines = []
    for key in GOALS:
        for row in rows:
            if (row["collection"], row["dimension"], row["baseline"]) != key:
                continue
            met = "met" if row["verdict"] == "significantly above" else "NOT met"
            lines.append(
                f"- {row['trained']} above {key[2]} on {key[0]} / {key[1]}: {met} (difference "
                f"{format_number(row['difference'])}, p (Holm) {format_p(row['p_holm'])})"
            )
    return ["Goals of the issue:", "\n".join(lines)] if lines else []


def validation_section(rows: Sequence[dict]) -> list[str]:
    header = ["collection / dimension", "ranker", "nDCG@10 [95% CI]", "queries", "chosen"]
    header += ["p (Holm) vs the first trained"]
    validity = any("validity" in r for r in rows)
    header += ["wins", f"wins {HELD_OUT_FAMILY} (held out)", "validity"] if validity else []
    body = [
        [
            _where(r),
            r["ranker"],
            f"{format_number(r['ndcg10'])} {format_interval(r['ci_low'], r['ci_high'])}",
            r["queries"],
            "yes" if r["chosen"] else "",
            "" if r["p_holm_vs_trained"] is None else format_p(r["p_holm_vs_trained"]),
            *([_share(r.get("wins")), _share(r.get("wins_held_out")), r.get("validity", "")]
              if validity else []),
        ]
        for r in rows
    ]  # fmt: skip
    return [
        "### Validation (nDCG@10, 95% t-interval over queries; Holm over all pairs of rankers)",
        md_table(header, body),
    ]


def _share(value: Any) -> str:
    return "-" if value is None or value != value else f"{value:.3f}"


def overlap_section(rows: Sequence[dict]) -> list[str]:
    body = [[r["trained_on"], r["check"], r["count"], r["details"]] for r in rows]
    lines = [
        "### Overlap checks (training.json; the last rows check that none was kept)",
        md_table(["trained on", "check", "count", "details"], body),
    ]
    if any(r["count"] for r in rows if r["check"].startswith("questions of")):
        lines.append(
            "**Evaluation questions were trained on** (the overlap rule did not hold): the "
            "transfer figures include these questions; read them with that in mind."
        )
    return lines


# -- variants --------------------------------------------------------------------------------------
def compare_variants(folders: Sequence[Path], out: Path) -> str:
    """One table of the variants that runs of this study wrote to ``folders`` (one trained
    setting each, ``--only`` one dimension): each trained ranker's agreement and its per-query
    difference from dense, the randomization p-values Holm-corrected over all variants'
    comparisons with dense, nDCG@10 and validity. Written to ``out/variants.md`` (and .csv)."""
    rows = []
    for folder in folders:
        tables = {}
        for name in ("paired", "validation"):
            path = folder / "tables" / f"{name}.json"
            if not path.exists():
                raise StudyError(f"--compare {folder}: no {path.name} (run the study there)")
            tables[name] = json.loads(path.read_text(encoding="utf-8"))
        validation = {
            (r["collection"], r["dimension"], r["ranker"]): r for r in tables["validation"]
        }
        for row in tables["paired"]:
            if row["baseline"] != "dense":
                continue
            checked = validation.get((row["collection"], row["dimension"], row["trained"]), {})
            rows.append({"variant": folder.name, **row, **_validation_of(checked)})
    if not rows:
        raise StudyError("--compare: the folders hold no comparison of a trained ranker with dense")
    for row, corrected in zip(rows, correct([r["p"] for r in rows], "holm"), strict=True):
        row["p_holm_variants"] = corrected
        row["verdict"] = verdict(row["difference"], corrected)
    frame = pd.DataFrame(rows)
    write_text(out / "variants.csv", frame.to_csv(index=False))
    text = variants_markdown(rows)
    write_text(out / "variants.md", text)
    return text


def _validation_of(row: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("ndcg10", "ci_low", "ci_high", "chosen", "wins", "wins_held_out", "validity")
    return {f"validation_{key}": row.get(key) for key in keys}


def variants_markdown(rows: Sequence[dict]) -> str:
    header = ["variant", "collection / dimension", "trained", "tau-b", "dense"]
    header += ["difference [95% CI]", "p", "p (Holm, all variants)", "verdict", "nDCG@10 [95% CI]"]
    header += ["wins", f"wins {HELD_OUT_FAMILY}", "validity"]
    body = [
        [
            r["variant"],
            _where(r),
            r["trained"],
            format_number(r["trained_tau"]),
            format_number(r["baseline_tau"]),
            f"{format_number(r['difference'])} {format_interval(r['ci_low'], r['ci_high'])}",
            format_p(r["p"]),
            format_p(r["p_holm_variants"]),
            r["verdict"],
            f"{format_number(r['validation_ndcg10'])} "
            f"{format_interval(r['validation_ci_low'], r['validation_ci_high'])}",
            _share(r["validation_wins"]),
            _share(r["validation_wins_held_out"]),
            r["validation_validity"] or "",
        ]
        for r in rows
    ]
    title = "# Trained variants against dense: per-query tau-b, Holm over every row"
    return f"{title}\n\n{md_table(header, body)}\n"


# -- command line ----------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``trained_rankers_study: error: ...``, exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{PROG}: error: {message}\n")


def parse_args(argv: Sequence[str] | None) -> tuple[StudyOptions, list[Path]]:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of the study's output")
    parser.add_argument("--indexes", type=Path, help="indexes folder (default OUT/indexes)")
    parser.add_argument(
        "--only",
        nargs="+",
        action="extend",
        default=[],
        metavar="SPEC",
        help=f"COLLECTION, COLLECTION/DIMENSION or {TRANSFER} (default: everything)",
    )
    parser.add_argument("--epochs", type=int, help="training epochs (default: nrp train's)")
    parser.add_argument("--folds", type=int, default=5, help="query-disjoint folds (5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of folds and training (0)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda[:N] or auto")
    parser.add_argument(
        "--max-steps", type=int, default=0, help="stop each model after N steps (a smoke run)"
    )
    parser.add_argument(
        "--rankers",
        nargs="+",
        default=list(TRAINED_RANKERS),
        choices=TRAINED_RANKERS,
        help="what nrp train trains, each studied (default: cross dense)",
    )
    parser.add_argument("--base", help="nrp train --base (default: minilm)")
    parser.add_argument("--lr", type=float, help="nrp train --lr (default: nrp train's)")
    parser.add_argument("--train-layers", type=int, help="nrp train --train-layers")
    for option, what in [
        ("--also", "collections whose judgments are added to training (nrp train --also)"),
        ("--held-out", "collections whose questions train no model (nrp train --held-out)"),
        ("--also-query", "other topic fields trained as queries (nrp train --also-query)"),
    ]:
        parser.add_argument(option, nargs="+", default=[], help=what)
    parser.add_argument(
        "--guard", action="store_true", help="also the trained rankers through the guard, and "
        "validity (docs/validity.md)",
    )  # fmt: skip
    parser.add_argument(
        "--compare", nargs="+", type=Path, default=[], metavar="DIR",
        help="only compare the variants earlier runs wrote to DIR ... (into --out)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    given = {name: getattr(args, name) for name in TRAINING_OPTIONS}
    options = StudyOptions(
        out=args.out,
        indexes=args.indexes,
        only=tuple(args.only),
        epochs=args.epochs,
        folds=args.folds,
        seed=args.seed,
        device=args.device,
        max_steps=args.max_steps,
        rankers=tuple(dict.fromkeys(args.rankers)),
        training={
            k: (tuple(v) if isinstance(v, list) else v)
            for k, v in given.items()
            if v is not None and v != []
        },
        guard=args.guard,
    )
    check(options)
    return options, args.compare


def check(options: StudyOptions) -> None:
    """Every argument checked before anything is read or written (the library's own checks)."""
    for ranker in options.rankers:
        resolve_base(api.TrainSettings(**options.train_settings(ranker)).checked().base)
    resolve_device(options.device)
    select(options)
    training_collections(options)
    if options.out.exists() and not options.out.is_dir():
        raise StudyError(f"--out {options.out}: exists and is not a folder")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        options, variants = parse_args(argv)
        if variants:
            print(compare_variants(variants, options.out), end="")
        else:
            tables = run_study(options)
            print(write_outputs(options, tables), end="")
    except NrpError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (run again to continue)", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
