"""Degenerate texts built from a collection itself: what a ranker must never put above a real
answer.

A judged document is an answer someone wrote; nDCG on judged documents says nothing about how a
ranker treats text that only mirrors the question, evades it, or is a damaged copy of a
document. Validity (``nrp.validation.validity``) ranks these texts among D_q and counts how often
the judged documents stay above them.

Kinds, in four families (``FAMILIES``). Each text is drawn from the query, its judged documents
and a seeded generator (``random.Random(f"{seed}/{qid}/{kind}/{i}")``: the same collection, seed
and kind give the same texts on every machine). Wording is composed from slots (openings,
bodies, closings, joined in a random order and case), so one kind yields hundreds of different
texts, not a fixed list of sentences:

- ``mirror``: ``echo`` (the question itself), ``restated`` (the question framed as a restatement:
  "So you want to know ...", "Your question was: ..."), ``keywords`` (the question's content words
  as a list, comma-separated, bulleted or as a tag line), ``spliced`` (the question followed by
  the first one to three sentences of another query's best document: words beyond the question,
  none of them about it).
- ``evasion``: ``padded`` (the question in polite boilerplate: thanks, greetings, wishes),
  ``evasive`` (the question and sentences that defer: it depends, ask a professional),
  ``refusal`` (the question and a refusal to answer it), ``asked`` (one to three questions back
  to the asker about the question's content words, and nothing else: "How long have you been
  dealing with knee pain? Did a doctor mention swelling to you?").
- ``damaged``: ``shuffled`` (the best judged document's words in a random order),
  ``first_sentence`` (the best judged document cut to its first sentence).
- ``off_topic``: ``other_best`` (the best judged document of another query; never one graded
  relevant for this query too: pools share documents). Which other query is a draw, and one
  draw decides much of a query's figure, so ``query_materials`` can draw several other queries
  (``draws``), one text each.

``HELD_OUT_FAMILY`` (evasion) is the family the packaged validity guard (``nrp.rankers.guard``)
never saw: it was fitted on the other three, so validity on evasion measures how the guard
handles forms of degenerate text it was not built with. Validation reports it separately.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from nrp.errors import ConfigError

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
WORD = re.compile(r"[A-Za-z0-9']+")

FAMILIES: dict[str, tuple[str, ...]] = {
    "mirror": ("echo", "restated", "keywords", "spliced"),
    "evasion": ("padded", "evasive", "refusal", "asked"),
    "damaged": ("shuffled", "first_sentence"),
    "off_topic": ("other_best",),
}
KINDS: tuple[str, ...] = tuple(kind for kinds in FAMILIES.values() for kind in kinds)
FAMILY_OF: dict[str, str] = {k: family for family, kinds in FAMILIES.items() for k in kinds}
#: kinds of which a query can have several draws (other queries, ``query_materials``'s
#: ``draws``): more draws make the kind's figure steadier, not heavier, so in a figure over
#: several kinds (a family, all texts) a query's draws count as one text, their mean
DRAWN_KINDS = frozenset({"other_best"})
#: the family the packaged guard was not fitted on (reported apart as "held out")
HELD_OUT_FAMILY = "evasion"
#: docnos of degenerate texts start with this (never a judged document's)
DOCNO_PREFIX = "~degenerate"

#: words that carry no content (the keywords kind; the probes' perturbations use the same list)
FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "is",
        "it",
        "its",
        "my",
        "of",
        "on",
        "or",
        "should",
        "that",
        "the",
        "their",
        "there",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "me",
        "we",
        "about",
        "any",
    ]
)


@dataclass(frozen=True)
class QueryMaterial:
    """What the texts of one query are made from: the query, its judged documents best first
    (by grade, then docno), the best judged document of another query that is not graded
    relevant for this one (None when there is none), and ``more_other_best``: the best judged
    documents of further other queries, drawn the same way, each text once (``other_best``
    texts beyond the first; ``spliced`` draws on ``other_best`` alone)."""

    qid: str
    query: str
    best_documents: Sequence[str]
    other_best: str | None
    more_other_best: Sequence[str] = ()


# -- the slots of composed wording ----------------------------------------------------------------
_RESTATE_OPEN = (
    "So you want to know {q}",
    "Your question was: {q}",
    "You are asking: {q}",
    "To restate the question: {q}",
    "In other words, the question is {q}",
    "If I understand correctly, you are wondering {q}",
    "The question here is: {q}",
    "Let me repeat what you asked. {q}",
    "You would like to find out {q}",
    "Question: {q}",
)
_RESTATE_CLOSE = (
    "That is the question.",
    "This is a common question.",
    "Many people wonder about the same thing.",
    "That is what you would like to know.",
    "It is a good question to ask.",
    "This question comes up often.",
    "",
)
_PAD_OPEN = (
    "Hello, and thank you for reaching out about {q}",
    "Thanks so much for your message regarding {q}",
    "Dear reader, we appreciate your question: {q}",
    "Hi there! Thank you for asking about {q}",
    "Greetings, and thanks for writing to us about {q}",
    "We are glad you contacted us with your question, {q}",
)
_PAD_BODY = (
    "We really appreciate you taking the time to write.",
    "It is always a pleasure to hear from our readers.",
    "Your message is important to us.",
    "We hope you are doing well today.",
    "Thank you again for your trust and your patience.",
    "We value every question we receive.",
)
_PAD_CLOSE = (
    "Best wishes and have a wonderful day!",
    "Kind regards, and take care.",
    "Warm wishes to you and your family.",
    "Stay well, and thanks again for writing.",
    "All the best!",
)
_EVADE_OPEN = (
    "Regarding {q}",
    "As for your question, {q}",
    "About {q}",
    "When it comes to {q}",
    "You asked: {q}",
)
_EVADE_BODY = (
    "The answer depends on many factors and differs from one person to the next.",
    "There is no simple answer, since every situation is different.",
    "It varies a great deal with individual circumstances.",
    "Opinions on this differ and a lot depends on the details.",
    "Several things can play a role, so it is hard to say in general.",
    "This is a complex topic with many aspects to consider.",
)
_EVADE_CLOSE = (
    "It is best to talk it over with a qualified professional who knows your situation.",
    "A specialist can give you advice that fits your case.",
    "Please discuss it with someone who can look at the details.",
    "Consider asking an expert for guidance.",
    "Your own doctor is the right person to ask.",
)
_REFUSE_OPEN = (
    "I'm sorry, but I can't help with {q}",
    "Unfortunately I am not able to answer {q}",
    "I cannot provide information on {q}",
    "Sorry, a question like {q} is not something I can answer",
    "I'm afraid I must decline to answer {q}",
)
_REFUSE_BODY = (
    "I am not in a position to give advice on this.",
    "This falls outside what I can respond to.",
    "Giving an answer here would not be appropriate for me.",
    "I do not have the means to address it.",
)
_REFUSE_CLOSE = (
    "Please seek help elsewhere.",
    "I hope you understand.",
    "Please ask someone qualified instead.",
    "Thank you for understanding.",
)

_ASK_BACK = (
    "What exactly do you mean by {k}?",
    "How long have you been dealing with {k}?",
    "Have you talked to anyone about {k} yet?",
    "Why do you want to know about {k}?",
    "Is {k} something that affects you or someone close to you?",
    "What have you already read about {k}?",
    "Could you tell me a little more about {k}?",
    "Did a doctor mention {k} to you?",
    "When did you first hear about {k}?",
    "Are you taking anything for {k} at the moment?",
)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".!?" else text + "."


def _question(query: str, rng: random.Random) -> str:
    """The query as it is spliced into a frame: trimmed, its end mark kept or not, lower-cased
    first letter or not."""
    q = " ".join(query.split()).rstrip(".!? ")
    if q and rng.random() < 0.5:
        q = q[0].lower() + q[1:]
    return q + ("?" if rng.random() < 0.5 else "")


def _frame(
    query: str, rng: random.Random, opens: Sequence[str], bodies: Sequence[str],
    closes: Sequence[str], n_body: tuple[int, int],
) -> str:  # fmt: skip
    opening = _sentence(rng.choice(opens).format(q=_question(query, rng)))
    k = rng.randint(*n_body)
    body = [_sentence(b) for b in rng.sample(list(bodies), min(k, len(bodies)))]
    close = _sentence(rng.choice(closes))
    parts = [opening, *body, close] if rng.random() < 0.7 else [*body, opening, close]
    return " ".join(p for p in parts if p)


def content_words(text: str) -> list[str]:
    """The words of ``text`` that carry content (not function words, at least 3 characters),
    in order, each once."""
    words = [w for w in WORD.findall(text) if w.lower() not in FUNCTION_WORDS and len(w) > 2]
    return list(dict.fromkeys(words))


def sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text.strip()) if s.strip()]


# -- the generators -------------------------------------------------------------------------------
def _echo(m: QueryMaterial, rng: random.Random) -> str | None:
    return m.query.strip() or None


def _restated(m: QueryMaterial, rng: random.Random) -> str | None:
    return _frame(m.query, rng, _RESTATE_OPEN, _RESTATE_CLOSE, _RESTATE_CLOSE[-1:], (0, 1))


def _keywords(m: QueryMaterial, rng: random.Random) -> str | None:
    words = content_words(m.query)
    if not words:
        return None
    if rng.random() < 0.5:
        rng.shuffle(words)
    style = rng.randrange(4)
    if style == 0:
        return ", ".join(words)
    if style == 1:
        return "\n".join(f"- {w}" for w in words)
    if style == 2:
        return "Keywords: " + "; ".join(words)
    return " ".join(f"#{w.lower()}" for w in words)


def _spliced(m: QueryMaterial, rng: random.Random) -> str | None:
    if not m.other_best:
        return None
    tail = " ".join(sentences(m.other_best)[: rng.randint(1, 3)])
    return f"{_sentence(_question(m.query, rng))} {tail}"


def _padded(m: QueryMaterial, rng: random.Random) -> str | None:
    return _frame(m.query, rng, _PAD_OPEN, _PAD_BODY, _PAD_CLOSE, (1, 3))


def _evasive(m: QueryMaterial, rng: random.Random) -> str | None:
    return _frame(m.query, rng, _EVADE_OPEN, _EVADE_BODY, _EVADE_CLOSE, (1, 3))


def _refusal(m: QueryMaterial, rng: random.Random) -> str | None:
    return _frame(m.query, rng, _REFUSE_OPEN, _REFUSE_BODY, _REFUSE_CLOSE, (0, 2))


def _asked(m: QueryMaterial, rng: random.Random) -> str | None:
    words = content_words(m.query)
    if not words:
        return None
    asks = []
    for ask in rng.sample(_ASK_BACK, rng.randint(1, 3)):
        start = rng.randrange(len(words))
        asks.append(ask.format(k=" ".join(words[start : start + rng.randint(1, 2)])))
    return " ".join(asks)


def _shuffled(m: QueryMaterial, rng: random.Random) -> str | None:
    if not m.best_documents:
        return None
    words = m.best_documents[0].split()
    if len(words) < 2:
        return None
    rng.shuffle(words)
    return " ".join(words)


def _first_sentence(m: QueryMaterial, rng: random.Random) -> str | None:
    if not m.best_documents:
        return None
    parts = sentences(m.best_documents[0])
    return parts[0] if len(parts) > 1 else None


def _other_best(m: QueryMaterial, rng: random.Random) -> str | None:
    return m.other_best


GENERATORS = {
    "echo": _echo,
    "restated": _restated,
    "keywords": _keywords,
    "spliced": _spliced,
    "padded": _padded,
    "evasive": _evasive,
    "refusal": _refusal,
    "asked": _asked,
    "shuffled": _shuffled,
    "first_sentence": _first_sentence,
    "other_best": _other_best,
}
#: kinds whose text is the same on every draw: one text per query whatever ``per_kind`` says
#: (``other_best``: one per other query drawn, ``QueryMaterial.more_other_best``)
_FIXED = frozenset({"echo", "first_sentence"})


def kind_names(value: str | Iterable[str] | None) -> list[str]:
    """Kinds from a comma-separated string or a list of kinds and families (None or ``all``:
    every kind), checked, in ``KINDS`` order."""
    if value is None or value == "all":
        return list(KINDS)
    names = [v.strip() for v in (value.split(",") if isinstance(value, str) else value)]
    wanted: set[str] = set()
    for name in filter(None, names):
        if name in FAMILIES:
            wanted.update(FAMILIES[name])
        elif name in GENERATORS:
            wanted.add(name)
        else:
            known = ", ".join([*FAMILIES, *KINDS])
            raise ConfigError(f"unknown degenerate kind {name!r} (known: {known})")
    return [k for k in KINDS if k in wanted]


def degenerate_text(
    kind: str, material: QueryMaterial, seed: int = 0, index: int = 0
) -> str | None:
    """One text of ``kind`` for one query, or None where the kind does not apply (no judged
    document, a one-sentence best document, a query without content words, no ``index``-th
    other query drawn). ``other_best``'s ``index`` counts the other queries drawn."""
    if kind == "other_best" and index > 0:
        more = material.more_other_best
        text = more[index - 1] if index <= len(more) else None
    else:
        rng = random.Random(f"{seed}/{material.qid}/{kind}/{index}")
        text = GENERATORS[kind](material, rng)
    return text if text and text.strip() else None


