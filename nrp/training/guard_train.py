"""``nrp train guard`` / ``train_guard``: the guard's detectors fitted on a collection's judged
answers and the non-answers made for it (``nrp.training.guard_data``), written as a model file
that ``guard:model=FILE`` reads (docs/guard.md, "Fitting a guard").

What is fitted:

1. the fluency reference (``guard_fit.fluency_reference``): the frequent function words of the
   reference questions' documents (never fitted on) and of ``fluency_collections``, and the
   pairs of them adjacent in enough documents; the term reference of ``idf_new``/``oov_new``
   from the same documents;
2. one logistic regression per detector (``DETECTORS``) of "real answer" on its features: the
   judged documents are real answers, and so are the best ones after their question and cut to
   their first sentence; the detector's negatives are its degenerate kinds, the mined
   boilerplate and the written non-answers. The ``held_out`` family is fitted on by none;
3. ``answer_like``'s direction: a logistic regression of "real answer" on the text's embedding,
   the real answers and the LLM's own answers against the written non-answers; the ``hollow``
   detector is fitted on values of a direction fitted without the row's question
   (``INNER_FOLDS``), so that its threshold is set as for texts the direction never saw;
4. each detector's threshold: the largest probability at which at most ``max_flagged`` of the
   fitting real answers are flagged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nrp.training.guard_data import (
    FittingData,
    feature_table,
    fitting_dimension,
    fitting_rows,
    question_folds,
    terse_answers,
    text_embeddings,
    written_prompts,
)
from nrp.training.guard_settings import GuardTrainSettings

if TYPE_CHECKING:
    from nrp.collection.collection import Collection
    from nrp.rankers.guard_model import GuardModel

#: the detectors fitted: (name, the kinds that are its negatives, its features): one for every
#: way of saying nothing beyond the question, one for the question followed by text about
#: another question, one for word salad on its word order alone (fluency, order), one for the
#: written non-answers (``hollow``), and one for a text that only asks (every sentence a question)
DETECTORS = (
    ("mirror", "echo,restated,keywords,spliced,shuffled",
     "novel_share,log_novel,cos_tq,cos_rq,fluency,spec_rq"),
    ("generic", "boilerplate", "novel_share,log_novel,cos_tq,cos_rq,fluency,spec_rq,spec_rd"),
    ("elsewhere", "spliced", "novel_share,log_novel,cos_tq,cos_rq,fluency,spec_rq,margin_rq"),
    ("off_topic", "other_best", "novel_share,log_novel,cos_tq,cos_rq,spec_rq,margin_rq,spec_rd"),
    ("disorder", "shuffled", "fluency,order"),
    ("hollow", "written", "answer_like,first_person,idf_new,oov_new"),
    ("asking", "echo", "asks_only"),
)  # fmt: skip
#: the detector that ``near_best`` adds its texts to the negatives of
NEAR_BEST_DETECTOR = "off_topic"
#: answer_like's direction: its negatives, and the folds of the questions that give each fitting
#: row a value of a direction fitted without it
DIRECTION_NEGATIVES = "written"
INNER_FOLDS = 5
#: negatives of the fitting's own, beside nrp.validation.degenerate's kinds
MINED_KINDS = ("boilerplate", "near_best", "written")


@dataclass(frozen=True)
class GuardTrainingResult:
    """A fitted guard (``model``, written to ``out``), the share of each kind of fitting text
    it flags and floors (``shares``, ``kind_shares``; ``family``: each kind's family), the same
    when every question is judged by a guard fitted without it (``cross_fitted``, with
    ``settings.cross_fit``), and the seconds it took."""

    model: GuardModel
    out: Path | None
    shares: pd.DataFrame
    family: Mapping[str, str]
    cross_fitted: pd.DataFrame | None = None
    seconds: float = 0.0

    def format(self) -> str:
        """What ``nrp train guard`` prints: each detector's weights and threshold, the flagged
        share per kind (and cross-fitted), where the model went."""
        lines = []
        for detector in (self.model, *self.model.also):
            weights = ", ".join(
                f"{f} {w:+.4f}" for f, w in zip(detector.features, detector.weights, strict=True)
            )
            name = detector.fitted_on["name"]
            lines.append(f"{name}: {weights}; intercept {detector.intercept:+.4f}; "
                         f"threshold {detector.threshold:.4f}")  # fmt: skip
        fitted = {d.fitted_on["name"] for d in (self.model, *self.model.also)}
        for name, kinds, _ in DETECTORS:
            if name not in fitted:
                lines.append(f"{name}: not fitted (no {kinds} texts among the fitting texts)")
        lines.append("share per kind (family) flagged (a detector below its threshold) and "
                     "floored (evidence above the floor: scored last):")  # fmt: skip
        for kind, row in self.shares.iterrows():
            lines.append(f"  {kind:19s} {self.family[kind]:10s} {row.flagged:.3f}  "
                         f"{row.floored:.3f}")  # fmt: skip
        if self.cross_fitted is not None:
            lines.append("the same, cross-fitted (written replies also without their prompt):")
            for name, row in self.cross_fitted.iterrows():
                lines.append(f"  {name:30s} {row.flagged:.3f}  {row.floored:.3f}")
        if self.out is not None:
            lines.append(f"wrote {self.out} ({self.seconds:.0f} s)")
        return "\n".join(lines)


def negative_kinds(kinds: str) -> list[str]:
    """The kinds of a detector's comma-separated negatives: degenerate kinds and families
    (``kind_names``), the mined kinds, and ``written`` as every prompt's ``written:NAME``."""
    from nrp.validation.degenerate import kind_names

    names = kinds.split(",")
    written = [f"written:{p.stem}" for p in written_prompts()] if "written" in names else []
    return [*kind_names([k for k in names if k not in MINED_KINDS]),
            *[k for k in names if k in MINED_KINDS and k != "written"], *written]  # fmt: skip


def fit_direction(
    embeddings: np.ndarray, answers: np.ndarray, negative: np.ndarray, l2: float
) -> tuple[np.ndarray, float]:
    """``answer_like``'s linear model: an L2-penalised logistic regression (``l2``) of "real
    answer" on the embeddings of the ``answers`` rows against the ``negative`` rows, the two
    classes weighted to equal mass."""
    from nrp.training.guard_fit import balanced_weights, fit_logistic

    fit = answers | negative
    y = answers[fit].astype(float)
    beta = fit_logistic(embeddings[fit], y, balanced_weights(y), l2)
    return beta[:-1], float(beta[-1])


def answer_like_column(
    embeddings: np.ndarray,
    rows: pd.DataFrame,
    answers: np.ndarray,
    within: np.ndarray,
    settings: GuardTrainSettings,
) -> tuple[np.ndarray, tuple[np.ndarray, float]]:
    """``answer_like`` of every row and the direction fitted on the rows of ``within``. A row
    of ``within`` gets the value of a direction fitted without its question (``INNER_FOLDS``
    folds of the questions): the detector that reads it is fitted, and its threshold set, on
    values like those of texts the direction never saw, not on its own training rows' (which
    it separates too well). Every other row gets the direction of all ``within`` rows."""
    negative = rows["kind"].isin(negative_kinds(DIRECTION_NEGATIVES)).to_numpy()
    answers = answers | (rows["family"] == "llm_answer").to_numpy()
    direction = fit_direction(embeddings[within], answers[within], negative[within],
                              settings.direction_l2)  # fmt: skip
    column = embeddings @ direction[0] + direction[1]
    fold = question_folds(rows["qid"], INNER_FOLDS, settings.seed, among=within)
    for k in range(INNER_FOLDS):
        train, held = within & (fold != k), within & (fold == k)
        w, b = fit_direction(embeddings[train], answers[train], negative[train],
                             settings.direction_l2)  # fmt: skip
        column[held] = embeddings[held] @ w + b
    return column, direction


@dataclass(frozen=True)
class Fitting:
    """What every fit of one set of fitting texts reads: their features (``table``), the rows
    (kind, family, qid), which are real answers, the fluency reference the features were
    computed with, the texts' embeddings (``answer_like``'s direction is fitted on them), the
    settings and the term reference."""

    table: pd.DataFrame
    rows: pd.DataFrame
    answers: np.ndarray
    reference: tuple[tuple[str, ...], tuple[str, ...]]
    embeddings: np.ndarray
    settings: GuardTrainSettings
    terms: tuple[int, Mapping[str, int]] = (0, {})


def fit_detectors(
    fit: Fitting, within: np.ndarray | None = None
) -> tuple[GuardModel, pd.DataFrame]:
    """The guard of ``DETECTORS`` fitted on the rows of ``within`` (default: all): the first
    detector with the others in its ``also``, and ``answer_like``'s direction. A detector with
    no texts of its kinds among them (no boilerplate where no sentence recurs in enough
    questions' documents) is not fitted: the model has no such detector. Returns the model and
    the table with the ``answer_like`` column it was fitted with."""
    from nrp.errors import ConfigError
    from nrp.training.guard_fit import fit_guard_model

    table, rows, answers, settings = fit.table, fit.rows, fit.answers, fit.settings
    within = np.ones(len(rows), dtype=bool) if within is None else within
    column, direction = answer_like_column(fit.embeddings, rows, answers, within, settings)
    table = table.assign(answer_like=column)
    detectors = []
    for name, kinds, used in DETECTORS:
        if name == NEAR_BEST_DETECTOR and settings.near_best:
            kinds = f"{kinds},near_best"
        used_features = used.split(",")
        fitting = answers | rows["kind"].isin(negative_kinds(kinds)).to_numpy()
        # a detector abstains where one of its features is unknown (spec_rd of a question with
        # no other judged document): such rows do not fit it either
        fitting &= table[used_features].notna().all(axis=1).to_numpy() & within
        if answers[fitting].all() or not answers[fitting].any():
            if not detectors:  # the first holds the references: no guard without it
                raise ConfigError(f"guard training: no {kinds} texts to fit {name} on")
            continue  # nothing of its kind to tell from a real answer: not fitted
        detector = fit_guard_model(
            table[fitting], answers[fitting], fit.reference, features=tuple(used_features),
            l2=settings.l2, max_flagged=settings.max_flagged, terms=fit.terms,
        )  # fmt: skip
        detectors.append(replace(detector, fitted_on={"name": name, "negative_kinds": kinds}))
    # the references are the first detector's (features are computed once, with them)
    detectors[1:] = [
        replace(d, frequent_words=(), attested_pairs=(), reference_documents=0,
                document_frequency={})
        for d in detectors[1:]
    ]  # fmt: skip
    model = replace(detectors[0], also=tuple(detectors[1:]),
                    answer_direction=tuple(float(w) for w in direction[0]),
                    answer_offset=direction[1], rest_words=settings.rest_words)  # fmt: skip
    return model, table


def kind_shares(model: GuardModel, fitted: pd.DataFrame, kind: np.ndarray) -> pd.DataFrame:
    """Per kind, the share of its rows of ``fitted`` (a feature table) that ``model`` flags (a
    detector below its threshold) and floors (the evidence above the model's floor, as the
    guard scores them)."""
    from nrp.rankers.guard_model import floored

    rows = pd.DataFrame({
        "flagged": model.answer_share(fitted) < 1,
        "floored": floored(model.evidence(fitted), model.floor_evidence),
    })  # fmt: skip
    return rows.groupby(np.asarray(kind)).mean()


def cross_fitted_rows(fit: Fitting, folds: int, by_prompt: bool = True) -> pd.DataFrame:
    """Each fitting row as a guard fitted without its question judges it (``folds`` folds of
    the questions, drawn with ``seed``): its least share (``share``, ``GuardModel.answer_share``),
    its ``evidence`` and whether that floors it (``floored``). ``by_prompt``: a written
    non-answer is judged by a guard fitted without its question and without every reply of its
    prompt too (a wording it never saw)."""
    from nrp.rankers.guard_model import floored

    rows = fit.rows
    fold = question_folds(rows["qid"], folds, fit.settings.seed)
    kind = rows["kind"].to_numpy()
    share, evidence = np.empty(len(rows)), np.empty(len(rows))
    low = np.empty(len(rows), dtype=bool)
    prompts = sorted({c for c in kind if str(c).startswith("written:")}) if by_prompt else []
    for k in range(folds):
        held = [(fold == k, fold != k)]
        for prompt in prompts:
            held.append(((fold == k) & (kind == prompt), (fold != k) & (kind != prompt)))
        for judged, within in held:  # a prompt's replies: by a guard without them too
            model, fitted = fit_detectors(fit, within=within)
            share[judged] = model.answer_share(fitted[judged])
            evidence[judged] = model.evidence(fitted[judged])
            low[judged] = floored(evidence[judged], model.floor_evidence)
    return pd.DataFrame({"share": share, "evidence": evidence, "floored": low})


def cross_fitted_shares(fit: Fitting) -> pd.DataFrame:
    """The share of each kind flagged and floored when every question's texts are judged by a
    guard fitted without that question (``cross_fitted_rows``, ``cross_fit`` folds): what the
    guard does with questions it never saw, where the in-sample shares flatter the kinds it was
    fitted on; a written non-answer also without its prompt's replies."""
    from nrp.validation.validity import SHORT_ANSWER_WORDS, answer_words

    rows = fit.rows
    kind = rows["kind"].to_numpy()
    judged = cross_fitted_rows(fit, fit.settings.cross_fit)
    table = pd.DataFrame({"flagged": judged["share"] < 1, "floored": judged["floored"]})
    shares = table.groupby(kind).mean()
    short = (kind == "judged") & (answer_words(rows["text"]) <= SHORT_ANSWER_WORDS).to_numpy()
    shares.loc[f"judged <= {SHORT_ANSWER_WORDS} words"] = table[short].mean()
    return shares


def real_answers(rows: pd.DataFrame, settings: GuardTrainSettings) -> np.ndarray:
    """The fitting rows that are real answers: the judged documents, the restated ones of at
    least ``restated_grade`` and the drawn share of the terse ones."""
    answers = rows["kind"].eq("judged").to_numpy()
    if settings.restated_grade > 0:
        restated = (rows["kind"] == "restated_answer").to_numpy()
        answers = answers | (restated & (rows["grade"] >= settings.restated_grade).to_numpy())
    return answers | terse_answers(rows, settings.terse_answers, settings.seed)


def train_guard(
    collection: Collection | str,
    out: str | Path | None = None,
    settings: GuardTrainSettings | None = None,
    *,
    indexes_dir: str | Path | None = None,
    features_cache: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    **overrides: Any,
) -> GuardTrainingResult:
    """Fit the guard's detectors on ``collection`` (a ``Collection`` or its name under
    ``indexes_dir``) and write the model to ``out`` (a JSON file ``guard:model=OUT`` reads;
    None: not written). ``settings`` and ``overrides`` (its fields): ``GuardTrainSettings``.
    ``features_cache``: a pickle of the feature table (and the embeddings beside it) kept
    between fits, so that a refit with other settings encodes nothing again."""
    from nrp.collection.collection import Collection

    started = time.perf_counter()
    checked = replace(settings or GuardTrainSettings(), **overrides).checked()
    _check_held_out(checked.held_out)
    say = progress or (lambda line: None)
    main = collection if isinstance(collection, Collection) else Collection.load(
        str(collection), indexes_dir)  # fmt: skip
    fluency = [Collection.load(name, indexes_dir) for name in checked.fluency_collections]
    fitting_dimension(main, checked)  # a wrong dimension said before anything is generated
    say(f"guard training: {main.name}, the fitting texts (written replies by "
        f"{checked.written_llm}, kept in {main.path})")  # fmt: skip
    data = fitting_rows(main, checked, progress=progress)
    fluency_texts = data.reference_texts + [
        t for c in fluency for t in c.candidates()["text"].astype(str).drop_duplicates()
    ]
    fit = fitting_table(main, data, checked, fluency_texts, features_cache, progress)
    say("guard training: fitting the detectors")
    model, fitted = fit_detectors(fit)
    shares = kind_shares(model, fitted, fit.rows["kind"].to_numpy())
    cross = None
    if checked.cross_fit:
        say(f"guard training: cross-fitting ({checked.cross_fit} folds of the questions)")
        cross = cross_fitted_shares(fit)
    record = fitted_on(main, data, fit, model, shares, len(fluency_texts))
    model = replace(model, fitted_on=record)
    if out is not None:
        _write(model, Path(out))
    family = fit.rows.drop_duplicates("kind").set_index("kind")["family"].to_dict()
    return GuardTrainingResult(
        model,
        Path(out) if out is not None else None,
        shares,
        family,
        cross,
        time.perf_counter() - started,
    )


def fitting_table(
    collection: Collection,
    data: FittingData,
    settings: GuardTrainSettings,
    fluency_texts: list[str],
    features_cache: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Fitting:
    """The ``Fitting`` of ``data`` (``fitting_rows``): the fluency reference of
    ``fluency_texts`` and the term reference of the reference questions' documents, the rows'
    features computed with them and the packaged encoder (``features_cache``: kept between
    fits), the texts' embeddings, and which rows are real answers."""
    from nrp.progress import reporting
    from nrp.rankers.guard_features import GuardFeatures, judged_answers
    from nrp.rankers.guard_model import FEATURES, GuardModel
    from nrp.rankers.registry import make_ranker
    from nrp.training.guard_fit import document_frequencies, fluency_reference

    rows = data.rows
    reference = fluency_reference(fluency_texts, settings.frequent, settings.pair_docs)
    terms = document_frequencies(data.reference_texts)
    provisional = GuardModel(FEATURES, (0.0,) * len(FEATURES), 0.0, 0.5, *reference, *terms,
                             rest_words=settings.rest_words)  # fmt: skip
    others = collection.topics["query"].astype(str).tolist()
    documents = judged_answers(collection, rows[rows["kind"] == "judged"])
    features = GuardFeatures(provisional, make_ranker("dense:model=minilm"), others, documents)
    cache = Path(features_cache) if features_cache is not None else None
    if progress is not None:
        progress(f"guard training: features of {len(rows)} texts of "
                 f"{len(data.fitted_queries)} questions")  # fmt: skip
    with reporting(progress):  # the encoder's batches say how far they are
        table = feature_table(rows, features, cache)
        embeddings = text_embeddings(rows, features, cache)
    answers = real_answers(rows, settings)
    return Fitting(table, rows, answers, reference, embeddings, settings, terms)


def fitted_on(
    collection: Collection,
    data: FittingData,
    fit: Fitting,
    model: GuardModel,
    shares: pd.DataFrame,
    fluency_documents: int,
) -> dict[str, Any]:
    """What the model file records of its fitting: the collection (name and fingerprint), the
    questions fitted on and set aside, every setting, the share of each kind flagged (a
    detector below its threshold) and floored at fit time, the written prompts and the first
    detector's name and negatives."""
    from nrp.version import __version__

    settings = fit.settings
    return {
        "collection": collection.name,
        "collection_fingerprint": collection.meta.get("fingerprint"),
        "dimension": data.dimension,
        "queries": len(data.fitted_queries),
        "reference_queries": len(data.reference_queries),
        "left_out": list(settings.leave_out),
        "fluency_reference": f"the {len(data.reference_texts)} distinct documents of the "
        f"reference questions ({fluency_documents} texts with the fluency collections)",
        "term_reference": f"the {fit.terms[0]} distinct documents of the reference questions",
        "real_answers": int(fit.answers.sum()),
        "settings": settings.recorded(),
        "written_prompts": sorted(p.stem for p in written_prompts()),
        "flagged_share_at_threshold": {k: round(float(v), 4) for k, v in shares["flagged"].items()},
        "floored_share_at_fit": {k: round(float(v), 4) for k, v in shares["floored"].items()},
        "fitted_by": f"nrp {__version__} (nrp train guard)",
        "name": model.fitted_on["name"],
        "negative_kinds": model.fitted_on["negative_kinds"],
    }


def _check_held_out(family: str) -> None:
    """A held-out family must be one no detector is fitted on."""
    from nrp.errors import ConfigError
    from nrp.validation.degenerate import FAMILIES

    held = set(FAMILIES[family])
    fitted = [name for name, kinds, _ in DETECTORS if held & set(negative_kinds(kinds))]
    if fitted:
        raise ConfigError(
            f"guard training: held_out {family!r} is fitted on by {', '.join(fitted)}: hold out "
            f"a family no detector is fitted on"
        )


def _write(model: GuardModel, out: Path) -> None:
    """The model file, written whole (to a temporary file beside it, then renamed)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    try:
        model.to_json(partial)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
