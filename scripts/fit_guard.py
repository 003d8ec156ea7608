"""Fit the validity guard (``nrp.rankers.guard``) and write its model file.

    .venv/bin/python scripts/fit_guard.py                      # -> nrp/rankers/guard_model.json
    .venv/bin/python scripts/fit_guard.py --out /tmp/guard.json --held-out evasion

What it reads: the MEDIQA 2019 training sets and validation set
(``manifests/mediqa-2019-train.yaml``, ingested into ``--indexes`` when missing), and nothing
else: no collection the guard is evaluated on. Left out of fitting: training set 1 (its
questions are the LiveQA-Med test questions, an evaluated collection) and the three questions
asked again in the MEDIQA test set (v-24, v-38, t2-103; docs/training.md). What it fits:

1. the fluency reference: the ``--frequent`` words of highest document frequency in the
   documents of training set 1 (never fitted on: a fitted answer's own word pairs must not make
   it look fluent) and of the ``--fluency-collections`` if any (their texts only; ingested from
   ``manifests/`` when missing), and the pairs of them adjacent in at least ``--pair-docs``
   documents;
2. one logistic regression per detector (``DETECTORS``; L2, ``--l2``; classes weighted to
   equal mass) of "real answer" on its features (``FEATURES``): the judged documents of the
   fitting questions are real answers, and so is each judged document of grade
   ``--restated-grade`` (3, Excellent) or above after its question (language models often
   restate the question first: their best answers must not look like evasions), and so is
   ``--terse-answers`` (all) of the questions' best judged documents cut to their first
   sentence (terse but real answers: a short answer must not look like a non-answer); the
   detector's negatives are not: degenerate kinds of ``nrp.validation.degenerate``
   (``--per-kind`` texts per composed kind and query, seed ``--seed``) and ``boilerplate``,
   the question followed by sentences the fitting documents of at least
   ``--boilerplate-questions`` other questions repeat, and ``written``, non-answers the
   packaged LLM writes for each fitting question in its own words under four prompts of this
   script's (``written_non_answers``); with ``--near-best N`` (0 by default: tried and not
   adopted, docs/validity.md), the best judged documents of each question's N closest other
   questions join ``off_topic``'s negatives. The evasion family is held out to measure what the
   guard does with forms it never saw;
3. ``answer_like``'s direction (``--direction-l2``): a logistic regression of "real answer" on
   the text's embedding, the real answers against the written non-answers; the ``hollow``
   detector reads it, and is fitted on values of a direction fitted without the row's question
   (``INNER_FOLDS``), so that its threshold is set as for texts the direction never saw;
4. the threshold: the largest probability at which at most ``--max-flagged`` of the fitting
   real answers would be flagged.

It prints the weights, the threshold, and the share of each kind flagged at it (held-out family
included, on the fitting questions: the figures on other collections come from ``nrp
validate``). ``--cross-fit K`` also prints each kind's share flagged when every question is
judged by a guard fitted without it, and every written reply by one fitted without its question
and without its prompt's replies (a wording the guard never saw): the figures the settings
were chosen by.

    .venv/bin/python scripts/fit_guard.py --out /tmp/guard.json --cross-fit 5
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import ROOT, load_or_ingest

#: the collection fitted on (ingested from ``manifests/mediqa-2019-train.yaml`` when missing)
FITTING_COLLECTION = "mediqa-2019-train"
#: training set 1 = LiveQA-Med's questions; these three are asked again in the MEDIQA test set
LEFT_OUT_PREFIX = "t1-"
LEFT_OUT = ("v-24", "v-38", "t2-103")
#: the prompts that make the packaged LLM write the non-answers of the ``hollow`` detector
#: and nrp's own prompts for its answers to the same questions (``written_answers``)
WRITTEN_PROMPTS = ROOT / "scripts" / "guard_prompts"
ANSWER_PROMPTS = ["short-qa:chat", "long-qa:chat"]


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "nrp" / "rankers" / "guard_model.json")
    parser.add_argument("--held-out", default="evasion", help="the family kept out of fitting")
    add_fitting_arguments(parser)
    parser.add_argument("--frequent", type=int, default=150)
    parser.add_argument("--pair-docs", type=int, default=3)
    parser.add_argument(
        "--fluency-collections", default="",
        help="comma-separated collections whose documents join training set 1's in the fluency "
        "reference (their texts only; '' for none)",
    )  # fmt: skip
    parser.add_argument(
        "--restated-grade",
        type=float,
        default=3,
        help="judged documents of at least this grade, after their question, are real answers "
        "too (0: none)",
    )
    parser.add_argument(
        "--cross-fit", type=int, default=0, metavar="K",
        help="also print each kind's flagged share when every question is judged by a guard "
        "fitted on the other folds of K (0: not)",
    )  # fmt: skip
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument(
        "--direction-l2", type=float, default=10.0,
        help="the L2 penalty of answer_like's linear model on the text's embedding",
    )  # fmt: skip
    parser.add_argument("--max-flagged", type=float, default=0.01)
    parser.add_argument(
        "--terse-answers", type=float, default=1.0, metavar="SHARE",
        help="this share of the fitting questions' first_sentence texts (the best judged "
        "document cut to its first sentence: a terse but real answer), drawn with --seed, join "
        "the real answers (0: none)",
    )  # fmt: skip
    parser.add_argument(
        "--features", type=Path, help="a pickle of the feature table, kept between runs"
    )
    return parser.parse_args(argv)


def add_fitting_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``fitting_rows`` reads: the scripts that build the fitting rows (this one and
    ``tune_guard.py``) take them alike."""
    parser.add_argument("--indexes", type=Path, default=ROOT / "indexes")
    parser.add_argument("--per-kind", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--boilerplate-questions",
        type=int,
        default=5,
        help="a sentence in the documents of at least this many fitting questions is "
        "boilerplate: the question followed by such sentences is not an answer",
    )
    parser.add_argument(
        "--near-best", type=int, default=0, metavar="N",
        help="the best judged documents of the N fitting questions closest to each question "
        "join other_best among the off_topic detector's negatives (0: none; tried with 2 and "
        "not adopted, docs/validity.md)",
    )  # fmt: skip
    parser.add_argument(
        "--written-tokens", type=int, default=96,
        help="new tokens of each written non-answer (generated once, kept under --indexes)",
    )  # fmt: skip
    parser.add_argument(
        "--written-llm", default="local",
        help="the LLM that writes them (nrp generate's --llm; default: the packaged SmolLM2)",
    )  # fmt: skip


