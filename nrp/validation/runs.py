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

Writing (``write_runs``: ``nrp validate --save-runs``, ``nrp score --trec``): TREC run files in
one folder, ``qid Q0 docno rank score tag``, each query's rows in that same order with ranks
1, 2, ... and scores written exactly (shortest round-trip decimal), so trec_eval and
``pyterrier.io.read_results`` read back the ranking nrp evaluated; plus ``runs.tsv``, an index
of the files (file, tag, what each run is). The folder is written aside and renamed into place:
a reader never sees half of it. It must be new, empty, or a run folder nrp wrote before (every
entry listed in its ``runs.tsv``), which is then replaced; a file in the way or another
non-empty folder is an error before any work is done.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd

from nrp.collection.reading import iter_lines, iter_table, read_text
from nrp.collection.records import nfc
from nrp.errors import InputError, NrpError
from nrp.tables import require_columns

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
        require_columns(row, TABLE_COLUMNS, path, line=header_line, hint="a run table")
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


# -- writing -----------------------------------------------------------------------------------
RUN_SUFFIX = ".run"
RUNS_INDEX = "runs.tsv"
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+,-]")


@dataclass(frozen=True)
class RunOut:
    """One run to write: its file under the folder (``relevance/x.run``), its tag, its rows
    (qid, docno, score; any order) and what the index says of it (column -> value)."""

    file: str
    tag: str
    frame: pd.DataFrame
    about: Mapping[str, object] = field(default_factory=dict)


def safe_tag(text: str) -> str:
    """``text`` as a run tag: whitespace (which would split the line) becomes ``_``."""
    return re.sub(r"\s", "_", str(text)) or "_"


def safe_name(text: str) -> str:
    """``text`` as a file name: characters other than letters, digits and ``._=+,-`` become
    ``_`` (a spec's ``:`` and ``/``, whitespace), no leading dot."""
    return _UNSAFE.sub("_", str(text)).lstrip(".") or "_"


def unique_file(name: str, used: set[str], suffix: str = RUN_SUFFIX) -> str:
    """``safe_name(name) + suffix``, numbered (``-2``, ``-3``) when ``used`` has it; added to
    ``used``."""
    stem = safe_name(name)
    file, number = f"{stem}{suffix}", 2
    while file in used:
        file, number = f"{stem}-{number}{suffix}", number + 1
    used.add(file)
    return file


def frame_of(run: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """A run held as qid -> docno -> score, as rows (qid, docno, score)."""
    rows = [(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def check_trec_ids(values: Iterable[object], what: str) -> None:
    """qids and docnos go into whitespace-separated columns: none may be empty or hold
    whitespace (a one-line error naming the first, before any work is done)."""
    for value in values:
        text = str(value)
        if not text or any(c.isspace() for c in text):
            raise NrpError(f"{what} {text!r} cannot be written to a TREC run (empty or whitespace)")


def ranked_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """qid, docno, rank, score in trec_eval's order: queries as they first appear, then score
    descending, ties by docno in descending string order; ranks 1, 2, ... per query."""
    out = frame[list(TABLE_COLUMNS)].astype({"qid": str, "docno": str, "score": float})
    order = pd.Series(range(out["qid"].nunique()), index=out["qid"].unique())
    out = out.assign(_query=out["qid"].map(order)).sort_values(
        ["_query", "score", "docno"], ascending=[True, False, False], kind="stable"
    )
    out["rank"] = out.groupby("_query").cumcount() + 1
    return out[["qid", "docno", "rank", "score"]].reset_index(drop=True)


def trec_text(frame: pd.DataFrame, tag: str) -> str:
    """The run as TREC lines ``qid Q0 docno rank score tag`` (``ranked_rows`` order)."""
    rows = ranked_rows(frame)
    check_trec_ids(rows["qid"].unique(), "qid")
    check_trec_ids(rows["docno"].unique(), "docno")
    tag = safe_tag(tag)
    return "".join(
        f"{q} Q0 {d} {r} {float(s)!r} {tag}\n"
        for q, d, r, s in zip(rows["qid"], rows["docno"], rows["rank"], rows["score"], strict=True)
    )


def _written_by_nrp(folder: Path) -> bool:
    """Whether every entry of ``folder`` is a run its ``runs.tsv`` lists (or that index)."""
    index = folder / RUNS_INDEX
    if not index.is_file():
        return False
    try:
        listed = set(pd.read_csv(index, sep="\t", dtype=str)["file"])
    except (ValueError, KeyError, OSError, pd.errors.ParserError):
        return False
    found = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    return found - {RUNS_INDEX} <= listed


def check_run_folder(folder: str | Path) -> Path:
    """The folder runs will be written to, checked before any work: new, empty, or a run folder
    nrp wrote before (replaced); a file in the way or another non-empty folder is an error."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise InputError(folder, None, "a file is in the way: runs are written to a folder")
    if folder.is_dir() and any(folder.iterdir()) and not _written_by_nrp(folder):
        raise InputError(
            folder,
            None,
            f"folder is not empty and holds files no {RUNS_INDEX} of nrp lists; give a new or "
            "empty folder (a run folder nrp wrote is replaced)",
        )
    return folder


def write_runs(folder: str | Path, runs: Sequence[RunOut]) -> list[Path]:
    """Write ``runs`` and their index into ``folder`` (module docstring), all or nothing; the
    paths written."""
    folder = check_run_folder(folder).resolve()
    files = [run.file for run in runs]
    repeated = sorted({f for f in files if files.count(f) > 1})
    if repeated:
        raise NrpError(f"two runs would be written to {repeated[0]}")
    texts = [trec_text(run.frame, run.tag) for run in runs]  # every check before a byte
    partial = folder.with_name(f".{folder.name}.partial-{os.getpid()}")
    old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
    try:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        for run, text in zip(runs, texts, strict=True):
            target = partial / run.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        index = pd.DataFrame(
            [
                {"file": run.file, "tag": safe_tag(run.tag), **run.about,
                 "queries": run.frame["qid"].nunique(), "rows": len(run.frame)}
                for run in runs
            ]
        )  # fmt: skip
        index.to_csv(partial / RUNS_INDEX, sep="\t", index=False)
        if folder.exists():
            folder.rename(old)
        partial.rename(folder)
    except OSError as err:
        if old.exists() and not folder.exists():
            old.rename(folder)  # the previous runs back in place
        raise NrpError(f"{folder}: cannot write the run files: {err.strerror or err}") from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)  # the previous runs, replaced
    return [folder / run.file for run in runs]
