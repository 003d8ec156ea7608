"""Reading answer sets: the generated answers that NRP ranks among the judged documents of their
query. One answer is a row (answer_id, llm, prompt, qid, sample, text).

Formats (by suffix; a folder is read file by file, see ``read_answers``):

- long layout, one answer per row: JSON Lines (``.jsonl``/``.ndjson``), CSV, TSV, Parquet, with
  columns ``llm, prompt, qid, text`` and optionally ``answer_id`` and ``sample``;
- TREC RAG reports (JSON Lines, detected by content: the file's first record has ``metadata``,
  ``answer``, ``responses`` or ``references`` and no ``llm``): the report format of TREC RAG
  2024/2025, RAGTIME, DRAGUN and the AutoJudge track, ids in a ``metadata`` object or (TREC
  RAG 2024's guidelines) at the top level (``report_layout``). One report is one answer: llm =
  the run_id, qid = the topic_id (or narrative_id), prompt = ``REPORT_PROMPT``, text = the
  sentences' texts joined by one space, answer_id = ``run_id/topic_id``, and the column
  ``citations``: the cited doc ids in citation order, each once (``report_citations``);
- wide layout of the source study (``answers/<llm>/<prompt>.csv``): columns ``qid``, ``query`` and
  ``answer1..answerN``; the LLM is the parent folder's name, the prompt the file's stem, sample is
  N - 1. A CSV, TSV or Parquet file is wide when it has answerN columns and no ``text`` column.

Identifiers (llm, prompt, qid, answer_id) are read in Unicode NFC, as the collection's ids are,
so an answer whose qid an editor wrote in NFD still meets its topic; ``sample`` is an integer
from 0 to ``MAX_SAMPLE``.

An empty answer (a null, an empty or whitespace-only text: the LLM returned nothing) is an
answer, read as it is: ``nrp score`` puts it last among D_q (NRP 0) and flags it ``empty``
(``is_empty``, ``AnswerSet.empty``), as the source study scored it, so an LLM that answers
nothing is not flattered by leaving its empty answers out.

Everything else is strict: a bad value is an ``InputError`` naming the file and line (Parquet:
row), unless ``skip_invalid`` is set, in which case the answer is left out and listed in
``AnswerSet.skipped`` with its location and reason, so nothing is ever dropped silently. Problems
with the file itself (unreadable, not UTF-8, empty, missing column) stay errors either way: no
row of such a file can be trusted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import pandas as pd

from nrp.collection.reading import (
    MAX_LINE_CHARS,
    folder_files,
    iter_lines,
    iter_table,
    json_problem,
    loads_strict,
)
from nrp.collection.records import nfc
from nrp.errors import InputError, quote
from nrp.jsontext import MAX_DEPTH
from nrp.tables import require_columns

COLUMNS = ["answer_id", "llm", "prompt", "qid", "sample", "text"]
#: the column of cited doc ids (a tuple per answer), in the frame when a report file was read
CITATIONS = "citations"
#: the keys that make a JSON Lines file a file of TREC RAG reports
REPORT_KEYS = ("metadata", "answer", "responses", "references")
#: the flag of an answer that says nothing (``is_empty``): flags.csv's column, the summary's
EMPTY = "empty"
#: the prompt of every answer read from a report (a run's prompts are not in its reports)
REPORT_PROMPT = "report"
# llm and prompt are required, not defaulted: NRP is aggregated per llm x prompt, and a default
# would silently pool different systems' answers under one name (and make their derived
# answer_ids collide). The wide layout takes both from its path instead.
LONG_REQUIRED = ("llm", "prompt", "qid", "text")
LONG_SUFFIXES = (".jsonl", ".ndjson")
TABLE_SUFFIXES = (".csv", ".tsv")
PARQUET_SUFFIXES = (".parquet",)
SUFFIXES = LONG_SUFFIXES + TABLE_SUFFIXES + PARQUET_SUFFIXES
#: the largest sample number an answer may have (also the wide layout's answerN - 1): a 32-bit
#: signed integer, so every store and frame holds it
MAX_SAMPLE = 2**31 - 1
WIDE_COLUMN = re.compile(r"answer([0-9]{1,10})")

Unit = Literal["line", "row"]


class _HasTopics(Protocol):
    @property
    def topics(self) -> pd.DataFrame: ...


@dataclass(frozen=True)
class SkippedRow:
    """An answer left out under ``skip_invalid``: where it is and why. ``line`` is the line the
    record starts on, or for Parquet (``unit == "row"``) the 1-based data row. In the wide layout
    one line holds several answers, so several entries can share a line; the reason names the
    column."""

    file: str
    line: int | None
    reason: str
    kind: str
    llm: str | None = None
    prompt: str | None = None
    unit: Unit = "line"

    @property
    def location(self) -> str:
        if self.line is None:
            return self.file
        if self.unit == "row":
            return f"{self.file} row {self.line}"
        return f"{self.file}:{self.line}"

    def __str__(self) -> str:
        """As an InputError for the same answer would read."""
        if self.unit == "row" and self.line is not None:
            return f"{self.file}: row {self.line}: {self.reason}"
        return f"{self.location}: {self.reason}"


@dataclass
class AnswerSet:
    """The answers read (a frame with ``COLUMNS``, in input order) and the answers skipped."""

    answers: pd.DataFrame
    skipped: list[SkippedRow] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    #: TREC RAG reports read per layout (``REPORT_LAYOUTS``: "2024", "2025"); {} without reports
    report_layouts: dict[str, int] = field(default_factory=dict)

    def layout_lines(self) -> list[str]:
        """One line per report layout read: how many reports, in which layout."""
        return [
            f"read {count:,} TREC RAG report(s) in the {REPORT_LAYOUTS[layout]} layout"
            for layout, count in self.report_layouts.items()
        ]

    def __len__(self) -> int:
        return len(self.answers)

    @property
    def empty(self) -> int:
        """How many answers read say nothing (``is_empty``): scored last, flagged ``empty``."""
        return int(empty_texts(self.answers["text"]).sum())

    def empty_line(self) -> str:
        """One line saying how many answers are empty and what becomes of them ('' for none)."""
        count = self.empty
        if not count:
            return ""
        return (
            f"{count:,} empty answer(s) (no text, or whitespace only): scored last (NRP 0) "
            f"and flagged {EMPTY}"
        )

    def skipped_frame(self) -> pd.DataFrame:
        """file, line, unit, kind, reason, llm, prompt of every skipped answer (for listing)."""
        names = ["file", "line", "unit", "kind", "reason", "llm", "prompt"]
        return pd.DataFrame(
            [[getattr(row, name) for name in names] for row in self.skipped], columns=names
        )

    def describe(self) -> pd.DataFrame:
        """One row per llm x prompt in input order: answers read, distinct qids, empty answers
        among those read (``is_empty``), answers skipped. Skipped answers whose llm or prompt
        could not be read are counted under ``"?"``."""
        read = (
            self.answers.assign(empty=empty_texts(self.answers["text"]))
            .groupby(["llm", "prompt"], sort=False)
            .agg(answers=("answer_id", "size"), qids=("qid", "nunique"), empty=("empty", "sum"))
        )
        skipped: dict[tuple[str, str], int] = {}
        for row in self.skipped:
            key = (row.llm or "?", row.prompt or "?")
            skipped[key] = skipped.get(key, 0) + 1
        keys = list(read.index) + [key for key in skipped if key not in read.index]
        return pd.DataFrame(
            [
                {
                    "llm": llm,
                    "prompt": prompt,
                    "answers": int(read["answers"].get((llm, prompt), 0)),
                    "qids": int(read["qids"].get((llm, prompt), 0)),
                    "empty": int(read["empty"].get((llm, prompt), 0)),
                    "skipped": skipped.get((llm, prompt), 0),
                }
                for llm, prompt in keys
            ],
            columns=["llm", "prompt", "answers", "qids", "empty", "skipped"],
        )


def is_empty(text: object) -> bool:
    """Whether an answer says nothing: no text (None, NaN), or one that is empty or whitespace
    only (all of it what ``str.strip`` removes). Such an answer is read, put last among D_q by
    every ranker (NRP 0; ``nrp.positioning``) and flagged ``EMPTY``."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return True
    return isinstance(text, str) and not text.strip()