def fitting_arguments_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options of ``add_fitting_arguments`` (one line), or None."""
    if args.written_tokens < 1:
        return f"--written-tokens must be at least 1, got {args.written_tokens}"
    if args.near_best < 0:
        return f"--near-best must be at least 0, got {args.near_best}"
    return None


def feature_table(rows: pd.DataFrame, features, cache: Path | None) -> pd.DataFrame:
    """``features.frame`` of (query, text) rows; with ``cache``, rows computed before are read
    from it and the table is written back (refits with other settings cost no encoding)."""
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
        kept[~kept.index.duplicated()].to_pickle(cache)
    return table


def text_embeddings(rows: pd.DataFrame, features, cache: Path | None) -> np.ndarray:
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


def fitting_rows(args: argparse.Namespace):
    """The fitting questions' judged documents and degenerate texts (kind, family columns)."""
    from nrp.validation.degenerate import degenerate_frame, query_materials

    collection = load_or_ingest(FITTING_COLLECTION, args.indexes)
    everything = collection.candidates()
    reference = everything[everything["qid"].str.startswith(LEFT_OUT_PREFIX)]["text"]
    keep = ~everything["qid"].str.startswith(LEFT_OUT_PREFIX) & ~everything["qid"].isin(LEFT_OUT)
    candidates = everything[keep].reset_index(drop=True)
    grades = {(r.qid, r.docno): float(r.label) for r in collection.qrels("relevance").itertuples()}
    materials = query_materials(candidates, grades, args.seed)
    texts = degenerate_frame(materials, None, args.per_kind, args.seed)
    boilerplate = boilerplate_texts(candidates, args.boilerplate_questions, args.per_kind,
                                    args.seed)  # fmt: skip
    near = near_best_texts(materials, candidates, args.near_best, question_embedder())
    written = written_non_answers(candidates, args)
    llm_answers = written_answers(candidates, args)
    rows = pd.concat(
        [candidates.assign(kind="judged", family="judged"), restated_answers(candidates, grades),
         texts, boilerplate, near, written, llm_answers],
        ignore_index=True,
    )  # fmt: skip
    return collection, reference.drop_duplicates().tolist(), rows


