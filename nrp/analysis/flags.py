"""Flags of degenerate answers on a collection, and their shares per LLM x prompt.

``flag_answers(collection, answers)`` applies the rules of ``nrp.validation.flags`` (an answer
made of the question's words, a near copy of a judged document, little content beyond the
question) with the collection's questions and judged documents (D_q). ``nrp score`` writes the
result as ``flags.csv`` beside its results (``FLAGS_FILE``); ``read_flags`` reads it back,
checked, and ``flag_shares`` gives, per LLM x prompt, the share of answers with any flag and
with each flag: the table ``nrp summary``, ``nrp report`` and ``nrp check --max-flagged`` show.
The share is over answers, not queries: a flag is a property of one text.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from nrp.collection.collection import Collection
from nrp.errors import InputError
from nrp.forking import CAN_FORK, Forked, fork_call
from nrp.tables import read_table_file, require_columns, text_column
from nrp.validation import flags as rules

FLAGS_FILE = "flags.csv"
FLAG_NAMES = rules.FLAG_NAMES
#: flags a flags file written before they existed lacks: read as False (``read_flags``)
LATER_FLAGS = (rules.EMPTY,)
#: what ``read_flags`` needs in a flags file (llm and prompt default to "")
REQUIRED_COLUMNS = ("answer_id", "flagged", *(f for f in FLAG_NAMES if f not in LATER_FLAGS))
_BOOLEANS = {"true": True, "false": False, "1": True, "0": False}


def flag_answers(collection: Collection | str, answers: pd.DataFrame) -> pd.DataFrame:
    """The flags of every answer (answer_id, qid, text; llm, prompt, sample kept) against its
    question and its query's judged documents: one row per answer, see
    ``nrp.validation.flags.flag_answers``."""
    return rules.flag_answers(answers, *_questions_and_judged(collection, answers))


def _questions_and_judged(
    collection: Collection | str, answers: pd.DataFrame
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """qid -> question text, and qid -> its judged documents' texts (the answers' qids)."""
    if not isinstance(collection, Collection):
        collection = Collection.load(str(collection))
    topics = collection.topics
    queries = dict(zip(topics["qid"].astype(str), topics["query"].astype(str), strict=True))
    wanted = set(answers["qid"].astype(str)) if "qid" in answers.columns else set()
    candidates = collection.candidates()
    candidates = candidates[candidates["qid"].astype(str).isin(wanted)]
    judged = {
        str(qid): rows["text"].astype(str).tolist()
        for qid, rows in candidates.groupby("qid", sort=False)
    }
    return queries, judged


def flags_path(results: str | Path) -> Path:
    """Where the flags of a results folder or results file are: ``flags.csv`` in the folder or
    beside the file (a path named ``flags.csv`` is itself)."""
    path = Path(results)
    if path.name == FLAGS_FILE and not path.is_dir():
        return path
    return (path if path.is_dir() else path.parent) / FLAGS_FILE


def flags_beside(results: str | Path) -> pd.DataFrame | None:
    """The flags of a results folder or file, read and checked; None when there is no file."""
    path = flags_path(results)
    return read_flags(path) if path.is_file() else None


def read_flags(path: str | Path) -> pd.DataFrame:
    """A flags file as ``nrp score`` writes it: ids as text, the flag columns as booleans; an
    ``InputError`` naming the file (and line) when it is missing or malformed."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "file not found (nrp score writes it beside the results)")
    table = read_table_file(path)
    frame = table.frame.copy()
    require_columns(frame, REQUIRED_COLUMNS, path, line=1, hint="a flags table")
    for column in ("answer_id", "qid", "llm", "prompt"):
        if column not in frame.columns:
            frame[column] = ""
        frame[column] = text_column(frame[column])
    for column in LATER_FLAGS:
        if column not in frame.columns:
            frame[column] = "False"
    for column in ("flagged", *FLAG_NAMES):
        text = frame[column].astype(str).str.strip().str.lower()
        bad = ~text.isin(list(_BOOLEANS))
        if bad.any():
            value = frame[column][bad].iloc[0]
            raise InputError(
                path, table.first_line(bad), f"{column} {value!r} is not True or False"
            )
        frame[column] = text.map(_BOOLEANS).astype(bool)
    repeated = frame["answer_id"].duplicated()
    if repeated.any():
        value = frame["answer_id"][repeated].iloc[0]
        raise InputError(path, table.first_line(repeated), f"answer_id {value!r} repeats")
    return frame


