"""``probe``: how easily is each evaluator fooled? Every answer is perturbed (``perturbations``),
originals and perturbed twins are scored by the same evaluators (``nrp.evaluators``: NRP with
``nrp:rankers=...``, BLEU, ROUGE, BERTScore, the judge, the heuristics), and for each score
column and perturbation the pairs are compared:

- ``share_original_higher``: pairs where the original scores higher (an evaluator that is not
  fooled prefers the original for ``meaning`` and ``form`` perturbations; for ``copy_best`` a
  reference-free evaluator that reads D_q is expected to prefer the copy);
- ``share_ties``: pairs scored equal (within 1e-12), counted apart;
- ``mean_change``: mean of perturbed minus original;
each with a 95% bootstrap interval resampling queries (the pairs of a drawn query come along).
Every score is read as higher = better. Pairs where a perturbation does not apply (no sentence
to negate, no number to swap) are counted (``n_not_applicable``) and not scored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from nrp import lazy_libs
from nrp.collection.collection import Collection
from nrp.errors import ConfigError
from nrp.evaluators.run import evaluate_answers
from nrp.probes.entities import query_entities
from nrp.probes.perturbations import (
    NUMBER,
    PERTURBATIONS,
    PerturbationContext,
    parse_all,
    perturb,
    perturbation_names,
    texts_to_parse,
)
from nrp.progress import Progress
from nrp.statistics import percentile_interval, resample_counts
from nrp.tables import (
    FrameView,
    TableExports,
    format_number,
    numeric_columns,
    one_row,
    text_table,
)

IDENTITY = ("answer_id", "llm", "prompt", "qid", "sample", "reference_kind", "original_id")
TIE = 1e-12
#: pairs id: ``ANSWER_ID~PERTURBATION``
SEPARATOR = "~"


@dataclass
class ProbeResult(TableExports, FrameView):
    """``pairs``: one row per (answer, perturbation, score): qid, original, perturbed.
    ``summary``: one row per (score, perturbation): kind, n_pairs, n_not_applicable,
    share_original_higher with ci_low/ci_high, share_ties, mean_change with
    change_ci_low/change_ci_high. ``texts``: each perturbed answer's text."""

    settings: dict[str, Any]
    pairs: pd.DataFrame
    summary: pd.DataFrame
    texts: pd.DataFrame
    warnings: list[str] = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        return self.summary.copy()

    def row(self, score: str, perturbation: str) -> pd.Series:
        return one_row(self.summary, score=score, perturbation=perturbation)

    # to_dict, to_json and to_csv (probe_{summary,pairs,texts}.csv): ``TableExports``
    JSON_FIELDS: ClassVar[tuple[str, ...]] = ("settings", "summary", "warnings")
    CSV_TABLES: ClassVar[tuple[str, ...]] = ("summary", "pairs", "texts")
    CSV_PREFIX: ClassVar[str] = "probe"

    def format(self) -> str:
        header = ["score", "perturbation", "kind", "pairs", "original higher [95% CI]", "ties"]
        header += ["mean change"]
        rows = [
            [
                r.score,
                r.perturbation,
                r.kind,
                str(r.n_pairs),
                f"{format_number(r.share_original_higher, 3)} "
                f"[{format_number(r.ci_low, 3)}, {format_number(r.ci_high, 3)}]",
                format_number(r.share_ties, 3),
                format_number(r.mean_change, 4),
            ]
            for r in self.summary.itertuples()
        ]
        notes = "".join(f"\nwarning: {w}" for w in self.warnings)
        return text_table(header, rows, indent="") + notes

    def plot(self, path: str | Path) -> Path:
        """A heat map: share of pairs where the original scores higher, score x perturbation.
        Drawn on a ``Figure`` of its own (no pyplot: nothing global, and a quicker start),
        tall enough for the slanted perturbation names under a single score's row."""
        Figure = lazy_libs.module("matplotlib.figure").Figure

        table = self.summary.pivot(
            index="score", columns="perturbation", values="share_original_higher"
        )
        figure = Figure(figsize=(1.0 + 0.7 * table.shape[1], 2.6 + 0.4 * len(table)))
        axes = figure.subplots()
        image = axes.imshow(table.to_numpy(float), vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
        axes.set_xticks(range(table.shape[1]), table.columns, rotation=45, ha="right")
        axes.set_yticks(range(len(table)), table.index)
        for (i, j), value in np.ndenumerate(table.to_numpy(float)):
            if np.isfinite(value):
                axes.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7)
        figure.colorbar(image, ax=axes, label="share: original higher")
        figure.tight_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path)
        return path