def empty_texts(texts: pd.Series) -> np.ndarray:
    """``is_empty`` of each text, as a boolean array."""
    if not len(texts):
        return np.zeros(0, dtype=bool)
    return np.fromiter((is_empty(text) for text in texts), dtype=bool, count=len(texts))


def read_answers(
    path: str | Path,
    collection: _HasTopics | Iterable[str] | None = None,
    skip_invalid: bool = False,
) -> AnswerSet:
    """Read an answer file or folder.

    ``path`` is one file (format by suffix), a folder of answer files (an LLM folder of the wide
    layout), or a folder of such folders (the ``answers`` folder: every LLM). Files with other
    suffixes and hidden entries in a folder are not read; ``AnswerSet.files`` lists those read.

    ``collection`` (a ``Collection`` or the known qids): every answer's qid must be one of its
    topics, since an answer to an unknown query has no D_q to be ranked in.

    Missing ``answer_id`` is derived as ``llm/prompt/qid/sample``. Missing ``sample`` is the
    answer's 0-based position among the rows of its (llm, prompt, qid) in input order (across
    files, so shards of one run number on), counting every such row, skipped ones too, so ids do
    not change with ``skip_invalid``.
    """
    path = Path(path)
    reader = AnswerReader(_known_qids(collection), skip_invalid)
    for file in _answer_files(path):
        reader.read_file(file)
    if not reader.count:
        problem = "no answers"
        if reader.skipped:
            first = reader.skipped[0]
            problem = f"no valid answers: all {len(reader.skipped)} skipped (first: {first})"
        raise InputError(path, None, problem)
    files = [str(f) for f in reader.files]
    return AnswerSet(reader.frame(), reader.skipped, files, reader.report_layouts)


#: answers ``read_answer_blocks`` hands over at a time from a file larger than one block
BLOCK_ANSWERS = 1 << 17


@dataclass
class AnswerBlocks:
    """An answer set a block of answers at a time (``read_answer_blocks``): ``len`` answers,
    and iterating gives frames of up to ``rows`` answers each, in input order, with the columns
    and values ``read_answers`` gives (each block's index from 0). ``whole``: the set itself
    when it was read at once (one block), else None: the texts are read again from ``file``
    block by block, and only the other columns of every answer are held."""

    count: int
    whole: AnswerSet | None = None
    file: Path | None = None
    ids: pd.DataFrame | None = None  # every answer's COLUMNS but the text (streamed)
    rows: int = BLOCK_ANSWERS

    def __len__(self) -> int:
        return self.count

    @classmethod
    def at_once(cls, answer_set: AnswerSet, rows: int = BLOCK_ANSWERS) -> AnswerBlocks:
        """An answer set read whole, as one block."""
        return cls(len(answer_set), whole=answer_set, rows=rows)

    def __iter__(self) -> Iterator[pd.DataFrame]:
        if self.whole is not None:
            yield self.whole.answers
            return
        assert self.file is not None and self.ids is not None
        import pyarrow as pa

        start = 0
        try:
            for texts in _texts(self.file, self.rows):
                if start + len(texts) > self.count:
                    break
                block = self.ids.iloc[start : start + len(texts)].reset_index(drop=True)
                yield block.assign(text=texts.astype(str))
                start += len(texts)
        except (pa.ArrowException, OSError, KeyError) as error:
            raise self._changed(f"{type(error).__name__}: {error}") from None
        if start != self.count:
            raise self._changed(f"{self.count:,} answers when checked, now not")

    def _changed(self, why: str) -> InputError:
        return InputError(self.file, None, f"changed while it was being scored ({why})")


