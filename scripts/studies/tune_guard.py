"""Choose the guard's scoring parameters (``content``, ``quoted``) on MEDIQA train+val alone.

    .venv/bin/python scripts/studies/tune_guard.py
    .venv/bin/python scripts/studies/tune_guard.py --quoted 0 3 4 5 6 8 --content 0.06

The guard (``nrp.rankers.guard``) decides which texts are answers at all; two parameters say
how it scores the texts it lets through: ``content`` (a reward per new content term) and
``quoted`` (the guarded ranker scores a text without the runs of at least that many words it
copies from the question). Both are chosen here, on the questions the packaged
guard is fitted on (``nrp train guard mediqa-2019-train``, ``PACKAGED_FITTING``: MEDIQA 2019
training set 2 and validation set; training set 1 is LiveQA-Med's questions and v-24, v-38,
t2-103 are asked again in MEDIQA test), never on a collection the guard is evaluated on.

For every combination it prints, over the fitting questions:

- **tau-b**: per question, Kendall's tau-b of the guard's scores of the judged documents with
  their grades (a judged document's leave-one-out NRP orders as its score), the mean over the
  questions with two grades or more: the agreement the choice must keep;
- **wins** per degenerate kind: the share of (graded-relevant judged document, text) pairs of a
  question in which the document scores higher (ties half), the mean over questions, as
  ``nrp validate`` measures it; the kinds of the held-out family (``--held-out``, the evasion
  family by default), ``first_sentence`` and the packaged LLM's own answers (``llm_answer:*``,
  answers and not degenerate texts) are printed and are not part of the criterion
  (``fitting_kinds``);
- **restated_answer**: the same share for each graded-relevant judged document after its
  question (``nrp.training.guard_data.restated_answers``): a real answer that restates the
  question first, as language models write them, must keep its place (about 0.5, where its
  document stands; the lower, the higher it ranks).

``content`` was chosen first (0.06, with ``quoted`` 0: the agreement peaks there;
docs/studies/validity-study.md). The criterion for ``quoted``: on the fitting questions the guard
flags nearly every degenerate text (it was fitted there), so those kinds cannot show what ``quoted``
adds for the texts the guard lets through; they show what it costs. Chosen: the smallest share above
0 (the broadest rule) whose tau-b and fitting wins are each within 0.005 of ``quoted=0``'s; 0 when
none is. restated_answer is printed, not a criterion: the criterion first written also asked it not
to rise by more than 0.005, but with ``quoted=0`` the question an answer repeats lifts it above its
own document's place (0.28 of pairs against about 0.5), and removing that lift is what ``quoted`` is
for; that first criterion chose 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchkit, beside the benchmarks
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other studies
from benchkit import ROOT, load_or_ingest

#: the collection and settings the packaged guard is fitted with (docs/guard.md, "Fitting a
#: guard"): training set 1 (LiveQA-Med's questions) forms the references, and the three
#: questions MEDIQA test asks again are left out
FITTING_COLLECTION = "mediqa-2019-train"
PACKAGED_FITTING = {"reference_queries": ("t1-*",), "leave_out": ("v-24", "v-38", "t2-103")}

TOLERANCE = 0.005


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quoted", type=float, nargs="+", default=[0, 0.3, 0.5, 0.8, 1])
    parser.add_argument("--content", type=float, nargs="+", default=[0.06])
    parser.add_argument(
        "--ranker", default="dense", help="the ranker guarded (the guard's ranker=)"
    )
    parser.add_argument("--held-out", default="evasion", help="the family kept out of choice")
    add_fitting_arguments(parser)
    return parser.parse_args(argv)


def add_fitting_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the fitting rows (``GuardTrainSettings`` fields, its defaults)."""
    from nrp.training.guard_settings import GuardTrainSettings

    default = GuardTrainSettings()
    parser.add_argument("--indexes", type=Path, default=ROOT / "indexes")
    for name in ("per_kind", "seed", "boilerplate_questions", "near_best", "written_tokens"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(default, name))
    parser.add_argument("--written-llm", default=default.written_llm)


def fitting_settings(args: argparse.Namespace):
    """The ``GuardTrainSettings`` of the packaged guard with the options given, checked (a
    ``ConfigError`` of one line)."""
    from nrp.training.guard_settings import GuardTrainSettings

    given = {
        k: getattr(args, k)
        for k in (
            "per_kind",
            "seed",
            "boilerplate_questions",
            "near_best",
            "written_tokens",
            "written_llm",
        )
    }
    return GuardTrainSettings(**PACKAGED_FITTING, **given).checked()


def scoring_rows(rows: pd.DataFrame, collection) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """The fitting rows as they are scored (an answer after its question is a text of its own,
    never its document's cached score: its docno gets ``:after-question``), each row's grade
    (NaN but for the judged documents) and whether it is a relevant judged document (grade >= 1)."""
    rows = rows.reset_index(drop=True)
    restated = rows["kind"] == "restated_answer"
    rows.loc[restated, "docno"] = rows.loc[restated, "docno"] + ":after-question"
    qrels = collection.qrels("relevance")
    grade_of = {(str(r.qid), str(r.docno)): float(r.label) for r in qrels.itertuples()}
    keys = zip(rows["qid"], rows["docno"], strict=True)
    grades = pd.Series([grade_of.get(key, np.nan) for key in keys])
    return rows, grades, (rows["kind"] == "judged") & (grades >= 1)


