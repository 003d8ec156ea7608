"""Categorical meta-evaluation: a judge's labels against human labels, and confidence filtering.

For judges that output a class (TRUE / FALSE / NOT GIVEN against an expected answer) rather
than a score, correlation is the wrong measure. ``categorical_evaluate`` reports:

- **Per-class accuracy**: for each human class, the share of its items the judge labelled the
  same (the class's recall), and the judge's precision for that class; **macro accuracy** is
  the mean of the per-class accuracies. Why macro: in the Vietnamese set 238 of 299 labels are
  TRUE, so a judge that always says TRUE has 80% accuracy but 33% macro accuracy; the macro
  figure weighs the rare FALSE and NOT GIVEN classes, the ones a review is for, equally.
- **Confusion table**: human class (rows) x judge label (columns). An item the judge gave no
  label (unparseable output) is counted in a ``(none)`` column and as wrong, never dropped:
  dropping would flatter a judge that fails on hard items.
- **Review curve** (with a confidence column): a judge whose labels carry a confidence sends
  the items below a threshold t to a human. For each t: the share of items sent to review
  (confidence < t) and the share of the judge's *wrong* labels among them (the recall of
  errors), with the accuracy of the labels kept. A useful confidence catches most errors while
  sending few items; random review catches errors in proportion to the share sent (the
  diagonal of the plot). Items without a confidence are always sent to review.

Labels are compared after ``normalise_label`` (case, underscores, hyphens and spacing do not
matter: ``not_given`` = ``NOT GIVEN``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from nrp import lazy_libs
from nrp.errors import ConfigError, NrpError
from nrp.tables import (
    FrameView,
    TableExports,
    format_number,
    require_columns,
    text_table,
    write_aside,
)

NO_LABEL = "(none)"
DEFAULT_THRESHOLDS = tuple(round(t, 2) for t in np.linspace(0, 1, 21))


def normalise_label(value: Any) -> str | None:
    """Upper case, ``_``/``-`` as spaces, spacing collapsed; None for a missing or blank one."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    text = " ".join(str(value).replace("_", " ").replace("-", " ").split()).upper()
    return text or None