def collection_names(names: str) -> list[str]:
    return [name.strip() for name in names.split(",") if name.strip()]


def fluency_documents(args: argparse.Namespace) -> list[str]:
    """The distinct documents of the ``--fluency-collections`` (ingested when missing)."""
    texts: list[str] = []
    for name in collection_names(args.fluency_collections):
        collection = load_or_ingest(name, args.indexes)
        texts += collection.candidates()["text"].astype(str).drop_duplicates().tolist()
    return texts


def boilerplate_texts(
    candidates: pd.DataFrame, min_questions: int, per_query: int, seed: int
) -> pd.DataFrame:
    """Not answers mined from the fitting documents themselves, in no wording of nrp's: each
    question followed by one to three sentences that recur in the judged documents of at least
    ``min_questions`` questions (disclaimers, referrals, "talk to your healthcare professional")
    and not in its own: what the question gets from text that fits every question alike."""
    import random
    import re

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
    return pd.DataFrame(rows).assign(kind="boilerplate", family="mined")


def question_embedder():
    """The packaged encoder's embedding of texts (L2-normalised): what ``near_best_texts``
    finds a question's neighbours with."""
    from nrp.rankers.registry import make_ranker

    return make_ranker("dense:model=minilm").encode


def near_best_texts(materials, candidates: pd.DataFrame, per_query: int, embed) -> pd.DataFrame:
    """Answers to a neighbouring question: for each fitting question, the best judged document
    of each of the ``per_query`` other fitting questions closest to it (cosine of the questions'
    embeddings by ``embed``), skipping a document that is one of its own judged documents.
    ``other_best`` draws the other question at random, so its document is mostly about another
    subject; this one is about the question's subject and answers something else (a reply that
    misreads the question, a page on the same drug that says how to store it), the hardest
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


def written_non_answers(candidates: pd.DataFrame, args: argparse.Namespace) -> pd.DataFrame:
    """Non-answers in an LLM's own words: the packaged SmolLM2-135M-Instruct
    (``--written-llm``), told by each prompt of ``scripts/guard_prompts/`` not to answer (turn
    the person away, warm words and no facts, the question said again at length, a disclaimer
    that fits any question), writes one reply per fitting question (``written_replies``; kept
    in ``INDEXES/guard-written-non-answers.jsonl``). The negatives of ``answer_like``'s
    direction and of the ``hollow`` detector. No prompt of nrp's outside checks
    (``docs/examples/evasive-reply.txt``) is among them, and a small model does not always obey:
    some replies ramble about the topic, so not every one is a clean non-answer."""
    prompts = [f"{path}:chat" for path in written_prompts()]
    return written_replies(candidates, args, prompts, "guard-written-non-answers.jsonl", "written")


def written_answers(candidates: pd.DataFrame, args: argparse.Namespace) -> pd.DataFrame:
    """The same LLM's answers to the same questions under nrp's own answer prompts
    (``ANSWER_PROMPTS``; kept in ``INDEXES/guard-written-answers.jsonl``): positives of
    ``answer_like``'s direction beside the judged answers, so that it learns what tells an
    answer from a non-answer of the same writer, not the writer's style from the judged
    documents'. Not real answers to the detectors (their thresholds are the judged answers'):
    a small model's answers are often wrong, and some decline."""
    return written_replies(candidates, args, ANSWER_PROMPTS, "guard-written-answers.jsonl",
                           "llm_answer")  # fmt: skip