def read_answer_blocks(
    path: str | Path,
    collection: _HasTopics | Iterable[str] | None = None,
    skip_invalid: bool = False,
    rows: int = BLOCK_ANSWERS,
) -> AnswerBlocks:
    """``read_answers``, a block of ``rows`` answers at a time where that holds less: a single
    plainly valid long-layout JSON Lines or Parquet file (``_plain_columns``) of more than
    ``rows`` answers is checked whole first, then its texts are read again block by block as
    they are wanted; any other input is read at once (``AnswerBlocks.whole``), as
    ``read_answers`` reads it."""
    path = Path(path)
    files = _answer_files(path)
    columns = (
        _streamed_columns(files[0], _known_qids(collection), rows) if len(files) == 1 else None
    )
    if columns is not None:
        ids, samples = _derived_ids(columns, {})
        if len(set(ids)) == len(ids):
            frame = _id_frame(ids, columns, samples)
            frame = frame.astype({c: str for c in COLUMNS[:-1] if c != "sample"})
            return AnswerBlocks(len(frame), file=files[0], ids=frame, rows=rows)
    return AnswerBlocks.at_once(read_answers(path, collection, skip_invalid), rows)


def _streamed_columns(file: Path, known_qids: set[str] | None, rows: int) -> dict[str, Any] | None:
    """The columns but the text of a JSON Lines or Parquet file of more than ``rows`` answers
    when every one is plainly valid (``_plain_columns``); None otherwise."""
    suffix = file.suffix.lower()
    if suffix in LONG_SUFFIXES:
        facts = _line_facts(file)
        if facts is not None and facts.lines > rows:
            return _jsonl_columns(file, known_qids, keep_text=False, facts=facts)
    elif suffix in PARQUET_SUFFIXES and _parquet_rows(file) > rows:
        return _parquet_columns(file, known_qids, keep_text=False)
    return None


def _parquet_rows(file: Path) -> int:
    """The rows a Parquet file's footer counts (0 when it cannot be read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return int(pq.ParquetFile(file).metadata.num_rows)
    except (pa.ArrowException, OSError, ValueError):
        return 0


def _known_qids(collection: _HasTopics | Iterable[str] | None) -> set[str] | None:
    if collection is None:
        return None
    if hasattr(collection, "topics"):
        return set(collection.topics["qid"].astype(str))
    return {str(qid) for qid in collection}


def _answer_files(path: Path) -> list[Path]:
    """The files to read, in a stable order (sorted by name, LLM folders first to last)."""
    if not path.exists():
        raise InputError(path, None, "file or folder not found")
    if path.is_file():
        if path.suffix.lower() not in SUFFIXES:
            raise InputError(
                path,
                None,
                f"cannot read answers from a {quote(path.suffix)} file "
                f"(expected one of {', '.join(SUFFIXES)})",
            )
        return [path]
    if not path.is_dir():  # a device, a socket or a FIFO (e.g. /dev/null)
        raise InputError(path, None, "not a regular file or folder")
    direct = _files_in(path, path)
    folders = [d for d in sorted(path.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    nested = [(d, _files_in(d, path)) for d in folders]
    nested = [(d, files) for d, files in nested if files]
    if direct and nested:
        raise InputError(
            path,
            None,
            "holds both answer files and folders of answer files; pass one LLM folder "
            f"or the folder of LLM folders (e.g. {nested[0][0].name}/)",
        )
    files = direct or [f for _, fs in nested for f in fs]
    if not files:
        raise InputError(path, None, f"no answer files ({', '.join(SUFFIXES)}) in folder")
    return files


def _files_in(folder: Path, named: Path) -> list[Path]:
    """The answer files of ``folder``, each inside the folder ``named`` (``folder_files``)."""
    return folder_files(folder, _is_answer_file, recursive=False, within=named)


def _is_answer_file(path: Path) -> bool:
    return not path.name.startswith(".") and path.suffix.lower() in SUFFIXES


class InvalidAnswer(InputError):
    """One answer record that cannot be read (a bad id, sample or text, an unknown qid, an id
    twice), raised where ``skip_invalid`` is not set: the caller may say how to leave such
    records out (``nrp score --skip-invalid``). A file that cannot be read at all is a plain
    ``InputError``: skipping its rows would not help."""


class _Invalid(Exception):
    """One answer is invalid: skippable under ``skip_invalid``."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


@dataclass(frozen=True)
class AnswerLocation:
    """Where an answer record is: its file and line (Parquet: ``unit == "row"``, the 1-based data
    row). Errors and skipped rows name it; a caller with records from elsewhere (the service's
    inline answers) gives its own."""

    file: Path
    line: int | None
    unit: Unit = "line"

    def __str__(self) -> str:
        if self.line is None:
            return str(self.file)
        return f"{self.file} row {self.line}" if self.unit == "row" else f"{self.file}:{self.line}"

    def error(self, problem: str, kind: type[InputError] = InputError) -> InputError:
        if self.unit == "row" and self.line is not None:
            return kind(self.file, None, f"row {self.line}: {problem}")
        return kind(self.file, self.line, problem)


