"""``nrp score`` as a library verb (``score``, ``nrp.score``), and its files, made a block of
answers at a time: results.parquet and results.csv (``nrp.positioning.result_files``), flags.csv
(``nrp.analysis.flags``) and scoring.json (``nrp.positioning.record``), with the bytes the whole
answer set scored at once gives them; and citations.csv (``nrp.analysis.citations``) when the
answers cite documents.

An answer set read in blocks (``nrp.answers.read_answer_blocks``: a large JSON Lines file) holds
one block's texts at a time; one read at once is one block. For each block the flags are
measured beside the positioning (``flags_aside``: a forked worker on the second core), the
block's rows are added to the result files, and its flags' lines to flags.csv. The files are
written aside (``.NAME.partial`` in the output folder) and renamed into place once every block
is done: an error leaves no file of this run, and a folder this run made is removed again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from nrp.analysis.citations import CITATIONS_FILE, cite_answers, has_citations
from nrp.analysis.flags import FLAGS_FILE, FlagsFile, flag_answers, flags_aside
from nrp.answers import AnswerBlocks, AnswerSet, read_answers
from nrp.collection.collection import Collection
from nrp.executors.base import Executor
from nrp.positioning.choice import RankerChoiceLike
from nrp.positioning.record import SCORING_FILE, scoring_record
from nrp.positioning.result_files import ResultFiles
from nrp.positioning.scoring import ScoreSettings, ScoringRun, score_answers
from nrp.progress import Progress
from nrp.tables import json_export, partial_path, write_aside

RESULTS_PARQUET = "results.parquet"
RESULTS_CSV = "results.csv"


@dataclass(frozen=True)
class ScoredFiles:
    """What ``write_score_files`` wrote: the results' attrs (``score_answers``' frame's), the
    answers scored (rows in the results), and flags.csv's answers and flagged answers; what
    ``score`` wrote also says whether it wrote citations.csv."""

    attrs: dict[str, Any]
    scored: int
    flagged: int
    answers: int
    citations: bool = False


def score(
    collection: Collection | str,
    answers: pd.DataFrame | str | Path | AnswerSet | AnswerBlocks,
    rankers: RankerChoiceLike,
    settings: ScoreSettings | None = None,
    *,
    out: str | Path | None = None,
    progress: Progress | None = None,
    executor: Executor | None = None,
    trec: str | Path | None = None,
    **overrides: Any,
) -> pd.DataFrame | ScoredFiles:
    """``nrp score``: the NRP of ``answers`` on ``collection`` by the ``rankers`` chosen
    (``RankerChoice.of``: a validation JSON, one ranker, or dimension -> ranker), with
    ``settings`` (``ScoreSettings``, or its fields as keywords: ``ties="strict"``).

    ``answers``: a frame (answer_id, llm, prompt, qid, sample, text), an answer file or folder
    (read with ``read_answers``, checked against the collection's topics), what ``read_answers``
    or ``read_answer_blocks`` returned. Without ``out``: the results frame (``score_answers``).
    With ``out``: the files ``nrp score --out`` writes there (results.parquet and results.csv,
    flags.csv, scoring.json; citations.csv when answers cite documents), a block at a time
    (``write_score_files``; each block's flags measured on a second core unless an executor
    other than the local one positions the answers), and what was written (``ScoredFiles``).
    ``trec``: the injected rankings as TREC run files."""
    collection = collection if isinstance(collection, Collection) else Collection.load(collection)
    if isinstance(answers, str | Path):
        answers = read_answers(answers, collection)
    if out is None:
        if isinstance(answers, AnswerBlocks):
            answers = (
                answers.whole
                if answers.whole is not None
                else read_answers(answers.file, collection)
            )
        frame = answers if isinstance(answers, pd.DataFrame) else answers.answers
        return score_answers(
            collection, frame, rankers, settings, progress=progress, executor=executor,
            trec=trec, **overrides,
        )  # fmt: skip
    if not isinstance(answers, AnswerBlocks):
        whole = answers if isinstance(answers, AnswerSet) else AnswerSet(answers)
        answers = AnswerBlocks.at_once(whole)
    run = ScoringRun(
        collection, rankers, settings, progress=progress, executor=executor, trec=trec,
        **overrides,
    )  # fmt: skip
    out = Path(out)
    aside = executor is None or executor.kind == "local"
    scored = write_score_files(run, answers, len(answers), out, aside=aside, progress=progress)
    whole = answers.whole
    if whole is None or not has_citations(whole.answers):
        return scored
    citations = cite_answers(collection, whole.answers)
    write_aside(out / CITATIONS_FILE, lambda path: citations.to_csv(path, index=False))
    return replace(scored, citations=True)


def write_score_files(
    run: ScoringRun,
    blocks: Iterable[pd.DataFrame],
    total: int,
    out: Path,
    *,
    aside: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ScoredFiles:
    """results.parquet, results.csv, flags.csv and scoring.json of the ``total`` answers in
    ``blocks`` (frames as ``read_answers`` gives them, in order), scored by ``run``, in ``out``
    (module docstring). ``aside``: the flags of a block measured in a forked worker while the
    block is positioned (``flags_aside``), else here after it."""
    names = (RESULTS_PARQUET, RESULTS_CSV, FLAGS_FILE)
    partial = {name: partial_path(out / name) for name in names}
    for path in partial.values():  # what a run killed outright (SIGKILL) could not remove
        if path.exists():
            path.unlink()
            if progress:
                progress(f"removed {path}: left by a run of nrp score that was killed")
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        with (
            ResultFiles(partial[RESULTS_PARQUET], partial[RESULTS_CSV]) as results,
            partial[FLAGS_FILE].open("wb") as flags,
        ):
            scored = _score_blocks(run, blocks, total, results, flags, aside, progress)
        for name in names:
            os.replace(partial[name], out / name)
    except BaseException:
        for path in partial.values():
            path.unlink(missing_ok=True)
        if made:
            _remove_if_empty(out)
        raise
    json_export(scoring_record(scored.attrs), out / SCORING_FILE)
    return scored


def _score_blocks(
    run: ScoringRun,
    blocks: Iterable[pd.DataFrame],
    total: int,
    results: ResultFiles,
    flags_file: BinaryIO,
    aside: bool,
    progress: Callable[[str], None] | None,
) -> ScoredFiles:
    """Each block scored, flagged and added to the files; the results finished (their bytes
    made while the last block's flags are still measured aside)."""
    done = scored = flagged = answers = 0
    for block in blocks:
        first, done = done == 0, done + len(block)
        if progress and len(block) < total:
            progress(f"answers {done - len(block) + 1:,}-{done:,} of {total:,}")
        only = done >= total == len(block)  # one block: its bytes made while it is flagged
        block_scored, block_flags = _score_block(run, block, results, first, aside, only)
        flags_file.write(block_flags.data)
        scored, flagged = scored + block_scored, flagged + block_flags.flagged
        answers += block_flags.answers
        del block  # its texts freed before the next block is read, and before the files end
    if not results.finished:  # several blocks: made once the last block's memory is free
        results.finish(run.attrs())
    return ScoredFiles(results.attrs, scored, flagged, answers)


def _score_block(
    run: ScoringRun,
    block: pd.DataFrame,
    results: ResultFiles,
    first: bool,
    aside: bool,
    finish: bool,
) -> tuple[int, FlagsFile]:
    """One block scored (its rows added to ``results``, which ``finish`` ends) and flagged:
    the answers it scored and its flags' lines (flags.csv's header with the ``first``)."""
    flagging = flags_aside(run.collection, block, header=first) if aside else None
    try:
        frame = run.score(block)
        results.add(frame)
        if finish:
            results.finish(run.attrs())
        flags = flagging() if flagging else FlagsFile.of(flag_answers(run.collection, block), first)
    except BaseException:
        if flagging:
            flagging.cancel()
        raise
    return int(frame["answer_id"].nunique()), flags


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not empty: something else is in it
        folder.rmdir()


__all__ = ["RESULTS_CSV", "RESULTS_PARQUET", "ScoredFiles", "write_score_files"]