def written_replies(
    candidates: pd.DataFrame, args: argparse.Namespace, prompts: list[str], name: str, family: str
) -> pd.DataFrame:
    """One reply of ``--written-llm`` per fitting question and prompt (chat mode, greedy,
    ``--written-tokens`` new tokens), generated once and kept in ``INDEXES/NAME`` (resumable):
    a refit reads them. Kind ``FAMILY:PROMPT`` (the prompt's name or file stem)."""
    from nrp.generation.generate import GenerationOptions, generate_answers

    topics = candidates.drop_duplicates("qid")[["qid", "query"]]
    options = GenerationOptions(
        max_new_tokens=args.written_tokens, temperature=0.0, top_k=50, top_p=0.95,
        repetition_penalty=1.2, seed=args.seed,
    )  # fmt: skip
    answers = generate_answers(topics, args.written_llm, prompts, samples=1, options=options,
                               out=args.indexes / name)  # fmt: skip
    rows = answers[["qid", "prompt", "text"]].merge(topics, on="qid")
    kind = f"{family}:" + rows["prompt"].str.removesuffix(":chat")
    return rows.drop(columns="prompt").assign(docno="", kind=kind, family=family)


def written_prompts() -> list[Path]:
    return sorted(WRITTEN_PROMPTS.glob("*.txt"))


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


#: the detectors fitted: (name, the degenerate kinds that are its negatives, its features): one
#: for every way of saying nothing beyond the question, one more for the question followed by
#: text about another question, which a line through all kinds separates worst, and one for
#: word salad on fluency alone: in the mirror detector's line, fluency is one of six features
#: and a shuffled document with many new terms passes (fluency 0.34-0.80 among those that do,
#: against 0.67 for the least fluent fitting judged document); and one for a text that only asks
#: (``asks_only``: every sentence a question): the echoed questions that end with a question
#: mark are its negatives, and what it learns is the form, not any wording (a question back, a
#: list of questions; docs/validity.md)
DETECTORS = (
    ("mirror", "echo,restated,keywords,spliced,shuffled",
     "novel_share,log_novel,cos_tq,cos_rq,fluency,spec_rq"),
    ("generic", "boilerplate", "novel_share,log_novel,cos_tq,cos_rq,fluency,spec_rq,spec_rd"),
    ("elsewhere", "spliced", "novel_share,log_novel,cos_tq,cos_rq,fluency,spec_rq,margin_rq"),
    ("off_topic", "other_best", "novel_share,log_novel,cos_tq,cos_rq,spec_rq,margin_rq,spec_rd"),
    ("disorder", "shuffled", "fluency"),
    ("hollow", "written", "answer_like,first_person,idf_new,oov_new"),
    ("asking", "echo", "asks_only"),
)  # fmt: skip


#: the detector that ``--near-best`` adds its texts to the negatives of (tried and not adopted:
#: docs/validity.md, Limits)
NEAR_BEST_DETECTOR = "off_topic"


#: answer_like's direction: its negatives (the written non-answers: every prompt's; its
#: positives are the real answers and the same LLM's answers, ``written_answers``), and the
#: folds of the questions that give each fitting row a value of a direction fitted without it
DIRECTION_NEGATIVES = "written"
INNER_FOLDS = 5


#: negatives of the fitting script's own, beside nrp.validation.degenerate's kinds: the mined
#: boilerplate, the neighbouring questions' answers (``--near-best``; none by default), and
#: ``written`` (every prompt's written non-answers, ``written:<prompt>``)
MINED_KINDS = ("boilerplate", "near_best", "written")


