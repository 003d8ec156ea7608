#!/usr/bin/env python3
"""NRP benchmark: the fast injection modes against the full re-ranking, side by side in one run.

For each ranker the same answers are positioned three ways, each in its own process:

- **fast**: ``score_answers(..., full_rerank=False, cache=True)`` on a fresh copy of the
  collection (empty score, pair and results caches), so D_q's documents are scored once inside
  the timed call: the cost a first run pays, and the honest comparison;
- **fast, D_q cached**: the same again on that copy with the results cache deleted and the
  score / pair caches kept: what each answer costs once D_q is scored (a later answer set, or
  many answers per query);
- **full**: ``score_answers(..., full_rerank=True, cache=False)``: D_q plus the answer re-ranked
  from scratch for every answer, as the source study's scripts did.

Printed per ranker: whether the NRP is identical (r, ties and NRP of every answer, compared
exactly with ``==``, fast and cached each against full), the model calls of each mode (answers
scored + documents scored + duoT5 pair evaluations, from ``attrs["counts"]``), the wall time of
each ``score_answers`` call (model loading excluded, timed apart), the ratio full / fast, and
the peak memory of each process (RSS high-water mark, VmHWM; model loading included).

Data: the TREC 2017 LiveQA medical questions with the MedQuAD answers judged for them
(manifests/liveqa-med-2017.yaml, data from ../shared/data beside the repo; about 22 documents
per query), ingested into a temporary indexes folder. Answers: LiveQA has no generated answers,
so its 167 reference answers are the answer set (llm ``reference``, prompt ``nist``, sample =
position within the qid); ``--answers FILE`` ranks any file ``nrp.answers.read_answers``
reads instead.

Rankers: ``tfidf`` (stats=query: the answer joins D_q's statistics), ``bm25:stats=collection``
(frozen collection statistics), ``dense`` (the packaged all-MiniLM-L6-v2) and ``monot5``. No
real monoT5 checkpoint exists offline, so ``monot5`` without ``model=`` runs on a tiny random
T5 built in a temporary folder (tests/rankers/tiny_models.py, via scripts/benchkit.py),
marked ``*``: it measures the code path, not a real model's speed.

    .venv/bin/python scripts/bench_nrp.py
    .venv/bin/python scripts/bench_nrp.py --rankers dense --limit-queries 20
    .venv/bin/python scripts/bench_nrp.py --device cuda --answers answers/gpt4/zero-shot.csv
    .venv/bin/python scripts/bench_nrp.py --rankers dense --no-cached --limit-queries 1 \
        --limit-answers 150 \
        --skip-invalid --manifest manifests/clef-ehealth-2021.yaml \
        --answers ../shared/data/clef-ehealth-2021/answers
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# the measuring code shared by the benchmarks (scripts/benchkit.py); importing it imports nothing
# heavy
sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import (
    ROOT,
    TINY_NOTE,
    child_main,
    complete_specs,
    emit,
    load_ranker,
    machine,
    measured,
    peak_rss_mib,
    ratio,
    run_child,
    sync,
    torch_stats,
)

DEFAULT_MANIFEST = ROOT / "manifests" / "liveqa-med-2017.yaml"
DEFAULT_RANKERS = "tfidf,bm25:stats=collection,dense,monot5"
MODES = ("fast", "cached", "full")
MODE_LABEL = {"fast": "fast", "cached": "fast, D_q cached", "full": "full"}
# fast injection modes that score D_q once (score cache) and each answer as one extra row
POINTWISE_MODES = ("fast:pointwise", "fast:lexical-frozen")
RESULTS_CACHE = "nrp.sqlite"
SCRIPT = Path(__file__).resolve()


# -- child: prepare ------------------------------------------------------------------------------
def _prepare(payload: dict) -> None:
    """Ingest the collection, write the answer set, build tiny checkpoints, complete the specs."""
    from nrp import ingest
    from nrp.collection.collection import Collection

    result = ingest(payload["manifest"], indexes_dir=payload["indexes"])
    collection = Collection.load(result.name, payload["indexes"])
    if payload["answers"]:
        from nrp.answers import read_answers

        read = read_answers(payload["answers"], collection, skip_invalid=payload["skip_invalid"])
        answers = read.answers
        source = f"{payload['answers']}: {len(answers)} answers"
        if read.skipped:
            source += f" ({len(read.skipped)} invalid ones skipped: empty text, unknown qid)"
    else:
        references = collection.references
        if references.empty:
            raise SystemExit(f"{result.name} has no reference answers; give --answers FILE")
        qid = references["qid"].astype(str)
        sample = references.groupby(qid, sort=False).cumcount()
        answers = references.assign(qid=qid, llm="reference", prompt="nist", sample=sample)
        answers["answer_id"] = [
            f"reference/nist/{q}/{s}" for q, s in zip(answers["qid"], sample, strict=True)
        ]
        source = f"the collection's {len(answers)} reference answers (llm reference, prompt nist)"
    answers = answers[["answer_id", "llm", "prompt", "qid", "sample", "text"]].copy()
    answers["qid"] = answers["qid"].astype(str)
    total_qids = answers["qid"].nunique()
    if payload["limit_queries"]:
        keep = set(answers["qid"].drop_duplicates()[: payload["limit_queries"]])
        answers = answers[answers["qid"].isin(keep)]
    if payload["limit_answers"]:  # an even sample, every LLM and prompt kept
        step = max(1, len(answers) // payload["limit_answers"])
        answers = answers.iloc[::step].head(payload["limit_answers"])
    records = answers.astype({"sample": int}).to_dict("records")
    Path(payload["answers_file"]).write_text(json.dumps(records))

    specs = complete_specs(payload["rankers"], Path(payload["models"]), payload["device"])
    emit(
        {
            "collection": result.name,
            "source": source,
            "answers": len(answers),
            "qids": int(answers["qid"].nunique()),
            "total_qids": int(total_qids),
            "specs": specs,
        }
    )


# -- child: one (ranker, mode) -------------------------------------------------------------------
def _measure(payload: dict) -> None:
    """Load the ranker, then time one ``score_answers`` call in the payload's mode; write every
    answer's r, ties and NRP to ``payload['rows']``."""
    import logging

    import pandas as pd

    from nrp.collection.collection import Collection
    from nrp.collection.manifest import COMBINED
    from nrp.positioning.injection import injection_mode
    from nrp.positioning.scoring import score_answers

    # the tiny T5 cuts every real text at its input limit and would log it for each call; the
    # answers skipped for an empty D_q are reported from attrs instead of the log
    logging.disable(logging.WARNING)
    mode = payload["mode"]
    collection = Collection.load(payload["collection"], payload["indexes"])
    answers = pd.DataFrame(json.loads(Path(payload["answers_file"]).read_text()))
    if mode == "cached":  # keep D_q's scores and pairs, forget the answers' positions
        for path in collection.path.glob(RESULTS_CACHE + "*"):
            path.unlink()

    ranker, device, load_s = load_ranker(payload["spec"], collection)
    full = mode == "full"
    start = time.perf_counter()
    frame = score_answers(collection, answers, ranker, full_rerank=full, cache=not full)
    sync(device)
    wall_s = time.perf_counter() - start
    peak = peak_rss_mib()

    rows = {}
    for row in frame.itertuples(index=False):
        ties = None if row.dimension == COMBINED else int(row.ties)
        rank = float(row.rank)
        rows[f"{row.answer_id}\t{row.dimension}"] = [rank, ties, float(row.nrp), float(row.score)]
    Path(payload["rows"]).write_text(json.dumps(rows))
    scored = frame[frame["dimension"] != COMBINED].drop_duplicates("answer_id")
    per_qid = scored.groupby("qid")["n_docs"].first()
    result = {
        "mode": injection_mode(ranker, False, full),
        "counts": frame.attrs["counts"],
        "skipped": [s["qid"] for s in frame.attrs["skipped"]],
        "ranked": len(scored),
        "qids": len(per_qid),
        "dq_sum": int(per_qid.sum()),
        "dq_mean_per_answer": float(scored["n_docs"].mean()) if len(scored) else 0.0,
        "load_s": load_s,
        "wall_s": wall_s,
        "peak_rss_mib": peak,
        "device": device,
    }
    emit(result | torch_stats(device))


