"""Terrier's default text pipeline in Python: EnglishTokeniser, then ``Stopwords,PorterStemmer``.

Why a Python copy of Terrier's pipeline: the source study ranked with Terrier (TF_IDF, BM25,
DPH), whose Java backend needs a jar from Maven Central that an offline machine does not have.
The lexical rankers (``nrp.rankers.lexical``) reproduce Terrier's scores exactly, and that
starts with the same terms. Each rule below names the Terrier class it follows
(terrier-org/terrier-core, ``modules/core/src/main/java/org/terrier/...``):

- ``indexing/tokenisation/EnglishTokeniser.java`` (Terrier's default ``tokeniser``): a token is a
  maximal run of ASCII letters and digits; every other character (punctuation, whitespace,
  non-ASCII letters: "café" gives "caf") separates tokens. A token is dropped when it is longer
  than ``max.term.length`` (20, ``ApplicationSetup.MAX_TERM_LENGTH``), has more than 4 digits,
  or has more than 3 identical consecutive characters (compared before lowercasing, as
  ``check()`` does); kept tokens are lowercased (property ``lowercase``, default true).
- ``terms/Stopwords.java`` with ``stopword-list.txt``: Terrier's 733-word list. We read it from
  pyterrier-pisa (``pyterrier_pisa/stopwords.py``, "From org.terrier.terms.Stopwords"), a
  pinned dependency, instead of keeping a copy; its 733 words equal an independent copy of
  Terrier's ``stopword-list.txt``. Eight entries contain hyphens ("vis-a-vis") and can never
  match a token, exactly as in Terrier.
- ``terms/PorterStemmer.java``: Martin Porter's own Java release (Release 4), i.e. the 1980
  algorithm with the departures of his published implementations ("bli" -> "ble" instead of
  "abli" -> "able", the added "logi" -> "log", words of one or two letters left alone). That is
  NLTK's ``PorterStemmer.MARTIN_EXTENSIONS`` mode, not ``ORIGINAL_ALGORITHM``: the two differ on
  "cardiology" (Terrier: "cardiolog", original algorithm: "cardiologi"), "possibly"
  ("possibl" / "possibli") and "is" ("is" / "i"). NLTK's MARTIN_EXTENSIONS output equals a
  line-by-line transcription of Terrier's PorterStemmer.java on all 18,303 alphabetic words of
  the MEDIQA 2019 files. ``nrp.rankers.porter`` is that mode in plain Python (importing NLTK
  takes over a second), equal to NLTK's on every distinct token of the MEDIQA, LiveQA and CLEF
  eHealth files.
- Queries (``querying/ApplyTermPipeline.java``, ``querying/parser/SingleTermQuery.java``,
  ``matching/MatchingQueryTerms.java``): a query term's weight (Terrier's ``keyFrequency``) is
  how often it occurs in the query. Identical tokens are merged before the pipeline, wherever
  they occur; after stopword removal and stemming Terrier merges only *adjacent* equal stems,
  so "diabetes ... diabetic" stays two entries of weight 1 (which matters only for BM25, whose
  query-term factor is not linear). ``query_terms`` follows that logic step by step.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import Counter
from functools import cache, lru_cache
from pathlib import Path

from nrp.rankers import porter

#: ``max.term.length``: longer tokens are dropped (``EnglishTokeniser.DROP_LONG_TOKENS``).
MAX_TERM_LENGTH = 20
#: ``EnglishTokeniser.maxNumOfDigitsPerTerm``: tokens with more digits are dropped.
MAX_DIGITS_PER_TERM = 4
#: ``EnglishTokeniser.maxNumOfSameConseqLettersPerTerm``: longer runs of one character are dropped.
MAX_SAME_CONSECUTIVE = 3
#: Size of Terrier's ``stopword-list.txt``; a different size means the list we read is not it.
TERRIER_STOPWORD_COUNT = 733
#: Identifies this pipeline in ranker fingerprints: change it when the terms change.
PIPELINE_ID = "terrier-english+stopwords+porter-martin/1"

_TOKEN = re.compile(r"[A-Za-z0-9]+")
#: ``bytes.translate`` table: ASCII letters and digits kept, every other byte a space. Encoded
#: with ``errors="replace"`` (each non-ASCII character becomes "?", then a space), a text split
#: on whitespace gives exactly ``_TOKEN.findall``'s runs, several times faster than the regex.
_SEPARATORS = bytes(b if chr(b).isascii() and chr(b).isalnum() else ord(" ") for b in range(256))
#: Raw token -> its term (None: dropped), as ``_pipeline_term``; a plain dict read through
#: ``map`` costs a fraction of a cached call per token. Cleared when it reaches this size.
_TERM_MEMO: dict[str, str | None] = {}
_TERM_MEMO_LIMIT = 1 << 20
_SAME_CONSECUTIVE = re.compile(rf"(.)\1{{{MAX_SAME_CONSECUTIVE}}}")
_DIGIT = re.compile(r"[0-9]")


def _valid_token(token: str) -> bool:
    """``EnglishTokeniser.check`` and the length rule: True when Terrier keeps the token."""
    return (
        len(token) <= MAX_TERM_LENGTH
        and len(_DIGIT.findall(token)) <= MAX_DIGITS_PER_TERM
        and _SAME_CONSECUTIVE.search(token) is None
    )


def english_tokens(text: str) -> list[str]:
    """Terrier's EnglishTokeniser: ASCII alphanumeric runs, filtered by ``check``, lowercased."""
    return [token.lower() for token in _TOKEN.findall(text) if _valid_token(token)]


