"""External runs: TREC run files and CSV/TSV score tables, read strictly.

Formats:

- **TREC run** (any suffix but .csv/.tsv/.tab): ``qid Q0 docno rank score tag`` per line,
  whitespace-separated, exactly six fields; rank an integer, score a finite number. Blank lines
  are skipped. The second field is not checked (trec_eval ignores it).
- **CSV / TSV** (``.csv``; ``.tsv`` or ``.tab``): a header row naming at least ``qid``,
  ``docno`` and ``score`` (PyTerrier's column names; other columns are ignored).

Ids (qid, docno) are read in Unicode NFC, as the collection's are, so a run written with NFD
ids (macOS file names, some editors) meets the collection's topics and judgments.

Every problem is an ``InputError`` naming the file and line on one line: wrong field count,
non-numeric or non-finite score, non-integer rank, a (qid, docno) given twice, an empty file,
bytes that are not UTF-8.

Ordering: like trec_eval, nrp ranks by score (descending) and breaks ties by docno in descending
string order; the rank column is not used. A file whose ranks disagree with its scores gets a
warning, because the author probably meant the ranks.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd

from nrp.collection.formats._io import iter_lines, iter_table, read_text
from nrp.collection.records import nfc
from nrp.errors import InputError

RunFormat = Literal["trec", "csv", "tsv"]
TABLE_COLUMNS = ("qid", "docno", "score")


@dataclass(frozen=True)
class RunFile:
    """One external run: its rows (qid, docno, score, line) in file order, and its origin."""

    path: Path
    format: RunFormat
    frame: pd.DataFrame
    tags: tuple[str, ...]  # run tags in order of appearance (TREC format only)
    fingerprint: str  # SHA-256 of the file's bytes (20 hex digits)
    warnings: list[str] = field(default_factory=list)

    @property
    def stem(self) -> str:
        return self.path.stem


def run_format_of(path: Path, format: RunFormat | None = None) -> RunFormat:
    if format is not None:
        if format not in ("trec", "csv", "tsv"):
            raise InputError(path, None, f"run format must be trec, csv or tsv, not {format!r}")
        return format
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".tsv", ".tab"):
        return "tsv"
    return "trec"


def _score(value: str, path: Path, line: int) -> float:
    try:
        score = float(value)
    except ValueError:
        raise InputError(path, line, f"score {value!r} is not a number") from None
    if not math.isfinite(score):
        raise InputError(path, line, f"score {value!r} is not a finite number")
    return score


def _read_trec(path: Path) -> tuple[list[tuple[str, str, float, int, int]], list[str]]:
    rows: list[tuple[str, str, float, int, int]] = []
    tags: list[str] = []
    for line, text in iter_lines(path):
        fields = text.split()
        if not fields:
            continue
        if len(fields) != 6:
            raise InputError(
                path,
                line,
                f"expected 6 whitespace-separated fields (qid Q0 docno rank score tag), "
                f"found {len(fields)}",
            )
        qid, _, docno, rank_text, score_text, tag = fields
        try:
            rank = int(rank_text)
        except ValueError:
            raise InputError(path, line, f"rank {rank_text!r} is not an integer") from None
        rows.append((qid, docno, _score(score_text, path, line), rank, line))
        if tag not in tags:
            tags.append(tag)
    return rows, tags


def _read_table(path: Path, delimiter: str) -> list[tuple[str, str, float, int, int]]:
    header_line = next(
        (n for n, text in enumerate(read_text(path).split("\n"), start=1) if text.strip()), 1
    )
    rows: list[tuple[str, str, float, int, int]] = []
    for line, row in iter_table(path, delimiter):
        missing = [c for c in TABLE_COLUMNS if c not in row]
        if missing:
            raise InputError(
                path,
                header_line,
                f"header lacks column(s) {', '.join(missing)} (needs {', '.join(TABLE_COLUMNS)})",
            )
        qid, docno = row["qid"].strip(), row["docno"].strip()
        if not qid or not docno:
            raise InputError(path, line, "qid or docno is empty")
        rows.append((qid, docno, _score(row["score"].strip(), path, line), 0, line))
    return rows


def read_run(path: str | Path, format: RunFormat | None = None) -> RunFile:
    """Read and check one run file (format from the suffix unless given)."""
    path = Path(path)
    kind = run_format_of(path, format)
    if kind == "trec":
        rows, tags = _read_trec(path)
    else:
        rows, tags = _read_table(path, "," if kind == "csv" else "\t"), []
    # ids in NFC, as the collection's (and the answers') ids are read
    rows = [(nfc(qid), nfc(docno), score, rank, line) for qid, docno, score, rank, line in rows]
    if not rows:
        raise InputError(path, None, "run has no rows")
    first_line: dict[tuple[str, str], int] = {}
    for qid, docno, _, _, line in rows:
        earlier = first_line.setdefault((qid, docno), line)
        if earlier != line:
            raise InputError(path, line, f"({qid}, {docno}) ranked twice (first on line {earlier})")
    frame = pd.DataFrame(rows, columns=["qid", "docno", "score", "rank", "line"])
    warnings = []
    if kind == "trec":
        disagree = _queries_with_ranks_against_scores(frame)
        if disagree:
            warnings.append(
                f"{path}: ranks disagree with scores in {len(disagree)} queries (first: "
                f"{disagree[0]}); evaluation uses the scores, as trec_eval does"
            )
    frame = frame.drop(columns="rank" if kind != "trec" else [])
    fingerprint = hashlib.sha256(path.read_bytes()).hexdigest()[:20]
    return RunFile(path, kind, frame, tuple(tags), fingerprint, warnings)


def _queries_with_ranks_against_scores(frame: pd.DataFrame) -> list[str]:
    """Queries where a better (lower) rank has a strictly lower score than a worse rank."""
    bad = []
    for qid, group in frame.groupby("qid", sort=False):
        scores = group.sort_values("rank", kind="stable")["score"].to_numpy()
        if (scores[1:] > scores[:-1]).any():
            bad.append(str(qid))
    return bad
