"""The injected rankings as TREC run files (``nrp score --trec DIR``): what each dimension's
ranker made of D_q with an answer injected, for reading in trec_eval, PyTerrier or by eye.

Layout: ``DIR/DIMENSION/LLM__PROMPT__SAMPLE.run``, one file per dimension and answer run (the
answers of one LLM, prompt and sample), and the index ``DIR/runs.tsv`` (file, tag, dimension,
ranker, llm, prompt, sample, queries, rows). In a file, each query's ranking is D_q plus that
run's answer to the query, ``docno`` the answer's id, tag ``LLM/PROMPT/SAMPLE``; scores are the
ranker's, D_q's as scored beside the answer (lexical statistics with the answer counted, duoT5's
pairwise stage with it), the answer's as in ``results.csv``. Ranks follow the scores, ties by
docno in descending order as trec_eval breaks them; NRP's r applies its tie rule and the
ranker's tolerance instead, so an answer tied with documents may sit elsewhere among them here.

Why one file per answer run: a TREC run holds one ranking per query and NRP injects one answer
at a time, so a file with one answer per query is a valid run (no docno twice in a query) that
any reader takes as it is. Dimensions that share a ranker get the same rankings, each in its
own folder, so every dimension reads alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from nrp.errors import NrpError
from nrp.positioning.injection import InjectedRanking
from nrp.validation.runs import (
    RunOut,
    check_run_folder,
    check_trec_ids,
    safe_name,
    unique_file,
    write_runs,
)

RUN_KEY = ["llm", "prompt", "sample"]


def check_injected_runs(
    folder: str | Path, answers: pd.DataFrame, candidates: pd.DataFrame
) -> None:
    """Before any positioning: the folder can take the runs, every id fits a TREC line, and no
    answer run has two answers to one query."""
    check_run_folder(folder)
    check_trec_ids(answers["answer_id"], "answer id")
    check_trec_ids(candidates["qid"].unique(), "qid")
    check_trec_ids(candidates["docno"].unique(), "docno")
    twice = answers[answers.duplicated([*RUN_KEY, "qid"], keep=False)]
    if len(twice):
        first = twice.iloc[0]
        raise NrpError(
            f"answers {', '.join(twice['answer_id'].head(2))} are both llm {first['llm']!r}, "
            f"prompt {first['prompt']!r}, sample {first['sample']} for query {first['qid']!r}: "
            "a TREC run holds one answer per query"
        )


def _rows(answers: pd.DataFrame, rankings: Mapping[str, InjectedRanking]) -> pd.DataFrame:
    """qid, docno, score of D_q plus the answer, for each answer of one answer run (an empty
    answer was not ranked: none for it)."""
    parts = []
    for answer_id in answers["answer_id"]:
        ranking = rankings.get(answer_id)
        if ranking is None:
            continue
        parts.append(
            pd.DataFrame(
                {
                    "qid": ranking.qid,
                    "docno": [*ranking.docnos, answer_id],
                    "score": [*ranking.doc_scores.tolist(), ranking.score],
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def write_injected_runs(
    folder: str | Path,
    answers: pd.DataFrame,
    rankings: Mapping[str, tuple[str, Mapping[str, InjectedRanking]]],
) -> list[Path]:
    """Write the runs (module docstring). ``answers``: answer_id, llm, prompt, qid, sample of the
    ranked answers; ``rankings``: dimension -> (ranker spec, answer_id -> its ranking)."""
    runs = []
    groups = list(answers.groupby(RUN_KEY, sort=False))
    for dimension, (spec, by_answer) in rankings.items():
        used: set[str] = set()
        for (llm, prompt, sample), group in groups:
            stem = unique_file(f"{llm}__{prompt}__{sample}", used)
            about = {"dimension": dimension, "ranker": spec, "llm": llm, "prompt": prompt,
                     "sample": sample}  # fmt: skip
            runs.append(RunOut(f"{safe_name(dimension)}/{stem}", f"{llm}/{prompt}/{sample}",
                               _rows(group, by_answer), about))  # fmt: skip
    return write_runs(folder, runs)
