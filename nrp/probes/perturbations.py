"""Controlled perturbations of an answer, each a registered, deterministic function.

``perturb(name, text, context)`` -> the perturbed text, or None where the perturbation does not
apply (no sentence to negate, no number to swap): such a pair is counted apart, never scored as
if the text had changed. ``context`` (``PerturbationContext``) holds what some perturbations
draw on: the query, the query's judged documents with their grades, judged documents of other
queries, the numbers of the collection, and a seed
(``random.Random(f"{seed}/{answer_id}/{name}")``: the same answer, perturbation and seed give
the same text on every run and machine).

Rule-based, so that every output can be checked by hand (tests/probes): sentences are split at
``.``, ``!`` or ``?`` followed by a space; words are runs of letters, digits and apostrophes.

Perturbations (``PERTURBATIONS``; kind ``meaning`` changes what the answer claims, ``form`` keeps
the claims and damages the answer, ``other`` replaces or pads it):

- ``negate`` (meaning): in each sentence the first auxiliary or copula (is, are, can, should,
  does, ...) gets ``not`` after it, or loses the ``not``/``n't`` it has; a sentence without one
  has its first finite verb negated with do-support, by spaCy's tags and lemmas ("walks" ->
  "does not walk", "took" -> "did not take", "Take it" -> "Do not take it"): the claims
  reversed.
- ``swap_numbers`` (meaning): every number (dosages, ages, years, with their units kept) replaced
  by another number of the same kind (integer or decimal) from the collection's documents.
- ``swap_entities`` (meaning): every named entity spaCy finds (people, organisations, places,
  dates, products, ...: ``ENTITY_LABELS``) replaced by another of the same label from the
  judged documents of the answer's query (``entities``; ``nrp.probes.entities``).
- ``antonyms`` (meaning): words of a fixed list of antonym pairs (increase/decrease, safe/unsafe,
  more/less, ...) swapped with their opposite.
- ``first_sentence``, ``first_half`` (form): the answer cut to its first sentence / its first
  half of sentences (at least one).
- ``shuffle`` (form): the sentences in another seeded order.
- ``drop_question_overlap`` (form): the sentences sharing a content word with the question
  removed (None when none or all would be).
- ``echo_question`` (other): the question itself.
- ``pad_empty`` (other): the answer followed by fluent sentences that say nothing.
- ``off_topic`` (other): the best-graded judged document of another query (well written,
  about something else).
- ``copy_best`` (other): the query's best-graded judged document verbatim (the copy-paste upper
  bound of reference-free evaluators that read D_q).
- ``keyword_stuffing`` (other): the answer followed by the question's content words, three times.
- ``restated``, ``padded``, ``evasive``, ``refusal``, ``keyword_list``, ``asked`` (other): the
  answer replaced by a degenerate text of validity's kinds (``nrp.validation.degenerate``; one
  copy of each generator): the question framed as a restatement ("So you want to know ..."),
  the question in polite boilerplate, the question with sentences that defer ("it depends, ask
  a professional"), the question with a refusal, the question's content words as a list
  (validity's ``keywords``), questions back to the asker about the question's words. Each is
  drawn with ``degenerate_text(kind, material, seed)``, the answer id standing in for the qid
  in the generator's seed, so the same answer and seed give the same text and two answers of
  one query get their own draws.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nrp.errors import ConfigError
from nrp.probes.entities import ENTITY_LABELS
from nrp.probes.nlp import spacy_pipeline
from nrp.validation.degenerate import (
    FUNCTION_WORDS,
    SENTENCE_END,
    WORD,
    QueryMaterial,
    degenerate_text,
    draw_other_answer,
)

NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.]*\d)")
#: auxiliaries and copulas a negation attaches to (lower case)
AUXILIARIES = [
    "is",
    "are",
    "was",
    "were",
    "am",
    "can",
    "could",
    "will",
    "would",
    "shall",
    "should",
    "may",
    "might",
    "must",
    "does",
    "do",
    "did",
    "has",
    "have",
    "had",
]
#: antonym pairs (both directions are swapped)
ANTONYM_PAIRS = (
    ("increase", "decrease"),
    ("increases", "decreases"),
    ("increased", "decreased"),
    ("more", "less"),
    ("higher", "lower"),
    ("high", "low"),
    ("safe", "unsafe"),
    ("effective", "ineffective"),
    ("common", "rare"),
    ("always", "never"),
    ("before", "after"),
    ("better", "worse"),
    ("raise", "lower"),
    ("raises", "lowers"),
    ("helps", "harms"),
    ("benefits", "risks"),
    ("good", "bad"),
    ("healthy", "unhealthy"),
    ("recommended", "discouraged"),
)
ANTONYMS = {**dict(ANTONYM_PAIRS), **{b: a for a, b in ANTONYM_PAIRS}}
#: fluent sentences that say nothing (pad_empty)
EMPTY_SENTENCES = (
    "This is an important question that many people ask.",
    "There are many factors to consider, and every situation is different.",
    "It is always a good idea to stay informed and to think carefully about it.",
)
#: words that carry no content (drop_question_overlap, keyword_stuffing)
STOPWORDS = FUNCTION_WORDS


@dataclass(frozen=True)
class PerturbationContext:
    """What perturbations of one answer may draw on. ``judged``: the query's judged documents as
    (grade, text), best first; ``others``: the best-graded judged document of each other query;
    ``numbers``: numbers found in the collection's documents (as written); ``entities``: label ->
    named entities found in the query's judged documents (``nrp.probes.entities``);
    ``parsed``: text -> its spaCy doc, parsed beforehand in one batch (``parse_all``); a text
    not in it is parsed when a perturbation reads it."""

    answer_id: str
    query: str
    judged: Sequence[tuple[float, str]] = ()
    others: Sequence[str] = ()
    numbers: Sequence[str] = ()
    entities: Mapping[str, Sequence[str]] = field(default_factory=dict)
    seed: int = 0
    parsed: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def parse(self, text: str) -> Any:
        """``text``'s spaCy doc (tags, lemmas, entities)."""
        doc = self.parsed.get(text)
        return doc if doc is not None else spacy_pipeline()(text)

    def rng(self, name: str) -> random.Random:
        return random.Random(f"{self.seed}/{self.answer_id}/{name}")