def flag_shares(flags: pd.DataFrame) -> pd.DataFrame:
    """Per LLM x prompt (in order of appearance): n_answers, n_flagged, share_flagged (any
    flag) and ``share_<flag>`` for each flag."""
    frame = flags.copy()
    for column in ("llm", "prompt"):
        if column not in frame.columns:
            frame[column] = ""
    columns = ["flagged", *FLAG_NAMES]
    grouped = frame.groupby(["llm", "prompt"], sort=False)[columns]
    shares = grouped.mean().astype(float).add_prefix("share_")
    counts = grouped.agg(n_answers=("flagged", "size"), n_flagged=("flagged", "sum"))
    table = counts.join(shares).reset_index()
    table["n_answers"] = table["n_answers"].astype(int)
    table["n_flagged"] = table["n_flagged"].astype(int)
    return table


#: the least answers for which ``flags_aside`` computes the flags in a second process: below,
#: starting one costs more than it saves
ASIDE_MIN_ANSWERS = 5_000


def flags_aside(collection: Collection, answers: pd.DataFrame, header: bool = True) -> FlagsAside:
    """``flag_answers`` started beside the caller's own work, and a function that waits for it:
    in a forked process where ``os.fork`` exists and there are at least ``ASIDE_MIN_ANSWERS``
    answers (``nrp score`` positions the answers meanwhile: the two use two cores), else here
    when the function is called. The worker measures slices of the answers
    (``rules.FlagMeasures``) one after the other, and the function, called when the caller's
    own work is done, measures the slices the worker has not begun (a shared counter hands
    each slice to one of them), then waits for the worker's and makes ``flags.csv``'s bytes,
    written where the caller decides (nothing is written by the worker). An error in either is
    raised by the function; ``cancel()`` ends a worker whose result is not wanted (the caller
    failed). ``header=False``: the lines without flags.csv's header (a block after the first)."""
    if not CAN_FORK or len(answers) < ASIDE_MIN_ANSWERS:
        return FlagsAside(lambda: FlagsFile.of(flag_answers(collection, answers), header))
    try:
        measures = rules.FlagMeasures(answers, *_questions_and_judged(collection, answers))
    except Exception as error:  # raised where the caller asks for the flags, as before
        return FlagsAside(partial(_raise, error))
    claims = multiprocessing.get_context("fork").Value("q", 0)  # the next slice to measure
    worker = fork_call(partial(_claimed_lines, measures, claims, header), "computing the flags")
    return _Waiter(worker, measures, claims, header)


def _raise(error: Exception) -> FlagsFile:
    raise error


def _claimed_lines(
    measures: rules.FlagMeasures, claims: Any, header: bool = True
) -> dict[int, tuple[bytes, int]]:
    """flags.csv's lines of every slice this process claims (slice number -> its lines, the
    header with the first slice's when ``header``, and how many of its answers are flagged),
    until none is left: ``claims`` (a shared integer) is the number of the next slice, taken
    under its lock."""
    done = {}
    while True:
        with claims.get_lock():
            number = claims.value
            claims.value = number + 1
        if number >= len(measures.starts):
            return done
        start = measures.starts[number]
        frame = measures.frame(measures.rows(start), start)
        lines = FlagsFile.lines(frame, header=header and start == 0)
        done[number] = (lines, int(frame["flagged"].sum()))


class FlagsAside:
    """What ``flags_aside`` returns: call it for the ``FlagsFile`` (computed here); ``cancel``
    does nothing."""

    def __init__(self, compute: Callable[[], FlagsFile]):
        self.compute = compute

    def __call__(self) -> FlagsFile:
        return self.compute()

    def cancel(self) -> None:
        pass


@dataclass(frozen=True)
class FlagsFile:
    """The flags of an answer set as ``flags.csv``'s bytes, and how many answers are flagged."""

    data: bytes
    flagged: int
    answers: int

    @classmethod
    def of(cls, flags: pd.DataFrame, header: bool = True) -> FlagsFile:
        return cls(cls.lines(flags, header), int(flags["flagged"].sum()), len(flags))

    @staticmethod
    def lines(flags: pd.DataFrame, header: bool = True) -> bytes:
        """flags.csv's lines of these flags, the header first when asked (the lines of a
        slice are those of the whole frame: each value is written alone)."""
        return flags.to_csv(index=False, header=header).encode("utf-8")


class _Waiter(FlagsAside):
    """Measures the slices a forked ``flags_aside`` worker has not claimed, then waits for its
    own; ``cancel`` ends it."""

    def __init__(
        self, worker: Forked, measures: rules.FlagMeasures, claims: Any, header: bool = True
    ):
        self.worker, self.measures, self.claims = worker, measures, claims
        self.header = header

    def __call__(self) -> FlagsFile:
        try:
            lines = _claimed_lines(self.measures, self.claims, self.header)
        except BaseException:
            self.cancel()
            raise
        lines.update(self.worker.result())
        ordered = [lines[number] for number in range(len(self.measures.starts))]
        return FlagsFile(
            b"".join(text for text, _ in ordered),
            sum(flagged for _, flagged in ordered),
            len(self.measures.answers),
        )

    def cancel(self) -> None:
        self.worker.cancel()
