"""The rows the guard is fitted on (``fitting_rows``) and their features (``feature_table``,
``text_embeddings``): a collection's judged documents (real answers), the same documents after
their question and cut to their first sentence (real answers too), the degenerate texts of
``nrp.validation.degenerate``, boilerplate mined from the documents themselves, and replies an
LLM writes in its own words when told not to answer (``written_non_answers``) and when told to
answer (``written_answers``). Each row has a ``kind`` and a ``family``; ``nrp.training.guard_train``
fits the detectors on them.
"""

from __future__ import annotations

import fnmatch
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from nrp.training.guard_settings import GuardTrainSettings

if TYPE_CHECKING:
    from nrp.collection.collection import Collection
    from nrp.rankers.guard_features import GuardFeatures

#: the prompts that make the LLM write the non-answers of the ``hollow`` detector (one file per
#: way of not answering), beside this module
WRITTEN_PROMPTS = Path(__file__).with_name("guard_prompts")
#: nrp's own answer prompts: the same LLM's answers to the same questions (``written_answers``)
ANSWER_PROMPTS = ("short-qa:chat", "long-qa:chat")
#: where the written replies are kept, in the fitted collection's folder (resumable)
WRITTEN_STORE = "guard-written-non-answers.jsonl"
ANSWER_STORE = "guard-written-answers.jsonl"
#: every fourth question forms the references when no ``reference_queries`` are given
REFERENCE_EVERY = 4


@dataclass(frozen=True)
class FittingData:
    """What a guard is fitted on: ``rows`` (qid, query, docno, text, kind, family, grade where
    the kind has one), the reference documents' texts (distinct, in the collection's order) and
    the questions fitted on and set aside as references."""

    rows: pd.DataFrame
    reference_texts: list[str]
    fitted_queries: list[str]
    reference_queries: list[str]
    dimension: str


def written_prompts() -> list[Path]:
    return sorted(WRITTEN_PROMPTS.glob("*.txt"))


def split_questions(
    qids: Sequence[str], settings: GuardTrainSettings
) -> tuple[list[str], list[str]]:
    """The questions fitted on and the reference questions, each sorted: a qid matching a
    ``reference_queries`` pattern is a reference; with none given, every ``REFERENCE_EVERY``-th
    question of a seeded shuffle is. ``leave_out`` qids are neither."""
    left_out = set(settings.leave_out)
    kept = sorted({str(q) for q in qids} - left_out)
    if settings.reference_queries:
        patterns = settings.reference_queries
        reference = [q for q in kept if any(fnmatch.fnmatchcase(q, p) for p in patterns)]
    else:
        shuffled = list(kept)
        np.random.default_rng(settings.seed).shuffle(shuffled)
        reference = sorted(shuffled[::REFERENCE_EVERY])
    chosen = set(reference)
    return [q for q in kept if q not in chosen], reference


def fitting_rows(
    collection: Collection,
    settings: GuardTrainSettings,
    *,
    progress: Callable[[str], None] | None = None,
    store: Path | None = None,
) -> FittingData:
    """The fitting questions' judged documents and the texts made from them (``kind``,
    ``family`` columns): what ``train_guard`` fits on. ``store``: the folder the written replies
    are kept in (default: the collection's own)."""
    from nrp.errors import ConfigError
    from nrp.validation.degenerate import degenerate_frame, query_materials

    dimension = fitting_dimension(collection, settings)
    everything = collection.candidates()
    fitted, reference = split_questions(everything["qid"].astype(str), settings)
    if len(fitted) < 2 or not reference:
        raise ConfigError(
            f"guard training: {collection.name} leaves {len(fitted)} questions to fit on and "
            f"{len(reference)} for the references; at least 2 and 1 are needed"
        )
    qid = everything["qid"].astype(str)
    reference_texts = everything[qid.isin(reference)]["text"].drop_duplicates().tolist()
    candidates = everything[qid.isin(fitted)].reset_index(drop=True)
    grades = {(r.qid, r.docno): float(r.label) for r in collection.qrels(dimension).itertuples()}
    materials = query_materials(candidates, grades, settings.seed)
    texts = degenerate_frame(materials, None, settings.per_kind, settings.seed)
    boilerplate = boilerplate_texts(
        candidates, settings.boilerplate_questions, settings.per_kind, settings.seed
    )
    embed = question_embedder() if settings.near_best else None
    near = near_best_texts(materials, candidates, settings.near_best, embed)
    folder = Path(store) if store is not None else Path(collection.path)
    written = written_non_answers(candidates, settings, folder, progress)
    llm_answers = written_answers(candidates, settings, folder, progress)
    rows = pd.concat(
        [candidates.assign(kind="judged", family="judged"), restated_answers(candidates, grades),
         texts, boilerplate, near, written, llm_answers],
        ignore_index=True,
    )  # fmt: skip
    return FittingData(rows, reference_texts, fitted, reference, dimension)