# -- parent: no heavy imports, so each child's memory is its own --------------------------------
def compare(fast: dict, full: dict) -> tuple[bool, str]:
    """Exact comparison of r, ties and NRP of every (answer, dimension) row; a reason if not."""
    if set(fast) != set(full):
        return False, f"different rows ({len(fast)} vs {len(full)})"
    differ = _differing(fast, full)
    if differ:
        key = next(
            k
            for k, v in full.items()
            if not (_same(fast[k][0], v[0]) and fast[k][1] == v[1] and _same(fast[k][2], v[2]))
        )
        first = f"{key.split(chr(9))[0]}: r {fast[key][0]} vs {full[key][0]}"
        return False, f"{differ} answers differ (first {first})"
    return True, ""


def _differing(fast: dict, full: dict) -> int:
    """Answers whose r, ties or NRP differ between the two runs (any dimension)."""
    return len(
        {
            key.split("\t")[0]
            for key, (rank, ties, nrp, _) in full.items()
            if key in fast
            and not (
                _same(fast[key][0], rank) and fast[key][1] == ties and _same(fast[key][2], nrp)
            )
        }
    )


def _tied(rows: dict) -> int:
    """Answers tied with at least one document of D_q (in any dimension)."""
    return len({key.split("\t")[0] for key, (_, ties, _, _) in rows.items() if ties})


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _max_score_diff(fast: dict, full: dict) -> float:
    diffs = [
        abs(fast[k][3] - v[3])
        for k, v in full.items()
        if k in fast and not math.isnan(v[3]) and not math.isnan(fast[k][3])
    ]
    return max(diffs, default=0.0)


