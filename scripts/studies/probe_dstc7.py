#!/usr/bin/env python3
"""Does nrp probe's generated negation move evaluators like a human-made adversarial twin?

On DialogADV DSTC7-ADV (``nrp.meta.datasets``: 1,710 original responses, each with its negated
copy written by the set's authors), every original response is also negated by ``nrp probe``'s
``negate`` perturbation. Originals, human twins and generated twins are scored by the same
reference-based evaluators (the original reference of the dialogue), and for each score the
script prints, over the pairs where ``negate`` applies: the share where the original scores
higher than its human twin and than its generated twin (ties apart), the mean change of each,
and how often the generated twin is the human twin word for word (case and spacing ignored).

    .venv/bin/python scripts/studies/probe_dstc7.py [--evaluators bleu,rouge,bertscore] [--limit N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchkit, beside the benchmarks
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other studies
from benchkit import machine

from nrp.errors import NrpError
from nrp.evaluators.run import evaluate
from nrp.meta.datasets import load_meta_set
from nrp.probes.perturbations import PerturbationContext, perturb

TIE = 1e-12


def normal(text: str) -> str:
    return " ".join(str(text).lower().split())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evaluators", default="bleu,rouge,bertscore")
    parser.add_argument("--limit", type=int, help="first N dialogues only")
    args = parser.parse_args(argv)
    try:
        meta = load_meta_set("dstc7-adv", limit=args.limit)
    except NrpError as err:
        print(f"probe_dstc7: error: {err}", file=sys.stderr)
        return 2
    items = meta.items.reset_index(drop=True)
    original = items[items["subset"] == "original"].set_index("pair_id")
    human = items[items["subset"] == "adversarial"].set_index("pair_id")
    pairs = original.index.intersection(human.index)
    generated, applies, same = [], 0, 0
    for pair in pairs:
        row = original.loc[pair]
        context = PerturbationContext(answer_id=str(row["answer_id"]), query=str(row["question"]))
        text = perturb("negate", str(row["text"]), context)
        if text is None:
            continue
        applies += 1
        same += normal(text) == normal(human.loc[pair, "text"])
        generated.append({**row.to_dict(), "pair_id": pair, "answer_id": f"{row['answer_id']}~gen",
                          "text": text})  # fmt: skip
    gen = pd.DataFrame(generated).set_index("pair_id")
    used = gen.index
    frame = pd.concat(
        [original.loc[used].reset_index(), human.loc[used].reset_index(), gen.reset_index()],
        ignore_index=True,
    )
    started = time.perf_counter()
    scored = evaluate(frame, args.evaluators).set_index("answer_id")
    seconds = time.perf_counter() - started
    scores = [c for c in scored.columns if pd.api.types.is_float_dtype(scored[c])]
    ids = {
        "original": original.loc[used, "answer_id"].to_numpy(),
        "human": human.loc[used, "answer_id"].to_numpy(),
        "generated": gen["answer_id"].to_numpy(),
    }
    print(f"DSTC7-ADV: {len(pairs)} original responses with a human negated twin; nrp's negate "
          f"applies to {applies} ({applies / len(pairs):.1%}); generated = human twin word for "
          f"word in {same} ({same / max(applies, 1):.1%}). Scored in {seconds:.0f} s; "
          f"{machine()}")  # fmt: skip
    print("\n| score | original > human twin | ties | mean change | original > generated twin "
          "| ties | mean change |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for score in scores:
        base = scored.loc[ids["original"], score].to_numpy(float)
        cells = []
        for twin in ("human", "generated"):
            diff = scored.loc[ids[twin], score].to_numpy(float) - base
            ok = np.isfinite(diff)
            diff = diff[ok]
            cells += [f"{np.mean(diff < -TIE):.3f}", f"{np.mean(np.abs(diff) <= TIE):.3f}",
                      f"{diff.mean():+.4f}"]  # fmt: skip
        print(f"| {score} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
