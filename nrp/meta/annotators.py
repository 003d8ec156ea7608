"""Inter-annotator agreement: how far people agree with each other before a judge is held to them.

A judge's correlation with human labels is bounded by how well the humans agree among
themselves, so a review that collects several labels per item reports that ceiling too.

- ``krippendorff_alpha(units, level)``: Krippendorff's alpha over units (items) each labelled by
  any number of coders (missing labels allowed; a unit with fewer than two labels is not
  pairable and left out). ``level``: ``nominal`` (labels only equal or not: TRUE / FALSE /
  NOT GIVEN), ``ordinal`` (ranks of the values: a grade scale 0-2) or ``interval`` (squared
  differences). Computed by the ``krippendorff`` package: alpha = 1 - D_o / D_e from the
  coincidence matrix (Krippendorff 2011,
  "Computing Krippendorff's Alpha-Reliability"): o_ck sums, over units, the c-k pairs of the
  unit divided by m_u - 1; n_c = sum_k o_ck, n = sum_c n_c;
  alpha = 1 - (n - 1) sum_ck o_ck d_ck / sum_ck n_c n_k d_ck, with d_ck the squared distance:
  nominal 1 when c != k; interval (c - k)^2; ordinal (sum_{g between c and k} n_g
  - (n_c + n_k) / 2)^2. NaN when there is no pairable value or no disagreement is possible.
- ``pairwise_kendall_tau(labels)``: per pair of coders, Kendall's tau-b between their labels of
  each query's items (the items both labelled), averaged over the queries where it is defined
  (ranking reviews: every item of a query is labelled by its position).
- ``annotator_agreement(paths)``: both over human files as ``nrp meta`` reads them, one coder
  per file, or per annotator of a Label Studio export (``nrp annotators A B ...``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from nrp.errors import NrpError
from nrp.statistics import kendall_tau_b
from nrp.tables import FrameView, format_number, text_table

if TYPE_CHECKING:
    from nrp.meta.labelstudio import QueryMap

Level = Literal["nominal", "ordinal", "interval"]
LEVELS = ("nominal", "ordinal", "interval")


def krippendorff_alpha(units: Sequence[Sequence[Hashable | None]], level: Level) -> float:
    """Krippendorff's alpha of ``units``: one sequence of labels per unit (one per coder who
    labelled it; None for a coder who did not). Ordinal and interval labels must be numbers.
    The arithmetic is the ``krippendorff`` package's, from the units' value counts."""
    import krippendorff  # first use: keeps the start of the CLI quick

    if level not in LEVELS:
        raise NrpError(f"unknown level {level!r} (use one of {', '.join(LEVELS)})")
    pairable = [[v for v in unit if v is not None] for unit in units]
    pairable = [unit for unit in pairable if len(unit) >= 2]
    values = sorted({v for unit in pairable for v in unit}, key=_order_key)
    if len(values) < 2:  # nothing to disagree on: the package refuses, alpha is undefined
        return math.nan
    numbers = [_order_key(v) for v in values]
    if level != "nominal" and any(kind != 0 for kind, _ in numbers):
        raise NrpError(f"{level} agreement needs numeric labels, got {values}")
    index = {v: i for i, v in enumerate(values)}
    counts = np.zeros((len(pairable), len(values)))
    for row, unit in enumerate(pairable):
        for value in unit:
            counts[row, index[value]] += 1
    # interval distances need the numbers; nominal and ordinal only the values' order
    domain = [v for _, v in numbers] if level == "interval" else list(range(len(values)))
    alpha = krippendorff.alpha(value_counts=counts, value_domain=domain, level_of_measurement=level)
    return float(alpha)


def _order_key(value: Hashable) -> tuple[int, float | str]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value))
    return (1, str(value))


def pairwise_kendall_tau(
    labels: Mapping[str, Mapping[str, Mapping[str, float]]],
) -> dict[tuple[str, str], float]:
    """``labels``: coder -> query -> item -> label. For each pair of coders (in sorted order):
    the mean over queries of tau-b between their labels of the items both gave (queries where
    tau-b is undefined, fewer than two shared items or a constant side, are left out; NaN when
    none is left)."""
    out: dict[tuple[str, str], float] = {}
    for first, second in itertools.combinations(sorted(labels), 2):
        taus = []
        for qid in sorted(set(labels[first]) & set(labels[second])):
            a, b = labels[first][qid], labels[second][qid]
            shared = sorted(set(a) & set(b))
            tau = kendall_tau_b([a[i] for i in shared], [b[i] for i in shared])
            if not math.isnan(tau):
                taus.append(tau)
        out[(first, second)] = float(np.mean(taus)) if taus else math.nan
    return out


@dataclass
class AnnotatorAgreement(FrameView):
    """Agreement between the coders of several human files (one coder per file).

    ``table``: one row per dimension: dimension, kind (graded or ranking), coders, units
    (items labelled by two coders or more), alpha (at ``level``), level, and for rankings
    tau_pairwise_mean (the mean over coder pairs of ``pairwise_kendall_tau``); ``pairs``: per
    ranking dimension and coder pair, the pair's tau."""

    table: pd.DataFrame
    pairs: pd.DataFrame

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def format(self) -> str:
        rows = [
            [str(r.dimension), str(r.kind), str(r.coders), str(r.units),
             f"{format_number(r.alpha, 3)} ({r.level})", format_number(r.tau_pairwise_mean, 3)]
            for r in self.table.itertuples()
        ]  # fmt: skip
        return text_table(
            ["dimension", "kind", "coders", "units", "Krippendorff's alpha", "pairwise tau"], rows
        )