class AnswerReader:
    """Accumulates valid answers across files; checks ids, qids and text; records skips.

    ``read_answers`` feeds it files; ``read_record`` takes one long-layout record (a mapping with
    llm, prompt, qid, text, optionally answer_id and sample) from any source, checked the same
    way. ``frame()`` is the answers read, ``skipped`` those left out under ``skip_invalid``."""

    def __init__(self, known_qids: set[str] | None, skip_invalid: bool):
        self.known_qids = known_qids
        self.skip_invalid = skip_invalid
        self.rows: dict[str, list[Any]] = {column: [] for column in COLUMNS}
        self.skipped: list[SkippedRow] = []
        self.files: list[Path] = []
        self.first_seen: dict[str, AnswerLocation] = {}
        self.group_position: dict[tuple[str, str, str], int] = {}
        self.citations: list[tuple[str, ...]] = []
        self.has_reports = False  # the frame has the column CITATIONS when a report was read
        self.report_layouts: dict[str, int] = {}  # reports read per layout (``REPORT_LAYOUTS``)
        # answers read column by column (``_read_jsonl_columns``), in order with ``rows``: the
        # frames read so far, each after the rows that came before it
        self.parts: list[pd.DataFrame] = []
        self.count = 0  # answers added, in ``rows`` and ``parts``

    # --- files ---------------------------------------------------------------------------------

    def read_file(self, file: Path) -> None:
        suffix = file.suffix.lower()
        before = self.count + len(self.skipped)
        if suffix in LONG_SUFFIXES:
            columns = _jsonl_columns(file, self.known_qids)
            if columns is None or not self._add_columns(file, columns):
                self._read_jsonl(file)
        elif suffix in TABLE_SUFFIXES:
            records = iter_table(file)
            first = next(records, None)
            if first is not None:
                self._read_records(file, list(first[1]), _chain(first, records), "line")
        else:
            columns = _parquet_columns(file, self.known_qids)
            if columns is None or not self._add_columns(file, columns, "row"):
                names, records = _parquet_records(file)
                self._read_records(file, names, records, "row")
        if self.count + len(self.skipped) == before:
            raise InputError(file, None, "file has no answers (a header, no rows)")
        self.files.append(file)

    def _read_jsonl(self, file: Path) -> None:
        # not iter_jsonl: a malformed line must be skippable, and its generator ends at the first
        reports: bool | None = None  # decided by the file's first JSON object
        for number, line in iter_lines(file):
            if not line.strip():
                continue
            where = AnswerLocation(file, number)
            try:
                value = loads_strict(line)  # a key given twice is refused, not the last kept
            except ValueError as err:  # JSONDecodeError, a number of over 4,300 digits, a key twice
                self._invalid(where, "malformed_json", json_problem(err))
                continue
            if not isinstance(value, dict):
                self._invalid(
                    where, "malformed_json", f"expected a JSON object, found {type(value).__name__}"
                )
                continue
            if reports is None:
                reports = "llm" not in value and any(key in value for key in REPORT_KEYS)
            if reports:
                self.read_report(where, value)
                continue
            missing = [key for key in LONG_REQUIRED if key not in value]
            if missing:
                # a key absent is a missing column (the writer's schema is wrong), not a bad value
                raise where.error(
                    f"missing key(s) {', '.join(map(repr, missing))}; every answer needs "
                    f"{', '.join(LONG_REQUIRED)} (answer_id and sample are optional), or a "
                    "TREC RAG report has metadata and answer or responses"
                )
            self.read_record(where, value)

    def _read_records(
        self,
        file: Path,
        columns: list[str],
        records: Iterator[tuple[int, dict[str, Any]]],
        unit: Unit,
    ) -> None:
        wide = {
            name: int(match.group(1))
            for name in columns
            if (match := WIDE_COLUMN.fullmatch(name)) is not None
        }
        if wide and "text" not in columns:
            require_columns(columns, ["qid"], file, hint="the wide layout is qid, answer1..N")
            if 0 in wide.values():
                raise InputError(file, None, "answer columns are numbered from answer1")
            if max(wide.values()) > MAX_SAMPLE + 1:
                raise InputError(
                    file, None, f"answer columns are numbered up to answer{MAX_SAMPLE + 1}"
                )
            llm, prompt = nfc(file.parent.resolve().name), nfc(file.stem)
            for line, record in records:
                self._wide_row(AnswerLocation(file, line, unit), record, wide, llm, prompt)
            return
        require_columns(
            columns,
            LONG_REQUIRED,
            file,
            hint=f"an answer file has {', '.join(LONG_REQUIRED)} and optionally answer_id, "
            "sample, or the wide layout qid, answer1..answerN",
        )
        for line, record in records:
            self.read_record(AnswerLocation(file, line, unit), record)

    # --- rows ----------------------------------------------------------------------------------

    def read_record(self, where: AnswerLocation, record: dict[str, Any]) -> None:
        """One long-layout record at ``where``: added, skipped (``skip_invalid``) or an error."""
        llm = prompt = None
        try:
            llm = _name(record.get("llm"), "llm")
            prompt = _name(record.get("prompt"), "prompt")
            qid = _name(record.get("qid"), "qid")
            # claimed before any other check, so a skipped row keeps its slot (stable ids)
            group = (llm, prompt, qid)
            position = self.group_position.get(group, 0)
            self.group_position[group] = position + 1
            sample = _sample(record.get("sample"))
            if sample is None:
                sample = position
            answer_id = _optional_name(record.get("answer_id"), "answer_id")
            if answer_id is None:
                answer_id = f"{llm}/{prompt}/{qid}/{sample}"
            text = _text(record.get("text"), "text")
            self._add(where, answer_id, llm, prompt, qid, sample, text)
        except _Invalid as invalid:
            self._invalid(where, invalid.kind, invalid.reason, llm, prompt)

    def read_report(self, where: AnswerLocation, report: dict[str, Any]) -> None:
        """One TREC RAG report at ``where`` (see the module docstring): added, skipped or an
        error. A report without ``metadata`` or sentences is an error even under
        ``skip_invalid`` (the file is not what it seems); a bad value in it is skippable."""
        layout = report_layout(where, report)
        sentences = _report_sentences(where, report)
        llm = None
        try:
            if layout == "2025":
                llm, qid = _report_ids(report["metadata"])
            else:
                llm, qid = _report_ids(report, prefix="")
            position = self.group_position.get((llm, REPORT_PROMPT, qid), 0)
            self.group_position[(llm, REPORT_PROMPT, qid)] = position + 1
            texts = [_sentence_text(number, s) for number, s in enumerate(sentences, start=1)]
            text = _text(" ".join(texts), "answer")
            cited = report_citations(sentences, report.get("references"))
            self.has_reports = True
            self._add(where, f"{llm}/{qid}", llm, REPORT_PROMPT, qid, position, text, cited)
            self.report_layouts[layout] = self.report_layouts.get(layout, 0) + 1
        except _Invalid as invalid:
            self._invalid(where, invalid.kind, invalid.reason, llm, REPORT_PROMPT)

    def _wide_row(
        self,
        where: AnswerLocation,
        record: dict[str, Any],
        wide: dict[str, int],
        llm: str,
        prompt: str,
    ) -> None:
        try:
            qid = _name(record.get("qid"), "qid")
        except _Invalid as invalid:
            for column in wide:
                reason = f"{column}: {invalid.reason}"
                self._invalid(where, invalid.kind, reason, llm, prompt)
            return
        for column, number in wide.items():
            sample = number - 1
            answer_id = f"{llm}/{prompt}/{qid}/{sample}"
            try:
                text = _text(record.get(column), column)
                self._add(where, answer_id, llm, prompt, qid, sample, text)
            except _Invalid as invalid:
                reason = f"{invalid.reason} (answer {answer_id})"
                self._invalid(where, invalid.kind, reason, llm, prompt)

    def _add(
        self,
        where: AnswerLocation,
        answer_id: str,
        llm: str,
        prompt: str,
        qid: str,
        sample: int,
        text: str,
        cited: tuple[str, ...] = (),
    ) -> None:
        if self.known_qids is not None and qid not in self.known_qids:
            raise _Invalid(
                "unknown_qid", f"unknown qid {quote(qid)}: not a topic of the collection"
            )
        first = self.first_seen.get(answer_id)
        if first is not None:
            raise _Invalid(
                "duplicate_answer_id", f"duplicate answer_id {quote(answer_id)} (first at {first})"
            )
        self.first_seen[answer_id] = where
        for column, value in zip(COLUMNS, (answer_id, llm, prompt, qid, sample, text), strict=True):
            self.rows[column].append(value)
        self.citations.append(cited)
        self.count += 1

    def _add_columns(self, file: Path, frame: dict[str, Any], unit: Unit = "line") -> bool:
        """A JSON Lines or Parquet file's answers read column by column (``_plain_columns``:
        every record valid, ids in NFC and stripped, as lists; sample an array; text a Series):
        samples derived and answer ids checked as ``read_record`` does them. False, with nothing
        added, when an id repeats (within the file or with an answer read before): the file is
        then read record by record, which says where."""
        claimed = dict(self.group_position)
        ids, samples = _derived_ids(frame, claimed)
        if len(set(ids)) != len(ids) or not self.first_seen.keys().isdisjoint(ids):
            return False
        self.group_position = claimed
        self.first_seen.update(
            (answer_id, AnswerLocation(file, line, unit))
            for line, answer_id in enumerate(ids, start=1)
        )
        if self.rows["answer_id"]:
            self.parts.append(self._rows_frame())
        self.parts.append(_id_frame(ids, frame, samples).assign(text=frame["text"]))
        self.citations.extend([()] * len(ids))
        self.count += len(ids)
        return True

    def _invalid(
        self,
        where: AnswerLocation,
        kind: str,
        reason: str,
        llm: str | None = None,
        prompt: str | None = None,
    ) -> None:
        if not self.skip_invalid:
            raise where.error(reason, InvalidAnswer)
        self.skipped.append(
            SkippedRow(str(where.file), where.line, reason, kind, llm, prompt, where.unit)
        )

    def _rows_frame(self) -> pd.DataFrame:
        """The answers in ``rows`` as a frame, and ``rows`` emptied."""
        frame = pd.DataFrame(self.rows, columns=COLUMNS)
        self.rows = {column: [] for column in COLUMNS}
        return frame.astype({column: str for column in COLUMNS if column != "sample"}).astype(
            {"sample": "int64"}
        )

    def frame(self) -> pd.DataFrame:
        if self.parts and self.rows["answer_id"]:
            self.parts.append(self._rows_frame())
        if len(self.parts) == 1:
            frame = self.parts[0].astype({c: str for c in COLUMNS if c != "sample"})
        elif self.parts:
            frame = pd.concat(self.parts, ignore_index=True).astype(
                {c: str for c in COLUMNS if c != "sample"}
            )
        else:
            frame = self._rows_frame()
        if self.has_reports:
            frame[CITATIONS] = pd.Series(self.citations, index=frame.index, dtype=object)
        return frame


