#!/usr/bin/env python3
"""The main job on a fixed sample of real answers: whole ``nrp score`` processes in the default
flow (the collection's validation) beside the limit, a bare encode of each answer once, in one
run (issue 70).

The sample: CLEF eHealth 2021's answers (``../shared/data/clef-ehealth-2021/answers``, the wide
layout ``<llm>/<prompt>.csv``, read with ``nrp.read_answers``), the first answer (sample 0) of
every LLM x prompt x topic: 40 files x 50 topics, 2,000 answers, the empty ones among them
(scored last and flagged, as nrp reads them). The same sample before and after: it depends on
the data only. The collection: ``indexes/clef-ehealth-2021``, validated once beforehand by
``nrp validate clef-ehealth-2021`` (its ``validation.json`` chooses the rankers; this script
does not validate) and reused by every run. Measured, alternated within each round:

- **the limit (bare encode)**: a whole process (``run_child``) that loads the packaged MiniLM
  nrp's ``dense`` loads (the same folder, device, precision and batch size) with
  sentence-transformers and encodes each distinct non-empty answer text of the sample once, in
  one ``SentenceTransformer.encode`` call (which sorts its batches by length): the least a
  ranker over that model must do for these answers. Its whole process (start to exit) is the
  limit; the encode alone is printed beside it.
- **the guard's own work (bare encode, answers and rests)**: the same, encoding each distinct
  answer and each distinct rest (the answer without its question's words, which the guard's
  features embed beside it; ``nrp.rankers.guard_features.lexical_features`` with the packaged
  model's ``rest_words``) once, in one call: the least the default flow's guard must encode.
- **nrp**: ``nrp score clef-ehealth-2021 SAMPLE --out DIR`` (no ``--ranker``: the default
  flow), start to exit, peak RSS of the process (``os.wait4``). D_q's scores come from the
  score cache as validation left them; no answer's position comes from the results cache: each
  run scores a copy of the sample whose LLM names carry a tag of that run, so every answer id is
  new (positions are kept per answer id and text). With ``--before DIR`` the same command from
  that source tree runs too, on the same collection folder, at each precision (a tree before
  ``nrp score --dtype`` fails at bf16, and says so).

Printed per run: wall s, answers/s, peak RSS MB; then nrp's whole process over the bare
encode's (goal at most 1.3x) and over the guard's own work, and nrp's peak RSS (goal at most
2,000 MB), each beside its goal; then each LLM's mean weighted NRP (round 1) compared between the
precisions and, with ``--before``, between the trees at each precision (goal: within 0.005, no
pair in another order).
Each run writes 2,000 rows to the collection's results cache (``nrp.sqlite``).

    .venv/bin/python scripts/bench_default_flow.py
    git worktree add ../before REV && .venv/bin/python scripts/bench_default_flow.py \\
        --before ../before --runs 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import (
    ROOT,
    before_option,
    checkout_env,
    child_main,
    emit,
    load_or_ingest,
    machine,
    measured,
    ratio,
    run_child,
    timed_process,
)

SCRIPT = Path(__file__).resolve()
CLEF = "clef-ehealth-2021"
CLEF_ANSWERS = ROOT.parent / "shared" / "data" / CLEF / "answers"
GOAL_RATIO = 1.3
GOAL_RSS_MB = 2_000


# -- children -------------------------------------------------------------------------------------
def _prepare(payload: dict) -> None:
    """Load (or ingest) the collection, write the sample (JSON Lines), and say how nrp's
    ``dense`` loads its model (folder, device, dtype, batch)."""
    import nrp
    from nrp.answers import empty_texts
    from nrp.models.device import resolve_device
    from nrp.models.folders import resolve_model
    from nrp.rankers.guard_features import lexical_features
    from nrp.rankers.guard_model import packaged_model

    collection = load_or_ingest(CLEF, payload["indexes"])
    answers = nrp.read_answers(payload["answers"], collection).answers
    sample = answers[answers["sample"] == 0]
    if payload["limit"]:
        sample = sample.head(payload["limit"])
    sample = sample.assign(text=sample["text"].fillna("").astype(str))
    questions = dict(zip(collection.topics["qid"].astype(str),
                         collection.topics["query"].astype(str), strict=True))  # fmt: skip
    cut = packaged_model().rest_words
    rests = [lexical_features(questions[str(q)], t, cut)[2]
             for q, t in zip(sample["qid"], sample["text"], strict=True)]  # fmt: skip
    Path(payload["rests"]).write_text(json.dumps(rests), encoding="utf-8")
    columns = ["llm", "prompt", "qid", "sample", "text"]
    with open(payload["sample"], "w", encoding="utf-8") as out:
        for record in sample[columns].to_dict("records"):
            record["sample"] = int(record["sample"])
            out.write(json.dumps(record) + "\n")
    params = nrp.make_ranker("dense").params
    name = str(params["model"])
    emit({"answers": len(sample), "empty": int(empty_texts(sample["text"]).sum()),
          "llms": int(sample["llm"].nunique()),
          "files": len(answers[["llm", "prompt"]].drop_duplicates()), "name": name,
          "model": resolve_model(name), "device": resolve_device(str(params["device"])),
          "dtype": str(params["dtype"]), "batch": int(params["batch"])})  # fmt: skip


def _bare_encode(payload: dict) -> None:
    """The limit: the model loaded as ``dense`` loads it, each distinct non-empty answer text
    (and with ``rests`` each distinct rest too) encoded once in one
    ``SentenceTransformer.encode`` call, timed around the encode."""
    from benchkit import peak_rss_mib, sync
    from sentence_transformers import SentenceTransformer

    from nrp.models.device import autocast, resolve_device, resolve_dtype, weight_dtype

    with open(payload["sample"], encoding="utf-8") as lines:
        texts = [json.loads(line)["text"] for line in lines]
    if payload.get("rests"):
        texts += json.loads(Path(payload["rests"]).read_text(encoding="utf-8"))
    texts = list(dict.fromkeys(t for t in texts if t.strip()))
    device = resolve_device(payload["device"])
    dtype = resolve_dtype(payload["dtype"], device, cpu_bf16=True)
    model = SentenceTransformer(payload["model"], device=device)
    model = model.to(weight_dtype(dtype)).eval()  # bf16: fp32 weights under autocast, as dense
    started = time.perf_counter()
    with autocast(dtype, device):
        model.encode(texts, batch_size=payload["batch"], convert_to_numpy=True,
                     normalize_embeddings=True, show_progress_bar=False)  # fmt: skip
    sync(device)
    emit({"encode_s": time.perf_counter() - started, "texts": len(texts), "device": device,
          "peak_mib": peak_rss_mib()})  # fmt: skip


# -- parent ---------------------------------------------------------------------------------------
def main() -> int:
    if child_main({"--_prepare": _prepare, "--_bare": _bare_encode}):
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=1, help="rounds of nrp and the bare encode")
    parser.add_argument("--limit", type=int, default=0,
                        help="keep the first N answers of the sample (0: all)")  # fmt: skip
    parser.add_argument("--dtypes", nargs="+", default=["fp32"], choices=("fp32", "bf16"),
                        help="precisions to measure, each with its own limit (nrp score "
                        "--dtype; the bare encode at the same precision)")  # fmt: skip
    parser.add_argument("--indexes", type=Path, default=ROOT / "indexes")
    parser.add_argument("--timeout", type=float, default=3600)
    before_option(parser, "nrp score from this source tree after each run of this one")
    args = parser.parse_args()
    if not CLEF_ANSWERS.is_dir():
        print(f"CLEF eHealth 2021's answers not found in {CLEF_ANSWERS}: nothing to benchmark",
              file=sys.stderr)  # fmt: skip
        return 1
    validation = args.indexes.resolve() / CLEF / "validation.json"
    if not validation.is_file():
        print(f"{validation} not found: the default flow needs it; run `nrp validate {CLEF} "
              f"--indexes {args.indexes}` first", file=sys.stderr)  # fmt: skip
        return 1
    work = Path(tempfile.mkdtemp(prefix="nrp-bench-default-flow-"))
    try:
        _run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(measured("2 CPU cores shared with other work: the ratios are what count"))
    return 0


def _tagged(sample: Path, tag: str, work: Path) -> Path:
    """A copy of the sample whose LLM names end in ``tag``: every answer id new, so no position
    comes from the results cache."""
    path = work / f"sample-{tag}.jsonl"
    with open(sample, encoding="utf-8") as lines, open(path, "w", encoding="utf-8") as out:
        for line in lines:
            record = json.loads(line)
            record["llm"] = f"{record['llm']}--{tag}"
            out.write(json.dumps(record) + "\n")
    return path


def _run(args: argparse.Namespace, work: Path) -> None:
    indexes, sample = args.indexes.resolve(), work / "sample.jsonl"
    rests = work / "rests.json"
    payload = {"indexes": str(indexes), "answers": str(CLEF_ANSWERS), "sample": str(sample),
               "limit": args.limit, "rests": str(rests)}  # fmt: skip
    found = run_child(SCRIPT, "--_prepare", payload, args.timeout)
    count = found["answers"]
    trees = [("", checkout_env())]
    if args.before:
        trees.append((" (before)", {**trees[0][1], "PYTHONPATH": str(args.before.resolve())}))
    print(f"machine: {machine()}; {CLEF}: {count:,} answers (sample 0 of each LLM x prompt x "
          f"topic of {found['files']} files, {found['llms']} LLMs; {found['empty']} empty); "
          f"dense's model={found['name']}, device {found['device']}, batch {found['batch']}; "
          f"precisions {', '.join(args.dtypes)}; whole processes\n")  # fmt: skip
    header = (f"{'round':<6} {'run':<30} {'s':>7} {'answers/s':>9} {'peak MB':>7} "
              f"{'x bare':>6} {'goal':>4} {'x guard':>7}")  # fmt: skip
    print(header)
    print("-" * len(header))
    stamp = time.strftime("%Y%m%d%H%M%S")
    seen: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    means: dict[tuple[str, str], dict[str, float]] = {}  # (tree, dtype) -> LLM -> mean (round 1)
    bare_payload = {k: found[k] for k in ("model", "device", "batch")}
    for number in range(1, args.runs + 1):
        for dtype in args.dtypes:
            started = time.perf_counter()
            bare = run_child(SCRIPT, "--_bare", {**bare_payload, "dtype": dtype,
                             "sample": str(sample)}, args.timeout, checkout_env())  # fmt: skip
            bare_s = time.perf_counter() - started
            print(f"{number:<6} {'bare encode (the limit) ' + dtype:<30} {bare_s:7.1f} "
                  f"{ratio(count, bare_s):9.1f} {bare['peak_mib']:7.0f}   encode alone "
                  f"{bare['encode_s']:.1f} s, {bare['texts']:,} distinct texts",
                  flush=True)  # fmt: skip
            started = time.perf_counter()
            guard = run_child(SCRIPT, "--_bare", {**bare_payload, "dtype": dtype, "sample":
                              str(sample), "rests": str(rests)}, args.timeout,
                              checkout_env())  # fmt: skip
            guard_s = time.perf_counter() - started
            print(f"{number:<6} {'answers and rests ' + dtype:<30} {guard_s:7.1f} "
                  f"{ratio(count, guard_s):9.1f} {guard['peak_mib']:7.0f}   encode alone "
                  f"{guard['encode_s']:.1f} s, {guard['texts']:,} distinct texts",
                  flush=True)  # fmt: skip
            for index, (tree, tree_env) in enumerate(trees):
                tagged = _tagged(sample, f"bench{stamp}r{number}{dtype}t{index}", work)
                out = work / f"out-{number}-{dtype}-{index}"
                command = [sys.executable, "-m", "nrp", "score", CLEF, str(tagged), "--out",
                           str(out), "--indexes", str(indexes)]  # fmt: skip
                if dtype != "fp32":
                    command += ["--dtype", dtype]
                seconds, peak, status = timed_process(command, tree_env)
                if number == 1 and not status:
                    means[(tree, dtype)] = _llm_means(out / "results.parquet")
                shutil.rmtree(out, ignore_errors=True)
                tagged.unlink()
                label = f"nrp score {dtype}{tree}"
                if status:
                    print(f"{number:<6} {label:<30} failed (exit {status})", flush=True)
                    continue
                seen.setdefault((tree, dtype), []).append(
                    (ratio(seconds, bare_s), peak, seconds, ratio(seconds, guard_s))
                )
                print(f"{number:<6} {label:<30} {seconds:7.1f} {ratio(count, seconds):9.1f} "
                      f"{peak:7.0f} {ratio(seconds, bare_s):6.2f} {GOAL_RATIO:4.1f} "
                      f"{ratio(seconds, guard_s):7.2f}", flush=True)  # fmt: skip
    print()
    for (tree, dtype), rows in seen.items():
        times = statistics.median(r for r, _, _, _ in rows)
        peak = max(p for _, p, _, _ in rows)
        wall = statistics.median(w for _, _, w, _ in rows)
        guard = statistics.median(g for _, _, _, g in rows)
        print(
            f"nrp score {dtype}{tree}: {wall:.1f} s, {times:.2f}x the bare encode at {dtype} "
            f"(median of {len(rows)}; goal <= {GOAL_RATIO}x), {guard:.2f}x the bare encode of "
            f"the answers and their rests, peak RSS {peak:,.0f} MB (goal <= {GOAL_RSS_MB:,} MB)"
        )
    if ("", "fp32") in seen and ("", "bf16") in seen:
        fp32 = statistics.median(w for _, _, w, _ in seen[("", "fp32")])
        bf16 = statistics.median(w for _, _, w, _ in seen[("", "bf16")])
        print(f"bf16 over fp32: nrp score {ratio(fp32, bf16):.2f}x faster")
    if ("", "fp32") in means and ("", "bf16") in means:
        _agreement(means[("", "fp32")], means[("", "bf16")], "fp32", "bf16")
    for (tree, dtype), before in means.items():
        if tree and ("", dtype) in means:
            _agreement(before, means[("", dtype)], f"before {dtype}", f"this tree {dtype}")
    print(
        "x bare: nrp's whole process over the bare encode's whole process at the same "
        "precision in the same round (start to exit both; the bare encode loads the model and "
        "encodes each answer once); x guard: the same over the bare encode of each answer and "
        "each rest once (the guard's own work)"
    )


def _llm_means(results: Path) -> dict[str, float]:
    """Each LLM's mean weighted NRP in a run's results (its run tag taken off the name)."""
    import pandas as pd

    frame = pd.read_parquet(results, columns=["llm", "dimension", "nrp"])
    weighted = frame[frame["dimension"] == "weighted"]
    llm = weighted["llm"].astype(str).str.rsplit("--", n=1).str[0]
    return {str(k): float(v) for k, v in weighted.groupby(llm)["nrp"].mean().items()}


def _agreement(first: dict[str, float], second: dict[str, float], one: str, other: str) -> None:
    """The LLMs' mean weighted NRP in two runs (``one``, ``other``: what each is): the largest
    difference (acceptance: at most 0.005 per system) and the pairs of LLMs whose order
    differs."""
    llms = sorted(first, key=lambda k: -first[k])
    worst = max(abs(first[k] - second[k]) for k in llms)
    moved = [(a, b) for i, a in enumerate(llms) for b in llms[i + 1 :]
             if (first[a] - first[b]) * (second[a] - second[b]) < 0]  # fmt: skip
    print(f"\nmean weighted NRP per LLM, {one} -> {other} (round 1; {len(llms)} LLMs):")
    for k in llms:
        print(f"  {k:<28} {first[k]:.4f} -> {second[k]:.4f} ({second[k] - first[k]:+.4f})")
    print(f"largest difference {worst:.4f} (goal <= 0.005); pairs in another order: "
          + (", ".join(f"{a} / {b}" for a, b in moved) or "none"))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
