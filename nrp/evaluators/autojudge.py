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
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from nrp.analysis.citations import cite_answers
from nrp.analysis.leaderboard import leaderboard
from nrp.answers import AnswerLocation, AnswerReader
from nrp.collection.collection import Collection
from nrp.errors import ConfigError
from nrp.positioning.scoring import score_answers
from nrp.positioning.ties import DEFAULT_TIE_MODE
from nrp.validation.result import VALIDATION_FILE

log = logging.getLogger(__name__)
#: the settings ``judge`` takes (from the constructor, overridden by ``judge``'s keywords)
SETTINGS = ("collection", "indexes", "ranker", "weights", "ties", "skip_invalid")
#: what the track's runner adds to every judge's settings (its output folder and file base):
#: the runner writes the leaderboard itself, so the judge takes and ignores them
RUNNER_SETTINGS = ("outdir", "filebase")


#: the NLTK data ``import autojudge_base`` loads (and downloads when missing)
NLTK_DATA = ("corpora/stopwords", "tokenizers/punkt")


def autojudge_module() -> Any:
    """``autojudge_base``, or a ``ConfigError`` saying why it cannot be imported. The NLTK data
    its import needs are looked for first, so a machine without them gets this one line instead
    of a download attempt (which hangs or fails where NLTK's site cannot be reached)."""
    import nltk

    missing = [name for name in NLTK_DATA if not _nltk_has(nltk, name)]
    if missing:
        raise ConfigError(
            "autojudge_base needs NLTK data to be imported, and these are not installed: "
            f"{', '.join(missing)} (run nltk.download('stopwords') and nltk.download('punkt') "
            "where the network allows, or point NLTK_DATA at a copy)"
        )
    try:
        import autojudge_base
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