def _texts_of(kind: str, material: QueryMaterial, per_kind: int) -> int:
    """How many texts of ``kind`` a query is given at most."""
    if kind == "other_best":
        return 1 + len(material.more_other_best)
    return 1 if kind in _FIXED else per_kind


def docno_for(kind: str, text: str) -> str:
    """The docno of a degenerate text: its kind and a hash of its text (never a judged one's)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return f"{DOCNO_PREFIX}:{kind}:{digest}"


def query_materials(
    candidates: pd.DataFrame,
    grades: Mapping[tuple[str, str], float],
    seed: int = 0,
    draws: int = 1,
) -> list[QueryMaterial]:
    """One ``QueryMaterial`` per query of ``candidates`` (qid, query, docno, text): its judged
    documents ordered by ``grades`` ((qid, docno) -> gain; best first, then docno), and the best
    documents of ``draws`` other queries drawn with the seed (``draw_other_answer``: never one
    that is judged relevant, gain above 0, for this query too; the first is ``other_best``,
    the same whatever ``draws`` is, and the rest ``more_other_best``, each text once: fewer
    where fewer are left)."""
    queries: list[tuple[str, str, list[str], list[str]]] = []
    for qid, rows in candidates.groupby("qid", sort=True):
        gain = {d: grades.get((str(qid), d), 0.0) for d in rows["docno"].astype(str)}
        order = sorted(
            zip(rows["docno"].astype(str), rows["text"].astype(str), strict=True),
            key=lambda pair: (-gain[pair[0]], pair[0]),
        )
        relevant = [text for docno, text in order if gain[docno] > 0]
        queries.append((str(qid), str(rows["query"].iloc[0]), [t for _, t in order], relevant))
    best = {qid: docs[0] for qid, _, docs, _ in queries if docs}
    position = {qid: i for i, qid in enumerate(best)}
    texts = list(best.values())
    counts = Counter(texts)
    materials = []
    for qid, query, docs, relevant in queries:
        others = _AllBut(texts, position.get(qid), counts)
        other = draw_other_answer(random.Random(f"{seed}/{qid}/other"), others, relevant)
        more: list[str] = []
        if draws > 1 and other is not None:
            rng = random.Random(f"{seed}/{qid}/other/more")
            more = _draw_more(rng, others, {*relevant, other}, draws - 1)
        materials.append(QueryMaterial(qid, query, docs, other, tuple(more)))
    return materials


class _AllBut(Sequence[str]):
    """``texts`` without the one at ``skip`` (None: all of them), read in place: the other
    queries' best documents of each query without a list of them per query. ``counts`` (how
    often each text is in ``texts``) answers ``in`` and ``distinct`` without reading them."""

    def __init__(self, texts: Sequence[str], skip: int | None, counts: Counter[str]) -> None:
        self._texts = texts
        self._skip = len(texts) if skip is None else skip
        self._counts = counts
        self._own = texts[skip] if skip is not None else None

    def __contains__(self, text: object) -> bool:
        return self._counts.get(text, 0) > (text == self._own)  # type: ignore[arg-type]

    @property
    def distinct(self) -> int:
        """How many different texts it holds."""
        own = self._own
        return len(self._counts) - (own is not None and self._counts[own] == 1)

    def __len__(self) -> int:
        return len(self._texts) - (self._skip < len(self._texts))

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._texts[index + (index >= self._skip)]

    def __iter__(self) -> Iterator[str]:
        return (text for i, text in enumerate(self._texts) if i != self._skip)


def _draw_more(rng: random.Random, others: _AllBut, taken: set[str], k: int) -> list[str]:
    """Up to ``k`` texts of ``others`` drawn with ``rng`` without replacement, none of ``taken``
    and none twice (pools share documents: two queries can have the same best one). It stops
    as soon as no text is left to find: where the queries share a few best documents it no
    longer tries every other query first (a coupon collector's n log n draws per query, so
    quadratic in queries: scripts/bench_validate_draws.py)."""
    picked: list[str] = []
    seen: set[int] = set()
    # until all are found, an eligible text is left at an index not yet seen
    wanted = min(k, others.distinct - sum(text in others for text in taken))
    while len(picked) < wanted:
        index = rng.randrange(len(others))
        if index in seen:
            continue
        seen.add(index)
        text = others[index]
        if text not in taken:
            taken.add(text)
            picked.append(text)
    return picked


def draw_other_answer(
    rng: random.Random, others: Sequence[str], relevant: Iterable[str]
) -> str | None:
    """One of ``others`` (the best judged documents of other queries) drawn with ``rng``, never
    one of ``relevant`` (the texts of the query's own judged documents graded relevant): pools
    share documents, and a text the judges graded relevant, even best, for this query is no
    answer to *another* question. (One they graded 0 for it is: they said it does not answer
    this one.) A draw that is one of ``relevant`` is drawn again among the rest with the same
    ``rng``, so every other draw is what it would be without the check. None when nothing is
    left."""
    if not others:
        return None
    pick = rng.choice(others)
    mine = set(relevant)
    if pick in mine:
        rest = [text for text in others if text not in mine]
        pick = rng.choice(rest) if rest else None
    return pick


def degenerate_frame(
    materials: Sequence[QueryMaterial],
    kinds: str | Iterable[str] | None = None,
    per_kind: int = 1,
    seed: int = 0,
) -> pd.DataFrame:
    """The degenerate texts of every query: columns qid, query, docno, text, kind, family. Up
    to ``per_kind`` texts of each composed kind per query (duplicates dropped), one of the
    fixed ones (echo, first_sentence), one ``other_best`` per other query drawn."""
    rows = []
    for material in materials:
        for kind in kind_names(kinds):
            seen: set[str] = set()
            for index in range(_texts_of(kind, material, per_kind)):
                text = degenerate_text(kind, material, seed, index)
                if text is None or text in seen:
                    continue
                seen.add(text)
                rows.append(
                    (material.qid, material.query, docno_for(kind, text), text, kind,
                     FAMILY_OF[kind])
                )  # fmt: skip
    columns = ["qid", "query", "docno", "text", "kind", "family"]
    return pd.DataFrame(rows, columns=columns)