# --- values --------------------------------------------------------------------------------------


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _optional_name(value: Any, what: str) -> str | None:
    """An identifier (llm, prompt, qid, answer_id) as a stripped string, or None when absent.
    Integers are accepted (JSON and Parquet qids are often numbers); other types are not, since
    e.g. a float qid 1.0 would never match topic "1"."""
    if _is_missing(value):
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _Invalid(
            "invalid_value", f"{what} must be a string or integer, found {type(value).__name__}"
        )
    text = nfc(_unicode(value, what).strip()) if isinstance(value, str) else str(value)
    return text or None


def _name(value: Any, what: str) -> str:
    name = _optional_name(value, what)
    if name is None:
        raise _Invalid("missing_value", f"{what} is missing or empty")
    return name


def _sample(value: Any) -> int | None:
    """An integer from 0 to ``MAX_SAMPLE``, or None when absent (then derived from the order).
    NaN (JSON's ``NaN``, a float Parquet column) is a bad value, not an absent one: only a null
    or a blank is absent."""
    if isinstance(value, float) and math.isnan(value):
        raise _Invalid("invalid_sample", "sample is NaN; give a non-negative integer or null")
    if _is_missing(value) or (isinstance(value, str) and not value.strip()):
        return None
    number: int | None = None
    digits = re.fullmatch(r"\s*\+?([0-9]+)\s*", value) if isinstance(value, str) else None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():  # Parquet ints with nulls
        number = int(value)
    elif digits is not None:  # no int() of a 5,000-digit string: too long is out of range
        number = int(digits[1]) if len(digits[1].lstrip("0")) <= 10 else MAX_SAMPLE + 1
    if number is None or number < 0:
        raise _Invalid(
            "invalid_sample", f"sample must be a non-negative integer, found {quote(value)}"
        )
    if number > MAX_SAMPLE:
        raise _Invalid(
            "invalid_sample", f"sample {quote(value)} is out of range (0 to {MAX_SAMPLE:,})"
        )
    return number