@dataclass(frozen=True)
class Perturbation:
    name: str
    kind: str  # meaning, form or other
    description: str
    apply: Callable[[str, PerturbationContext], str | None] = field(repr=False)


PERTURBATIONS: dict[str, Perturbation] = {}


def register(name: str, kind: str, description: str):
    def decorate(function: Callable[[str, PerturbationContext], str | None]):
        PERTURBATIONS[name] = Perturbation(name, kind, description, function)
        return function

    return decorate


def perturb(name: str, text: str, context: PerturbationContext) -> str | None:
    """``text`` perturbed by ``name``; None where it does not apply or changes nothing."""
    if name not in PERTURBATIONS:
        known = ", ".join(PERTURBATIONS)
        raise ConfigError(f"unknown perturbation {name!r} (known: {known})")
    out = PERTURBATIONS[name].apply(str(text), context)
    return None if out is None or out.strip() == str(text).strip() else out


def perturbation_names(value: str | Sequence[str] | None) -> list[str]:
    """Names from a comma-separated string or a list (None or ``all``: every one), checked."""
    if value is None or value == "all":
        return list(PERTURBATIONS)
    names = [v.strip() for v in (value.split(",") if isinstance(value, str) else value)]
    names = [n for n in names if n]
    for name in names:
        if name not in PERTURBATIONS:
            known = ", ".join(PERTURBATIONS)
            raise ConfigError(f"unknown perturbation {name!r} (known: {known})")
    return list(dict.fromkeys(names))


def sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text.strip()) if s.strip()]


def content_words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text) if w.lower() not in STOPWORDS and len(w) > 2}


# -- meaning --------------------------------------------------------------------------------------
def _negate_sentence(sentence: str) -> str | None:
    words = list(re.finditer(r"[A-Za-z']+", sentence))
    for i, match in enumerate(words):
        word = match.group(0)
        lower = word.lower()
        if lower.endswith("n't") and lower[:-3] in [*AUXILIARIES, "ca", "wo"]:
            base = {"ca": "can", "wo": "will"}.get(lower[:-3], word[:-3])
            return sentence[: match.start()] + base + sentence[match.end() :]
        if lower in AUXILIARIES:
            following = words[i + 1].group(0).lower() if i + 1 < len(words) else ""
            if following == "not":
                end = words[i + 1].end()
                return sentence[: match.end()] + sentence[end:]
            return sentence[: match.end()] + " not" + sentence[match.end() :]
    return None