def contexts(
    collection: Collection,
    answers: pd.DataFrame,
    seed: int,
    with_entities: bool = False,
    names: Sequence[str] = (),
) -> dict[str, PerturbationContext]:
    """answer_id -> what its perturbations draw on (``PerturbationContext``). Grades: the
    collection's first dimension (relevance where it has one). The texts that the perturbations
    ``names`` parse with spaCy are parsed here, once, in batches."""
    candidates = collection.candidates()
    grades = collection.qrels(collection.answer_dimension).set_index(["qid", "docno"])["label"]
    keys = list(zip(candidates["qid"].astype(str), candidates["docno"].astype(str), strict=True))
    candidates = candidates.assign(grade=[float(grades.get(k, 0.0)) for k in keys])
    judged: dict[str, list[tuple[float, str]]] = {}
    documents: dict[str, list[tuple[str, str]]] = {}  # qid -> (docno, text), for the entities
    for qid, group in candidates.groupby("qid", sort=True):
        ordered = group.sort_values(["grade", "docno"], ascending=[False, True])
        texts = ordered["text"].astype(str).tolist()
        judged[str(qid)] = list(zip(ordered["grade"], texts, strict=True))
        documents[str(qid)] = list(zip(ordered["docno"].astype(str), texts, strict=True))
    best = {qid: docs[0][1] for qid, docs in judged.items() if docs}
    texts = collection.docs["text"].astype(str).tolist()
    numbers = sorted({n for text in texts for n in NUMBER.findall(text)})
    entities = (
        query_entities(collection, documents, answers["qid"].astype(str)) if with_entities else {}
    )
    queries = collection.topic_texts()
    parsed = parse_all(
        [t for text in answers["text"].astype(str) for t in texts_to_parse(names, text)]
    )
    out = {}
    for row in answers.itertuples():
        qid = str(row.qid)
        out[str(row.answer_id)] = PerturbationContext(
            answer_id=str(row.answer_id),
            query=queries.get(qid, ""),
            judged=judged.get(qid, []),
            others=[text for other, text in best.items() if other != qid],
            numbers=numbers,
            entities=entities.get(qid, {}),
            seed=seed,
            parsed=parsed,
        )
    return out


def probe(
    collection: Collection,
    answers: pd.DataFrame,
    evaluators: str | Sequence[str],
    perturbations: str | Sequence[str] | None = None,
    *,
    seed: int = 0,
    n_bootstrap: int = 1000,
    cache: bool = True,
    progress: Progress | None = None,
) -> ProbeResult:
    """Perturb every answer, score originals and twins with ``evaluators``, compare (module
    docstring). ``answers``: answer_id, qid, text (llm, prompt, sample optional)."""
    names = perturbation_names(perturbations)
    if answers.empty:
        raise ConfigError("no answers to probe")
    if answers["answer_id"].astype(str).str.contains(re.escape(SEPARATOR)).any():
        raise ConfigError(f"answer ids may not contain {SEPARATOR!r} (the probe's twin ids use it)")
    answers = answers.reset_index(drop=True)
    context = contexts(
        collection, answers, seed, with_entities="swap_entities" in names, names=names
    )
    twins, missing = [], {name: 0 for name in names}
    for row in answers.to_dict("records"):
        for name in names:
            text = perturb(name, str(row["text"]), context[str(row["answer_id"])])
            if text is None:
                missing[name] += 1
                continue
            twins.append({**row, "answer_id": f"{row['answer_id']}{SEPARATOR}{name}", "text": text})
    if progress:
        progress(f"probe: {len(answers)} answers, {len(twins)} perturbed twins")
    twin_frame = pd.DataFrame(twins, columns=answers.columns)
    both = pd.concat([answers, twin_frame], ignore_index=True)
    table = with_label_scores(
        evaluate_answers(collection, both, evaluators, cache=cache, progress=progress)
    )
    scores = numeric_columns(table, IDENTITY)
    if not scores:
        raise ConfigError(f"evaluators {evaluators!r} wrote no numeric score column")
    pairs = _pairs(table, scores)
    summary = _summary(pairs, names, missing, n_bootstrap, seed)
    texts = twin_frame[["answer_id", "qid", "text"]]
    settings = {
        "evaluators": evaluators if isinstance(evaluators, str) else ",".join(evaluators),
        "perturbations": names,
        "seed": seed,
        "n_bootstrap": n_bootstrap,
        "answers": len(answers),
        "higher_is_better": True,
    }
    return ProbeResult(settings, pairs, summary, texts)


