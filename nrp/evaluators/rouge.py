"""ROUGE-1, ROUGE-2 and ROUGE-L exactly as rouge-score's ``RougeScorer.score_multi`` computes
them, without its quadratic cost.

rouge-score tokenizes the answer and every reference again for each (answer, reference) pair
and fills an |answer| x |reference| table in Python for the longest common subsequence (LCS);
ROUGE-L was nine tenths of ``nrp probe``'s time. Here:

- each distinct text is tokenized once per scorer (references recur for every answer of their
  query, and the probe's twins share them), with rouge-score's own ``tokenize`` and a Porter
  stemmer whose results are remembered per word;
- the LCS length is computed bit-parallel (Allison and Dix 1986, as Hyyro 2004 writes it): one
  Python integer holds a bit per reference token, and each answer token costs a few integer
  operations, so a pair costs O(|answer|) big-integer steps instead of |answer| x |reference|
  Python steps. The length is exact, so precision, recall and F1 are the same numbers;
- n-gram scores use rouge-score's own ``_create_ngrams``/``_score_ngrams``, and a reference is
  chosen per ROUGE type by the highest F1 (the first on ties), as ``score_multi`` does.

``tests/evaluators/test_rouge.py`` checks equality with ``RougeScorer`` on real texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nrp import lazy_libs

if TYPE_CHECKING:
    from collections import Counter

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


@dataclass(frozen=True)
class _Prepared:
    """A text as ROUGE reads it: its tokens, unigram and bigram counts, and per token the bits
    of the positions where it occurs (for the bit-parallel LCS)."""

    tokens: list[str]
    ngrams: dict[int, Counter[tuple[str, ...]]]
    positions: dict[str, int]


class _RememberingStemmer:
    """nltk's Porter stemmer with each word's stem remembered (stemming is a pure function of
    the word; the probe stems the same words thousands of times)."""

    def __init__(self) -> None:
        porter = lazy_libs.module("nltk.stem.porter")

        self._stemmer = porter.PorterStemmer()
        self._stems: dict[str, str] = {}

    def stem(self, word: str) -> str:
        stem = self._stems.get(word)
        if stem is None:
            stem = self._stems[word] = self._stemmer.stem(word)
        return stem


def lcs_length(positions: dict[str, int], length: int, other: Sequence[str]) -> int:
    """The length of the longest common subsequence of a sequence of ``length`` tokens, given
    as ``positions`` (token -> bit mask of where it occurs), and ``other``."""
    mask = (1 << length) - 1
    v = mask
    for token in other:
        match = positions.get(token)
        if match:
            u = v & match
            v = ((v + u) | (v - u)) & mask
    return length - bin(v).count("1")


class RougeScorer:
    """``score_multi(references, prediction)`` -> {rouge type: Score}, the numbers of
    ``rouge_score.rouge_scorer.RougeScorer(ROUGE_TYPES, use_stemmer).score_multi``."""

    def __init__(self, use_stemmer: bool):
        self._stemmer = _RememberingStemmer() if use_stemmer else None
        self._prepared: dict[str, _Prepared] = {}

    def _prepare(self, text: str) -> _Prepared:
        prepared = self._prepared.get(text)
        if prepared is None:
            from rouge_score.rouge_scorer import _create_ngrams
            from rouge_score.tokenize import tokenize

            tokens = tokenize(text, self._stemmer)
            positions: dict[str, int] = {}
            for i, token in enumerate(tokens):
                positions[token] = positions.get(token, 0) | (1 << i)
            ngrams = {n: _create_ngrams(tokens, n) for n in (1, 2)}
            prepared = self._prepared[text] = _Prepared(tokens, ngrams, positions)
        return prepared

    def score(self, reference: _Prepared, prediction: _Prepared) -> dict[str, Any]:
        from rouge_score.rouge_scorer import _score_ngrams
        from rouge_score.scoring import Score, fmeasure

        result = {
            "rouge1": _score_ngrams(reference.ngrams[1], prediction.ngrams[1]),
            "rouge2": _score_ngrams(reference.ngrams[2], prediction.ngrams[2]),
        }
        if not reference.tokens or not prediction.tokens:
            result["rougeL"] = Score(precision=0, recall=0, fmeasure=0)
        else:
            lcs = lcs_length(reference.positions, len(reference.tokens), prediction.tokens)
            precision = lcs / len(prediction.tokens)
            recall = lcs / len(reference.tokens)
            result["rougeL"] = Score(
                precision=precision, recall=recall, fmeasure=fmeasure(precision, recall)
            )
        return result

    def score_multi(self, references: Sequence[str], prediction: str) -> dict[str, Any]:
        answer = self._prepare(prediction)
        scores = [self.score(self._prepare(reference), answer) for reference in references]
        best = {}
        for kind in ROUGE_TYPES:
            values = [s[kind].fmeasure for s in scores]
            best[kind] = scores[values.index(max(values))][kind]
        return best
