"""nrp as a TREC AutoJudge judge (``autojudge_base``'s ``AutoJudge`` protocol).

``NrpJudge().judge(rag_responses=reports, ..., collection="NAME")`` reads the track's
``Report`` objects as answers (through ``nrp.answers``, as ``nrp score`` reads report files),
scores them with ``score_answers`` among the judged documents of a collection of nrp's, judges
their citations with ``cite_answers`` and returns the ``Leaderboard`` of
``nrp.analysis.leaderboard``: NRP per dimension, the weighted NRP and the citation measures per
run and topic, with ``all`` rows. The track's runner instantiates the class without arguments
(``judge_class: nrp.evaluators.autojudge.NrpJudge`` in its ``workflow.yml``) and passes the
``judge_settings`` as keywords of ``judge``:

- ``collection``: the name of an ingested collection (required), ``indexes``: its folder;
- ``ranker``: one ranker spec for every dimension, or dimension -> spec (default: the
  collection's validation JSON, written by ``nrp validate``); ``weights``, ``ties``;
- ``skip_invalid``: leave out (and log) reports to topics the collection does not have.

The runner's own ``outdir`` and ``filebase`` are taken and ignored (the runner writes the file);
any other setting is an error naming it, so a misspelt one is never silently dropped.

nrp judges with a collection's human judgments, so it makes neither qrels nor nuggets:
``create_qrels`` and ``create_nuggets`` return None; ``llm_config``, ``nugget_banks``, ``qrels``
and ``corpus`` are not used.

``autojudge_base`` is imported when a leaderboard is made, not with this module: its import
loads NLTK's ``stopwords`` and ``punkt`` data and downloads them when they are missing, which
hangs or fails on a machine that cannot reach NLTK's download site. ``autojudge_module`` looks
for the data first and, when they are missing, says so in one line; the rest of nrp is
unaffected.

``judge_reports`` is ``nrp judge``: the track's own runner (``autojudge_base.judge_runner``) with
``NrpJudge`` over report files read as ``nrp score`` reads them (``report_records``: their JSON
objects), the topics taken from the collection (``report_topics``) instead of a topics file, and
the runner's files written aside and moved into the output folder at the end.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from nrp import lazy_libs
from nrp.analysis.citations import cite_answers
from nrp.analysis.leaderboard import leaderboard
from nrp.answers import AnswerLocation, AnswerReader, AnswerSet
from nrp.collection.collection import Collection
from nrp.errors import ConfigError, InputError
from nrp.positioning.scoring import score_answers
from nrp.ranks import DEFAULT_TIE_MODE
from nrp.validation.result import VALIDATION_FILE

log = logging.getLogger(__name__)
#: the settings ``judge`` takes (from the constructor, overridden by ``judge``'s keywords)
SETTINGS = ("collection", "indexes", "ranker", "weights", "ties", "skip_invalid")
#: what the track's runner adds to every judge's settings (its output folder and file base):
#: the runner writes the leaderboard itself, so the judge takes and ignores them
RUNNER_SETTINGS = ("outdir", "filebase")


#: the file base of what ``judge_reports`` has the track's runner write: the leaderboard
#: ``nrp.eval.txt`` (``LEADERBOARD_FILE``), its measures ``nrp.eval.measures.yml`` and the
#: run's settings ``nrp.config.yml``
JUDGE_FILEBASE = "nrp"
#: the leaderboard file the runner writes (``run_id topic_id measure value``, the layout of
#: ``nrp leaderboard``, but tab-separated and unrounded: the runner's own writer)
LEADERBOARD_FILE = f"{JUDGE_FILEBASE}.eval.txt"


#: the NLTK data ``import autojudge_base`` loads (and downloads when missing)
NLTK_DATA = ("corpora/stopwords", "tokenizers/punkt")


def autojudge_module() -> Any:
    """``autojudge_base``, or a ``ConfigError`` saying why it cannot be imported. The NLTK data
    its import needs are looked for first, so a machine without them gets this one line instead
    of a download attempt (which hangs or fails where NLTK's site cannot be reached)."""
    nltk = lazy_libs.nltk()

    missing = [name for name in NLTK_DATA if not _nltk_has(nltk, name)]
    if missing:
        raise ConfigError(
            "autojudge_base needs NLTK data to be imported, and these are not installed: "
            f"{', '.join(missing)} (run nltk.download('stopwords') and nltk.download('punkt') "
            "where the network allows, or point NLTK_DATA at a copy)"
        )
    try:
        autojudge_base = lazy_libs.autojudge_base()
    except ImportError:
        raise ConfigError(
            "the AutoJudge judge needs autojudge-base (pip install autojudge-base==1.0.0)"
        ) from None
    return autojudge_base


def _nltk_has(nltk: Any, name: str) -> bool:
    try:
        nltk.data.find(name)
    except LookupError:
        return False
    return True


class NrpJudge:
    """The AutoJudge protocol over nrp's library (see the module docstring)."""

    @property
    def nugget_banks_type(self) -> type:
        """autojudge_base's ``NuggetBanks`` (the protocol asks for one; nrp makes none)."""
        return autojudge_module().NuggetBanks

    def __init__(self, **settings: Any):
        _check_settings(settings)
        self.settings = settings

    def judge(
        self,
        rag_responses: Iterable[Any],
        rag_topics: Sequence[Any] = (),
        llm_config: Any = None,
        nugget_banks: Any = None,
        qrels: Any = None,
        corpus: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """The ``autojudge_base.Leaderboard`` of the reports ``rag_responses`` (its ``Report``
        objects, or their JSON objects)."""
        given = {key: value for key, value in kwargs.items() if key not in RUNNER_SETTINGS}
        _check_settings(given)
        settings = {**self.settings, **given}
        if not settings.get("collection"):
            raise ConfigError("NrpJudge needs the setting collection (an ingested collection)")
        collection = Collection.load(str(settings["collection"]), settings.get("indexes"))
        answers = report_answers(rag_responses, collection, bool(settings.get("skip_invalid")))
        rankers = settings.get("ranker") or str(collection.path / VALIDATION_FILE)
        results = score_answers(
            collection, answers, rankers, ties=settings.get("ties", DEFAULT_TIE_MODE),
            weights=settings.get("weights"),
        )  # fmt: skip
        return as_leaderboard(leaderboard(results, cite_answers(collection, answers)))

    def create_qrels(self, *args: Any, **kwargs: Any) -> None:
        """None: nrp uses the collection's human judgments, it makes none."""
        return None

    def create_nuggets(self, *args: Any, **kwargs: Any) -> None:
        """None: NRP ranks answers among judged documents; it uses no nuggets."""
        return None


def _check_settings(settings: dict[str, Any]) -> None:
    """A ``ConfigError`` for a setting NrpJudge lacks, or one of a type it cannot mean: a
    workflow file's ``skip_invalid: "no"`` is a string, and a string is not false."""
    unknown = [key for key in settings if key not in SETTINGS]
    if unknown:
        raise ConfigError(f"NrpJudge has no setting {unknown[0]!r} (it has: {', '.join(SETTINGS)})")
    for key, value in settings.items():
        if value is not None and not _SETTING_TYPES[key](value):
            raise ConfigError(
                f"NrpJudge setting {key} must be {_SETTING_KINDS[key]}, not "
                f"{type(value).__name__} {value!r}"[:300]
            )


def _ranker_choice(value: Any) -> bool:
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and isinstance(v, str | Path) for k, v in value.items())
    return isinstance(value, str | Path)


_SETTING_TYPES: dict[str, Callable[[Any], bool]] = {
    "collection": lambda value: isinstance(value, str),
    "indexes": lambda value: isinstance(value, str | Path),
    "ranker": _ranker_choice,
    "weights": lambda value: (
        isinstance(value, Mapping)
        and all(
            isinstance(k, str) and isinstance(w, int | float) and not isinstance(w, bool)
            for k, w in value.items()
        )
    ),
    "ties": lambda value: isinstance(value, str),
    "skip_invalid": lambda value: isinstance(value, bool),
}
_SETTING_KINDS = {
    "collection": "the name of an ingested collection",
    "indexes": "a folder",
    "ranker": "a ranker spec, a validation JSON, or a mapping of dimension to either",
    "weights": "a mapping of dimension to a number",
    "ties": "a tie rule's name",
    "skip_invalid": "true or false",
}


def report_answers(
    reports: Iterable[Any], collection: Collection, skip_invalid: bool = False
) -> pd.DataFrame:
    """The answers of ``autojudge_base.Report`` objects (or report mappings), read as
    ``nrp.answers`` reads a report file; each located at its file (``Report.path``) and its
    number among the reports of that file."""
    reader = AnswerReader(set(collection.topics["qid"].astype(str)), skip_invalid)
    counts: dict[Path, int] = {}
    for report in reports:
        record = report if isinstance(report, dict) else _as_record(report)
        file = Path(str(getattr(report, "path", None) or "<reports>"))
        counts[file] = counts.get(file, 0) + 1
        reader.read_report(AnswerLocation(file, counts[file]), record)
    for row in reader.skipped:
        log.warning("skipped: %s", row)
    if not reader.rows["answer_id"]:
        raise ConfigError("no reports to judge" + (" (all skipped)" if reader.skipped else ""))
    return reader.frame()


def _as_record(report: Any) -> dict[str, Any]:
    """A ``Report`` as the JSON object of its submission line (None fields left out)."""
    return report.model_dump(mode="json", exclude_none=True)


def as_leaderboard(table: pd.DataFrame) -> Any:
    """A ``nrp.analysis.leaderboard`` table as an ``autojudge_base.Leaderboard`` (its ``all``
    rows included, measures as floats)."""
    autojudge = autojudge_module()
    measures = tuple(dict.fromkeys(table["measure"]))
    values: dict[tuple[str, str], dict[str, float]] = {}
    for row in table.itertuples(index=False):
        values.setdefault((row.run_id, row.topic_id), {})[row.measure] = float(row.value)
    entries = tuple(
        autojudge.LeaderboardEntry(run_id=run, topic_id=topic, values=by_measure)
        for (run, topic), by_measure in values.items()
    )
    specs = tuple(autojudge.MeasureSpec(name, float) for name in measures)
    spec = autojudge.LeaderboardSpec(measures=specs)
    return autojudge.Leaderboard(measures=measures, spec=spec, entries=entries)


class _ReportKeeper(AnswerReader):
    """An ``AnswerReader`` that keeps the JSON object of every report it reads as an answer,
    and notes each file it read a report from."""

    def __init__(self, known_qids: set[str] | None, skip_invalid: bool):
        super().__init__(known_qids, skip_invalid)
        self.records: list[dict[str, Any]] = []
        self.report_files: set[Path] = set()

    def read_report(self, where: AnswerLocation, report: dict[str, Any]) -> None:
        self.report_files.add(where.file)
        before = self.count
        super().read_report(where, report)
        if self.count > before:
            self.records.append(report)


def report_records(answer_set: AnswerSet, collection: Collection) -> list[dict[str, Any]]:
    """The JSON objects of the reports ``answer_set`` holds (read by ``read_answers`` from
    report files, which found every error and left out what ``skip_invalid`` skips), in the
    order read: what the track's runner hands a judge. A file of the set that holds no report
    (a long-layout answer file beside the reports) is an ``InputError``: a judge judges
    reports."""
    keeper = _ReportKeeper(set(collection.topics["qid"].astype(str)), skip_invalid=True)
    for name in answer_set.files:
        file = Path(name)
        keeper.read_file(file)
        if file not in keeper.report_files:
            raise InputError(
                file, None, "not a TREC RAG report file (the judge judges reports: run_id and "
                "topic_id, in metadata or at the top level, and answer or responses)"
            )  # fmt: skip
    return keeper.records


def report_topics(collection: Collection, qids: Iterable[str]) -> list[Any]:
    """``autojudge_base.Request`` topics of the collection's topics among ``qids`` (in the
    collection's order): request_id the qid, title the query, background the narrative
    (None where it is empty), collection_ids the collection's name. What a topics file gives
    the track's runner, taken from the collection instead."""
    request = autojudge_module().Request
    wanted = {str(qid) for qid in qids}
    topics = []
    for row in collection.topics.itertuples(index=False):
        if str(row.qid) not in wanted:
            continue
        narrative = row.narrative if isinstance(row.narrative, str) else ""
        topics.append(
            request(
                request_id=str(row.qid),
                title=str(row.query),
                collection_ids=[collection.name],
                background=narrative.strip() or None,
            )
        )
    return topics


def judge_reports(
    answer_set: AnswerSet,
    collection: Collection,
    out: str | Path,
    indexes: str | Path | None = None,
    **settings: Any,
) -> Path:
    """``nrp judge``: the track's runner (``autojudge_base.judge_runner.run_judge``) with
    ``NrpJudge`` and the judge settings ``settings`` (``SETTINGS``; collection and indexes are
    given here) over the reports of ``answer_set`` (``report_records``), the topics those reports
    name taken from the collection (``report_topics``). The runner's files (``JUDGE_FILEBASE``)
    are written into a folder beside ``out`` and moved into ``out`` when all is done, so an
    error leaves ``out`` as it was. Returns the leaderboard's path (``LEADERBOARD_FILE``)."""
    autojudge = autojudge_module()  # the NLTK data checked before anything is read or written
    run_judge = lazy_libs.module("autojudge_base.judge_runner").run_judge

    settings = {"collection": collection.name, **settings}
    if indexes is not None:
        settings["indexes"] = str(indexes)
    _check_settings(settings)
    records = report_records(answer_set, collection)
    topics = report_topics(collection, answer_set.answers["qid"])
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    said = io.StringIO()  # the runner's progress names the folder aside: logged, not printed
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            run_judge(
                auto_judge=NrpJudge(), rag_responses=records, rag_topics=topics,
                llm_config=autojudge.LlmConfigBase(model="none"), judge_settings=settings,
                judge_output_path=aside / JUDGE_FILEBASE, out_dir=aside,
                judge_uses_nuggets=False, judge_uses_qrels=False,
            )  # fmt: skip
        _move_into(aside, out)
    finally:
        log.debug("the runner said: %s", said.getvalue())
        shutil.rmtree(aside, ignore_errors=True)
    return out / LEADERBOARD_FILE


def _move_into(aside: Path, out: Path) -> None:
    """The files of the folder ``aside`` moved into ``out``: the folder renamed when ``out`` is
    not there, else file by file (each replacing a file of that name)."""
    if not out.exists():
        os.replace(aside, out)
        return
    for file in sorted(aside.iterdir()):
        os.replace(file, out / file.name)
