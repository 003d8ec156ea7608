"""``guard``: any ranker, with texts that only mirror or evade the question put below every real
answer.

Why. A ranker that scores how well a text matches its question scores the question itself
highest: an answer that echoes, restates or politely evades the question gets NRP near 1.0, above
every judged answer (docs/validity.md). Fine-tuning the ranker on such texts does not help (an
echo's embedding stays next to its question's), and adding a degeneracy score to the ranker's
score trades the ranker's agreement with the judges for validity. The guard does neither: it
decides whether a text is an answer at all, and only then lets the ranker order it.

How. Small logistic detectors (``GuardModel``: nrp.rankers.guard_model) read features of
(question, text) that say how much the text contributes beyond the question, and read no
wording (what each feature is: nrp.rankers.guard_features). A text whose evidence of being
no answer, summed over the detectors, exceeds the model's floor is flagged, and floored
(the evidence's arithmetic: nrp.rankers.guard_model).

Scores: the ranker's own score for an unflagged text (which must lie within
``+-FLAG_OFFSET / 2``), and for a flagged one a score in ``[-FLAG_OFFSET, -FLAG_OFFSET / 2)`` that
grows with the guard's probability, so every flagged text ranks below every unflagged one,
flagged texts rank among themselves by how likely the guard holds them to be answers, and the
ranker's order of unflagged texts, its agreement with the judges, is untouched. NRP of a flagged
answer is then the share of D_q that is flagged too (usually none: NRP 0).

The packaged model (``guard_model.json``) was fitted by ``nrp train guard``;
``model=FILE`` reads another fitted model. What it was fitted on and how its settings were
chosen: docs/studies/guard-study.md.

Calibrated. Bound to a collection, the guard sets each detector's threshold anew on the
collection's own judged answers (``calibrate``: the share, 0.01 by default; documents of a gain
above 0 in the first dimension, each with its own question) so that it flags that share of them,
and the floor so that at most that share of them is floored in all; calibration loosens, never
tightens (``CALIBRATION``): judged answers that all read as answers by far say nothing of how the
answers to be scored read. The thresholds and the floor are kept beside the collection
(``guard-thresholds-KEY.json``); unbound, with ``calibrate=0``, or with fewer judged answers than
``1 / calibrate``, the model's own. ``threshold=`` replaces the first detector's.

Content. ``content=W`` adds ``W * log(1 + new terms)`` (the ``log_novel`` feature) to the
guarded ranker's score: a small reward for what a text says beyond the question (judges grade
complete answers above partial ones; a ranker of similarity to the question cannot see it). 0 by
default; the default validation candidates include ``guard:content=0.06`` for dense's cosine.

Quoted. The guarded ranker scores a text without the question it repeats (``unquoted``): every
run of consecutive words the text copies from the question, of at least ``quoted`` of the
question's words (0.3 by default) and at least ``QUOTED_WORDS``, goes before scoring, unless one
of the question's judged answers says that run too (a page whose heading asks the question). A
similarity ranker scores a question it finds in a text as the best match there is; ``quoted``
takes that lift from the texts the guard lets through. A judged answer is never cut. 0: the
whole text.

Spec: ``guard:ranker=dense`` (default), ``guard:ranker=bm25;k1=0.9``: the guarded ranker's own
parameters separated by ``;`` as in ``fuse``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from nrp.errors import ConfigError, InputError, ModelError, NrpError
from nrp.rankers.base import Ranker
from nrp.rankers.cache import SCORE_CACHE_FILE, CachedRanker, ScoreCache
from nrp.rankers.fusion import join_specs, judged_rows, judged_texts, scores_with_cache
from nrp.rankers.guard_features import (
    ENCODER,
    QUOTED_WORDS,
    GuardFeatures,
    judged_answers,
    quoted_runs,
    unquoted,
)
from nrp.rankers.guard_model import (
    CALIBRATED_SHARE,
    CALIBRATION,
    FEATURE_DEFINITIONS,
    GuardModel,
    enough_to_calibrate,
    evidence_of,
    floored,
    packaged_model,
    with_thresholds,
)
from nrp.rankers.registry import (
    Param,
    RankerInfo,
    RankerSpec,
    make_ranker,
    nested_specs,
    register,
)
from nrp.spec import format_spec
from nrp.tables import write_aside

if TYPE_CHECKING:  # pragma: no cover - typing only
    from nrp.collection.collection import Collection

#: a flagged text's score is the ranker's minus this: below any unflagged text of a ranker whose
#: scores span less than it (cosines, logits, BM25 over a few hundred terms)
FLAG_OFFSET = 1.0e4
#: ``quoted``: a run of consecutive question words copied into a text is the question's, not the
#: text's, when it holds at least this share of the question's words (chosen on MEDIQA
#: train+val: scripts/studies/tune_guard.py) and at least ``QUOTED_WORDS`` words
QUOTED_SHARE = 0.3
#: ``content``'s largest weight: the reward of a text of ten thousand new terms (log 1e4 = 9.2)
#: stays far below ``FLAG_OFFSET / 2``, so that a flagged text still ranks below every other (at
#: 1e308 every text was pushed past it and every answer came last)
MAX_CONTENT = 100.0


PARAMS: dict[str, Param] = {
    "ranker": Param(
        str,
        "dense",
        "the ranker guarded (its own parameters separated by ;, as in fuse: bm25;k1=0.9)",
        nested=True,
    ),
    "model": Param(str, "", "a fitted guard model file (default: the packaged one)", kind="model"),
    "threshold": Param(
        float,
        -1.0,
        "the first detector flags a text whose probability of being a real answer is below "
        "this (-1: the model's threshold, calibrated where bound)",
    ),
    "calibrate": Param(
        float,
        CALIBRATED_SHARE,
        "bound to a collection, set each detector's threshold so that it flags this share of the "
        "collection's judged answers (gain above 0), as it was fitted to flag of the fitting "
        "answers, where that loosens it (never stricter than fitted); 0: the model's thresholds",
        minimum=0,
        maximum=0.5,
    ),
    "content": Param(
        float,
        0.0,
        "add this times log(1 + the text's distinct content terms beyond the question) to the "
        "guarded ranker's score (0.06 for dense's cosine, chosen on MEDIQA train+val)",
        minimum=0,
        maximum=MAX_CONTENT,
    ),
    "quoted": Param(
        float,
        QUOTED_SHARE,
        "the guarded ranker scores a text without every run of consecutive words it copies from "
        f"the question that holds at least this share of its words (and {QUOTED_WORDS} words or "
        "more; 0: the whole text)",
        minimum=0,
        maximum=1,
    ),
}


class GuardRanker(Ranker):
    """The guarded ranker's scores, flagged texts moved below (module docstring)."""

    name: ClassVar[str] = "guard"
    injection: ClassVar[str] = "pointwise"

    def __init__(self, params: Mapping[str, Any] | None = None, ranker: Ranker | None = None):
        merged = {key: p.default for key, p in PARAMS.items()}
        merged.update(params or {})
        if ranker is None:
            (spec,) = nested_specs(merged["ranker"], PARAMS["ranker"], self.name, "ranker")
        sub = ranker if ranker is not None else spec.build()
        if isinstance(sub, GuardRanker):
            raise ConfigError("ranker 'guard': a guard inside a guard is not supported")
        merged["ranker"] = join_specs([sub])
        if float(merged["content"]) < 0:
            raise ConfigError(
                f"ranker 'guard': content must be at least 0, not {merged['content']}"
            )
        threshold = float(merged["threshold"])
        if threshold != -1.0 and not 0.0 <= threshold <= 1.0:
            raise ConfigError(
                f"ranker 'guard': threshold must lie in [0, 1] (or -1), not {threshold}"
            )
        super().__init__(merged)
        self.ranker = sub
        self.depends_on_candidate_set = sub.injection != "pointwise" or sub.depends_on_candidate_set
        self._features: GuardFeatures | None = None
        self._others: list[str] = []
        self._documents: dict[str, list[str]] = {}  # bound: each question's judged documents
        self._store: Path | None = None  # bound: the collection's folder (document embeddings)
        self._dq_texts: dict[str, str] = {}  # bound: row key of D_q -> its text
        self._quoted_runs: dict[str, tuple[int, frozenset[tuple[str, ...]]]] = {}  # quoted_runs
        self._cached: CachedRanker | None = None  # bound: the guarded ranker's score cache
        self._detectors: GuardModel | None = None  # bound: the model calibrated (``detectors``)

    @cached_property
    def model(self) -> GuardModel:
        """The fitted model, read once per ranker (it is read on every scoring call). A file
        that is none is a ``ModelError`` (the CLI says why; the service answers as for any model
        it does not offer, and tells nothing of the file)."""
        path = str(self.params["model"])
        if not path:
            return packaged_model()
        try:
            return GuardModel.from_json(path)
        except InputError as error:
            raise ModelError(str(error), spec="guard", param="model", value=path) from None

    def parts(self) -> tuple[Ranker, ...]:
        return (self.ranker,)

    def identity(self) -> dict[str, Any]:
        """Name and parameters, with the guarded ranker's fingerprint and the model's content."""
        identity = super().identity()
        identity["params"]["ranker"] = self.ranker.fingerprint()
        identity["params"]["model"] = self.model.digest
        identity["params"]["features"] = FEATURE_DEFINITIONS
        identity["params"]["calibration"] = CALIBRATION
        return identity

    def spec(self, complete: bool = False) -> str:
        if not complete:
            return super().spec()
        params = {**self.params, "ranker": join_specs([self.ranker], complete=True)}
        return format_spec(self.name, {k: v for k, v in sorted(params.items()) if v is not None})

    @property
    def score_tolerance(self) -> float:
        return self.ranker.score_tolerance

    def floors(self, scores: np.ndarray) -> np.ndarray:
        """The flagged texts' scores: those below ``-FLAG_OFFSET / 2``."""
        return np.asarray(scores, dtype=float) < -FLAG_OFFSET / 2

    def bind_collection(self, collection: Collection) -> None:
        """Bind the guarded ranker; the collection's questions are those ``spec_rq`` compares
        with; D_q's scores by the guarded ranker come from the score cache beside it (what
        validating that ranker stores) when it is pointwise."""
        super().bind_collection(collection)
        self.ranker.bind_collection(collection)
        self._others = collection.topics["query"].astype(str).tolist()
        self._features = None
        candidates = collection.candidates()
        self._documents = judged_answers(collection, candidates)
        self._store = Path(collection.path)
        self._dq_texts = judged_texts(candidates)
        self._quoted_runs = {}  # read from this collection's judged answers
        self._detectors = None  # calibrated on this collection's judged answers
        self._cached = CachedRanker(
            self.ranker,
            ScoreCache(collection.path / SCORE_CACHE_FILE),
            str(collection.meta["fingerprint"]),
        )

    def ranker_scores(self, frame: pd.DataFrame) -> np.ndarray:
        """The guarded ranker's scores of ``frame``, each text without the runs it copies from
        its question (``unquoted``): D_q's rows of a pointwise ranker from the score cache
        (computed and stored when missing), every other row computed. A row is D_q's when its
        key (qid, docno) and the text scored are a judged document's: a text of its own under a
        judged document's docno, or a document cut, is scored and never stored under it."""
        share = float(self.params["quoted"])
        queries, texts = _queries_and_texts(frame)
        runs = self._quoted_runs
        for q in dict.fromkeys(queries):  # once per question while bound, not once per batch
            if q not in runs:
                runs[q] = quoted_runs(q, share, self._documents.get(q, ()))
        scored = [unquoted(q, t, share, runs=runs[q]) for q, t in zip(queries, texts, strict=True)]
        if scored != texts:
            frame = frame.assign(text=scored)
        rows = self.ranker.formulate(frame)
        in_dq = self._from_cache(frame)
        if not in_dq.any():
            return np.asarray(self.ranker.score_frame(rows), dtype=float)
        return scores_with_cache(self._cached, rows, in_dq)

    def _from_cache(self, frame: pd.DataFrame) -> np.ndarray:
        """True for each row whose guarded-ranker score ``ranker_scores`` reads from the score
        cache: D_q's rows (``judged_rows``) of a pointwise ranker, while bound."""
        if self._cached is None or self.depends_on_candidate_set:
            return np.zeros(len(frame), dtype=bool)
        return judged_rows(frame, self._dq_texts)

    def features(self) -> GuardFeatures:
        if self._features is None:
            self._features = GuardFeatures(
                self.model, self._encoder(), self._others, self._documents, self._store
            )
        return self._features

    def _encoder(self) -> Ranker:
        """The features' encoder (``ENCODER``, at the guarded ranker's ``dtype`` where that
        ranker is a ``dense`` one, so ``guard:ranker=dense;dtype=bf16`` embeds in bf16
        throughout): the guarded ranker itself when it is that encoder (the same model and
        parameters: the default ``guard``), so that one embedding stream serves both
        (``embedding_stream``)."""
        dtype = self.ranker.params.get("dtype", "fp32") if self.ranker.name == "dense" else "fp32"
        encoder = make_ranker(RankerSpec.parse(ENCODER).at_dtype(str(dtype)))
        return self.ranker if self.ranker.fingerprint() == encoder.fingerprint() else encoder

    @contextlib.contextmanager
    def embedding_stream(self, texts: Sequence[str]) -> Iterator[None]:
        """While open, the features' encoder serves the embeddings of ``texts`` (the positioner's
        answers and their questions) from one length-sorted stream embedded now
        (``DenseRanker.embedding_stream``); where the guarded ranker is that encoder, its scores
        read the same vectors, so each text is embedded once, not once for the ranker and once
        for the features. Vectors move by float rounding with the stream (about 1e-7); NRP
        does not (docs/nrp.md)."""
        with self.features().encoder.embedding_stream(texts):
            yield

    def assess(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The guard's features of each row (query, text), its ``answer_share`` (the least of
        each detector's probability of a real answer over its threshold), its ``evidence`` of
        being no answer (``GuardModel.evidence``) and whether it is flagged, and floored
        (``flagged``: the evidence above the model's ``floor_evidence``, ``floored``)."""
        table = self.features().frame(*_queries_and_texts(frame))
        detectors = self.detectors()
        shares = detectors.shares(table, self._given_threshold)
        evidence = evidence_of(shares)
        return table.assign(
            answer_share=shares.min(axis=1),
            evidence=evidence,
            flagged=floored(evidence, detectors.floor_evidence),
        )

    def collection_work(self) -> str | None:
        """``Ranker.collection_work``: calibrating the detectors on the bound collection's
        judged answers (every one's features), when this ``calibrate`` has no thresholds kept
        beside the collection and none calibrated in this process; else the guarded ranker's."""
        share = float(self.params["calibrate"])
        rows = sum(len(docs) for docs in self._documents.values())
        pending = (
            self._detectors is None
            and enough_to_calibrate(rows, share)
            and not self._kept_path("thresholds", [share]).is_file()
        )
        if pending:
            return f"calibrating the guard (calibrate={share:g}) on {rows:,} judged answers"
        return super().collection_work()

    def detectors(self) -> GuardModel:
        """The model whose thresholds flag texts: bound to a collection, each detector's
        threshold calibrated on the collection's judged answers (``calibrate``; kept beside the
        collection, ``guard-thresholds-KEY.json``), else the model's own."""
        share = float(self.params["calibrate"])
        answers = sum(len(docs) for docs in self._documents.values())
        if not enough_to_calibrate(answers, share):  # no detector has enough rows to go by
            return self.model
        if self._detectors is None:
            self._detectors = self._calibrated(share)
        return self._detectors

    @property
    def _given_threshold(self) -> float | None:
        """``threshold=``: the first detector's threshold, None for the model's own (-1)."""
        given = float(self.params["threshold"])
        return None if given == -1.0 else given

    def _judged_rows(self) -> list[tuple[str, str]]:
        """(question, judged answer) of the bound collection: what calibration reads."""
        return [(q, t) for q, docs in self._documents.items() for t in docs]

    def _kept(self, kind: str, key: list[Any], compute: Callable[[], Any], read: Callable) -> Any:
        """What ``compute`` gives (JSON), kept beside the collection in
        ``guard-KIND-KEY.json`` (``KEY``: a hash of what calibration reads and ``key``) and
        read back with ``read`` by the next guard; a file that cannot be read is computed and
        written again, a folder that cannot be written keeps nothing."""
        path = self._kept_path(kind, key) if self._store is not None else None
        if path is not None and path.is_file():
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                return read(json.loads(path.read_text(encoding="utf-8")))
        found = compute()
        if path is not None:
            with contextlib.suppress(OSError):
                write_aside(path, lambda part: part.write_text(json.dumps(found) + "\n"))
        return read(found)

    def _kept_path(self, kind: str, key: list[Any]) -> Path:
        """Where ``_kept`` keeps what it computes for ``kind`` and ``key`` (bound)."""
        digest = hashlib.sha256(
            json.dumps([self.model.digest, self.features().encoder.fingerprint(),
                        FEATURE_DEFINITIONS, CALIBRATION, *key[:1], self._others,
                        self._judged_rows(), *key[1:]]).encode("utf-8", "surrogatepass")
        )  # fmt: skip
        return Path(self._store or ".") / f"guard-{kind}-{digest.hexdigest()[:24]}.json"

    def _calibrated(self, share: float) -> GuardModel:
        def compute() -> dict[str, Any]:
            rows = self._judged_rows()
            table = self.features().frame([q for q, _ in rows], [t for _, t in rows])
            calibrated = self.model.calibrated(table, share)
            return {
                "thresholds": [d.threshold for d in (calibrated, *calibrated.also)],
                "floor_evidence": calibrated.floor_evidence,
            }

        return self._kept(
            "thresholds", [share], compute, lambda kept: with_thresholds(self.model, kept)
        )

    def guarded(self) -> Ranker:
        return self.ranker

    def cross_fitted_floors(self, folds: int, seed: int) -> tuple[int, int] | None:
        """``Ranker.cross_fitted_floors``: the judged answers calibration reads (a gain above 0
        in the first dimension, each with its question), the questions drawn into ``folds``
        parts with ``seed``; each part's answers judged by the detectors calibrated on the
        other parts' (``GuardModel.calibrated``, as ``detectors`` calibrates); kept beside the
        collection (``guard-crossfit-KEY.json``). None unbound, with ``calibrate=0`` or with
        fewer than two questions."""
        share = float(self.params["calibrate"])
        if share <= 0 or folds < 2 or len(self._documents) < 2:
            return None
        key = [share, folds, seed, float(self.params["threshold"])]
        return self._kept(
            "crossfit", key, lambda: list(self._cross_fitted(share, folds, seed)),
            lambda kept: (int(kept[0]), int(kept[1])),
        )  # fmt: skip

    def _cross_fitted(self, share: float, folds: int, seed: int) -> tuple[int, int]:
        """``cross_fitted_floors`` computed: (judged answers, of them floored)."""
        questions = list(self._documents)
        rows = self._judged_rows()
        table = self.features().frame([q for q, _ in rows], [t for _, t in rows])
        drawn = np.random.default_rng(seed).permutation(len(questions)) % folds
        part = dict(zip(questions, drawn.tolist(), strict=True))
        parts = np.array([part[q] for q, _ in rows])
        count = 0
        for k in range(folds):
            model = self.model.calibrated(table[parts != k], share)
            evidence = model.evidence(table[parts == k], self._given_threshold)
            count += int(floored(evidence, model.floor_evidence).sum())
        return len(rows), count

    def flags(self, frame: pd.DataFrame) -> np.ndarray:
        """True for each row whose text the guard takes for no real answer."""
        if frame.empty:
            return np.zeros(0, dtype=bool)
        return self.assess(frame)["flagged"].to_numpy(dtype=bool)

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        frame = frame.reset_index(drop=True)
        with self._shared_embeddings(frame):
            scores = self.ranker_scores(frame)
            if np.any(np.abs(scores) >= FLAG_OFFSET / 2):
                raise NrpError(
                    f"{self.spec()}: the guarded ranker scores beyond +-{FLAG_OFFSET / 2:g}; "
                    "a flagged text could not be put below every other"
                )
            if frame.empty:
                return scores
            return self.guarded_scores(scores, self.assess(frame))

    @contextlib.contextmanager
    def _shared_embeddings(self, frame: pd.DataFrame) -> Iterator[None]:
        """Where the guarded ranker is the features' encoder and no stream is open (a caller
        other than the positioner: validation's degenerate texts, the service's requests), one
        stream of the questions and texts of the rows that both would embed: rows whose
        features are not known yet and whose ranker score is not read from the score cache.
        Rows only one of them needs are embedded by that one, as before."""
        features = self.features()
        encoder = features.encoder
        if encoder is not self.ranker or frame.empty or encoder.streaming:
            yield
            return
        queries, texts = _queries_and_texts(frame)
        both = ~features.known(queries, texts) & ~self._from_cache(frame)
        if not both.any():
            yield
            return
        rows = np.flatnonzero(both)
        with encoder.embedding_stream([queries[i] for i in rows] + [texts[i] for i in rows]):
            yield

    def guarded_scores(self, scores: np.ndarray, assessed: pd.DataFrame) -> np.ndarray:
        """The guard's scores from the guarded ranker's (``ranker_scores``) and the guard's
        view of the same rows (``assess``): flagged rows moved below, ``content`` added."""
        content = float(self.params["content"])
        if content:
            scores = scores + content * assessed["log_novel"].to_numpy(dtype=float)
        flagged = assessed["flagged"].to_numpy(dtype=bool)
        # flagged: in [-FLAG_OFFSET, -FLAG_OFFSET / 2) by the guard's probability, spread so that
        # the relative tie tolerance at this magnitude never merges two distinct probabilities
        share = assessed["answer_share"].to_numpy(dtype=float)
        below = -FLAG_OFFSET + (FLAG_OFFSET / 2) * np.minimum(share, 1.0)
        return np.where(flagged, below, scores)


def _queries_and_texts(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The questions and texts of a ranker frame's rows (missing ones "")."""
    return (frame["query"].fillna("").astype(str).tolist(),
            frame["text"].fillna("").astype(str).tolist())  # fmt: skip


def _available() -> tuple[bool, str]:
    from nrp.rankers.registry import all_rankers

    return all_rankers()["dense"].available()


register(
    RankerInfo(
        name="guard",
        description="a ranker whose texts that only mirror or evade the question (echoes, "
        "restatements, keyword lists, evasions, word salad) rank below every real answer; "
        "docs/validity.md",
        backend="sentence-transformers",
        build=lambda params: GuardRanker(params),
        params=PARAMS,
        available=_available,
    )
)