def negative_kinds(kinds: str) -> list[str]:
    from nrp.validation.degenerate import kind_names

    names = kinds.split(",")
    written = [f"written:{p.stem}" for p in written_prompts()] if "written" in names else []
    return [*kind_names([k for k in names if k not in MINED_KINDS]),
            *[k for k in names if k in MINED_KINDS and k != "written"], *written]  # fmt: skip


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


def fit_direction(
    embeddings: np.ndarray, answers: np.ndarray, negative: np.ndarray, l2: float
) -> tuple[np.ndarray, float]:
    """``answer_like``'s linear model: an L2-penalised logistic regression (``l2``) of "real
    answer" on the embeddings of the ``answers`` rows against the ``negative`` rows, the two
    classes weighted to equal mass."""
    from nrp.training.guard_fit import balanced_weights, fit_logistic

    fit = answers | negative
    y = answers[fit].astype(float)
    beta = fit_logistic(embeddings[fit], y, balanced_weights(y), l2)
    return beta[:-1], float(beta[-1])


def answer_like_column(
    embeddings: np.ndarray,
    rows: pd.DataFrame,
    answers: np.ndarray,
    within: np.ndarray,
    args: argparse.Namespace,
) -> tuple[np.ndarray, tuple[np.ndarray, float]]:
    """``answer_like`` of every row and the direction fitted on the rows of ``within``. A row
    of ``within`` gets the value of a direction fitted without its question (``INNER_FOLDS``
    folds of the questions): the detector that reads it is fitted, and its threshold set, on
    values like those of texts the direction never saw, not on its own training rows' (which
    it separates too well). Every other row gets the direction of all ``within`` rows."""
    negative = rows["kind"].isin(negative_kinds(DIRECTION_NEGATIVES)).to_numpy()
    answers = answers | (rows["family"] == "llm_answer").to_numpy()
    direction = fit_direction(embeddings[within], answers[within], negative[within],
                              args.direction_l2)  # fmt: skip
    column = embeddings @ direction[0] + direction[1]
    fold = question_folds(rows["qid"], INNER_FOLDS, args.seed, among=within)
    for k in range(INNER_FOLDS):
        train, held = within & (fold != k), within & (fold == k)
        w, b = fit_direction(embeddings[train], answers[train], negative[train],
                             args.direction_l2)  # fmt: skip
        column[held] = embeddings[held] @ w + b
    return column, direction


def fit_detectors(
    table: pd.DataFrame,
    rows: pd.DataFrame,
    answers: np.ndarray,
    reference: tuple[tuple[str, ...], tuple[str, ...]],
    args: argparse.Namespace,
    embeddings: np.ndarray,
    within: np.ndarray | None = None,
    terms: tuple[int, dict[str, int]] = (0, {}),
):
    """The guard of ``DETECTORS`` fitted on the rows of ``within`` (default: all): the first
    detector with the others in its ``also``, and ``answer_like``'s direction. Returns the
    model and the table with the ``answer_like`` column it was fitted with."""
    from dataclasses import replace

    from nrp.training.guard_fit import fit_guard_model

    within = np.ones(len(rows), dtype=bool) if within is None else within
    column, direction = answer_like_column(embeddings, rows, answers, within, args)
    table = table.assign(answer_like=column)
    detectors = []
    for name, kinds, used in DETECTORS:
        if name == NEAR_BEST_DETECTOR and args.near_best:
            kinds = f"{kinds},near_best"
        used_features = used.split(",")
        fitting = answers | rows["kind"].isin(negative_kinds(kinds)).to_numpy()
        # a detector abstains where one of its features is unknown (spec_rd of a question with
        # no other judged document): such rows do not fit it either
        fitting &= table[used_features].notna().all(axis=1).to_numpy() & within
        detector = fit_guard_model(
            table[fitting], answers[fitting], reference, features=tuple(used_features),
            l2=args.l2, max_flagged=args.max_flagged, terms=terms,
        )  # fmt: skip
        detectors.append(replace(detector, fitted_on={"name": name, "negative_kinds": kinds}))
    # the references are the first detector's (features are computed once, with them)
    detectors[1:] = [
        replace(d, frequent_words=(), attested_pairs=(), reference_documents=0,
                document_frequency={})
        for d in detectors[1:]
    ]  # fmt: skip
    model = replace(detectors[0], also=tuple(detectors[1:]),
                    answer_direction=tuple(float(w) for w in direction[0]),
                    answer_offset=direction[1])  # fmt: skip
    return model, table