def _text(value: Any, what: str) -> str:
    """The answer verbatim (not stripped: it is what gets ranked). Strings such as "N/A" or
    "None" are text an LLM wrote, never a missing value; only a real null or blank is empty: an
    answer that says nothing (a null is read as ""), kept, and scored last (``is_empty``)."""
    if _is_missing(value):
        return ""
    if not isinstance(value, str):
        raise _Invalid("invalid_value", f"{what} must be a string, found {type(value).__name__}")
    return _unicode(value, what)


def _unicode(value: str, what: str) -> str:
    """``value`` when it is valid Unicode: a lone surrogate (JSON's ``"\\ud800"``) cannot be
    written to any file or table."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise _Invalid(
            "invalid_value",
            f"{what} holds a lone surrogate {value[err.start]!r} at character {err.start}: "
            "not valid Unicode",
        ) from None
    return value


# --- TREC RAG reports ----------------------------------------------------------------------------


#: the layouts of a TREC RAG report, told apart by their shape (``report_layout``)
REPORT_LAYOUTS = {
    "2024": "TREC RAG 2024 (run_id and topic_id at the top level; citations index references)",
    "2025": "TREC RAG 2025 / AutoJudge (run_id and topic_id in metadata; citations by doc id)",
}


def report_layout(where: AnswerLocation, report: dict[str, Any]) -> str:
    """``2025`` for a report with a ``metadata`` object (TREC RAG 2025, RAGTIME, DRAGUN, the
    AutoJudge track), ``2024`` for one with ``run_id`` at the top level and no metadata (TREC
    RAG 2024, as its guidelines write it: ``run_id``, ``topic_id``, ``topic``, ``references``,
    ``response_length``, ``answer``); an error at ``where`` for anything else."""
    if "metadata" in report:
        if not isinstance(report["metadata"], dict):
            found = type(report["metadata"]).__name__
            raise where.error(f"a TREC RAG report's metadata must be an object (found: {found})")
        return "2025"
    if "run_id" in report:
        return "2024"
    raise where.error(
        "a TREC RAG report needs run_id and topic_id: in a metadata object (2025 layout) or at "
        "the top level (2024 layout); found neither"
    )


def _report_sentences(where: AnswerLocation, report: dict[str, Any]) -> list[Any]:
    """The report's sentences (``responses``, else ``answer``; both: the same list); an error at
    ``where`` when they are missing or not what the format says."""
    given = [report[key] for key in ("responses", "answer") if report.get(key) is not None]
    if not given:
        raise where.error("a TREC RAG report needs its sentences as answer or responses")
    if len(given) == 2 and given[0] != given[1]:
        raise where.error("answer and responses are both given and differ; give one")
    if not isinstance(given[0], list):
        raise where.error(f"answer/responses must be a list, found {type(given[0]).__name__}")
    return given[0]


def _report_ids(fields: dict[str, Any], prefix: str = "metadata.") -> tuple[str, str]:
    """run_id and the topic id (topic_id, else narrative_id; both: the same) of a report, from
    its metadata (2025 layout) or its top level (2024: ``prefix`` empty)."""
    llm = _name(fields.get("run_id"), f"{prefix}run_id")
    topic = _optional_name(fields.get("topic_id"), f"{prefix}topic_id")
    narrative = _optional_name(fields.get("narrative_id"), f"{prefix}narrative_id")
    if topic is not None and narrative is not None and topic != narrative:
        raise _Invalid(
            "invalid_value",
            f"{prefix}topic_id {quote(topic)} and narrative_id {quote(narrative)} differ",
        )
    qid = topic if topic is not None else narrative
    if qid is None:
        where = prefix.rstrip(".") or "the report"
        raise _Invalid("missing_value", f"{where} has no topic_id or narrative_id")
    return llm, qid


def _sentence_text(number: int, sentence: Any) -> str:
    if not isinstance(sentence, dict):
        raise _Invalid(
            "invalid_value", f"sentence {number} is not an object ({type(sentence).__name__})"
        )
    text = sentence.get("text")
    if not isinstance(text, str):
        raise _Invalid("invalid_value", f"sentence {number} has no text string")
    return text


def report_citations(sentences: list[Any], references: Any) -> tuple[str, ...]:
    """The doc ids a report's sentences cite, in citation order, each once. A citation is an
    index into ``references`` (TREC RAG 2024), a doc id (2025), or a ``{doc_id: confidence}``
    mapping (RAGTIME: highest confidence first). ``_Invalid`` names the sentence of a bad one."""
    cited: dict[str, None] = {}
    for number, sentence in enumerate(sentences, start=1):
        given = sentence.get("citations") if isinstance(sentence, dict) else None
        if given is None:
            continue
        if isinstance(given, dict):
            given = _by_confidence(number, given)
        if not isinstance(given, list):
            raise _Invalid(
                "invalid_citation",
                f"sentence {number}: citations must be a list or an object, "
                f"found {type(given).__name__}",
            )
        for citation in given:
            cited.setdefault(_cited_doc(number, citation, references), None)
    return tuple(cited)


def _by_confidence(number: int, citations: dict[str, Any]) -> list[str]:
    for doc, confidence in citations.items():
        if isinstance(confidence, bool) or not isinstance(confidence, int | float):
            raise _Invalid(
                "invalid_citation",
                f"sentence {number}: the confidence of {quote(doc)} is not a number",
            )
    return sorted(citations, key=lambda doc: -citations[doc])  # stable: ties keep their order


def _cited_doc(number: int, citation: Any, references: Any) -> str:
    """The doc id one citation names: itself (a string) or ``references[citation]``."""
    if isinstance(citation, str):
        return _name(citation, f"sentence {number}: citation")
    if isinstance(citation, bool) or not isinstance(citation, int):
        raise _Invalid(
            "invalid_citation",
            f"sentence {number}: a citation is an index or a doc id, found {quote(citation)}",
        )
    count = len(references) if isinstance(references, list) else 0
    if not 0 <= citation < count:
        raise _Invalid(
            "invalid_citation",
            f"sentence {number}: citation index {citation} is out of range "
            f"(references has {count} entr{'y' if count == 1 else 'ies'})",
        )
    return _name(references[citation], f"references[{citation}]")


_LONG_KEYS = frozenset(COLUMNS)


def _jsonl_columns(
    file: Path,
    known_qids: set[str] | None,
    keep_text: bool = True,
    facts: _LineFacts | None = None,
) -> dict[str, Any] | None:
    """A long-layout JSON Lines file read by pyarrow, column by column, when every record is
    plainly valid (``_plain_columns``) and one JSON object per line (no blank line). None
    otherwise: the file is read record by record, which finds and words every problem (the
    records this accepts, it accepts with the same values). The file is read a block of bytes
    at a time (pyarrow's streaming reader: a key or a type that changes after the first block
    is not plainly valid)."""
    facts = facts if facts is not None else _line_facts(file)
    # a blank line: pyarrow skips it (line numbers would drift), so it has fewer rows than
    # lines (checked below); the records read it
    if facts is None or not facts.content or facts.longest > MAX_LINE_CHARS:
        return None  # (the longest line in bytes, at least as many as characters)
    if facts.brackets > MAX_DEPTH:
        return None
    read = _plain_columns(_json_batches(file), known_qids, keep_text)
    return read[0] if read is not None and read[1] == facts.lines else None


def _parquet_columns(
    file: Path, known_qids: set[str] | None, keep_text: bool = True
) -> dict[str, Any] | None:
    """A long-layout Parquet file read column by column, a row group at a time, when every row
    is plainly valid (``_plain_columns``; the strings of Parquet's string types, sample of an
    integer type). None otherwise: the file is read row by row, which words every problem."""
    read = _plain_columns(_parquet_batches(file), known_qids, keep_text)
    return read[0] if read is not None else None


def _plain_columns(
    batches: Iterator[Any], known_qids: set[str] | None, keep_text: bool
) -> tuple[dict[str, Any], int] | None:
    """The columns of a long-layout answer file's record batches, and its rows, when every row
    is plainly valid: the columns of ``COLUMNS`` only, each once, llm, prompt, qid, text (and
    answer_id) strings in every row, sample (if given) an integer from 0 to ``MAX_SAMPLE`` in
    every row, every qid known, no text missing; ids in NFC and stripped as ``_optional_name``
    gives them (an id blank once stripped: not plainly valid), as lists; sample an array; text
    a Series. None otherwise, or when a batch cannot be read. ``keep_text=False`` checks the
    texts and keeps none of them (``_texts`` reads them again, a block of answers at a time)."""
    import pyarrow as pa

    kept: dict[str, list[Any]] = {}
    names: set[str] = set()
    rows = 0
    try:
        for batch in batches:
            if len(set(batch.schema.names)) != batch.num_columns:
                return None  # a column named twice
            names.update(batch.schema.names)
            batch.validate(full=True)  # pyarrow's readers do not check strings are UTF-8
            rows += batch.num_rows
            for name, column in zip(batch.schema.names, batch.columns, strict=True):
                if name == "text" and not _plain_texts(column):
                    return None
                if name != "text" or keep_text:
                    kept.setdefault(name, []).append(column)
    except (pa.ArrowException, OSError, ValueError):
        return None
    if not rows or not names <= _LONG_KEYS or not set(LONG_REQUIRED) <= names:
        return None
    out: dict[str, Any] = {}
    for name, chunks in kept.items():
        column = pa.chunked_array(chunks)
        if column.null_count:
            return None
        if name == "sample":
            if not _plain_samples(column):
                return None
            out[name] = column.to_numpy()
            continue
        if name == "text":
            out[name] = column.to_pandas()  # checked batch by batch (``_plain_texts``)
            continue
        values = _names(column) if _is_string_type(column.type) else None
        if values is None:
            return None
        out[name] = values
    if known_qids is not None and not set(out["qid"]) <= known_qids:
        return None
    return out, rows


def _is_string_type(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _json_batches(file: Path) -> Iterator[Any]:
    """The record batches of a JSON Lines file, a block of bytes at a time (the file opened,
    and its first block read, when the first batch is asked for)."""
    import pyarrow.json as pj

    yield from pj.open_json(file)


def _parquet_batches(file: Path, columns: list[str] | None = None) -> Iterator[Any]:
    """The record batches of a Parquet file (of ``columns``), read through a buffer of 1 MiB
    rather than a whole row group at a time (a file written in one row group would be decoded
    whole); the file opened when the first batch is asked for."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(file, buffer_size=1 << 20, pre_buffer=False)
    yield from parquet.iter_batches(columns=columns)