def model_calls(counts: dict) -> int:
    return counts["answers_scored"] + counts["documents_scored"] + counts["pair_evaluations"]


def main() -> int:
    if child_main({"--_prepare": _prepare, "--_measure": _measure}):
        return 0
    args = _parse_args()
    modes = [m for m in MODES if not (args.no_cached and m == "cached")]
    with tempfile.TemporaryDirectory(prefix="nrp-bench-nrp-") as tmp_name:
        run = _Run(Path(tmp_name), args, modes)
        prep = run.prepare()
        rows = []
        for number, entry in enumerate(prep["specs"]):
            label = entry["shown"] + (" *" if entry["tiny"] else "")
            if entry["error"]:
                rows.append((label, {"error": entry["error"]}))
            else:
                rows.append((label, run.measure(number, entry, label)))
    print_table(rows, modes, any(entry["tiny"] for entry in prep["specs"]))
    return 0 if all("error" not in result for _, result in rows) else 1


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rankers",
        default=DEFAULT_RANKERS,
        help=f"comma-separated ranker specs (default: {DEFAULT_RANKERS})",
    )
    parser.add_argument("--limit-queries", type=int, default=0, help="first N queries only")
    parser.add_argument(
        "--limit-answers", type=int, default=0, help="N answers only, every k-th of those kept"
    )
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--answers", type=Path, help="an answer file (default: the references)")
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--no-cached", action="store_true", help="skip the 'fast, D_q cached' runs")
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip (and count) answer rows that cannot be read (an unknown qid, a bad sample), "
        "as nrp score does",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    args = parser.parse_args()
    if args.limit_answers < 0:
        parser.error("--limit-answers must be >= 0")
    if args.limit_queries < 0:
        parser.error("--limit-queries must be >= 0")
    return args


@dataclass
class _Run:
    """One benchmark run in the temporary folder ``tmp``: the prepared collection and answers,
    then each ranker measured in every mode, each in a child process."""

    tmp: Path
    args: argparse.Namespace
    modes: list[str]
    prep: dict = field(default_factory=dict)

    def prepare(self) -> dict:
        """Ingest, write the answers, complete the specs (a child); print the data line."""
        args, models = self.args, self.tmp / "models"
        models.mkdir()
        self.prep = prep = run_child(
            SCRIPT,
            "--_prepare",
            {
                "manifest": str(args.manifest),
                "indexes": str(self.tmp / "indexes"),
                "models": str(models),
                "rankers": args.rankers,
                "device": args.device,
                "limit_queries": args.limit_queries,
                "limit_answers": args.limit_answers,
                "answers": str(args.answers) if args.answers else "",
                "skip_invalid": args.skip_invalid,
                "answers_file": str(self.tmp / "answers.json"),
            },
        )
        data = f"{prep['collection']}; answers: {prep['source']}"
        if prep["qids"] < prep["total_qids"]:
            data += f"; first {prep['qids']} of {prep['total_qids']} queries: "
            data += f"{prep['answers']} answers"
        print(f"data: {data}")
        print(f"machine: {machine()}; --device {args.device}", flush=True)
        return prep

    def measure(self, number: int, entry: dict, label: str) -> dict:
        """Every mode of one ranker: the results by mode, or ``{"error": ...}`` at the first
        failing mode."""
        indexes, collection = self.tmp / "indexes", self.prep["collection"]
        # fresh caches for this ranker: a copy of the collection without any cache file
        fast_indexes = self.tmp / f"fast-{number}"
        shutil.copytree(
            indexes / collection,
            fast_indexes / collection,
            ignore=shutil.ignore_patterns("scores.sqlite*", "nrp.sqlite*"),
        )
        found: dict = {}
        for mode in self.modes:
            payload = {
                "spec": entry["spec"],
                "mode": mode,
                "collection": collection,
                "indexes": str(indexes if mode == "full" else fast_indexes),
                "answers_file": str(self.tmp / "answers.json"),
                "rows": str(self.tmp / f"rows-{number}-{mode}.json"),
            }
            timeout = self.args.timeout
            try:
                result = run_child(SCRIPT, "--_measure", payload, timeout=timeout)
                result["rows"] = json.loads(Path(payload["rows"]).read_text())
            except subprocess.TimeoutExpired:
                result = {"error": f"{mode}: timed out after {timeout:.0f} s"}
            except RuntimeError as error:
                result = {"error": f"{mode}: {error}"}
            found[mode] = result
            status = result.get("error") or f"{result['wall_s']:.1f} s"
            print(f"  measured {label} {MODE_LABEL[mode]}: {status}", file=sys.stderr)
            if "error" in result:
                break
        errors = [r["error"] for r in found.values() if "error" in r]
        return {"error": errors[0]} if errors else found