def fitting_dimension(collection: Collection, settings: GuardTrainSettings) -> str:
    """The dimension whose grades tell real answers: ``settings.dimension``, else relevance
    where the collection has it, else its first; a ``ConfigError`` naming the collection's
    dimensions when it has no such dimension."""
    from nrp.errors import ConfigError

    dimensions = list(collection.dimensions)
    dimension = settings.dimension or collection.answer_dimension
    if dimension not in dimensions:
        raise ConfigError(
            f"guard training: {collection.name} has no dimension {dimension!r} "
            f"(it has {', '.join(dimensions)})"
        )
    return dimension


def written_non_answers(
    candidates: pd.DataFrame,
    settings: GuardTrainSettings,
    store: Path,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Non-answers in an LLM's own words: ``written_llm`` (by default the packaged
    SmolLM2-135M-Instruct), told by each prompt of ``WRITTEN_PROMPTS`` not to answer (turn the
    person away, warm words and no facts, the question said again at length, a disclaimer that
    fits any question), writes one reply per fitting question (kept in ``STORE/WRITTEN_STORE``).
    The negatives of ``answer_like``'s direction and of the ``hollow`` detector. A small model
    does not always obey: some replies ramble about the topic, so not every one is a clean
    non-answer."""
    prompts = [f"{path}:chat" for path in written_prompts()]
    return written_replies(candidates, settings, prompts, store / WRITTEN_STORE, "written",
                           progress)  # fmt: skip


def written_answers(
    candidates: pd.DataFrame,
    settings: GuardTrainSettings,
    store: Path,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """The same LLM's answers to the same questions under nrp's own answer prompts
    (``ANSWER_PROMPTS``; kept in ``STORE/ANSWER_STORE``): positives of ``answer_like``'s
    direction beside the judged answers, so that it learns what tells an answer from a
    non-answer of the same writer, not the writer's style from the judged documents'. Not real
    answers to the detectors (their thresholds are the judged answers'): a small model's
    answers are often wrong, and some decline."""
    return written_replies(candidates, settings, list(ANSWER_PROMPTS), store / ANSWER_STORE,
                           "llm_answer", progress)  # fmt: skip


def written_replies(
    candidates: pd.DataFrame,
    settings: GuardTrainSettings,
    prompts: list[str],
    out: Path,
    family: str,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """One reply of ``written_llm`` per fitting question and prompt (chat mode, greedy,
    ``written_tokens`` new tokens), generated once and kept in ``out`` (resumable): a refit
    reads them. Kind ``FAMILY:PROMPT`` (the prompt's name or file stem)."""
    from nrp.generation.generate import GenerationOptions, generate_answers

    topics = candidates.drop_duplicates("qid")[["qid", "query"]]
    options = GenerationOptions(
        max_new_tokens=settings.written_tokens, temperature=0.0, top_k=50, top_p=0.95,
        repetition_penalty=1.2, seed=settings.seed,
    )  # fmt: skip
    answers = generate_answers(topics, settings.written_llm, prompts, samples=1, options=options,
                               out=out, progress=progress)  # fmt: skip
    rows = answers[["qid", "prompt", "text"]].merge(topics, on="qid")
    kind = f"{family}:" + rows["prompt"].str.removesuffix(":chat")
    return rows.drop(columns="prompt").assign(docno="", kind=kind, family=family)


def restated_answers(candidates: pd.DataFrame, grades: dict) -> pd.DataFrame:
    """Real answers that begin by restating the question, as language models write them: each
    graded-relevant judged document after its question (``grade`` column: the document's)."""
    grade = [
        grades.get((q, d), 0.0) for q, d in zip(candidates["qid"], candidates["docno"], strict=True)
    ]
    rows = candidates.assign(grade=grade)
    rows = rows[rows["grade"] >= 1].copy()
    rows["text"] = [
        f"{' '.join(str(q).split()).rstrip('.?!')}? {t}"
        for q, t in zip(rows["query"], rows["text"], strict=True)
    ]
    return rows.assign(kind="restated_answer", family="judged")


def boilerplate_texts(
    candidates: pd.DataFrame, min_questions: int, per_query: int, seed: int
) -> pd.DataFrame:
    """Not answers mined from the fitting documents themselves, in no wording of nrp's: each
    question followed by one to three sentences that recur in the judged documents of at least
    ``min_questions`` questions (disclaimers, referrals, "talk to your healthcare professional")
    and not in its own: what the question gets from text that fits every question alike."""
    from nrp.validation.degenerate import sentences

    seen: dict[str, set[str]] = {}
    for qid, text in zip(candidates["qid"], candidates["text"].astype(str), strict=True):
        for sentence in sentences(text):
            sentence = " ".join(sentence.split())
            if 20 <= len(sentence) <= 250 and re.search(r"[a-z]{3}", sentence):
                seen.setdefault(sentence, set()).add(qid)
    common = sorted(s for s, questions in seen.items() if len(questions) >= min_questions)
    rng = random.Random(seed)
    rows = []
    topics = candidates.drop_duplicates("qid")
    for qid, query in zip(topics["qid"], topics["query"].astype(str), strict=True):
        pool = [s for s in common if qid not in seen[s]]
        for _ in range(per_query if pool else 0):
            picked = rng.sample(pool, min(len(pool), rng.randint(1, 3)))
            text = f"{' '.join(query.split())} {' '.join(picked)}"
            rows.append({"qid": qid, "query": query, "docno": "", "text": text})
    columns = ["qid", "query", "docno", "text"]
    return pd.DataFrame(rows, columns=columns).assign(kind="boilerplate", family="mined")


def question_embedder() -> Callable[[list[str]], np.ndarray]:
    """The packaged encoder's embedding of texts (L2-normalised): what ``near_best_texts``
    finds a question's neighbours with."""
    from nrp.rankers.registry import make_ranker

    return make_ranker("dense:model=minilm").encode


def near_best_texts(materials, candidates: pd.DataFrame, per_query: int, embed) -> pd.DataFrame:
    """Answers to a neighbouring question: for each fitting question, the best judged document
    of each of the ``per_query`` other fitting questions closest to it (cosine of the questions'
    embeddings by ``embed``), skipping a document that is one of its own judged documents.
    ``other_best`` draws the other question at random, so its document is mostly about another
    subject; this one is about the question's subject and answers something else, the hardest
    form of an answer to another question. Negatives of the ``off_topic`` detector beside
    ``other_best`` (family ``mined``)."""
    columns = ["qid", "query", "docno", "text"]
    usable = [m for m in materials if m.best_documents]
    if per_query < 1 or len(usable) < 2:
        return pd.DataFrame(columns=columns).assign(kind="near_best", family="mined")
    own = candidates.groupby("qid")["text"].agg(lambda texts: set(texts.astype(str)))
    vectors = np.asarray(embed([m.query for m in usable]), dtype=float)
    similarity = vectors @ vectors.T
    rows = []
    for i, material in enumerate(usable):
        picked = 0
        for j in np.argsort(-similarity[i], kind="stable"):
            if picked == per_query:
                break
            text = usable[j].best_documents[0]
            if j == i or text in own.get(material.qid, set()):
                continue
            rows.append({"qid": material.qid, "query": material.query, "docno": "", "text": text})
            picked += 1
    return pd.DataFrame(rows, columns=columns).assign(kind="near_best", family="mined")


def terse_answers(rows: pd.DataFrame, share: float, seed: int) -> np.ndarray:
    """The rows that join the real answers as terse ones: ``share`` of the ``first_sentence``
    rows (a judged document cut to its first sentence), each kept when a uniform draw of its row
    (seed ``seed``, one draw per row of ``rows``) is below ``share``: all of them at 1, none
    at 0."""
    first = (rows["kind"] == "first_sentence").to_numpy()
    return first & (np.random.default_rng(seed).random(len(rows)) < share)


def question_folds(
    qids: pd.Series, folds: int, seed: int, among: np.ndarray | None = None
) -> np.ndarray:
    """Each row's fold of the questions: the distinct questions (of the rows of ``among``;
    default: all) sorted, shuffled with ``seed`` and dealt round ``folds`` folds; -1 for a row
    whose question is not among them."""
    questions = np.array(sorted(set(qids if among is None else qids[among])))
    np.random.default_rng(seed).shuffle(questions)
    fold_of = {q: i % folds for i, q in enumerate(questions)}
    return qids.map(fold_of).fillna(-1).to_numpy()


def feature_table(rows: pd.DataFrame, features: GuardFeatures, cache: Path | None) -> pd.DataFrame:
    """``features.frame`` of (query, text) rows; with ``cache``, rows computed before are read
    from it and the table is written back (refits with other settings cost no encoding). A
    cache of another ``rest_words`` (kept in its ``attrs``) is computed again."""
    from nrp.rankers.guard_features import WORD_FEATURES
    from nrp.rankers.guard_model import FEATURES

    key = pd.MultiIndex.from_frame(rows[["query", "text"]])
    if cache is not None and cache.is_file():
        cached = pd.read_pickle(cache)
        found = cached.reindex(index=key, columns=list(FEATURES))
        encoded = [f for f in FEATURES if f not in WORD_FEATURES]
        # rows the cache lacks, all rows where it lacks a feature; a feature it holds as NaN is
        # unknown (spec_rd of a question with no other judged answer), not missing
        todo = ~key.isin(cached.index) | any(f not in cached.columns for f in encoded)
        todo |= cached.attrs.get("rest_words", 0) != features.model.rest_words
        if todo.any():
            fresh = features.frame(rows["query"][todo].tolist(), rows["text"][todo].tolist())
            found.iloc[np.flatnonzero(todo)] = fresh[list(FEATURES)].to_numpy()
        table = found.reset_index(drop=True)
        # the word features are cheap and their references may have changed: computed anew
        words = features.word_features(rows["query"].tolist(), rows["text"].tolist())
        table[list(WORD_FEATURES)] = words[list(WORD_FEATURES)].to_numpy()
    else:
        table = features.frame(rows["query"].tolist(), rows["text"].tolist())
    if cache is not None:
        kept = table.set_axis(key, axis=0)
        kept = kept[~kept.index.duplicated()]
        kept.attrs["rest_words"] = features.model.rest_words
        kept.to_pickle(cache)
    return table


def text_embeddings(rows: pd.DataFrame, features: GuardFeatures, cache: Path | None) -> np.ndarray:
    """The encoder's embedding of each row's text (what ``answer_like`` reads); with ``cache``,
    kept beside the feature table (``CACHE.embeddings.pkl``) and read from it."""
    texts = rows["text"].astype(str)
    path = cache.with_name(cache.name + ".embeddings.pkl") if cache is not None else None
    kept = pd.read_pickle(path) if path is not None and path.is_file() else pd.DataFrame()
    todo = sorted(set(texts) - set(kept.index))
    if todo:
        fresh = pd.DataFrame(features.text_embeddings(todo), index=todo)
        kept = pd.concat([kept, fresh]) if len(kept) else fresh
        if path is not None:
            kept.to_pickle(path)
    return kept.loc[texts.tolist()].to_numpy(dtype=float)