def kind_wins(rows: pd.DataFrame, scores: np.ndarray, relevant: pd.Series) -> pd.Series:
    """kind -> the share of pairs its texts lose to their question's relevant judged documents
    (``relevant``; ties half), the mean over questions: ``nrp validate``'s own measure
    (``measure_validity``) of the texts scored beside the judged documents (kind "judged")."""
    from nrp.validation.validity import ScoredText, measure_validity

    frame = rows.assign(score=scores)
    judged = frame[frame["kind"] == "judged"]
    documents = {
        qid: dict(zip(group["docno"], group["score"], strict=True))
        for qid, group in judged.groupby("qid")
    }
    graded = frame[relevant.to_numpy()]
    relevant_docs = {qid: set(group["docno"]) for qid, group in graded.groupby("qid")}
    texts = [
        ScoredText(row.qid, row.kind, float(row.score), documents[row.qid])
        for row in frame[frame["kind"] != "judged"].itertuples(index=False)
        if row.qid in relevant_docs
    ]
    validity = measure_validity(texts, relevant_docs)
    return pd.Series({kind: group.wins for kind, group in validity.kinds.items()})


def fitting_kinds(per_kind: pd.Series, rows: pd.DataFrame, held: set[str]) -> pd.Series:
    """The kinds of ``per_kind`` (kind -> wins) that the fitting wins average: the texts that
    are no answer and were not held out. Not the held-out family's, not the kinds ``nrp
    validate`` reports only (``REPORTED_ONLY``: first_sentence, an incomplete answer), and not
    the packaged LLM's own answers (family ``llm_answer``: answers, for ``answer_like``'s
    direction to tell from its non-answers, where judged documents need not win)."""
    from nrp.validation.validity import REPORTED_ONLY

    left_out = held | REPORTED_ONLY | set(rows.loc[rows["family"] == "llm_answer", "kind"])
    return per_kind.drop([k for k in per_kind.index if k in left_out])


def mean_tau(rows: pd.DataFrame, scores: np.ndarray, grades: pd.Series) -> float:
    from nrp.statistics import kendall_tau_b

    judged = rows.assign(score=scores, grade=grades)[rows["kind"] == "judged"]
    taus = [
        kendall_tau_b(group["score"].tolist(), group["grade"].tolist())
        for _, group in judged.groupby("qid")
        if group["grade"].nunique() > 1
    ]
    return float(np.mean(taus))


def choose(table: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(the chosen row, the row it was compared with) of a table of quoted, content, tau_b,
    fitting_wins. ``content`` first: the one of the highest tau-b at the smallest ``quoted``
    measured (where the agreement peaks; the first of equals). Then ``quoted``, at that content:
    the smallest share above the smallest measured whose tau-b and fitting wins are each within
    ``TOLERANCE`` of the smallest's; the smallest when none is."""
    first = table[table["quoted"] == table["quoted"].min()]
    base = first.loc[first["tau_b"].idxmax()]
    same = table[table["content"] == base["content"]]
    keeps = (
        (same["quoted"] > base["quoted"])
        & (same["tau_b"] >= base["tau_b"] - TOLERANCE)
        & (same["fitting_wins"] >= base["fitting_wins"] - TOLERANCE)
    )
    best = same[keeps].sort_values("quoted").iloc[0] if keeps.any() else base
    return best, base


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    from nrp.errors import ConfigError

    try:
        settings = fitting_settings(args)
    except ConfigError as error:
        print(f"tune_guard: {error}", file=sys.stderr)
        return 2
    from nrp.rankers.guard import GuardRanker
    from nrp.training.guard_data import fitting_rows
    from nrp.validation.degenerate import FAMILIES

    collection = load_or_ingest(FITTING_COLLECTION, args.indexes)
    rows = fitting_rows(collection, settings).rows
    rows, grades, relevant = scoring_rows(rows[rows["kind"] != "boilerplate"], collection)
    held = set(FAMILIES[args.held_out])
    frame = rows[["qid", "query", "docno", "text"]]
    assessed = None
    results = []
    for quoted in args.quoted:
        guard = GuardRanker({"ranker": args.ranker, "quoted": quoted})
        guard.bind_collection(collection)
        if assessed is None:
            assessed = guard.assess(frame)
        scored = guard.ranker_scores(frame)  # content does not change them: once per quoted
        for content in args.content:
            guard = GuardRanker({"ranker": args.ranker, "content": content, "quoted": quoted})
            scores = guard.guarded_scores(scored, assessed)
            per_kind = kind_wins(rows, scores, relevant)
            restated = per_kind.pop("restated_answer")  # pairs the documents win: no criterion
            fitting = fitting_kinds(per_kind, rows, held)
            results.append(
                {"quoted": quoted, "content": content, "tau_b": mean_tau(rows, scores, grades),
                 "fitting_wins": float(fitting.mean()), "restated_answer": float(restated),
                 **{k: float(v) for k, v in per_kind.items()}}
            )  # fmt: skip
            print(pd.DataFrame(results[-1:]).round(4).to_string(index=False), flush=True)
    table = pd.DataFrame(results)
    print(table.round(4).to_string(index=False))
    best, base = choose(table)
    print(f"chosen for ranker={args.ranker}: quoted={best['quoted']:g} content={best['content']:g} "
          f"(tau-b {best['tau_b']:.4f}, fitting wins {best['fitting_wins']:.4f}; quoted="
          f"{base['quoted']:g}: {base['tau_b']:.4f}, {base['fitting_wins']:.4f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