# -- the table -----------------------------------------------------------------------------------
@dataclass
class _Findings:
    """What the table's lines below it say: per-ranker notes, the dense speed-up goals and the
    pointwise rankers' model-call check."""

    notes: list[str] = field(default_factory=list)
    goals: list[str] = field(default_factory=list)
    pointwise: list[tuple[str, bool, dict, dict]] = field(default_factory=list)


def print_table(rows: list[tuple[str, dict]], modes: list[str], any_tiny: bool) -> None:
    cached = "cached" in modes
    width = max([len(label) for label, _ in rows] + [22])
    header = (
        f"{'ranker':<{width}} {'same NRP':>8} {'calls fast':>10} "
        + (f"{'cached':>7} " if cached else "")
        + f"{'calls full':>10} {'fast s':>7} "
        + (f"{'cached s':>8} " if cached else "")
        + f"{'full s':>7} {'full/fast':>9} "
        + (f"{'full/cached':>11} " if cached else "")
        + f"{'fast MiB':>8} {'full MiB':>8}"
    )
    print()
    print(header)
    print("-" * len(header))
    findings = _Findings()
    for label, found in rows:
        if "error" in found:
            print(f"{label:<{width}} failed: {found['error'][:160]}")
            continue
        same, why = _verdict(found, modes)
        print(_table_line(label, width, found, modes, same))
        findings.notes.append(_note(label, found, modes, same, why))
        fast = found["fast"]
        if fast["mode"] in POINTWISE_MODES:
            c = fast["counts"]
            ok = c["answers_scored"] == fast["ranked"] and c["documents_scored"] == fast["dq_sum"]
            findings.pointwise.append((label, ok, c, fast))
        if label.split(":")[0].split()[0] == "dense":
            findings.goals += _dense_goals(label, found, cached)
    print()
    _print_findings(rows, findings)
    print()
    if any_tiny:
        print(f"* {TINY_NOTE} (T5: 1 layer, d_model 16, 512 input tokens)")
    print(
        "same NRP: r, ties and NRP of every answer equal (==) in fast and full mode (and in\n"
        "  the cached run); NO (n): n answers differ. calls: answers scored + documents scored\n"
        "  + duoT5 pair evaluations (attrs['counts']). fast: fresh score and results caches, D_q\n"
        "  scored inside the timed call; cached: the same with D_q's scores in the score cache\n"
        "  (results cache deleted), so fast s - cached s is about the time of scoring D_q and\n"
        "  cached s that of the answers; full: full_rerank=True, cache=False. s: the\n"
        "  score_answers call only (model loading timed apart, see load); MiB: peak RSS (VmHWM)\n"
        "  of the run's own process, loading included. One process per ranker and mode."
    )
    print(measured())


def _verdict(found: dict, modes: list[str]) -> tuple[bool, str]:
    """Whether fast (and cached) positioned every answer as full did; why not."""
    full = found["full"]
    same, why = compare(found["fast"]["rows"], full["rows"])
    if "cached" in modes:
        same_cached, why_cached = compare(found["cached"]["rows"], full["rows"])
        if not same_cached:
            why = "; ".join(w for w in (why, f"cached: {why_cached}") if w)
        same = same and same_cached
    return same, why