#: do-support for a finite verb without an auxiliary, by its Penn tag
DO_SUPPORT = {"VBZ": "does not", "VBD": "did not", "VBP": "do not"}


def _negate_verb(sentence: str, context: PerturbationContext) -> str | None:
    """The sentence with its first finite verb negated by do-support, or None."""
    try:
        tokens = list(context.parse(sentence))
    except ConfigError:  # no spaCy model here: auxiliaries only
        return None
    if tokens and tokens[0].tag_ == "VB":  # an imperative: "Take it" -> "Do not take it"
        return f"Do not {sentence[:1].lower()}{sentence[1:]}"
    for token in tokens:
        if token.tag_ in DO_SUPPORT:
            start, end = token.idx, token.idx + len(token.text)
            return f"{sentence[:start]}{DO_SUPPORT[token.tag_]} {token.lemma_}{sentence[end:]}"
    return None


def texts_to_parse(names: Sequence[str], text: str) -> list[str]:
    """The texts the perturbations ``names`` will parse with spaCy for an answer ``text``: the
    answer itself (``swap_entities``) and each sentence without an auxiliary to negate
    (``negate``)."""
    out = [text] if "swap_entities" in names else []
    if "negate" in names:
        out += [s for s in sentences(text) if _negate_sentence(s) is None]
    return out


def parse_all(texts: Sequence[str]) -> dict[str, Any]:
    """text -> spaCy doc for every distinct text, parsed in batches (``nlp.pipe``: the same docs
    as one call per text, several times faster); empty where no spaCy model is installed."""
    distinct = list(dict.fromkeys(texts))
    if not distinct:
        return {}
    try:
        nlp = spacy_pipeline()
    except ConfigError:
        return {}
    return dict(zip(distinct, nlp.pipe(distinct, batch_size=64), strict=True))


@register("negate", "meaning", "the first auxiliary (else verb) of each sentence negated")
def negate(text: str, context: PerturbationContext) -> str | None:
    parts = sentences(text)
    changed = [_negate_sentence(s) or _negate_verb(s, context) for s in parts]
    if all(c is None for c in changed):
        return None
    return " ".join(c if c is not None else s for s, c in zip(parts, changed, strict=True))


@register("swap_numbers", "meaning", "every number replaced by another of the collection's")
def swap_numbers(text: str, context: PerturbationContext) -> str | None:
    found = NUMBER.findall(text)
    if not found:
        return None
    rng = context.rng("swap_numbers")
    pools = {
        kind: sorted({n for n in context.numbers if ("." in n) == kind}) for kind in (False, True)
    }

    def other(number: str) -> str:
        decimal = "." in number
        pool = [n for n in pools[decimal] if n != number]
        if pool:
            return rng.choice(pool)
        return str(int(number) * 10) if not decimal else f"{float(number) * 10:g}"

    return NUMBER.sub(lambda m: other(m.group(1)), text)


@register("swap_entities", "meaning", "named entities replaced by others of the same label")
def swap_entities(text: str, context: PerturbationContext) -> str | None:
    doc = context.parse(text)
    rng = context.rng("swap_entities")
    out, end, changed = [], 0, False
    for entity in doc.ents:
        pool = [e for e in context.entities.get(entity.label_, []) if e != entity.text]
        if entity.label_ not in ENTITY_LABELS or not pool:
            continue
        out += [text[end : entity.start_char], rng.choice(pool)]
        end, changed = entity.end_char, True
    return "".join([*out, text[end:]]) if changed else None


@register("antonyms", "meaning", "words of a fixed antonym list swapped with their opposite")
def antonyms(text: str, context: PerturbationContext) -> str | None:
    def swap(match: re.Match) -> str:
        word = match.group(0)
        opposite = ANTONYMS.get(word.lower())
        if opposite is None:
            return word
        return opposite.capitalize() if word[0].isupper() else opposite

    out = re.sub(r"[A-Za-z]+", swap, text)
    return out if out != text else None


