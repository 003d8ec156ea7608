"""The guard's features of (question, text) (``FEATURES``, ``GuardFeatures``): how much the text
contributes beyond the question; none reads any wording. The model that reads them is
``nrp.rankers.guard_model``, the ranker ``nrp.rankers.guard``.

- ``novel_share``: the share of the text's distinct content terms (Terrier's tokeniser,
  stopwords and Porter stems) that are not the question's terms;
- ``log_novel``: log(1 + the number of such new terms);
- ``cos_tq``: cosine of the text's and the question's embeddings (the packaged
  all-MiniLM-L6-v2);
- ``cos_rq``: cosine of the *rest* of the text (every word whose stem is a question term
  removed) and the question: what the text says about the question once the question's own
  words are gone (0 when nothing is left). A model whose ``rest_words`` is above 0 reads the
  rest's first ``rest_words`` words only (one short forward pass per text instead of a second
  one nearly as long as the text's own); every feature of the rest below reads the same;
- ``fluency``: among adjacent pairs of frequent function words (the model's reference list),
  the share that occur in ordinary text (the model's reference pairs), with a prior of four
  attested pairs (a short text's few pairs say little): low for word salad;
- ``spec_rq``: ``cos_rq`` minus the mean cosine of the rest with the other questions of the
  collection: whether what the text adds is about *this* question rather than any question;
- ``margin_rq``: ``cos_rq`` minus the rest's highest cosine with another question of the
  collection: negative when what the text adds answers another question (a question followed by
  another topic's text).
- ``spec_rd``: what the rest says compared with what the judged answers say: the mean of the
  rest's three highest cosines with the question's own judged answers (documents of a gain
  above 0 in the collection's first dimension: a pool holds systems' own deferrals too, graded
  lowest) minus the mean of the same over every other question's judged answers (documents
  contained in the text, such as the text itself, left out; 0 without a rest; unknown (NaN,
  and the detectors that read it abstain) where the question has no other judged answer or the
  guard is bound to no collection). Boilerplate of any wording ("it depends on many
  factors", "ask your doctor") is as close to every question's answers as to this one's; a real
  answer's new words are closest to its own question's answers.
- ``first_person``: the share of the text's words that are the first person singular ("I",
  "my", "I'm", ...): an answer speaks of its subject; a reply that declines speaks of itself
  ("I'm sorry, but as an AI I cannot ...").
- ``idf_new``: the mean inverse document frequency, ``log((N + 1) / (df + 1))``, of the text's
  new terms (content terms the question lacks) in the model's reference corpus of ``N``
  documents (0 without new terms): what the text adds is specific information (drugs, organs,
  doses: rare words) or words that every text has ("information", "provide", "consult").
- ``oov_new``: the share of the text's new terms that the reference corpus lacks (0 without
  new terms).
- ``answer_like``: the logit of a linear model (the model's ``answer_direction`` and
  ``answer_offset``) on the text's embedding: whether the text, taken whole, reads like an
  answer or like a reply that gives none (declines, defers, stalls, talks around the question).
  Fitted on the judged answers against non-answers a language model wrote in its own words
  (``nrp train guard``), so it learns what saying nothing means, not any sentence; 0
  without a direction.
- ``asks_only``: 1 when every sentence of the text that holds a word ends with a question mark
  (a text that asks and states nothing: the question itself, a question back, a list of
  questions), else 0. An answer states something; a reply made only of questions gives no
  answer, in whatever wording (docs/studies/validity-study.md, "Questions in place of an answer").
- ``order``: whether the text's sentences begin where its capitals say they do: of the words
  that follow a sentence's end (a word ending in . ! or ?, not an abbreviation such as "e.g."
  or "U.S." nor a list's mark such as "1."), those that begin with a capital or a digit, over
  all of them and the capitalised function words ("The", "It", "And", ...) that follow a word
  in lower case inside a sentence, counted with
  ``ORDER_PRIOR`` words in place more; 1.0 without any (in a text without a word in title case,
  written without capitals, lower-case starts count for nothing). Prose and lists keep their
  sentence starts; words put in another order (word salad) carry their capitals and full stops
  into the middle of sentences, which the pairs of function words that ``fluency`` reads miss in
  a short text or a list.

``unquoted`` (and ``quoted_runs``): a text without the runs of words it copies from its question,
what the guarded ranker scores. ``judged_documents`` / ``judged_answers``: each question's judged
answers, what ``spec_rd`` compares with.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from nrp.rankers.guard_model import FEATURES, GuardModel
from nrp.rankers.text_pipeline import porter_stem, terrier_stopwords
from nrp.tables import write_aside

if TYPE_CHECKING:  # pragma: no cover - typing only
    from nrp.collection.collection import Collection
    from nrp.rankers.dense import DenseRanker

#: the features read from the words alone and the model's references (no encoder): cheap, and
#: computed anew by the fitting script whatever its cache holds
WORD_FEATURES = ("fluency", "first_person", "idf_new", "oov_new", "asks_only", "order")
#: first_person: the words of the first person singular (lower case, as ``WORDS`` splits them)
FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll"})
#: spec_rd: how many of a question's judged documents (the closest) the rest is compared with
DOCUMENTS_CLOSEST = 3
#: fluency: attested pairs counted in addition to a text's own (a prior of fluent text)
FLUENCY_PRIOR = 4
#: the encoder of the cosine features (the packaged all-MiniLM-L6-v2)
ENCODER = "dense:model=minilm"

WORDS = re.compile(r"[A-Za-z0-9']+")
_ANY_WORD = re.compile(r"\w")
_MARKS = re.compile(r"[^\w\s]*")
#: closing quotes and brackets, which may follow a sentence's final mark
_CLOSING = r"[\"'\u201d\u2019)\]]*"
#: asks_only: a sentence ends at . ! or ? (closing quotes and brackets after it kept out) before
#: white space, or at a line break; it asks when it ends with a question mark
_SENTENCE_BREAK = re.compile(rf"(?<=[.!?]){_CLOSING}\s+|\n")
_ASKS = re.compile(rf"\?{_CLOSING}$")
#: order: words in place counted in addition to a text's own (a prior of ordered text); the
#: function words whose capital after a word in lower case is out of place; a sentence's end
#: (a word ending in . ! or ?, closing quotes and brackets after it) that is an abbreviation,
#: an ellipsis or a list's mark ("1.", "b.") and ends nothing; what may come before a sentence's
#: first word besides a sentence's end (the text's or a line's start, a word ending in a colon
#: or a dash, a list's mark such as "(a)" or "2)", a mark or sign that holds no letter or digit)
ORDER_PRIOR = 2
ORDER_FUNCTION_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "he", "her", "his",
    "how", "if", "in", "is", "it", "its", "of", "on", "or", "our", "she", "that", "the", "their",
    "there", "these", "they", "this", "those", "to", "was", "we", "were", "what", "when", "which",
    "who", "with", "you", "your",
))  # fmt: skip
_ENDS_SENTENCE = re.compile(rf"[.!?]{_CLOSING}$")
_LIST_MARK = r"\(?(?:\d{1,3}|[A-Za-z])[.)]"
_ENDS_NOTHING = re.compile(
    rf"\.\.{_CLOSING}$|^\(?(?:[A-Za-z]\.){{2,}}{_CLOSING}$"
    rf"|^\(?(?:e\.g|i\.e|etc|vs|cf|dr|mr|mrs|ms|st|no|fig|approx|inc|ltd|jr|sr)\.$|^{_LIST_MARK}$",
    re.IGNORECASE,
)
_IS_LIST_MARK = re.compile(rf"{_LIST_MARK}$")
_OPENS = re.compile(rf"^[^\w]+$|[:\-\u2013\u2014]$|^{_LIST_MARK}$")
_TITLE_CASE = re.compile(r"\b[A-Z][a-z]")
_ESCAPED = re.compile(r"\\[nrt]|\\u[0-9a-fA-F]{4}")
_PUNCTUATION = "\"'()[]{},;:.!?\u201c\u201d\u2018\u2019"
#: ``quoted_runs``: a run of question words cut from a text is at least this many words (and
#: at least the ranker's ``quoted`` share of the question's words: ``QUOTED_SHARE``)
QUOTED_WORDS = 4


def content_terms(text: str) -> list[str]:
    """The stemmed content terms of ``text`` in order (Terrier's stopwords out, 3+ letters)."""
    stop = terrier_stopwords()
    words = (w.lower() for w in WORDS.findall(text))
    return [porter_stem(w) for w in words if len(w) > 2 and w not in stop]


def rest_of(text: str, question_terms: set[str], words: int = 0) -> str:
    """``text`` without the words whose stem is a question term ("" when no new term is left),
    cut to its first ``words`` words where ``words`` is above 0 (``GuardModel.rest_words``)."""
    stop = terrier_stopwords()
    kept, new = [], False
    for word in WORDS.findall(text):
        lower = word.lower()
        if lower not in stop and len(lower) > 2 and porter_stem(lower) in question_terms:
            continue
        kept.append(word)
        new = new or (lower not in stop and len(lower) > 2)
    if not new:
        return ""
    return " ".join(kept[:words] if words > 0 else kept)


def quoted_runs(
    question: str, share: float, answers: Sequence[str] = ()
) -> tuple[int, frozenset[tuple[str, ...]]]:
    """What ``unquoted`` cuts: the run length (at least ``share`` of the question's words and at
    least ``QUOTED_WORDS``) and the question's runs of that many consecutive words (letters and
    digits, lower case) that none of ``answers`` (its judged answers) contains. A run the judged
    answers repeat (a page's heading that asks the question) is what answers say; one they never
    say is the question's alone. No runs when ``share`` is 0 or the question is shorter."""
    words = [w.lower() for w in WORDS.findall(question)]
    run = max(QUOTED_WORDS, math.ceil(share * len(words) - 1e-9))
    if share <= 0 or len(words) < run:
        return run, frozenset()
    grams = {tuple(words[i : i + run]) for i in range(len(words) - run + 1)}
    for answer in answers:
        tokens = [w.lower() for w in WORDS.findall(answer)]
        grams.difference_update(tuple(tokens[i : i + run]) for i in range(len(tokens) - run + 1))
    return run, frozenset(grams)


def unquoted(
    question: str, text: str, share: float, answers: Sequence[str] = (),
    runs: tuple[int, frozenset[tuple[str, ...]]] | None = None,
) -> str:  # fmt: skip
    """``text`` without every run of consecutive words (letters and digits, case aside) that it
    copies from ``question`` and that holds at least ``share`` of the question's words and at
    least ``QUOTED_WORDS``, unless one of the question's judged ``answers`` says it too
    (``quoted_runs``; ``runs``: its result, when known): what the text says once the question it
    repeats is gone. ``text`` itself when it copies no such run (or ``share`` is 0); otherwise
    what is left around the runs (a run goes from its first word to its last, with the
    punctuation between them and right after it: "...?"), its white space collapsed."""
    run, grams = runs if runs is not None else quoted_runs(question, share, answers)
    if not grams:
        return text
    found = list(WORDS.finditer(text))
    tokens = [m.group().lower() for m in found]
    copied = np.zeros(len(tokens), dtype=bool)
    for i in range(len(tokens) - run + 1):
        if tuple(tokens[i : i + run]) in grams:
            copied[i : i + run] = True
    if not copied.any():
        return text
    kept, start, cutting = [], 0, False
    for match, cut in zip(found, copied, strict=True):
        if cut and not cutting:  # a run begins: keep what came before it
            kept.append(text[start : match.start()])
        if cut:  # the run goes, with the punctuation between its words and right after it
            start = _MARKS.match(text, match.end()).end()
        cutting = bool(cut)
    kept.append(text[start:])
    return " ".join("".join(kept).split())


def fluency(text: str, frequent: frozenset[str], attested: frozenset[str]) -> float:
    """The share of adjacent pairs of frequent words that are attested pairs, counted with
    ``FLUENCY_PRIOR`` attested pairs more: a short text's two or three pairs say little (an
    unusual but correct phrase is not word salad), a shuffled document's forty say a lot;
    without any pair, 1.0 (no evidence of disorder)."""
    words = [w.lower() for w in WORDS.findall(text)]
    pairs = [f"{a} {b}" for a, b in pairwise(words) if a in frequent and b in frequent]
    return (sum(p in attested for p in pairs) + FLUENCY_PRIOR) / (len(pairs) + FLUENCY_PRIOR)


def asks_only(text: str) -> float:
    """1.0 when ``text`` has a sentence with a word and every such sentence ends with a question
    mark (``_SENTENCE_BREAK``, ``_ASKS``), else 0.0."""
    sentences = (part.strip() for part in _SENTENCE_BREAK.split(text))
    said = [s for s in sentences if _ANY_WORD.search(s)]
    return float(bool(said) and all(_ASKS.search(s) for s in said))


def order(text: str) -> float:
    """The share of sentence starts in place (``order`` in the module's docstring): words after
    a sentence's end that begin with a capital or a digit, over those and the capitalised
    function words inside a sentence, with ``ORDER_PRIOR`` in place more; 1.0 without any. A
    text without a word in title case (a capital, then lower case; acronyms aside) is written
    without capitals: its lower-case starts are its way, not out of place. Escaped line breaks
    and characters (a literal ``\\n`` or ``\\u2022``, as text stored twice in JSON carries them)
    read as what they stand for."""
    text = _ESCAPED.sub(_unescape, text)
    placed = misplaced = lowered = 0
    capitalised = bool(_TITLE_CASE.search(text))
    for line in text.splitlines():
        ends = lower = False  # what the word before says: a sentence ended, a word in lower case
        for token in line.split():
            first = next((ch for ch in token if ch.isalnum()), "")
            if ends and first and not _IS_LIST_MARK.match(token):
                placed += not first.islower()
                lowered += first.islower()
            elif not ends and lower:
                word = token.rstrip(_PUNCTUATION)  # an opening mark of its own starts one
                misplaced += word.istitle() and word.lower() in ORDER_FUNCTION_WORDS
            ends = _ends_sentence(token)
            lower = first.islower() and not _OPENS.search(token)  # not a mark before a start
    misplaced += lowered if capitalised else 0
    return (placed + ORDER_PRIOR) / (placed + misplaced + ORDER_PRIOR)


def _unescape(match: re.Match[str]) -> str:
    escaped = match.group(0)
    return "\n" if escaped[1] in "nr" else " " if escaped[1] == "t" else chr(int(escaped[2:], 16))


def _ends_sentence(token: str) -> bool:
    """Whether ``token`` ends a sentence: . ! or ? at its end (closing marks after it), and no
    abbreviation, ellipsis or list's mark."""
    return bool(_ENDS_SENTENCE.search(token)) and not _ENDS_NOTHING.search(token)


def information_features(
    question: str, text: str, documents: int, frequency: Mapping[str, int]
) -> tuple[float, float, float]:
    """(first_person, idf_new, oov_new) of one pair, with a term reference of ``documents``
    documents and each term's ``frequency`` (its number of documents)."""
    words = [w.lower() for w in WORDS.findall(text)]
    first = sum(w in FIRST_PERSON for w in words) / len(words) if words else 0.0
    new = set(content_terms(text)) - set(content_terms(question))
    if not new:
        return first, 0.0, 0.0
    counts = [frequency.get(term, 0) for term in sorted(new)]
    idf = sum(math.log((documents + 1) / (n + 1)) for n in counts) / len(counts)
    return first, idf, sum(n == 0 for n in counts) / len(counts)


def lexical_features(question: str, text: str, rest_words: int = 0) -> tuple[float, float, str]:
    """(novel_share, log_novel, the rest of the text) of one pair; the rest cut to its first
    ``rest_words`` words where that is above 0."""
    q_terms = set(content_terms(question))
    terms = set(content_terms(text))
    novel = terms - q_terms
    share = len(novel) / len(terms) if terms else 0.0
    return share, math.log1p(len(novel)), rest_of(text, q_terms, rest_words)


#: features computed in this process: (reference, questions, query, text) -> row; bounded
_MEMO: dict[tuple[int, int, str, str], np.ndarray] = {}
_MEMO_LIMIT = 1 << 18


def _mean_of_highest(sims: np.ndarray) -> np.ndarray:
    """Per row of ``sims``, the mean of its ``DOCUMENTS_CLOSEST`` highest values (all of a row
    with fewer), summed from the highest down."""
    top = -np.sort(-sims, axis=1)[:, :DOCUMENTS_CLOSEST]
    return top.sum(axis=1) / top.shape[1]


def _save_array(path: Path, array: np.ndarray) -> None:
    with path.open("wb") as handle:  # np.save(path) would add ".npy" to the name
        np.save(handle, array, allow_pickle=False)


class GuardFeatures:
    """Computes ``FEATURES`` for rows of (query, text); ``others``: the questions a text's rest
    is compared with for ``spec_rq`` (the bound collection's topics); ``documents``: each
    question's judged documents, which ``spec_rd`` compares the rest with. Rows computed before
    in this process with the same reference, questions and documents are not computed again
    (validation ranks the same texts with several guards). ``store``: a folder where the judged
    documents' embeddings are kept between processes (the bound collection's)."""

    def __init__(
        self,
        model: GuardModel,
        encoder: DenseRanker,
        others: Sequence[str] = (),
        documents: Mapping[str, Sequence[str]] | None = None,
        store: str | Path | None = None,
    ):
        self.model = model
        self.store = Path(store) if store is not None else None
        self.encoder = encoder
        self.others = list(dict.fromkeys(others))
        self.documents = {
            str(q): list(dict.fromkeys(str(d) for d in docs))
            for q, docs in (documents or {}).items()
            if len(docs)
        }
        self._frequent = frozenset(model.frequent_words)
        self._attested = frozenset(model.attested_pairs)
        self._other_emb: np.ndarray | None = None
        self._doc_emb: np.ndarray | None = None
        self._frequency = dict(model.document_frequency)
        references = (
            model.frequent_words, model.attested_pairs, model.reference_documents,
            tuple(sorted(self._frequency.items())), model.answer_direction, model.answer_offset,
            model.rest_words,
        )  # fmt: skip
        self._key = (
            hash((*references, encoder.fingerprint())),
            hash((tuple(self.others), tuple((q, tuple(d)) for q, d in self.documents.items()))),
        )

    def known(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """True for each (query, text) whose features this process has computed (``frame``
        reads them without embedding anything)."""
        return np.array(
            [(*self._key, q, t) in _MEMO for q, t in zip(queries, texts, strict=True)], dtype=bool
        )

    def frame(self, queries: Sequence[str], texts: Sequence[str]) -> pd.DataFrame:
        """One row per (query, text), one column per feature of ``FEATURES``."""
        keys = [(*self._key, q, t) for q, t in zip(queries, texts, strict=True)]
        todo = [i for i, key in enumerate(keys) if key not in _MEMO]
        if todo:
            fresh = self._compute([queries[i] for i in todo], [texts[i] for i in todo])
            if len(_MEMO) + len(todo) > _MEMO_LIMIT:
                _MEMO.clear()
            for i, row in zip(todo, fresh.to_numpy(dtype=float), strict=True):
                _MEMO[keys[i]] = row
        values = np.array([_MEMO[key] for key in keys]).reshape(len(keys), len(FEATURES))
        return pd.DataFrame(values, columns=list(FEATURES))

    def _encode(self, texts: list[str]) -> np.ndarray:
        unique, index = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
        return self.encoder.encode([str(t) for t in unique], desc="guard texts")[index]

    def _compute(self, queries: Sequence[str], texts: Sequence[str]) -> pd.DataFrame:
        cut = self.model.rest_words
        lexical = [lexical_features(q, t, cut) for q, t in zip(queries, texts, strict=True)]
        rests = [r for _, _, r in lexical]
        q_emb = self._encode(list(queries))
        t_emb = self._encode(list(texts))
        has_rest = np.array([bool(r) for r in rests])
        r_emb = self._encode([r if r else "." for r in rests])
        cos_rq = np.where(has_rest, np.einsum("ij,ij->i", q_emb, r_emb), 0.0)
        mean_other, max_other = self._other_cosines(r_emb, list(queries))
        spec = cos_rq - mean_other * has_rest
        margin = cos_rq - max_other * has_rest
        spec_rd = np.where(
            has_rest, self._document_specificity(r_emb, list(queries), list(texts)), 0.0
        )
        encoded = pd.DataFrame(
            {
                "novel_share": [s for s, _, _ in lexical],
                "log_novel": [n for _, n, _ in lexical],
                "cos_tq": np.einsum("ij,ij->i", q_emb, t_emb),
                "cos_rq": cos_rq,
                "spec_rq": spec,
                "margin_rq": margin,
                "spec_rd": spec_rd,
                "answer_like": self.answer_like(t_emb),
            }
        )
        table = pd.concat([encoded, self.word_features(queries, texts)], axis=1)
        return table[list(FEATURES)].astype(float)

    def answer_like(self, embeddings: np.ndarray) -> np.ndarray:
        """``answer_like`` of texts' embeddings (0 each without the model's direction)."""
        direction = np.asarray(self.model.answer_direction, dtype=float)
        if not len(direction):
            return np.zeros(len(embeddings))
        return np.asarray(embeddings, dtype=float) @ direction + self.model.answer_offset

    def text_embeddings(self, texts: Sequence[str]) -> np.ndarray:
        """The encoder's embeddings of ``texts`` (what ``answer_like`` reads)."""
        return self._encode(list(texts))

    def word_features(self, queries: Sequence[str], texts: Sequence[str]) -> pd.DataFrame:
        """The ``WORD_FEATURES`` of each row: read from its words and the model's references."""
        n = self.model.reference_documents
        information = [
            information_features(q, t, n, self._frequency)
            for q, t in zip(queries, texts, strict=True)
        ]
        return pd.DataFrame(
            {
                "fluency": [fluency(t, self._frequent, self._attested) for t in texts],
                "first_person": [f for f, _, _ in information],
                "idf_new": [i for _, i, _ in information],
                "oov_new": [o for _, _, o in information],
                "asks_only": [asks_only(t) for t in texts],
                "order": [order(t) for t in texts],
            },
            dtype=float,
        )

    def _document_specificity(
        self, r_emb: np.ndarray, queries: list[str], texts: list[str]
    ) -> np.ndarray:
        """``spec_rd`` of each row: the mean of the rest's ``DOCUMENTS_CLOSEST`` highest cosines
        with its question's judged documents minus the mean of the same over the other
        questions' documents; a document contained in the text (the text itself, or a judged
        answer after its question) is left out. NaN (unknown) where the question has no other
        judged document or no other question has any."""
        out = np.full(len(queries), np.nan)
        if len(self.documents) < 2:
            return out
        groups = list(self.documents)
        if self._doc_emb is None:
            flat = [d for q in groups for d in self.documents[q]]
            self._doc_emb = self._document_embeddings(flat)
        bounds = np.cumsum([0] + [len(self.documents[q]) for q in groups])
        group_of = {q: i for i, q in enumerate(groups)}
        for start in range(0, len(queries), 512):
            stop = min(start + 512, len(queries))
            sims = (r_emb[start:stop] @ self._doc_emb.T).astype(float)
            closest = np.column_stack(  # per row and question: the mean of the highest cosines
                [_mean_of_highest(sims[:, lo:hi]) for lo, hi in pairwise(bounds)]
            )
            for row in range(start, stop):
                own = group_of.get(queries[row], -1)
                if own < 0:
                    continue
                kept = [  # its own question's documents, less those the text contains
                    sims[row - start, bounds[own] + j]
                    for j, doc in enumerate(self.documents[queries[row]])
                    if doc not in texts[row]
                ]
                if kept:
                    mine = _mean_of_highest(np.array([kept]))[0]
                    out[row] = mine - np.delete(closest[row - start], own).mean()
        return out

    def _document_embeddings(self, texts: list[str]) -> np.ndarray:
        """The encoder's embeddings of ``texts``, read from ``store`` when an earlier process
        kept them there (the key: the encoder's fingerprint and every text), else computed and
        kept (written whole or not at all; a folder that cannot be written keeps nothing)."""
        digest = hashlib.sha256(self.encoder.fingerprint().encode())
        for text in texts:
            digest.update(b"\0" + text.encode("utf-8", "surrogatepass"))
        path = self.store / f"guard-documents-{digest.hexdigest()[:24]}.npy" if self.store else None
        if path is not None and path.is_file():
            try:
                kept = np.load(path, allow_pickle=False)
                if kept.shape[0] == len(texts):
                    return kept
            except (OSError, ValueError):
                pass
        embeddings = np.asarray(self.encoder.encode(texts, desc="guard documents"))
        if path is not None:
            with contextlib.suppress(OSError):  # a folder that cannot be written keeps nothing
                write_aside(path, lambda partial: _save_array(partial, embeddings))
        return embeddings

    def _other_cosines(
        self, r_emb: np.ndarray, queries: list[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The mean and the highest cosine of each rest with the questions other than its own
        (zeros without other questions)."""
        if self._other_emb is None:
            self._other_emb = (
                self.encoder.encode(self.others, desc="guard questions")
                if self.others
                else np.zeros((0, r_emb.shape[1]), np.float32)
            )
        position = {q: i for i, q in enumerate(self.others)}
        own = np.array([position.get(q, -1) for q in queries], dtype=int)
        count = len(self.others) - (own >= 0)
        if not len(self._other_emb) or not count.any():
            return np.zeros(len(r_emb)), np.zeros(len(r_emb))
        sims = (r_emb @ self._other_emb.T).astype(float)  # rows x questions
        rows = np.arange(len(own))
        own_sim = np.where(own >= 0, sims[rows, np.maximum(own, 0)], 0.0)
        mean = (sims.sum(axis=1) - own_sim) / np.maximum(count, 1)
        sims[rows[own >= 0], own[own >= 0]] = -np.inf
        highest = np.where(count > 0, sims.max(axis=1), 0.0)
        return mean, highest


def judged_documents(
    candidates: pd.DataFrame, qrels: pd.DataFrame | None = None
) -> dict[str, list[str]]:
    """Each question's judged answers (``query`` and ``text`` of a collection's candidates), as
    ``GuardFeatures`` reads them for ``spec_rd``. With ``qrels`` (qid, docno, label: graded
    gains), only the documents of a gain above 0: what the judges held to be answers. A pool
    holds systems' own deferrals and boilerplate too ("please see a doctor", graded lowest);
    compared with them, boilerplate would look specific to the question."""
    if qrels is not None:
        answered = qrels.loc[qrels["label"] > 0, ["qid", "docno"]].astype(str)
        keys = pd.MultiIndex.from_frame(candidates[["qid", "docno"]].astype(str))
        candidates = candidates[keys.isin(pd.MultiIndex.from_frame(answered))]
    documents: dict[str, list[str]] = {}
    for query, text in zip(candidates["query"].astype(str), candidates["text"].astype(str),
                           strict=True):  # fmt: skip
        documents.setdefault(query, []).append(text)
    return documents


def judged_answers(collection: Collection, candidates: pd.DataFrame) -> dict[str, list[str]]:
    """``judged_documents`` of ``candidates`` (rows of ``collection``'s) that the judges held to
    be answers: a gain above 0 in the collection's first dimension (relevance where it has
    several). What a bound guard's ``spec_rd`` compares with, and what it is fitted with."""
    first = next(iter(collection.dimensions))
    return judged_documents(candidates, collection.qrels(first))