def _table_line(label: str, width: int, found: dict, modes: list[str], same: bool) -> str:
    cached = "cached" in modes
    fast, full = found["fast"], found["full"]
    differ = max([_differing(found[m]["rows"], full["rows"]) for m in modes if m != "full"] or [0])
    verdict = "yes" if same else (f"NO ({differ})" if differ else "NO")
    line = (
        f"{label:<{width}} {verdict:>8} {model_calls(fast['counts']):>10,} "
        + (f"{model_calls(found['cached']['counts']):>7,} " if cached else "")
        + f"{model_calls(full['counts']):>10,} {fast['wall_s']:>7.2f} "
        + (f"{found['cached']['wall_s']:>8.2f} " if cached else "")
        + f"{full['wall_s']:>7.2f} {ratio(full['wall_s'], fast['wall_s']):>8.1f}x "
    )
    if cached:
        line += f"{ratio(full['wall_s'], found['cached']['wall_s']):>10.1f}x "
    return line + f"{fast['peak_rss_mib']:>8,.0f} {full['peak_rss_mib']:>8,.0f}"


def _note(label: str, found: dict, modes: list[str], same: bool, why: str) -> str:
    fast, full = found["fast"], found["full"]
    parts = []
    for mode in modes:
        c = found[mode]["counts"]
        part = (
            f"{MODE_LABEL[mode]} {c['answers_scored']:,} answers + "
            f"{c['documents_scored']:,} docs + {c['pair_evaluations']:,} pairs"
        )
        if c["documents_rescored"]:
            part += f" ({c['documents_rescored']:,} docs rescored by array arithmetic)"
        parts.append(part)
    note = f"{label}: {fast['mode']} vs {full['mode']}; " + "; ".join(parts)
    note += f"; load {fast['load_s']:.1f} s"
    diff = _max_score_diff(fast["rows"], full["rows"])
    note += f"; max |answer score fast - full| {diff:.3g}"
    note += (
        f"; answers tied with a document: fast {_tied(fast['rows'])}, full {_tied(full['rows'])}"
    )
    if not same:
        note += f"; NRP differs: {why}"
    return note


def _dense_goals(label: str, found: dict, cached: bool) -> list[str]:
    """The dense ranker's speed-up against its goal, and its model calls."""
    fast, full = found["fast"], found["full"]
    speed_up = ratio(full["wall_s"], fast["wall_s"])
    target = 0.8 * (fast["dq_mean_per_answer"] + 1)
    goal = (
        f"{label}: speed-up {speed_up:.1f}x, goal >= 0.8 x (mean |D_q| + 1) = "
        f"{target:.1f}x: {'met' if speed_up >= target else 'not met'}"
    )
    if cached:
        with_cache = full["wall_s"] / found["cached"]["wall_s"]
        goal += f"; with D_q cached {with_cache:.1f}x: " + (
            "met" if with_cache >= target else "not met"
        )
    calls_ratio = model_calls(full["counts"]) / max(model_calls(fast["counts"]), 1)
    return [
        goal,
        f"  (model calls full/fast {calls_ratio:.1f}x: {fast['ranked']} answers over "
        f"{fast['qids']} queries, {fast['ranked'] / max(fast['qids'], 1):.1f} per query; "
        "a cold fast run scores every D_q once, which outweighs the answers unless a "
        "query has many of them)",
    ]


def _print_findings(rows: list[tuple[str, dict]], findings: _Findings) -> None:
    first = next((f for _, f in rows if "error" not in f), None)
    if first is not None:
        fast = first["fast"]
        skipped = sorted(set(fast["skipped"]))
        print(
            f"{fast['ranked']} answers ranked, {fast['qids']} queries, sum of |D_q| "
            f"{fast['dq_sum']:,} (mean |D_q| per answer {fast['dq_mean_per_answer']:.1f})"
            + (
                f"; {len(fast['skipped'])} skipped (no judged documents: {', '.join(skipped)})"
                if skipped
                else ""
            )
        )
    if findings.pointwise:
        labels = ", ".join(label for label, *_ in findings.pointwise)
        verdict = "yes" if all(ok for _, ok, *_ in findings.pointwise) else "no"
        print(f"pointwise rankers ({labels}): one model call per answer: {verdict}")
        for label, ok, c, fast in findings.pointwise:
            if not ok:
                print(
                    f"  {label}: {c['answers_scored']} answers scored for {fast['ranked']} "
                    f"answers, {c['documents_scored']} documents scored for "
                    f"sum |D_q| = {fast['dq_sum']}"
                )
    for goal in findings.goals:
        print(goal)
    print()
    for note in findings.notes:
        print(note)


if __name__ == "__main__":
    sys.exit(main())