def annotator_agreement(
    paths: Sequence[str | Path],
    id_column: str = "answer_id",
    level: Level = "ordinal",
    categorical: bool = False,
    query_map: QueryMap | str | Path | None = None,
) -> AnnotatorAgreement:
    """Agreement between human files (``nrp.meta.human.read_human``: graded labels or
    rankings), each one coder's, over the dimensions they share; an item is (qid, id) when the
    files have a qid. ``categorical``: text labels, nominal alpha. A Label Studio export
    (``nrp.meta.labelstudio``, query texts mapped to qids by ``query_map``) is one coder per
    annotator."""
    from nrp.meta.readers import item_keys

    names, frames = _coders(paths, id_column, categorical, query_map)
    shared = [d for d in frames[0].attrs["dimensions"] if all(d in f for f in frames[1:])]
    if not shared:
        raise NrpError("the human files share no label column")
    level = "nominal" if categorical else level
    rows, pair_rows = [], []
    for dimension in shared:
        units: dict[tuple, list[Any]] = {}
        by_query: dict[str, dict[str, dict[str, float]]] = {}
        for name, frame in zip(names, frames, strict=True):
            keys = item_keys(frame, id_column)
            for record in frame.to_dict("records"):
                value = record[dimension]
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    continue
                units.setdefault(tuple(record[k] for k in keys), []).append(value)
                qid = str(record.get("qid", ""))
                by_query.setdefault(name, {}).setdefault(qid, {})[record[id_column]] = value
        ranking = all(f.attrs.get("kind") == "ranking" for f in frames)
        taus = pairwise_kendall_tau(by_query) if ranking else {}
        for (a, b), tau in taus.items():
            pair_rows.append({"dimension": dimension, "coder_a": a, "coder_b": b, "tau": tau})
        finite = [t for t in taus.values() if not math.isnan(t)]
        rows.append(
            {
                "dimension": dimension,
                "kind": "ranking" if ranking else "graded",
                "coders": len(frames),
                "units": sum(len(u) >= 2 for u in units.values()),
                "alpha": krippendorff_alpha(list(units.values()), level),
                "level": level,
                "tau_pairwise_mean": float(np.mean(finite)) if finite else math.nan,
            }
        )
    pairs = pd.DataFrame(pair_rows, columns=["dimension", "coder_a", "coder_b", "tau"])
    return AnnotatorAgreement(pd.DataFrame(rows), pairs)


def _coders(
    paths: Sequence[str | Path],
    id_column: str,
    categorical: bool,
    query_map: QueryMap | str | Path | None,
) -> tuple[list[str], list[pd.DataFrame]]:
    """The coders of the files (one per file; a Label Studio export one per annotator) and
    their labels; names qualified by the file when two would be the same."""
    from nrp.meta.human import read_human_coders

    entries = [
        (str(p), name, frame, len(coders))
        for p in paths
        for coders in [read_human_coders(p, id_column, categorical, query_map)]
        for name, frame in coders.items()
    ]
    names = [name for _, name, _, _ in entries]
    if len(set(names)) != len(names):
        names = [f"{p}:{name}" if many > 1 else p for p, name, _, many in entries]
    frames = [frame for _, _, frame, _ in entries]
    if len(frames) < 2:
        raise NrpError(
            "agreement needs two human files or more (one per coder), or a Label Studio "
            "export with two annotators or more"
        )
    return names, frames