def with_label_scores(table: pd.DataFrame) -> pd.DataFrame:
    """A judge's label column (``X.label``: TRUE / FALSE / NOT GIVEN) also as a score,
    ``X.true``: 1.0 for TRUE, 0.0 for any other label, missing where the label is, so the probe
    compares how often an original and its twin are judged TRUE."""
    labels = [
        c
        for c in table.columns
        if str(c).endswith(".label") and not pd.api.types.is_numeric_dtype(table[c])
    ]
    if not labels:
        return table
    table = table.copy()
    for column in labels:
        is_true = table[column].astype("string").str.strip().str.upper() == "TRUE"
        table[column[: -len("label")] + "true"] = is_true.astype("Float64").to_numpy(
            float, na_value=np.nan
        )
    return table


def _pairs(table: pd.DataFrame, scores: list[str]) -> pd.DataFrame:
    ids = table["answer_id"].astype(str)
    is_twin = ids.str.contains(re.escape(SEPARATOR))
    originals = table[~is_twin].set_index(table.loc[~is_twin, "answer_id"].astype(str))
    twins = table[is_twin]
    original_id, _, perturbation = ids[is_twin].str.rpartition(SEPARATOR).T.to_numpy()
    rows = []
    for score in scores:
        before = originals[score].reindex(original_id).to_numpy(float)
        after = twins[score].to_numpy(float)
        rows.append(
            pd.DataFrame(
                {
                    "answer_id": original_id,
                    "qid": twins["qid"].astype(str).to_numpy(),
                    "perturbation": perturbation,
                    "score": score,
                    "original": before,
                    "perturbed": after,
                }
            )
        )
    pairs = pd.concat(rows, ignore_index=True)
    return pairs[np.isfinite(pairs["original"]) & np.isfinite(pairs["perturbed"])]


def _summary(
    pairs: pd.DataFrame, names: list[str], missing: dict[str, int], n_bootstrap: int, seed: int
) -> pd.DataFrame:
    rows = []
    for (score, name), group in pairs.groupby(["score", "perturbation"], sort=False):
        qids, per_query = np.unique(group["qid"].to_numpy(str), return_inverse=True)
        diff = group["perturbed"].to_numpy(float) - group["original"].to_numpy(float)
        higher = (diff < -TIE).astype(float)
        ties = (np.abs(diff) <= TIE).astype(float)
        # per query sums, so a bootstrap draw of queries weighs their pairs
        n = np.bincount(per_query, minlength=len(qids)).astype(float)
        h = np.bincount(per_query, weights=higher, minlength=len(qids))
        d = np.bincount(per_query, weights=diff, minlength=len(qids))
        counts = resample_counts(len(qids), n_bootstrap, seed)
        total = counts @ n
        with np.errstate(invalid="ignore", divide="ignore"):
            share_draws = (counts @ h) / total
            change_draws = (counts @ d) / total
        low, high = percentile_interval(share_draws, 0.95)
        change_low, change_high = percentile_interval(change_draws, 0.95)
        rows.append(
            {
                "score": score,
                "perturbation": name,
                "kind": PERTURBATIONS[name].kind,
                "n_pairs": len(group),
                "n_queries": len(qids),
                "n_not_applicable": missing.get(name, 0),
                "share_original_higher": float(higher.mean()),
                "ci_low": low,
                "ci_high": high,
                "share_ties": float(ties.mean()),
                "mean_change": float(diff.mean()),
                "change_ci_low": change_low,
                "change_ci_high": change_high,
            }
        )
    order = {name: i for i, name in enumerate(names)}
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame["_order"] = frame["perturbation"].map(order)
    return (
        frame.sort_values(["score", "_order"], kind="stable")
        .drop(columns="_order")
        .reset_index(drop=True)
    )