@dataclass
class CategoricalResult(TableExports, FrameView):
    """Accuracy of a judge's labels against human labels.

    ``summary``: n_items, n_no_label, n_missing_human (items without a human label, left out),
    accuracy, macro_accuracy, n_classes. ``per_class``: class, n_items, correct, accuracy,
    predicted (items the judge gave this label), precision. ``confusion``: human class rows,
    judge label columns. ``review``: threshold, n_review, share_review, n_wrong,
    n_wrong_caught, share_wrong_caught, n_kept, accuracy_kept (empty without confidences)."""

    settings: dict[str, Any]
    summary: dict[str, Any]
    per_class: pd.DataFrame
    confusion: pd.DataFrame
    review: pd.DataFrame
    warnings: list[str] = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """Per class: items, correct, accuracy, predicted, precision."""
        return self.per_class.copy()

    # to_dict, to_json and to_csv (categorical_{per_class,confusion,review}.csv, review only
    # when it has rows): ``TableExports``
    JSON_FIELDS: ClassVar[tuple[str, ...]] = (
        "settings", "summary", "per_class", "confusion", "review", "warnings",
    )  # fmt: skip
    CSV_TABLES: ClassVar[tuple[str, ...]] = ("per_class", "confusion", "review")
    CSV_PREFIX: ClassVar[str] = "categorical"

    def exported(self, name: str) -> Any:
        """The confusion matrix with its index as a ``human`` column; an empty review table
        is not written as a CSV file."""
        if name == "confusion":
            return self.confusion.reset_index().rename(columns={"index": "human"})
        return super().exported(name)

    def csv_tables(self) -> dict[str, pd.DataFrame]:
        tables = super().csv_tables()
        if not len(self.review):
            del tables["review"]
        return tables

    def format(self) -> str:
        s = self.summary
        lines = [
            f"{s['n_items']} items labelled by {self.settings['label_column']} against "
            f"{self.settings['human_column']}: accuracy {format_number(s['accuracy'], 3)}, "
            f"macro accuracy {format_number(s['macro_accuracy'], 3)} over {s['n_classes']} "
            f"classes; {s['n_no_label']} without a label (counted wrong)",
            text_table(
                ["class", "items", "correct", "accuracy", "predicted", "precision"],
                [
                    [
                        str(r.cls),
                        str(r.n_items),
                        str(r.correct),
                        format_number(r.accuracy, 3),
                        str(r.predicted),
                        format_number(r.precision, 3),
                    ]
                    for r in self.per_class.rename(columns={"class": "cls"}).itertuples()
                ],
            ),
            "  confusion (rows: human, columns: judge)",
            text_table(
                ["", *map(str, self.confusion.columns)],
                [[str(i), *map(str, row)] for i, row in self.confusion.iterrows()],
            ),
        ]
        if len(self.review):
            lines.append(
                f"  review curve: items with {self.settings['confidence_column']} < t sent to "
                f"review; wrong caught = share of the {int(self.review['n_wrong'].iloc[0])} "
                "wrong labels among them"
            )
            lines.append(
                text_table(
                    ["t", "sent", "share sent", "wrong caught", "share caught", "kept accuracy"],
                    [
                        [
                            f"{r.threshold:g}",
                            str(r.n_review),
                            format_number(r.share_review, 3),
                            str(r.n_wrong_caught),
                            format_number(r.share_wrong_caught, 3),
                            format_number(r.accuracy_kept, 3),
                        ]
                        for r in self.review.itertuples()
                    ],
                )
            )
        if self.warnings:
            lines.append("warnings:\n" + "\n".join(f"  {w}" for w in self.warnings))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def plot(self, path: str | Path, title: str | None = None) -> Path:
        """The review curve (share of wrong labels caught against share sent to review) as PNG
        or SVG (by the suffix), with the diagonal of random review; written aside."""
        if not len(self.review):
            raise NrpError("no review curve to plot: the judge's labels carry no confidence")
        path = Path(path)
        kind = path.suffix.lower().lstrip(".")
        if kind not in ("png", "svg"):
            raise ConfigError(f"plot file must end in .png or .svg, not {path.name!r}")
        matplotlib = lazy_libs.module("matplotlib")

        matplotlib.use("Agg")
        plt = lazy_libs.module("matplotlib.pyplot")

        figure, axes = plt.subplots(figsize=(5, 4.5))
        try:
            curve = self.review.sort_values(["share_review", "threshold"])
            axes.plot([0, 1], [0, 1], linestyle="--", color="grey", label="random review")
            axes.plot(
                curve["share_review"],
                curve["share_wrong_caught"],
                marker="o",
                markersize=3,
                label=f"{self.settings['confidence_column']} < t",
            )
            # one label per distinct point (thresholds that send the same items share it),
            # the corners (nothing / everything sent) left unlabelled
            points = curve.groupby(["share_review", "share_wrong_caught"], sort=True)["threshold"]
            for (sent, caught), thresholds in points:
                if sent in (0, 1):
                    continue
                low, high = thresholds.min(), thresholds.max()
                axes.annotate(
                    f"t={low:g}" if low == high else f"t={low:g}-{high:g}",
                    (sent, caught),
                    fontsize=7,
                    xytext=(4, -10),
                    textcoords="offset points",
                )
            axes.set_xlim(0, 1)
            axes.set_ylim(0, 1.02)
            axes.set_xlabel("share of items sent to review")
            axes.set_ylabel("share of wrong labels caught")
            axes.set_title(textwrap.fill(title or "confidence filtering", 55), fontsize=9)
            axes.legend(loc="lower right")
            figure.tight_layout()
            write_aside(path, lambda partial: figure.savefig(partial, format=kind))
        finally:
            plt.close(figure)
        return path