def print_cross_fit(
    table: pd.DataFrame,
    rows: pd.DataFrame,
    answers: np.ndarray,
    reference: tuple[tuple[str, ...], tuple[str, ...]],
    args: argparse.Namespace,
    embeddings: np.ndarray,
) -> pd.Series:
    """The share of each kind flagged when every question's texts are judged by a guard fitted
    without that question (``--cross-fit`` folds of the questions, drawn with ``--seed``): what
    the guard does with questions it never saw, where the in-sample shares flatter the kinds
    it was fitted on. A written non-answer is judged by a guard fitted without its question and
    without every reply of its prompt: what the guard does with a wording it never saw."""
    from nrp.validation.validity import SHORT_ANSWER_WORDS, answer_words

    fold = question_folds(rows["qid"], args.cross_fit, args.seed)
    kind = rows["kind"].to_numpy()
    share = np.empty(len(rows))
    for k in range(args.cross_fit):
        model, fitted = fit_detectors(table, rows, answers, reference, args, embeddings,
                                      within=fold != k)  # fmt: skip
        share[fold == k] = model.answer_share(fitted[fold == k])
        for prompt in sorted({c for c in kind if str(c).startswith("written:")}):
            judged = (fold == k) & (kind == prompt)
            model, fitted = fit_detectors(table, rows, answers, reference, args, embeddings,
                                          within=(fold != k) & (kind != prompt))  # fmt: skip
            share[judged] = model.answer_share(fitted[judged])
    flagged = pd.Series(share < 1).groupby(kind).mean()
    short = (kind == "judged") & (answer_words(rows["text"]) <= SHORT_ANSWER_WORDS).to_numpy()
    flagged[f"judged <= {SHORT_ANSWER_WORDS} words"] = float((share[short] < 1).mean())
    print(f"flagged share per kind, cross-fitted ({args.cross_fit} folds of the questions; "
          "written replies also without their prompt):")  # fmt: skip
    for name, value in flagged.items():
        print(f"  {name:19s} {value:.3f}")
    return flagged


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    from dataclasses import replace

    from nrp.rankers.guard_features import GuardFeatures, judged_answers
    from nrp.rankers.guard_model import FEATURES, GuardModel
    from nrp.rankers.registry import make_ranker
    from nrp.training.guard_fit import document_frequencies, fluency_reference
    from nrp.validation.degenerate import FAMILIES

    held = set(FAMILIES.get(args.held_out, ()))
    if not held or any(held & set(negative_kinds(kinds)) for _, kinds, _ in DETECTORS):
        print(f"fit_guard: --held-out must be a family ({', '.join(FAMILIES)}) that no "
              "detector is fitted on", file=sys.stderr)  # fmt: skip
        return 2
    problem = fitting_arguments_problem(args)
    if args.cross_fit != 0 and args.cross_fit < 2:  # 0: no cross-fitting
        problem = f"--cross-fit must be at least 2, got {args.cross_fit}"
    if problem:
        print(f"fit_guard: {problem}", file=sys.stderr)
        return 2
    for name in collection_names(args.fluency_collections):
        if not (ROOT / "manifests" / f"{name}.yaml").is_file():
            print(f"fit_guard: --fluency-collections: no manifests/{name}.yaml", file=sys.stderr)
            return 2
    if not 0 <= args.terse_answers <= 1:
        print(f"fit_guard: --terse-answers must be a share from 0 to 1, got {args.terse_answers}",
              file=sys.stderr)  # fmt: skip
        return 2
    if not args.direction_l2 > 0:
        print(f"fit_guard: --direction-l2 must be above 0, got {args.direction_l2}",
              file=sys.stderr)  # fmt: skip
        return 2
    collection, reference_texts, rows = fitting_rows(args)
    fluency_texts = reference_texts + fluency_documents(args)
    reference = fluency_reference(fluency_texts, args.frequent, args.pair_docs)
    terms = document_frequencies(reference_texts)
    provisional = GuardModel(FEATURES, (0.0,) * len(FEATURES), 0.0, 0.5, *reference, *terms)
    others = collection.topics["query"].astype(str).tolist()
    # the fitting questions' own judged answers, as a bound guard reads them
    documents = judged_answers(collection, rows[rows["kind"] == "judged"])
    features = GuardFeatures(provisional, make_ranker("dense:model=minilm"), others, documents)
    table = feature_table(rows, features, args.features)
    restated = (rows["kind"] == "restated_answer").to_numpy()
    answers = rows["kind"].eq("judged").to_numpy()
    if args.restated_grade > 0:
        answers = answers | (restated & (rows["grade"] >= args.restated_grade).to_numpy())
    answers = answers | terse_answers(rows, args.terse_answers, args.seed)
    embeddings = text_embeddings(rows, features, args.features)
    model, fitted = fit_detectors(table, rows, answers, reference, args, embeddings, terms=terms)
    flagged = pd.Series(model.answer_share(fitted) < 1).groupby(rows["kind"].to_numpy()).mean()
    fitted_on = {
        "collection": "mediqa-2019-train (MEDIQA 2019 training set 2 and validation set)",
        "left_out": f"training set 1 ({LEFT_OUT_PREFIX}*: LiveQA-Med's questions), "
        + ", ".join(LEFT_OUT),
        "queries": int(rows["qid"].nunique()),
        "fluency_reference": f"the {len(reference_texts)} distinct documents of training set 1 "
        "(not fitted on: a fitted answer's own pairs must not make it fluent)"
        + "".join(f", {n}'s documents" for n in collection_names(args.fluency_collections)),
        "real_answers": int(answers.sum()),
        "restated_answers_of_grade": args.restated_grade,
        "terse_answers": args.terse_answers,
        "held_out_family": args.held_out,
        "per_kind": args.per_kind,
        **({"near_best": args.near_best} if args.near_best else {}),
        "seed": args.seed,
        "l2": args.l2,
        "max_flagged_per_detector": args.max_flagged,
        # answer_like of each fitting text from a direction fitted without its question
        "flagged_share_at_threshold": {k: round(float(v), 4) for k, v in flagged.items()},
        "script": "scripts/fit_guard.py",
        "name": model.fitted_on["name"],
        "negative_kinds": model.fitted_on["negative_kinds"],
    }
    fitted_on["written_prompts"] = sorted(p.stem for p in written_prompts())
    fitted_on["written_llm"] = args.written_llm
    fitted_on["direction_l2"] = args.direction_l2
    fitted_on["term_reference"] = (
        f"the {terms[0]} distinct documents of training set 1 (idf_new, oov_new)"
    )
    model = replace(model, fitted_on=fitted_on)
    model.to_json(args.out)
    for detector in (model, *model.also):
        weights = ", ".join(
            f"{f} {w:+.4f}" for f, w in zip(detector.features, detector.weights, strict=True)
        )
        print(f"{detector.fitted_on['name']}: {weights}; intercept {detector.intercept:+.4f}; "
              f"threshold {detector.threshold:.4f}")  # fmt: skip
    print("flagged share per kind (family):")
    family_of = rows.drop_duplicates("kind").set_index("kind")["family"]
    for kind, share in flagged.items():
        print(f"  {kind:19s} {family_of[kind]:10s} {share:.3f}")
    if args.cross_fit:
        print_cross_fit(table, rows, answers, reference, args, embeddings)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
