"""A TREC leaderboard of NRP results: the file the TREC RAG and AutoJudge tools read.

One line per run, topic and measure, whitespace separated: ``run_id topic_id measure value``
(the ``ir_measures`` layout, ``autojudge_base.Leaderboard``'s default, which its runner writes
too), values with 4 decimals as trec_eval prints them, and per run and measure a line with
topic ``all``: the mean over the run's topics that have the measure (of the unrounded values).
The table (``leaderboard``) keeps the values unrounded.

- **Runs**: the LLM; when the results hold more than one prompt, ``llm/prompt``; best first,
  by the weighted NRP over all topics (``run_order``). Answers read
  from TREC RAG reports are llm = run_id, prompt ``report``, so their runs keep their ids.
- **Per topic**: the mean over the run's answers to the topic (its samples; a report: one).
- **Measures**: ``nrp_<dimension>`` for each dimension and ``nrp_weighted`` (the weighted NRP of
  ``nrp score``); with the citations of ``nrp score`` beside the results
  (``nrp.analysis.citations``), ``cited_relevant_<dimension>`` (share of the judged cited
  documents with label >= 1) and ``cited_grade_<dimension>`` (their mean label). A topic where no
  cited document is judged has no citation measure (undefined, not 0), so it is left out of the
  line and of the ``all`` mean.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from nrp.analysis.citations import citations_path, read_citations
from nrp.analysis.summary import checked_results, read_results
from nrp.collection.manifest import COMBINED
from nrp.errors import NrpError, quote
from nrp.tables import write_aside

LEADERBOARD_COLUMNS = ("run_id", "measure", "topic_id", "value")
ALL_TOPICS = "all"
#: citations.csv column -> leaderboard measure prefix
CITATION_MEASURES = {"share_relevant": "cited_relevant", "mean_grade": "cited_grade"}


def leaderboard(
    results: pd.DataFrame | str | Path, citations: pd.DataFrame | None = None
) -> pd.DataFrame:
    """``LEADERBOARD_COLUMNS`` rows: per run, the per-topic values of each measure, then its
    ``all`` rows (see the module docstring). ``results``: the frame of ``score_answers`` or a
    path ``read_results`` accepts (a path's ``citations.csv``, when there, adds the citation
    measures); ``citations``: the frame of ``cite_answers``, for a results frame."""
    if not isinstance(results, pd.DataFrame):
        beside = citations_path(results)
        if citations is None and beside.is_file():
            citations = read_citations(beside)
        results = read_results(results)
    frame = checked_results(results, [])
    several_prompts = frame["prompt"].nunique() > 1
    long = [_long(frame, "dimension", {"nrp": "nrp"}, several_prompts)]
    if citations is not None and len(citations):
        long.append(_long(citations, "dimension", CITATION_MEASURES, several_prompts))
    per_topic = pd.concat(long, ignore_index=True).dropna(subset=["value"])
    per_topic = per_topic.groupby(["run_id", "measure", "topic_id"], sort=False).mean()
    per_topic = per_topic.reset_index()
    overall = per_topic.groupby(["run_id", "measure"], sort=False)["value"].mean().reset_index()
    overall["topic_id"] = ALL_TOPICS
    table = pd.concat([per_topic, overall[list(LEADERBOARD_COLUMNS)]], ignore_index=True)
    _check_names(table)
    return _in_order(table[list(LEADERBOARD_COLUMNS)])


def _in_order(table: pd.DataFrame) -> pd.DataFrame:
    """Runs best first (``run_order``), then topics (``all`` last), then measures (each in
    order of appearance): a run's lines together, one topic's measures together."""
    keys = [table[column].map({v: i for i, v in enumerate(dict.fromkeys(table[column]))})
            for column in ("topic_id", "measure")]  # fmt: skip
    runs = {run: n for n, run in enumerate(run_order(table))}
    order = pd.DataFrame({"run": table["run_id"].map(runs), "topic": keys[0], "measure": keys[1]})
    order["topic"] = order["topic"].where(table["topic_id"] != ALL_TOPICS, len(table))
    ranked = order.sort_values(["run", "topic", "measure"], kind="stable").index
    return table.loc[ranked].reset_index(drop=True)


def run_order(table: pd.DataFrame) -> list[str]:
    """The runs of a leaderboard table best first: by their ``all`` value of ``nrp_weighted``
    (the weighted NRP), else of the first NRP measure, highest first; ties (and runs without
    it) in order of appearance."""
    measures = [m for m in dict.fromkeys(table["measure"]) if str(m).startswith("nrp_")]
    by = f"nrp_{COMBINED}" if f"nrp_{COMBINED}" in measures else (measures or [None])[0]
    runs = list(dict.fromkeys(table["run_id"]))
    overall = table[(table["topic_id"] == ALL_TOPICS) & (table["measure"] == by)]
    value = dict(zip(overall["run_id"], overall["value"].astype(float), strict=True))
    return sorted(runs, key=lambda run: -value.get(run, float("-inf")))


def _long(
    frame: pd.DataFrame, by: str, measures: dict[str, str], several_prompts: bool
) -> pd.DataFrame:
    """run_id, measure, topic_id, value of each answer: one row per answer x ``by`` x column of
    ``measures`` (column -> measure prefix; the measure is ``prefix_<by value>``)."""
    llm = frame["llm"].astype(str)
    run = llm + "/" + frame["prompt"].astype(str) if several_prompts else llm
    parts = [
        pd.DataFrame(
            {
                "run_id": run,
                "measure": prefix + "_" + frame[by].astype(str),
                "topic_id": frame["qid"].astype(str),
                "value": pd.to_numeric(frame[column], errors="coerce").astype(float),
            }
        )
        for column, prefix in measures.items()
    ]
    return pd.concat(parts, ignore_index=True)


def _check_names(table: pd.DataFrame) -> None:
    """Run ids, measures and topics must be single words: the file is whitespace separated."""
    for column in ("run_id", "measure", "topic_id"):
        bad = table[column][(table[column] == "") | table[column].str.contains(r"\s", regex=True)]
        if len(bad):
            raise NrpError(
                f"cannot write a TREC leaderboard: {column} {quote(bad.iloc[0])} is empty or "
                "holds whitespace (the file's columns are whitespace separated)"
            )


#: how a value is written: as trec_eval prints a measure
VALUE_FORMAT = "{:.4f}"


def write_leaderboard(table: pd.DataFrame, path: str | Path) -> Path:
    """``table`` (``leaderboard``) as a whitespace-separated file, ``run_id topic_id measure
    value``: each run's lines topic by topic (``all`` last, as in the table), the measures in
    the table's order; written aside (never half)."""
    path = Path(path)
    order = {
        column: {value: n for n, value in enumerate(dict.fromkeys(table[column]))}
        for column in ("run_id", "topic_id", "measure")
    }
    rows = sorted(
        table.itertuples(index=False),
        key=lambda r: (
            order["run_id"][r.run_id],
            r.topic_id == ALL_TOPICS,
            order["topic_id"][r.topic_id],
            order["measure"][r.measure],
        ),
    )
    lines = [
        f"{row.run_id} {row.topic_id} {row.measure} {VALUE_FORMAT.format(float(row.value))}\n"
        for row in rows
    ]
    write_aside(path, lambda partial: partial.write_text("".join(lines), encoding="utf-8"))
    return path