def _plain_texts(column: Any) -> bool:
    """Every text of a batch a string, none missing (a blank one is an empty answer, read as
    it is)."""
    return _is_string_type(column.type) and not column.null_count


def _plain_samples(column: Any) -> bool:
    """Every sample an integer from 0 to ``MAX_SAMPLE``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pa.types.is_integer(column.type) and bool(
        pc.min(column).as_py() >= 0 and pc.max(column).as_py() <= MAX_SAMPLE
    )


def _texts(file: Path, rows: int) -> Iterator[pd.Series]:
    """The texts of a JSON Lines or Parquet file ``_plain_columns`` accepted, ``rows`` at a
    time, as the Series it would give (read again, a block of bytes or a row group at a
    time)."""
    import pyarrow as pa

    chunks: list[Any] = []
    held = 0
    parquet = file.suffix.lower() in PARQUET_SUFFIXES
    for batch in _parquet_batches(file, ["text"]) if parquet else _json_batches(file):
        chunks.append(batch.column("text"))
        held += batch.num_rows
        while held >= rows:
            column = pa.chunked_array(chunks)
            yield column.slice(0, rows).to_pandas()
            rest = column.slice(rows)
            chunks, held = list(rest.chunks), len(rest)
    if held:
        yield pa.chunked_array(chunks).to_pandas()


def _derived_ids(
    frame: dict[str, Any], claimed: dict[tuple[str, str, str], int]
) -> tuple[list[str], list[int]]:
    """Answer ids and samples of ``_plain_columns``'s answers, derived where not given as
    ``read_record`` derives them; ``claimed`` (each group's next position) is advanced."""
    groups = list(zip(frame["llm"], frame["prompt"], frame["qid"], strict=True))
    positions = []
    for group in groups:
        position = claimed.get(group, 0)
        claimed[group] = position + 1
        positions.append(position)
    count = len(groups)
    given_samples = frame.get("sample", [None] * count)
    samples = [p if n is None else n for p, n in zip(positions, given_samples, strict=True)]
    given = frame.get("answer_id", [None] * count)
    ids = [
        a if a is not None else f"{llm}/{prompt}/{qid}/{n}"
        for a, (llm, prompt, qid), n in zip(given, groups, samples, strict=True)
    ]
    return ids, samples


def _id_frame(ids: list[str], frame: dict[str, Any], samples: list[int]) -> pd.DataFrame:
    """The answers' ``COLUMNS`` but the text (added after it), sample as int64."""
    return pd.DataFrame(
        {
            "answer_id": ids,
            "llm": frame["llm"],
            "prompt": frame["prompt"],
            "qid": frame["qid"],
            "sample": samples,
        },
        columns=COLUMNS[:-1],
    ).astype({"sample": "int64"})


@dataclass(frozen=True)
class _LineFacts:
    lines: int  # lines, the last one counted whether or not it ends with a line end
    longest: int  # the most bytes between two line ends (0 when none can be over the limit)
    content: bool  # a byte that is not ASCII whitespace somewhere
    #: the most opening brackets ([ and {, in strings too) on one line: a line with no more than
    #: ``MAX_DEPTH`` cannot nest deeper (pyarrow's reader overflows the stack on deep nesting,
    #: killing the process; such a line is left to the records, which refuse it in one line)
    brackets: int = 0


_BLOCK = 1 << 24


def _line_facts(file: Path) -> _LineFacts | None:
    """What ``_jsonl_columns`` checks of a file's lines, read a block at a time (the file is
    never held whole); None when it cannot be read."""
    lines = longest = run = 0
    brackets = open_run = 0  # the most opening brackets on a line; those of the line running on
    content = False
    last = b""
    try:
        size = file.stat().st_size
        with file.open("rb") as handle:
            while block := handle.read(_BLOCK):
                content = content or re.search(rb"\S", block) is not None
                brackets, open_run = _opening_brackets(block, brackets, open_run)
                if size <= MAX_LINE_CHARS:  # no line can be longer
                    lines += block.count(b"\n")
                else:  # where the line ends are: the bytes between two, and the lines
                    ends = np.flatnonzero(np.frombuffer(block, np.uint8) == ord("\n"))
                    lines += len(ends)
                    if len(ends):
                        between = int(np.diff(ends).max()) - 1 if len(ends) > 1 else 0
                        longest = max(longest, run + int(ends[0]), between)
                        run = len(block) - int(ends[-1]) - 1
                    else:
                        run += len(block)
                last = block[-1:]
    except OSError:
        return None
    return _LineFacts(lines + (last != b"\n"), max(longest, run), content, brackets)


def _opening_brackets(block: bytes, most: int, running: int) -> tuple[int, int]:
    """(the most opening brackets on one line so far, those of the line that runs on past
    ``block``), from the same before it (``most``, ``running``: of the line running into it)."""
    if block.count(b"[") + block.count(b"{") + running <= most:
        return most, running + block.count(b"[") + block.count(b"{")
    data = np.frombuffer(block, np.uint8)
    ends = np.flatnonzero(data == ord("\n"))
    opening = np.flatnonzero((data == ord("[")) | (data == ord("{")))
    per_line = np.bincount(np.searchsorted(ends, opening), minlength=len(ends) + 1)
    per_line[0] += running
    return max(most, int(per_line.max())), int(per_line[-1])


def _names(column: Any) -> list[str] | None:
    """Ids of a string column as ``_optional_name`` gives them (NFC, stripped); None when one is
    blank once stripped (``read_record`` words that)."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column).combine_chunks()
    names = [_optional_name_or_blank(value) for value in encoded.dictionary.to_pylist()]
    if any(name is None for name in names):
        return None
    return [names[i] for i in encoded.indices.to_numpy()]


def _optional_name_or_blank(value: str) -> str | None:
    try:
        return _optional_name(value, "id")
    except _Invalid:
        return None


def _chain(
    first: tuple[int, dict[str, Any]], rest: Iterator[tuple[int, dict[str, Any]]]
) -> Iterator[tuple[int, dict[str, Any]]]:
    yield first
    yield from rest


def _parquet_records(file: Path) -> tuple[list[str], Iterator[tuple[int, dict[str, Any]]]]:
    """Column names and (1-based row, record) of a Parquet file; binary columns are decoded as
    UTF-8 with the same strictness as text files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if file.stat().st_size == 0:
        raise InputError(file, None, "file is empty")
    try:
        table = pq.read_table(file)
    except (pa.ArrowException, OSError) as err:
        raise InputError(file, None, f"not a readable Parquet file: {err}") from None
    columns = [str(name) for name in table.column_names]
    if len(set(columns)) != len(columns):
        raise InputError(file, None, f"names a column twice: {columns}")
    values: dict[str, list[Any]] = {}
    for name, column in zip(columns, table.columns, strict=True):
        items = column.to_pylist()
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            items = [_decode(file, row, name, item) for row, item in enumerate(items, start=1)]
        values[name] = items

    def records() -> Iterator[tuple[int, dict[str, Any]]]:
        for index in range(table.num_rows):
            yield index + 1, {name: values[name][index] for name in columns}

    return columns, records()


def _decode(file: Path, row: int, column: str, item: bytes | None) -> str | None:
    if item is None:
        return None
    try:
        return item.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(
            file,
            None,
            f"row {row}: column {quote(column)} is not valid UTF-8: "
            f"byte 0x{item[err.start]:02x} cannot be decoded",
        ) from None


__all__ = [
    "CITATIONS",
    "COLUMNS",
    "REPORT_PROMPT",
    "AnswerBlocks",
    "AnswerSet",
    "SkippedRow",
    "read_answer_blocks",
    "read_answers",
    "report_citations",
]
