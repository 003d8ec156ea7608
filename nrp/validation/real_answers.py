"""Real answers in validation: what a ranker's gate costs answers nobody fitted or calibrated on.

A guard (``nrp.rankers.guard``) puts the texts it takes for no answer on its floor. Validity's
degenerate texts show that it floors what it should; they cannot show what it floors that it
should not. Two figures do, per ranker (``nrp.validation.validity.RealAnswers``,
``CrossFitted``):

- **real answers given** (``nrp validate NAME --real-answers FILE``, any answer file nrp reads,
  several allowed; ``references``: the collection's own reference answers): each answer ranked
  among its query's D_q exactly as NRP ranks it, and per ranker the share floored and flagged,
  the mean NRP and, for a guard, the same answers' mean NRP under the guarded ranker alone and
  how many lost their place (NRP more than ``LOST_PLACE`` below it). The validity rule reads
  the floored share: a ranker that floors more than
  ``ValidationSettings.validity_max_floored`` of them fails, as one whose non-answers score
  high does.
- **cross-fitted calibration** (always, for a ranker whose gate is calibrated on the
  collection's judged answers): the questions split in ``CROSS_FOLDS`` parts, each part's judged
  answers judged with the thresholds calibrated on the other part; reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from nrp.answers import read_answers
from nrp.collection.collection import Collection
from nrp.errors import ConfigError
from nrp.measures import run_from_frame
from nrp.rankers.base import REQUIRED_COLUMNS, Ranker
from nrp.rankers.cache import CachedRanker, ScoreCache
from nrp.validation.degenerate import docno_for
from nrp.validation.validity import CrossFitted, RealAnswers, real_answer_figures, score_texts

#: the kind (and docno prefix) of a real answer among the texts validation ranks
REAL_KIND = "real"
#: ``real_answers`` names the collection's own reference answers with this word (they are
#: neither judged nor read by calibration): ``nrp validate NAME --real-answers references``
REFERENCES = "references"
#: cross-fitted calibration: the parts the questions are split into
CROSS_FOLDS = 2

Run = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class RealAnswerTexts:
    """The real answers given to validation as texts to rank (qid, query, docno, text, kind),
    and the files they were read from."""

    frame: pd.DataFrame
    sources: tuple[str, ...]


def read_real_answers(collection: Collection, paths: Sequence[str]) -> RealAnswerTexts | None:
    """The answers of ``paths`` (checked settings' ``real_answers``: answer files or folders,
    ``nrp.answers.read_answers``: a bad file is an ``InputError`` naming it, its line and the
    problem; ``REFERENCES``: the collection's reference answers) as texts to rank among D_q;
    None without paths. Read before any ranker runs: a bad file costs nothing."""
    if not paths:
        return None
    answers = pd.concat([_answers(collection, path) for path in paths], ignore_index=True)
    queries = dict(
        zip(collection.topics["qid"].astype(str), collection.topics["query"].astype(str),
            strict=True)
    )  # fmt: skip
    texts = answers["text"].astype(str)
    frame = pd.DataFrame(
        {
            "qid": answers["qid"].astype(str),
            "query": answers["qid"].astype(str).map(queries),
            "docno": [docno_for(REAL_KIND, text) for text in texts],
            "text": texts,
            "kind": REAL_KIND,
        }
    )
    return RealAnswerTexts(frame, tuple(str(path) for path in paths))


def _answers(collection: Collection, path: str | Path) -> pd.DataFrame:
    """qid, text of the answers of ``path``: an answer file or folder, or ``REFERENCES``, the
    collection's own reference answers."""
    if str(path) == REFERENCES:
        references = collection.references
        if references.empty:
            raise ConfigError(
                f"collection {collection.name!r} has no reference answers to take as real "
                f"answers ('{REFERENCES}'); give an answer file (./{REFERENCES} for a file of "
                "that name)"
            )
        return references[["qid", "text"]]
    return read_answers(path, collection).answers[["qid", "text"]]


def real_figures(
    ranker: Ranker,
    candidates: pd.DataFrame,
    real: RealAnswerTexts,
    run: Run,
    score_cache: ScoreCache | None,
    fingerprint: str,
) -> RealAnswers:
    """``RealAnswers`` of ``ranker`` (bound; ``run``: its scores of D_q) for the real answers
    whose query has D_q, and, where it guards another ranker (``Ranker.guarded``), of that
    ranker alone (its scores of D_q from the score cache, computed where missing)."""
    scored = score_texts(ranker, candidates, real.frame, run, score_cache, fingerprint)
    kept = real.frame[real.frame["qid"].isin(run)].reset_index(drop=True)
    scores = np.array([text.score for text in scored], dtype=float)
    flagged = (
        np.asarray(ranker.flags(kept[list(REQUIRED_COLUMNS)]), dtype=bool)
        if len(kept)
        else np.zeros(0, dtype=bool)
    )
    base = ranker.guarded()
    alone = None
    if base is not None:
        base_run = _run(base, candidates, score_cache, fingerprint)
        base_scored = score_texts(base, candidates, real.frame, base_run, score_cache, fingerprint)
        alone = (base.spec(), base_scored, base.score_tolerance)
    return real_answer_figures(
        scored,
        ranker.score_tolerance,
        ranker.floors(scores),
        flagged,
        alone,
        real.sources,
        read=len(real.frame),
    )


def cross_fitted(ranker: Ranker, seed: int) -> CrossFitted | None:
    """``CrossFitted`` of a bound ranker whose gate is calibrated on the collection's judged
    answers (``Ranker.cross_fitted_floors``), None for any other."""
    found = ranker.cross_fitted_floors(CROSS_FOLDS, seed)
    if found is None:
        return None
    answers, floored = found
    return CrossFitted(answers=answers, floored=floored, folds=CROSS_FOLDS)


def _run(
    ranker: Ranker, candidates: pd.DataFrame, score_cache: ScoreCache | None, fingerprint: str
) -> dict[str, dict[str, float]]:
    """``ranker``'s scores of D_q (qid -> docno -> score), through the score cache when there
    is one."""
    scorer = CachedRanker(ranker, score_cache, fingerprint) if score_cache is not None else ranker
    return run_from_frame(scorer.ranked_in_order(candidates))