def categorical_evaluate(
    frame: pd.DataFrame,
    label_column: str,
    human_column: str,
    confidence_column: str | None = None,
    thresholds: Sequence[float] | None = None,
) -> CategoricalResult:
    """Per-class and macro accuracy of ``label_column`` against ``human_column``, the confusion
    table, and (with ``confidence_column``) the review curve over ``thresholds`` (default 0,
    0.05, ..., 1). See the module docstring."""
    columns = [label_column, human_column, *([confidence_column] if confidence_column else [])]
    require_columns(frame, columns, frame.attrs.get("path") or "the labelled table")
    human = frame[human_column].map(normalise_label)
    has_human = human.notna().to_numpy()
    warnings = []
    if not has_human.all():
        warnings.append(f"{int((~has_human).sum())} item(s) without a human label left out")
    human = human[has_human].to_numpy(dtype=object)
    if len(human) == 0:
        raise NrpError(f"no item has a human label in {human_column!r}")
    predicted = frame[label_column][has_human].map(normalise_label)
    predicted = predicted.fillna(NO_LABEL).to_numpy(dtype=object)
    correct = predicted == human
    classes = sorted(set(human))
    per_class_rows = []
    for cls in classes:
        mine = human == cls
        said = predicted == cls
        n_said = int(said.sum())
        per_class_rows.append(
            {
                "class": cls,
                "n_items": int(mine.sum()),
                "correct": int((mine & correct).sum()),
                "accuracy": float((mine & correct).sum() / mine.sum()),
                "predicted": n_said,
                "precision": float((said & correct).sum() / n_said) if n_said else np.nan,
            }
        )
    per_class = pd.DataFrame(per_class_rows)
    judge_labels = sorted(set(predicted) - {NO_LABEL}) + (
        [NO_LABEL] if NO_LABEL in predicted else []
    )
    confusion = pd.crosstab(
        pd.Categorical(human, categories=classes),
        pd.Categorical(predicted, categories=list(dict.fromkeys([*classes, *judge_labels]))),
        dropna=False,
    )
    confusion.index = confusion.index.astype(str)
    confusion.columns = confusion.columns.astype(str)
    confusion.index.name = None
    confusion.columns.name = None
    summary = {
        "n_items": len(human),
        "n_no_label": int((predicted == NO_LABEL).sum()),
        "n_missing_human": int((~has_human).sum()),
        "accuracy": float(correct.mean()),
        "macro_accuracy": float(per_class["accuracy"].mean()),
        "n_classes": len(classes),
    }
    review = pd.DataFrame()
    if confidence_column:
        confidence = pd.to_numeric(frame[confidence_column][has_human], errors="coerce")
        review = review_curve(correct, confidence.to_numpy(dtype=float), thresholds)
        unknown = int(np.isnan(confidence.to_numpy(dtype=float)).sum())
        if unknown:
            warnings.append(f"{unknown} item(s) without a confidence are always sent to review")
    settings = {
        "label_column": label_column,
        "human_column": human_column,
        "confidence_column": confidence_column,
        "no_label": "counted as wrong, column (none) of the confusion table",
        "macro_accuracy": "mean of the per-class accuracies (recall of each human class)",
        "review": "items with confidence < t (or no confidence) go to review",
    }
    return CategoricalResult(settings, summary, per_class, confusion, review, warnings)


def review_curve(
    correct: Sequence[bool], confidence: Sequence[float], thresholds: Sequence[float] | None = None
) -> pd.DataFrame:
    """For each threshold t: items with confidence < t (NaN: always) sent to review, and how
    many of the wrong labels they hold."""
    right = np.asarray(correct, dtype=bool)
    conf = np.asarray(confidence, dtype=float)
    if len(right) != len(conf):
        raise NrpError("correct and confidence differ in length")
    chosen = DEFAULT_THRESHOLDS if thresholds is None else tuple(float(t) for t in thresholds)
    wrong = ~right
    n_wrong = int(wrong.sum())
    rows = []
    for t in sorted(set(chosen)):
        sent = np.isnan(conf) | (conf < t)
        kept = ~sent
        rows.append(
            {
                "threshold": t,
                "n_review": int(sent.sum()),
                "share_review": float(sent.mean()) if len(sent) else np.nan,
                "n_wrong": n_wrong,
                "n_wrong_caught": int((sent & wrong).sum()),
                "share_wrong_caught": float((sent & wrong).sum() / n_wrong) if n_wrong else np.nan,
                "n_kept": int(kept.sum()),
                "accuracy_kept": float(right[kept].mean()) if kept.any() else np.nan,
            }
        )
    return pd.DataFrame(rows)
