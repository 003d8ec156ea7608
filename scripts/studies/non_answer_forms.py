#!/usr/bin/env python3
"""Non-answers in wordings that no generator of nrp has: an answer file for an outside check.

``nrp.validation.degenerate`` composes the degenerate texts that validation measures, and the
guard was fitted on three of their four families. This script writes other non-answers, by hand,
for every question of a collection, so that ``nrp score`` and ``nrp summary`` show how the
default flow treats wordings it was never built with (docs/validity.md, "Non-answers in
wordings of no generator"). Nothing in nrp was fitted or chosen on them.

Three sets, one answer per question and form (``llm``: the form; ``prompt``: the set):

- set ``A``: generic health advice, an AI's disclaimer, "I don't know", the question twice, with
  typos, upper-cased, after "Yes.", a dodge that names the question's words, those words in a
  sentence, a definition of medicine, advice to search online, a long restatement;
- set ``B`` (written before the trial in docs/studies/validity-study.md was built, read only
  after it): wellness advice, an encyclopedia's sentence on health care, a referral to named
  sources that names the subject, a vague remark on the subject, a hedge on two of its words,
  small talk, a disclaimer of qualification;
- set ``C`` (written after A and B had found a referral that names the subject passing on the
  LiveQA-Med pool, before the trial's last variant, read only after it): referrals and vague
  remarks in other words (a specialist, leaflets, a nurse line, forums, "has been studied"),
  and a fact about the human body.

"The question's words" are its words of four or more letters that are not stopwords, in order.

    .venv/bin/python scripts/studies/non_answer_forms.py mediqa-2019 forms.jsonl
    nrp score mediqa-2019 forms.jsonl --out runs/forms
    nrp summary runs/forms
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchkit, beside the benchmarks
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other studies
from benchkit import ROOT, load_or_ingest

from nrp.errors import NrpError

#: the words a form never takes from a question: a short list of its own, not Terrier's and not
#: ``nrp.validation.degenerate.content_words``, so the check takes nothing from what it checks
_STOP_WORDS = (
    "the a an and or of to in on for with is are was were be been i my me you your it "
    "this that what how why when which who do does did can could should would will have "
    "has had there their about from at by as not no yes any some more most very just so "
    "if than then"
)
_STOP = frozenset(_STOP_WORDS.split())


def words(question: str) -> list[str]:
    """The question's words of four or more letters, stopwords out, each once, in order, twice
    over (a form that names two has two); ``this, that`` where it has none."""
    found = [w for w in re.findall(r"[A-Za-z]+", question) if w.lower() not in _STOP and len(w) > 3]
    found = list(dict.fromkeys(found)) or ["this", "that"]
    return found + found


def typos(question: str, rng: random.Random) -> str:
    """One character in 25 (at least one) replaced by a vowel or a frequent consonant."""
    chars = list(question)
    for _ in range(max(1, len(chars) // 25)):
        chars[rng.randrange(len(chars))] = rng.choice("aeiourstn")
    return "".join(chars)


Form = Callable[[str, random.Random], str]

SET_A: dict[str, Form] = {
    "generic_health": lambda q, r: (
        "Maintaining a healthy lifestyle is important for everyone. Eat a balanced diet rich in "
        "fruits and vegetables, exercise regularly, get enough sleep, and avoid smoking. Regular "
        "check-ups help catch problems early."
    ),
    "ai_disclaimer": lambda q, r: (
        "As an AI language model, I am not able to provide medical advice, diagnosis, or "
        "treatment. The information I can share is general in nature and should not replace a "
        "consultation with a qualified healthcare provider."
    ),
    "dont_know": lambda q, r: "I don't know. Sorry, I can't help with that.",
    "echo_twice": lambda q, r: f"{q} {q}",
    "echo_typos": lambda q, r: typos(q, r),
    "echo_upper": lambda q, r: q.upper(),
    "topic_dodge": lambda q, r: (
        f"This is a complex topic involving {', '.join(words(q)[:4])}. Many factors play a role, "
        "and every situation is unique. There is no simple answer that fits everyone."
    ),
    "keywords_sentence": lambda q, r: (
        f"{' and '.join(words(q)[:4])} are important subjects that many people wonder about. "
        f"Understanding {words(q)[0]} can be difficult."
    ),
    "yes_echo": lambda q, r: f"Yes. {q}",
    "medicine_definition": lambda q, r: (
        "Medicine is the science and practice of caring for patients, managing the diagnosis, "
        "prognosis, prevention, treatment and palliation of their injury or disease, and "
        "promoting their health."
    ),
    "search_advice": lambda q, r: (
        f"You can find more information about {words(q)[0]} by searching online or visiting the "
        "website of a reputable health organization. A librarian can also help you find "
        "reliable sources."
    ),
    "restate_long": lambda q, r: (
        "Let me make sure I understand correctly. Your message concerns the following: "
        f'"{q}". I understand that this matters a great deal to you and that you are looking '
        "for clarity on it."
    ),
}

SET_B: dict[str, Form] = {
    "wellness": lambda q, r: (
        "Staying active, drinking plenty of water and keeping a regular sleep schedule all "
        "support good health. Stress management and social connection matter too."
    ),
    "encyclopedic": lambda q, r: (
        "Health care covers the prevention, diagnosis and treatment of illness. It is delivered "
        "by doctors, nurses, pharmacists and other professionals in clinics and hospitals."
    ),
    "ref_mention": lambda q, r: (
        f"For reliable details on {words(q)[0]}, the National Institutes of Health and "
        "MedlinePlus publish pages written for patients. Your local library can point you to "
        "them as well."
    ),
    "vague_mention": lambda q, r: (
        f"{words(q)[0].capitalize()} is something that affects people in different ways. What "
        "works for one person may not work for another, so results vary."
    ),
    "hedge_mention": lambda q, r: (
        f"There are several things to consider regarding {words(q)[0]} and {words(q)[1]}. Each "
        "of them deserves careful thought before any decision is made."
    ),
    "smalltalk": lambda q, r: (
        "That's a great question! I'm glad you reached out. Health questions can feel "
        "overwhelming, but you're taking a good first step by asking."
    ),
    "not_qualified": lambda q, r: (
        "I'm not a medical professional, so I can't really say. It would be best to check with "
        "someone who has the right training."
    ),
}

SET_C: dict[str, Form] = {
    "consult_named": lambda q, r: (
        f"Questions about {words(q)[0]} are best answered by a specialist who can review your "
        "history. A family physician can refer you to one."
    ),
    "pamphlet": lambda q, r: (
        f"Many hospitals hand out leaflets on {words(q)[0]}. Ask at the front desk, or check the "
        "patient education section of their website."
    ),
    "forum": lambda q, r: (
        f"People in online forums share their experiences with {words(q)[0]}, and reading them "
        "may help you feel less alone."
    ),
    "overview_vague": lambda q, r: (
        f"{words(q)[0].capitalize()} has been studied for many years. Researchers continue to "
        "learn more about it, and new findings appear regularly."
    ),
    "hotline": lambda q, r: (
        f"If you have concerns about {words(q)[0]}, you can call a nurse advice line; many "
        "insurers offer one free of charge, day and night."
    ),
    "generic_fact": lambda q, r: (
        "The human body is made up of trillions of cells that work together in organs and systems."
    ),
}

SETS = {"A": SET_A, "B": SET_B, "C": SET_C}


def answers(topics: list[tuple[str, str]], sets: str = "ABC", seed: int = 0) -> list[dict]:
    """One answer per (qid, question) of ``topics``, set of ``sets`` and form, in that order."""
    rng = random.Random(seed)
    return [
        {"llm": form, "prompt": name, "qid": qid, "text": make(question, rng)}
        for name in sets
        for qid, question in topics
        for form, make in SETS[name].items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="non_answer_forms", description=__doc__.splitlines()[0])
    parser.add_argument("collection", help="an ingested collection (ingested when missing)")
    parser.add_argument("out", type=Path, help="the answer file written (JSON Lines)")
    parser.add_argument("--indexes", type=Path, default=ROOT / "indexes")
    parser.add_argument(
        "--sets", default="ABC", help="the sets written, in this order: A, B and/or C (ABC)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of the typos")
    args = parser.parse_args(argv)
    if not args.sets or set(args.sets) - set(SETS) or len(set(args.sets)) < len(args.sets):
        parser.error(f"--sets: each of A, B, C at most once, not {args.sets!r}")
    if not args.out.parent.is_dir():
        parser.error(f"{args.out}: its folder does not exist")
    try:
        topics = load_or_ingest(args.collection, args.indexes).topics
    except NrpError as error:  # no such collection and no manifests/NAME.yaml to ingest it from
        parser.error(f"collection {args.collection!r}: {error}")
    pairs = list(zip(topics["qid"].astype(str), topics["query"].astype(str), strict=True))
    rows = answers(pairs, args.sets, args.seed)
    args.out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    print(f"wrote {len(rows):,} answers ({len(pairs)} questions) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