@cache
def terrier_stopwords() -> frozenset[str]:
    """Terrier's stopword list (733 words), read from pyterrier-pisa's ``stopwords.py``.

    The file is executed on its own: importing the ``pyterrier_pisa`` package would load PISA's
    native library (seconds) just to read a word list.
    """
    module = sys.modules.get("pyterrier_pisa.stopwords")
    if module is None:
        spec = importlib.util.find_spec("pyterrier_pisa")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(
                "pyterrier-pisa is not installed: it provides Terrier's stopword list"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / "stopwords.py"
        file_spec = importlib.util.spec_from_file_location("_nrp_terrier_stopwords", path)
        if file_spec is None or file_spec.loader is None:
            raise RuntimeError(f"cannot read Terrier's stopword list from {path}")
        module = importlib.util.module_from_spec(file_spec)
        file_spec.loader.exec_module(module)
    words = frozenset(module._STOPWORDS["terrier"])
    if len(words) != TERRIER_STOPWORD_COUNT:
        raise RuntimeError(
            f"pyterrier_pisa's 'terrier' stopword list has {len(words)} words, not "
            f"{TERRIER_STOPWORD_COUNT}: it is no longer Terrier's stopword-list.txt"
        )
    return words


@lru_cache(maxsize=1 << 18)
def porter_stem(term: str) -> str:
    """Terrier's PorterStemmer on one lowercased term (``nrp.rankers.porter``: NLTK's
    MARTIN_EXTENSIONS mode, without importing NLTK)."""
    return porter.stem(term)


@lru_cache(maxsize=1 << 20)
def _pipeline_term(token: str) -> str | None:
    """Tokeniser check, lowercase, stopword removal and stemming of one raw token (cached:
    a collection has far fewer distinct tokens than tokens)."""
    if not _valid_token(token):
        return None
    term = token.lower()
    if term in terrier_stopwords():
        return None
    return porter_stem(term)


def raw_tokens(text: str) -> list[str]:
    """The EnglishTokeniser's runs of ASCII letters and digits, before ``check`` and
    lowercasing (equal to ``_TOKEN.findall(text)``)."""
    return text.encode("ascii", "replace").translate(_SEPARATORS).decode("ascii").split()


def _learn(tokens: list[str]) -> None:
    """Tokens seen for the first time through the pipeline, once each (``_TERM_MEMO``)."""
    if len(_TERM_MEMO) > _TERM_MEMO_LIMIT:
        _TERM_MEMO.clear()
    for token in tokens:
        if token not in _TERM_MEMO:
            _TERM_MEMO[token] = _pipeline_term(token)


def analyse(text: str) -> list[str]:
    """The indexing pipeline: the terms Terrier would index for ``text``, in order."""
    tokens = raw_tokens(text)
    try:
        terms = list(map(_TERM_MEMO.__getitem__, tokens))
    except KeyError:  # a token seen for the first time: through the pipeline once
        _learn(tokens)
        terms = list(map(_TERM_MEMO.__getitem__, tokens))
    return list(filter(None, terms))  # None: dropped (a term is never empty)


def term_counts(text: str) -> Counter[str]:
    """Term frequencies of ``text`` after the pipeline (a document's row in an index)."""
    return Counter(analyse(text))


@lru_cache(maxsize=1 << 14)
def query_terms(query: str) -> tuple[tuple[str, float], ...]:
    """A query's matching terms with their weights (Terrier's ``keyFrequency``), in order.

    Follows Terrier 5: identical tokens are merged first, adding their weights
    (``SingleTermQuery.obtainQueryTerms``); then the term pipeline maps each entry to its stem
    or drops it; then, as in ``ApplyTermPipeline.process``, runs of *adjacent* entries with the
    same stem are merged and the rest is left as separate entries (each scored on its own,
    so their contributions add up). Terrier's merge loop moves ``prev`` to the entry it has
    just removed, so in a run of three the third weight is added to the removed second one and
    lost; we do the same.
    """
    weights: dict[str, float] = {}
    for token in english_tokens(query):
        weights[token] = weights.get(token, 0.0) + 1.0
    entries: list[list] = []
    for token, weight in weights.items():
        term = None if token in terrier_stopwords() else porter_stem(token)
        if term is not None:
            entries.append([term, weight])
    merged: list[list] = []
    previous: list | None = None
    for entry in entries:
        if previous is not None and entry[0] == previous[0]:
            previous[1] += entry[1]  # merged into prev (which may itself have been removed)
        else:
            merged.append(entry)
        previous = entry
    return tuple((term, float(weight)) for term, weight in merged)
