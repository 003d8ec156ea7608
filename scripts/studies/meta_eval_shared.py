#!/usr/bin/env python3
"""Meta-evaluation on the shared public sets: our evaluators against human judgments.

For each chosen set of ``nrp.meta.datasets`` (data from ../shared/data/meta beside the repo,
or ``--data-root``):

- **graded sets** (dstc7-adv, kdconv-adv, summeval, usr-topical, usr-persona): runs the
  evaluators (default ``bleu,rouge,bertscore``) through ``nrp.evaluators.run.evaluate`` with
  the per-item cache in ``indexes/meta/evaluations.sqlite`` (a second run computes nothing),
  then ``nrp.meta.correlation.meta_evaluate``: per-query Kendall tau-b and Spearman with
  t-intervals (per dialogue context; per source document for SummEval: its "summary level"),
  pooled with bootstrap intervals over queries, and system level where the set has systems
  (SummEval's 12 models, USR's response sources). DialogADV sets are also reported per subset
  (DSTC7: original / adversarial; KdConv: close / open); DSTC7 adds the share of (response,
  negated response) pairs each score ranks the right way round. ``--precomputed`` adds the
  metric values shipped in the DialogADV files (``paper.*``) as a cross-check.
- **chatbot-vi** (categorical): the ``judge`` evaluator in TRUE / FALSE / NOT GIVEN mode
  (``--judge``, default the offline SmolLM2 backend) and ``nrp.meta.categorical``: per-class
  and macro accuracy, confusion table, review curve over the judge's confidence (plot written
  with ``--out``).

Chinese (kdconv-adv): BLEU uses sacrebleu's ``tokenize=zh`` (each CJK character a token; see
``nrp.meta.datasets.evaluator_specs``). rouge-score's tokenizer keeps only ``[a-z0-9]`` and
would drop every Chinese character (ROUGE 0 for all), so ROUGE runs on a copy of the items in
which each CJK character is written as an ASCII pseudo-word (``u5979``) and stemming is off:
character-level ROUGE, the usual choice for Chinese. BERTScore uses the packaged MiniLM, whose
uncased BERT vocabulary splits Chinese into single characters (it was trained on English:
weak for Chinese, reported as is).

    .venv/bin/python scripts/studies/meta_eval_shared.py --sets dstc7-adv,summeval
    .venv/bin/python scripts/studies/meta_eval_shared.py --sets usr-topical --evaluators bleu,rouge
    .venv/bin/python scripts/studies/meta_eval_shared.py --sets chatbot-vi --limit 40 --out meta-out
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from nrp.errors import NrpError  # noqa: E402
from nrp.evaluators.base import split_specs  # noqa: E402
from nrp.evaluators.cache import EvaluationCache  # noqa: E402
from nrp.evaluators.run import IDENTITY_COLUMNS, evaluate  # noqa: E402
from nrp.meta.categorical import categorical_evaluate  # noqa: E402
from nrp.meta.correlation import meta_evaluate, paired_preference  # noqa: E402
from nrp.meta.datasets import (  # noqa: E402
    META_SETS,
    MetaSet,
    default_meta_root,
    evaluator_specs,
    load_meta_set,
)

DEFAULT_EVALUATORS = "bleu,rouge,bertscore"
DEFAULT_JUDGE = "judge:mode=tfn"
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cjk_as_ascii(text: str) -> str:
    """Each CJK character as a space-separated ASCII pseudo-word, so that rouge-score's
    ``[a-z0-9]`` tokenizer keeps it (other characters stay as they are)."""
    return CJK.sub(lambda m: f" u{ord(m.group()):x} ", text)


def score_items(meta_set: MetaSet, specs: str, cache: EvaluationCache) -> pd.DataFrame:
    """The evaluators' scores for the set's items (Chinese ROUGE on pseudo-words, see above)."""
    specs = evaluator_specs(meta_set, specs)
    plain, rouge = [], []
    for spec in split_specs(specs):
        if meta_set.language == "zh" and spec.split(":", 1)[0] == "rouge":
            params = spec.partition(":")[2]
            rouge.append(f"rouge:{params + ',' if params else ''}use_stemmer=false")
        else:
            plain.append(spec)
    progress = log
    parts = []
    if plain:
        parts.append(evaluate(meta_set.items, plain, cache=cache, progress=progress))
    if rouge:
        items = meta_set.items.copy()
        items["text"] = items["text"].map(cjk_as_ascii)
        items["references"] = items["references"].map(lambda refs: tuple(map(cjk_as_ascii, refs)))
        parts.append(evaluate(items, rouge, cache=cache, progress=progress))
    scores = parts[0]
    for extra in parts[1:]:
        new = [c for c in extra.columns if c not in scores.columns]
        scores = scores.merge(extra[["answer_id", *new]], on="answer_id")
    return scores


def score_columns(scores: pd.DataFrame) -> list[str]:
    identity = {*IDENTITY_COLUMNS, "reference_kind"}
    return [
        c
        for c in scores.columns
        if c not in identity and pd.api.types.is_float_dtype(scores[c]) and scores[c].notna().any()
    ]


def graded(meta_set: MetaSet, args: argparse.Namespace, cache: EvaluationCache) -> None:
    started = time.perf_counter()
    scores = score_items(meta_set, args.evaluators, cache)
    columns = score_columns(scores)
    if args.precomputed and meta_set.precomputed is not None:
        scores = scores.merge(meta_set.precomputed, on="answer_id", how="left")
        columns += [c for c in meta_set.precomputed.columns if c != "answer_id"]
    log(f"{meta_set.name}: scored in {time.perf_counter() - started:.0f} s")
    joined = meta_set.joined(scores)
    result = meta_evaluate(
        joined,
        columns,
        meta_set.dimensions,
        query_column=meta_set.query_column,
        system_column=meta_set.system_column,
        by=meta_set.subset_column,
        n_bootstrap=args.bootstrap,
        seed=args.seed,
    )
    print(f"=== {meta_set.name}: {len(joined)} items; {describe(meta_set)}")
    print(result.format())
    if "pair_id" in joined.columns:
        pairs = paired_preference(
            joined, columns + meta_set.dimensions, "pair_id", "subset", "original", "adversarial"
        )
        print(
            "\noriginal vs negated response (same dialogue, same slot): share of pairs where the "
            "column is higher for the original"
        )
        print(pairs.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out:
        folder = args.out / meta_set.name
        folder.mkdir(parents=True, exist_ok=True)
        result.to_json(folder / "meta.json")
        result.to_csv(folder)
        scores.to_csv(folder / "scores.csv", index=False)
        log(f"wrote {folder}")
    print()


def categorical(meta_set: MetaSet, args: argparse.Namespace, cache: EvaluationCache) -> None:
    started = time.perf_counter()
    try:
        scores = evaluate(meta_set.items, [args.judge], cache=cache, progress=log)
    except NrpError as error:
        print(f"=== {meta_set.name}: judge not run: {error}\n")
        return
    log(f"{meta_set.name}: judged in {time.perf_counter() - started:.0f} s")
    label = next(c for c in scores.columns if c.endswith(".label") or c == "label")
    confidence = next((c for c in scores.columns if c.endswith("confidence")), None)
    joined = meta_set.joined(scores.rename(columns={"label": "judge_label"}))
    if label == "label":
        label = "judge_label"
    result = categorical_evaluate(joined, label, "label", confidence)
    print(f"=== {meta_set.name}: {len(joined)} items; {describe(meta_set)}; judge {args.judge}")
    print(result.format())
    if args.out:
        folder = args.out / meta_set.name
        folder.mkdir(parents=True, exist_ok=True)
        result.to_json(folder / "categorical.json")
        result.to_csv(folder)
        if len(result.review):
            result.plot(folder / "review.png", title=f"{meta_set.name}: {args.judge}")
            result.plot(folder / "review.svg", title=f"{meta_set.name}: {args.judge}")
        scores.to_csv(folder / "scores.csv", index=False)
        log(f"wrote {folder}")
    print()


def describe(meta_set: MetaSet) -> str:
    counts = ", ".join(f"{k} {v:,}" for k, v in meta_set.counts.items())
    return "; ".join([counts, *meta_set.notes])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(META_SETS), help="comma-separated set names")
    parser.add_argument("--limit", type=int, help="first N queries of each set")
    parser.add_argument("--evaluators", default=DEFAULT_EVALUATORS, help="evaluator specs")
    parser.add_argument("--judge", default=DEFAULT_JUDGE, help="judge spec for chatbot-vi")
    parser.add_argument("--precomputed", action="store_true", help="add the files' paper.* metrics")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-root", type=Path, help="the meta folder (default: shared data)")
    parser.add_argument(
        "--cache",
        type=Path,
        default=ROOT / "indexes" / "meta" / "evaluations.sqlite",
        help="per-item evaluation cache",
    )
    parser.add_argument("--out", type=Path, help="folder for JSON/CSV tables per set")
    args = parser.parse_args(argv)
    root = args.data_root or default_meta_root()
    if not root.is_dir():
        print(f"no meta-evaluation data at {root} (clone with ../shared beside the repo)")
        return 1
    cache = EvaluationCache(args.cache)
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        try:
            meta_set = load_meta_set(name, root, limit=args.limit)
        except NrpError as error:
            print(f"=== {name}: {error}")
            continue
        if meta_set.categorical:
            categorical(meta_set, args, cache)
        else:
            graded(meta_set, args, cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