# -- form -----------------------------------------------------------------------------------------
@register("first_sentence", "form", "the answer cut to its first sentence")
def first_sentence(text: str, context: PerturbationContext) -> str | None:
    parts = sentences(text)
    return parts[0] if len(parts) > 1 else None


@register("first_half", "form", "the answer cut to its first half of sentences")
def first_half(text: str, context: PerturbationContext) -> str | None:
    parts = sentences(text)
    return " ".join(parts[: max(1, len(parts) // 2)]) if len(parts) > 1 else None


@register("shuffle", "form", "the sentences in another seeded order")
def shuffle(text: str, context: PerturbationContext) -> str | None:
    parts = sentences(text)
    if len(set(parts)) < 2:
        return None
    order = list(range(len(parts)))
    rng = context.rng("shuffle")
    while order == sorted(order):
        rng.shuffle(order)
    return " ".join(parts[i] for i in order)


@register("drop_question_overlap", "form", "sentences sharing a content word with the question")
def drop_question_overlap(text: str, context: PerturbationContext) -> str | None:
    asked = content_words(context.query)
    parts = sentences(text)
    kept = [s for s in parts if not content_words(s) & asked]
    return " ".join(kept) if kept and len(kept) < len(parts) else None


# -- other ----------------------------------------------------------------------------------------
@register("echo_question", "other", "the question itself")
def echo_question(text: str, context: PerturbationContext) -> str | None:
    return context.query


@register("pad_empty", "other", "the answer followed by fluent sentences that say nothing")
def pad_empty(text: str, context: PerturbationContext) -> str | None:
    return " ".join([text.strip(), *EMPTY_SENTENCES])


@register("off_topic", "other", "the best-graded judged document of another query")
def off_topic(text: str, context: PerturbationContext) -> str | None:
    relevant = (judged for grade, judged in context.judged if grade > 0)
    return draw_other_answer(context.rng("off_topic"), list(context.others), relevant)


@register("copy_best", "other", "the query's best-graded judged document, verbatim")
def copy_best(text: str, context: PerturbationContext) -> str | None:
    return context.judged[0][1] if context.judged else None


@register("keyword_stuffing", "other", "the answer followed by the question's words, 3 times")
def keyword_stuffing(text: str, context: PerturbationContext) -> str | None:
    words = [w for w in WORD.findall(context.query) if w.lower() in content_words(context.query)]
    if not words:
        return None
    return " ".join([text.strip(), *(" ".join(words) for _ in range(3))])


# -- degenerate answers (validity's generators) ---------------------------------------------------
#: perturbation -> the kind of ``nrp.validation.degenerate`` that writes its text
#: perturbation -> (the degenerate kind that writes it, description)
DEGENERATE_PERTURBATIONS = {
    "restated": ("restated", "the question framed as a restatement (So you want to know ...)"),
    "padded": ("padded", "the question in polite boilerplate (thanks, greetings, wishes)"),
    "evasive": ("evasive", "the question and sentences that defer (it depends, ask an expert)"),
    "refusal": ("refusal", "the question and a refusal to answer it"),
    "keyword_list": ("keywords", "the question's content words as a list"),
    "asked": ("asked", "questions back to the asker about the question's words, no answer"),
}


def _degenerate(kind: str, context: PerturbationContext) -> str | None:
    """A text of degenerate ``kind`` for the answer: the query and its judged documents as the
    material, the answer id in the qid's place, the context's seed."""
    material = QueryMaterial(
        qid=context.answer_id,
        query=context.query,
        best_documents=[text for _, text in context.judged],
        other_best=off_topic("", context),
    )
    return degenerate_text(kind, material, context.seed)


def _register_degenerate(name: str, kind: str, description: str) -> None:
    @register(name, "other", description)
    def written(text: str, context: PerturbationContext) -> str | None:
        return _degenerate(kind, context)


for _name, (_kind, _description) in DEGENERATE_PERTURBATIONS.items():
    _register_degenerate(_name, _kind, _description)
