"""LLM-as-judge: rubric scores (G-Eval or Prometheus style) and TRUE / FALSE / NOT GIVEN labels.

One evaluator, ``judge``, over any ``nrp.llm`` backend: ``backend=local`` (a transformers model
in this process; default the packaged SmolLM2-135M-Instruct GGUF) or ``backend=openai`` (any
OpenAI-compatible server, ``nrp.llm.server`` included). Prompts are versioned template files
(``nrp/llm/templates``); reading the output is ``nrp.llm.parsing``.

``mode=rubric``: a 1-5 score per criterion (``criteria=relevance;correctness;readability``, one
prompt per criterion and item; descriptions and five-level rubrics in
``templates/criteria-v1.yaml``, a generic text for criteria not listed there).

- ``style=geval`` (G-Eval, Liu et al. 2023): the answer is scored alone, the score written first;
  the score is the probability-weighted sum_s s * p(s) over the tokens "1".."5" at that position
  when log-probabilities are available (always with the local backend; with a remote one when
  it returns ``top_logprobs``), else the stated integer. By default without the reference
  (``reference=auto``; ``reference=yes`` adds the item's first reference for comparison).
- ``style=prometheus`` (Prometheus 2, Kim et al. 2024): feedback against the criterion's
  rubric, then "[RESULT] N"; the reference, when the item has one, is the answer worth 5.

Columns: ``judge.CRITERION`` (mean over samples) and, with ``samples > 1``,
``judge.CRITERION_sd`` (sample sd over the parsed samples).

``mode=tfn``: the answer against the expected answer (the item's first reference), with the
labels and the three strategies of Dang, Le and Nguyen (2026, "End-to-End Chatbot Evaluation
with Adaptive Reasoning and Uncertainty Filtering"): TRUE (the answer gives what the question
asks and agrees with the expected answer), FALSE (it tries to answer but does not match), NOT
GIVEN (it declines, says it does not know, or talks about other things). Items without a
reference get no label (nothing to check against).

- ``strategy=single``: one prompt; the label's confidence is its probability at its first token
  (renormalised over the three labels) with log-probabilities, else the stated confidence.
- ``strategy=sequential``: "does the answer give the information?" (GIVEN / NOT GIVEN, from the
  question and answer), then, in the same conversation and only when it does, "does it agree
  with the expected answer?" (TRUE / FALSE); confidence P(GIVEN) * P(label | GIVEN), or
  P(NOT GIVEN) when the chain stops at the first decision.
- ``strategy=adaptive``: at most ``steps`` (K) reasoning turns, each stating a confidence in
  [0, 1], ending as soon as the model states "Label: X" (otherwise a last turn asks for it);
  the label's confidence is the product of the stated confidences of all turns, the label's
  own included (the source multiplies its step confidences with the final one). The source
  asks for all K steps in one JSON reply; one step per turn keeps replies short enough for
  small models and lets a chain stop early.

Columns: ``judge.confidence`` (float), and the extra columns ``judge.label`` (str or None) and
``judge.review`` (True when the label is missing or its confidence is missing or below
``threshold``); with ``samples > 1`` the label is the majority label, ``judge.agreement`` its
share of the samples, and ``judge.confidence`` / ``judge.confidence_sd`` the mean / sd of its
confidence over the samples that gave it.

``decoding=choice`` (forced choice; local backend; ``geval``, ``single``, ``sequential``):
nothing is generated. Each score or label is scored as the reply (after the template's answer
prefix: "" for G-Eval, "Label: ", "Decision: ") from one forward pass
(``ChatBackend.choice_logprobs``), and the probabilities of the choices play the role of the
first-token log-probabilities: the G-Eval score is sum_s s * p(s) over the five scores, the label
is the most likely one and its confidence its share. Why: small offline models rarely write the
asked format (they echo the prompt: SmolLM2-135M wrote a readable G-Eval score for 0 of 16
MEDIQA answers and a TFN label for 0 of 30 items of the Vietnamese chatbot set), so free
generation leaves almost every item missing, while their preference among the fixed replies is
still defined; the option makes the offline judge usable and is the exact form of what G-Eval
approximates by sampling.

Both modes add ``judge_raw``: a JSON list of every raw output (per criterion / sample / turn)
with what was read from it. Unparseable output is missing (NaN / None) with its text kept in
``judge_raw``, never 0.

Samples: ``samples=n`` draws n outputs per prompt, sample j with seed ``seed + j``
(``nrp.llm.backends``); n > 1 needs ``temperature > 0`` (greedy decoding would repeat one output
n times). The cache key (``fingerprint``) holds the model (file checksum, or the remote model's
name and the base URL), every parameter that changes outputs (seed, temperature, ...), the
template's name and SHA-256, and the criteria file's SHA-256.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from nrp.errors import ConfigError
from nrp.evaluators.base import Evaluator, EvaluatorInfo, Param, register

if TYPE_CHECKING:
    from nrp.llm.backends import ChatBackend, Completion, Messages, Prompt
    from nrp.llm.parsing import LabelReading
    from nrp.llm.prompts import PromptTemplate

FAMILY = "judge"
MODES = ("rubric", "tfn")
STYLES = ("geval", "prometheus")
STRATEGIES = ("single", "sequential", "adaptive")
REFERENCE_CHOICES = ("auto", "yes", "no")
BACKEND_CHOICES = ("local", "openai")
DECODINGS = ("generate", "choice")
#: forced choice: what the reply starts with, per step, before the scored choices
CHOICE_PREFIX = {"geval": "", "single": "Label: ", "given": "Decision: ", "truth": "Label: "}
#: max_new_tokens per generation when the parameter is 0
DEFAULT_MAX_NEW_TOKENS = {
    "geval": 16,
    "prometheus": 256,
    "single": 32,
    "sequential": 32,
    "adaptive": 64,
}
#: alternatives per position asked for (OpenAI's maximum)
TOP_LOGPROBS = 20
SCALE = (1, 5)
CRITERIA_FILE = "criteria-v1.yaml"
CRITERION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

RUBRIC_PLACEHOLDERS = {
    "criterion",
    "criterion_title",
    "criterion_description",
    "question",
    "answer",
    "reference",
    "reference_block",
} | {f"rubric_{s}" for s in range(SCALE[0], SCALE[1] + 1)}
TFN_PLACEHOLDERS = {"question", "answer", "reference", "step", "steps"}
#: the sections each template kind must have
REQUIRED_SECTIONS = {
    "geval": ("user",),
    "prometheus": ("user",),
    "single": ("user",),
    "sequential": ("given", "truth"),
    "adaptive": ("start", "next", "final"),
}

JUDGE_PARAMS: dict[str, Param] = {
    "backend": Param(str, "local", "local (transformers here) or openai (HTTP)", BACKEND_CHOICES),
    "model": Param(
        str,
        "",
        "local: folder, hub id or .gguf ('' = packaged SmolLM2-135M-Instruct); "
        "openai: model id ('' = the server's only model)",
        kind="model",
    ),
    "base_url": Param(
        str, "", "openai: API root (default $NRP_OPENAI_BASE_URL or $OPENAI_BASE_URL)"
    ),
    "mode": Param(str, "rubric", "rubric (1-5 per criterion) or tfn (TRUE/FALSE/NOT GIVEN)", MODES),
    "style": Param(str, "geval", "rubric: geval (weighted score) or prometheus", STYLES),
    "criteria": Param(str, "relevance", "rubric: criteria separated by ';'"),
    "reference": Param(
        str,
        "auto",
        "rubric: show the item's first reference (auto: prometheus yes, geval no)",
        REFERENCE_CHOICES,
    ),
    "strategy": Param(str, "single", "tfn: single, sequential or adaptive", STRATEGIES),
    "steps": Param(int, 3, "tfn adaptive: at most K reasoning turns"),
    "threshold": Param(float, 0.5, "tfn: judge.review when confidence < threshold"),
    "samples": Param(int, 1, "outputs per prompt (seeds seed..seed+n-1)"),
    "temperature": Param(float, 0.0, "0: greedy; samples > 1 need > 0", minimum=0),
    "seed": Param(int, 0, "seed of sample 0"),
    "max_new_tokens": Param(int, 0, "per generation (0: geval 16, prometheus 256, tfn 32/64)"),
    "template": Param(
        str, "", "template name or file ('' = the mode's *-v1 template)", kind="path"
    ),
    "logprobs": Param(bool, True, "use token log-probabilities when the backend gives them"),
    "decoding": Param(
        str,
        "generate",
        "generate (the model writes its reply) or choice (forced choice: the probabilities of "
        "the scores / labels as the reply; local backend; geval, tfn single and sequential)",
        DECODINGS,
    ),
    "batch": Param(int, 8, "items per call (local: prompts per forward pass)", minimum=1),
    "concurrency": Param(int, 4, "openai: parallel requests", minimum=1),
    "timeout": Param(float, 60.0, "openai: seconds per request"),
    "retries": Param(int, 5, "openai: retries on 429, 5xx, timeouts, connection errors", minimum=0),
    "device": Param(str, "auto", "local: auto, cpu or cuda[:N]"),
    "dtype": Param(str, "fp32", "local: fp32; fp16 or bf16 on a GPU", ("fp32", "fp16", "bf16")),
}


# -- criteria -------------------------------------------------------------------------------------
@cache
def _criteria_file() -> tuple[dict[str, Any], str]:
    from nrp.llm.prompts import TEMPLATE_DIR

    path = TEMPLATE_DIR / CRITERIA_FILE
    data = path.read_bytes()
    from nrp.collection.mapping_files import read_mapping_text

    table = read_mapping_text(path, data.decode("utf-8")) or {}
    return table, hashlib.sha256(data).hexdigest()


def criterion_values(name: str) -> dict[str, str]:
    """Title, description and rubric lines of a criterion (generic ones for names the criteria
    file does not list)."""
    table, _ = _criteria_file()
    entry = table.get(name)
    title = name.replace("_", " ").capitalize()
    if entry is None:
        words = name.replace("_", " ")
        values = {
            "criterion_title": title,
            "criterion_description": f"how good the answer is with respect to {words}.",
        }
        generic = {1: "very poor", 2: "poor", 3: "acceptable", 4: "good", 5: "excellent"}
        rubric = {s: f"The answer's {words} is {generic[s]}." for s in generic}
    else:
        values = {
            "criterion_title": str(entry.get("title") or title),
            "criterion_description": str(entry["description"]),
        }
        rubric = {int(k): str(v) for k, v in entry["rubric"].items()}
    values["criterion"] = name
    for score in range(SCALE[0], SCALE[1] + 1):
        values[f"rubric_{score}"] = rubric[score]
    return values


def parse_criteria(value: str) -> list[str]:
    names = [c.strip().lower() for c in str(value).split(";") if c.strip()]
    if not names:
        raise ConfigError("judge: criteria is empty (e.g. criteria=relevance;readability)")
    for name in names:
        if not CRITERION_NAME.match(name):
            raise ConfigError(
                f"judge: criterion {name!r} must be lower-case letters, digits and _ "
                "(criteria are separated by ';')"
            )
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ConfigError(f"judge: criterion {', '.join(duplicated)} named twice")
    return names


# -- the evaluator --------------------------------------------------------------------------------
def _json(value: Any) -> str:
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(value), ensure_ascii=False)


def _choice_logprobs(completion: Completion) -> dict[str, float]:
    """The scored choices of a forced-choice reply (its last token's alternatives)."""
    return dict(completion.logprobs[-1].top) if completion.logprobs else {}


class Judge(Evaluator):
    """The ``judge`` evaluator (see the module docstring). ``backend``: a ``ChatBackend`` to use
    instead of building one from the parameters (e.g. one shared with answer generation); its
    ``checksum()`` enters the cache key."""

    name: ClassVar[str] = "judge"
    version: ClassVar[str] = "1"
    default_batch: ClassVar[int] = 8

    def __init__(self, params: Mapping[str, Any] | None = None, backend: ChatBackend | None = None):
        defaults = {k: p.default for k, p in JUDGE_PARAMS.items()}
        super().__init__({**defaults, **dict(params or {})})
        p = self.params
        unknown = sorted(set(p) - set(JUDGE_PARAMS) - {"label"})
        if unknown:
            raise ConfigError(f"judge has no parameter(s) {', '.join(unknown)}")
        for key, declared in JUDGE_PARAMS.items():
            if declared.choices is not None and p[key] not in declared.choices:
                raise ConfigError(
                    f"judge: parameter {key}={p[key]!r} must be one of "
                    f"{', '.join(map(str, declared.choices))}"
                )
        self.mode = str(p["mode"])
        self.style = str(p["style"])
        self.strategy = str(p["strategy"])
        self.samples = int(p["samples"])
        if self.samples < 1:
            raise ConfigError(f"judge: samples must be at least 1, got {self.samples}")
        if self.samples > 1 and float(p["temperature"]) <= 0:
            raise ConfigError(
                f"judge: samples={self.samples} needs temperature > 0 (greedy decoding would "
                "give the same output every time), e.g. temperature=0.7"
            )
        if int(p["steps"]) < 1:
            raise ConfigError(f"judge: steps must be at least 1, got {p['steps']}")
        if not 0.0 <= float(p["threshold"]) <= 1.0:
            raise ConfigError(f"judge: threshold must be in [0, 1], got {p['threshold']}")
        if int(p["max_new_tokens"]) < 0:
            raise ConfigError("judge: max_new_tokens must be >= 0 (0: the mode's default)")
        self.kind = self.style if self.mode == "rubric" else self.strategy
        self.forced = p["decoding"] == "choice"
        if self.forced:
            if self.kind not in ("geval", "single", "sequential"):
                raise ConfigError(
                    f"judge: decoding=choice scores fixed replies; {self.kind} needs the "
                    "model's own text (use decoding=generate)"
                )
            if p["backend"] != "local":
                raise ConfigError(
                    "judge: decoding=choice needs backend=local (an OpenAI-compatible chat API "
                    "gives log-probabilities of generated tokens only)"
                )
            if self.samples > 1:
                raise ConfigError("judge: decoding=choice is deterministic; use samples=1")
        self.criteria = parse_criteria(p["criteria"]) if self.mode == "rubric" else []
        self.template = self._load_template()
        self.needs_references = self.mode == "tfn"
        self._backend = backend

    def _load_template(self) -> PromptTemplate:
        from nrp.llm.prompts import load_template

        name = str(self.params["template"]).strip()
        if not name:
            name = f"{self.style}-v1" if self.mode == "rubric" else f"tfn-{self.strategy}-v1"
        allowed = RUBRIC_PLACEHOLDERS if self.mode == "rubric" else TFN_PLACEHOLDERS
        return load_template(name, REQUIRED_SECTIONS[self.kind], allowed)

    # -- identity -----------------------------------------------------------------------------
    def backend(self) -> ChatBackend:
        """The chat backend (built on first use)."""
        if self._backend is None:
            from nrp.llm.factory import make_backend

            p = self.params
            self._backend = make_backend(
                str(p["backend"]),
                str(p["model"]),
                base_url=str(p["base_url"]),
                device=str(p["device"]),
                dtype=str(p["dtype"]),
                batch_size=self.batch_size,
                timeout=float(p["timeout"]),
                retries=int(p["retries"]),
                concurrency=int(p["concurrency"]),
            )
        return self._backend

    def model_checksum(self) -> str:
        return self.backend().checksum()

    def _unused_params(self) -> set[str]:
        """Parameters the configured mode and backend never read (left out of the cache key,
        so that, e.g., ``steps`` does not split the cache of a rubric judge)."""
        unused = (
            {"strategy", "steps", "threshold"}
            if self.mode == "rubric"
            else {"style", "criteria", "reference"}
        )
        unused |= {"base_url"} if self.params["backend"] == "local" else {"dtype"}
        if self.forced:  # nothing is generated or sampled
            unused |= {"max_new_tokens", "temperature", "seed", "logprobs"}
        return unused

    def fingerprint(self) -> str:
        """Cache key: evaluator version, the parameters that change outputs, the model's
        checksum, the template's name and SHA-256, and (rubric) the criteria file's SHA-256."""
        skip = self.SCORE_NEUTRAL_PARAMS | self._unused_params()
        payload = {
            "name": self.name,
            "version": self.version,
            "params": {k: str(v) for k, v in sorted(self.params.items()) if k not in skip},
            "model": self.model_checksum(),
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "criteria_sha256": _criteria_file()[1] if self.mode == "rubric" else "",
        }
        encoded = json.dumps(payload, sort_keys=True).encode()
        return hashlib.sha256(encoded).hexdigest()[:20]

    # -- columns ------------------------------------------------------------------------------
    def score_columns(self) -> list[str]:
        if self.mode == "rubric":
            columns = []
            for criterion in self.criteria:
                columns.append(f"judge.{criterion}")
                if self.samples > 1:
                    columns.append(f"judge.{criterion}_sd")
            return columns
        columns = ["judge.confidence"]
        if self.samples > 1:
            columns += ["judge.confidence_sd", "judge.agreement"]
        return columns

    def extra_columns(self) -> list[str]:
        if self.mode == "rubric":
            return ["judge_raw"]
        return ["judge.label", "judge.review", "judge_raw"]

    # -- generation ---------------------------------------------------------------------------
    @property
    def max_new_tokens(self) -> int:
        return int(self.params["max_new_tokens"]) or DEFAULT_MAX_NEW_TOKENS[self.kind]

    @property
    def use_logprobs(self) -> bool:
        if self.forced:  # the choices' probabilities are the point
            return True
        return bool(self.params["logprobs"]) and self.kind in ("geval", "single", "sequential")

    def _complete(
        self, prompts: Sequence[Prompt], n: int, seed: int, step: str = ""
    ) -> list[list[Completion]]:
        """``n`` completions per prompt; with ``decoding=choice``, the forced-choice reply of
        ``step`` (``_choose``)."""
        if not prompts:
            return []
        if self.forced:
            return [[c] for c in self._choose(prompts, step)]
        return self.backend().complete(
            list(prompts),
            max_new_tokens=self.max_new_tokens,
            temperature=float(self.params["temperature"]),
            seed=seed,
            n=n,
            logprobs=self.use_logprobs,
            top_logprobs=TOP_LOGPROBS if self.use_logprobs else 0,
        )

    def _choose(self, prompts: Sequence[Prompt], step: str) -> list[Completion]:
        """Forced choice: the scores or labels of ``step`` scored as replies (after the
        template's answer prefix, "Label: ") by ``ChatBackend.choice_logprobs``, returned as a
        one-choice ``Completion``: text = prefix + the most likely choice, and one token whose
        alternatives are all the choices with their log-probabilities, so the same readers
        (G-Eval weighting, label probability) apply. ``finish_reason`` is "choice"."""
        from nrp.llm.backends import Completion, TokenLogprob
        from nrp.llm.parsing import GIVEN_LABELS, TFN_LABELS, TRUTH_LABELS

        choices = {
            "geval": tuple(str(s) for s in range(SCALE[0], SCALE[1] + 1)),
            "single": TFN_LABELS,
            "given": GIVEN_LABELS,
            "truth": TRUTH_LABELS,
        }[step]
        prefix = CHOICE_PREFIX[step]
        scored = self.backend().choice_logprobs(list(prompts), choices, prefix)
        out = []
        for logprobs in scored:
            ranked = sorted(logprobs.items(), key=lambda kv: -kv[1])
            best, best_logprob = ranked[0]
            tokens = ((prefix,) if prefix else ()) + (best,)
            entries = ((TokenLogprob(prefix, 0.0),) if prefix else ()) + (
                TokenLogprob(best, best_logprob, tuple(ranked)),
            )
            out.append(Completion(prefix + best, "choice", tokens, entries))
        return out

    def _complete_per_sample(
        self, prompts: Sequence[tuple[Prompt, int]], step: str = ""
    ) -> list[Completion]:  # (messages, sample j) -> the completion of sample j
        """One completion per (prompt, sample): grouped by sample so that sample j is drawn
        with seed ``seed + j``, as in the first turn."""
        from nrp.llm.backends import sample_seed

        out: list[Any] = [None] * len(prompts)
        for j in sorted({j for _, j in prompts}):
            indices = [i for i, (_, s) in enumerate(prompts) if s == j]
            seed = sample_seed(int(self.params["seed"]), j)
            results = self._complete([prompts[i][0] for i in indices], 1, seed, step)
            for i, result in zip(indices, results, strict=True):
                out[i] = result[0]
        return out

    def _values(self, item: Mapping[str, Any]) -> dict[str, str]:
        references = list(item["references"])
        return {
            "question": str(item["question"]),
            "answer": str(item["text"]),
            "reference": str(references[0]) if references else "",
        }

    # -- scoring ------------------------------------------------------------------------------
    def evaluate(self, items: pd.DataFrame) -> pd.DataFrame:
        records = items.reset_index(drop=True).to_dict("records")
        rows = self._rubric(records) if self.mode == "rubric" else self._tfn(records)
        frame = pd.DataFrame(index=range(len(rows)))
        for column in self.score_columns():
            frame[column] = pd.Series([r[column] for r in rows], dtype=float)
        for column in self.extra_columns():  # object: a missing label stays None, not NaN
            frame[column] = pd.Series([r[column] for r in rows], dtype=object)
        return frame

    def _show_reference(self) -> bool:
        choice = str(self.params["reference"])
        return choice == "yes" or (choice == "auto" and self.style == "prometheus")

    def prompts(self, items: pd.DataFrame) -> list[list[dict[str, str]]]:
        """The first-turn chat messages sent for ``items`` (to inspect a template): rubric, one
        per item and criterion (item-major); tfn, one per item that has a reference."""
        records = items.reset_index(drop=True).to_dict("records")
        if self.mode == "rubric":
            return self._rubric_prompts(records)
        section = {"single": "user", "sequential": "given", "adaptive": "start"}[self.strategy]
        steps = str(self.params["steps"])
        return [
            self.template.messages(section, {**self._values(r), "steps": steps})
            for r in records
            if self._values(r)["reference"].strip()
        ]

    def _rubric_prompts(self, records: list[dict[str, Any]]) -> list[list[dict[str, str]]]:
        show_reference = self._show_reference() and "reference" in self.template.sections
        prompts = []
        for record in records:
            values = self._values(record)
            block = ""
            if show_reference and values["reference"]:
                block = "\n" + self.template.render("reference", values) + "\n"
            for criterion in self.criteria:
                filled = {**values, **criterion_values(criterion), "reference_block": block}
                prompts.append(self.template.messages("user", filled))
        return prompts

    def _rubric(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from nrp.llm.parsing import mean_sd, rubric_score

        prompts = self._rubric_prompts(records)
        results = self._complete(prompts, self.samples, int(self.params["seed"]), "geval")
        rows = []
        for i in range(len(records)):
            row: dict[str, Any] = {}
            raw = []
            for c, criterion in enumerate(self.criteria):
                completions = results[i * len(self.criteria) + c]
                readings = [rubric_score(x, self.style, *SCALE) for x in completions]
                mean, sd = mean_sd([r.score for r in readings])
                row[f"judge.{criterion}"] = mean
                if self.samples > 1:
                    row[f"judge.{criterion}_sd"] = sd
                for j, (completion, reading) in enumerate(zip(completions, readings, strict=True)):
                    raw.append(
                        {
                            "criterion": criterion,
                            "sample": j,
                            "seed": completion.seed,
                            "text": completion.text,
                            "finish_reason": completion.finish_reason,
                            "score": reading.score,
                            "stated": reading.stated,
                            "weighted": reading.weighted,
                        }
                    )
                    if self.forced:
                        raw[-1]["choice_logprobs"] = _choice_logprobs(completion)
            row["judge_raw"] = _json(raw)
            rows.append(row)
        return rows

    def _tfn(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from nrp.llm.parsing import TFN_LABELS, majority_label

        active = [i for i, r in enumerate(records) if self._values(r)["reference"].strip()]
        values = [self._values(records[i]) for i in active]
        if self.strategy == "single":
            chains = self._tfn_single(values)
        elif self.strategy == "sequential":
            chains = self._tfn_sequential(values)
        else:
            chains = self._tfn_adaptive(values)
        threshold = float(self.params["threshold"])
        rows: list[dict[str, Any]] = []
        by_item = dict(zip(active, chains, strict=True))
        for i in range(len(records)):
            row: dict[str, Any] = dict.fromkeys(self.score_columns(), math.nan)
            if i not in by_item:
                row.update(
                    {
                        "judge.label": None,
                        "judge.review": True,
                        "judge_raw": _json([{"skipped": "the item has no reference answer"}]),
                    }
                )
                rows.append(row)
                continue
            samples = by_item[i]
            vote = majority_label([(s["label"], s["confidence"]) for s in samples], TFN_LABELS)
            row["judge.confidence"] = vote.confidence
            if self.samples > 1:
                row["judge.confidence_sd"] = vote.confidence_sd
                row["judge.agreement"] = vote.agreement
            row["judge.label"] = vote.label
            row["judge.review"] = bool(
                vote.label is None
                or not math.isfinite(vote.confidence)
                or vote.confidence < threshold
            )
            row["judge_raw"] = _json(samples)
            rows.append(row)
        return rows

    def _sample_record(
        self, j: int, turns: list[Completion], label: str | None, conf: float, source: str
    ):
        record = {
            "sample": j,
            "seed": turns[0].seed if turns else None,
            "turns": [t.text for t in turns],
            "finish_reasons": [t.finish_reason for t in turns],
            "label": label,
            "confidence": conf,
            "confidence_source": "choice" if self.forced else source,
        }
        if self.forced:
            record["choice_logprobs"] = [_choice_logprobs(t) for t in turns]
        return record

    def _tfn_single(self, values: list[dict[str, str]]) -> list[list[dict[str, Any]]]:
        from nrp.llm.parsing import TFN_LABELS, label_reading

        prompts = [self.template.messages("user", v) for v in values]
        results = self._complete(prompts, self.samples, int(self.params["seed"]), "single")
        chains = []
        for completions in results:
            samples = []
            for j, completion in enumerate(completions):
                reading = label_reading(completion, TFN_LABELS, self.use_logprobs)
                samples.append(
                    self._sample_record(
                        j, [completion], reading.label, reading.confidence, reading.source
                    )
                )
            chains.append(samples)
        return chains

    def _tfn_sequential(self, values: list[dict[str, str]]) -> list[list[dict[str, Any]]]:
        from nrp.llm.parsing import GIVEN_LABELS, TRUTH_LABELS, label_reading

        first_prompts = [self.template.messages("given", v) for v in values]
        first = self._complete(first_prompts, self.samples, int(self.params["seed"]), "given")
        chains: list[list[dict[str, Any]]] = []
        follow_ups: list[tuple[Messages, int]] = []
        # (item, sample, completion, reading)
        pending: list[tuple[int, int, Completion, LabelReading]] = []
        for i, completions in enumerate(first):
            samples: list[dict[str, Any]] = []
            for j, completion in enumerate(completions):
                reading = label_reading(completion, GIVEN_LABELS, self.use_logprobs)
                if reading.label == "GIVEN":
                    conversation = [
                        *first_prompts[i],
                        {"role": "assistant", "content": completion.text},
                        {"role": "user", "content": self.template.render("truth", values[i])},
                    ]
                    follow_ups.append((conversation, j))
                    pending.append((i, j, completion, reading))
                    samples.append({})  # filled below
                else:  # NOT GIVEN, or unreadable: the chain ends here
                    samples.append(
                        self._sample_record(
                            j, [completion], reading.label, reading.confidence, reading.source
                        )
                    )
            chains.append(samples)
        second = self._complete_per_sample(follow_ups, "truth")
        for (i, j, completion, given), answer in zip(pending, second, strict=True):
            truth = label_reading(answer, TRUTH_LABELS, self.use_logprobs)
            confidence = given.confidence * truth.confidence if truth.label else math.nan
            source = given.source if given.source == truth.source else "mixed"
            chains[i][j] = self._sample_record(
                j, [completion, answer], truth.label, confidence, source
            )
        return chains

    def _tfn_adaptive(self, values: list[dict[str, str]]) -> list[list[dict[str, Any]]]:
        from nrp.llm.parsing import TFN_LABELS, confidence_product, find_choice, find_confidence

        steps = int(self.params["steps"])
        n = self.samples
        start = [self.template.messages("start", {**v, "steps": str(steps)}) for v in values]
        conversations = {(i, j): list(start[i]) for i in range(len(values)) for j in range(n)}
        turns: dict[tuple[int, int], list[Completion]] = {key: [] for key in conversations}
        confidences: dict[tuple[int, int], list[float | None]] = {k: [] for k in conversations}
        labels: dict[tuple[int, int], str | None] = dict.fromkeys(conversations)
        open_chains = list(conversations)
        for turn in range(1, steps + 2):  # K reasoning turns, then the final question
            if not open_chains:
                break
            if turn == 1:
                results = self._complete(start, n, int(self.params["seed"]))
                answers = {(i, j): results[i][j] for i, j in open_chains}
            else:
                section = "final" if turn == steps + 1 else "next"
                prompts = []
                for key in open_chains:
                    text = self.template.render(
                        section, {**values[key[0]], "step": str(turn), "steps": str(steps)}
                    )
                    conversations[key].append({"role": "user", "content": text})
                    prompts.append((conversations[key], key[1]))
                answers = dict(zip(open_chains, self._complete_per_sample(prompts), strict=True))
            still_open = []
            for key in open_chains:
                completion = answers[key]
                turns[key].append(completion)
                conversations[key].append({"role": "assistant", "content": completion.text})
                confidences[key].append(find_confidence(completion.text))
                found = find_choice(completion.text, TFN_LABELS, keyed_only=turn <= steps)
                if found is not None:
                    labels[key] = found.value
                else:
                    still_open.append(key)
            open_chains = still_open
        chains = []
        for i in range(len(values)):
            samples = []
            for j in range(n):
                key = (i, j)
                label = labels[key]
                confidence = confidence_product(confidences[key]) if label else math.nan
                record = self._sample_record(j, turns[key], label, confidence, "stated")
                record["step_confidences"] = confidences[key]
                samples.append(record)
            chains.append(samples)
        return chains


def _available() -> tuple[bool, str]:
    if (
        importlib.util.find_spec("transformers") is None
        and importlib.util.find_spec("httpx") is None
    ):
        return False, "needs transformers (local backend) or httpx (openai backend)"
    return True, ""


register(
    EvaluatorInfo(
        "judge",
        "LLM-as-judge: rubric 1-5 per criterion (G-Eval weighted or Prometheus) or "
        "TRUE/FALSE/NOT GIVEN against the reference (single, sequential, adaptive)",
        lambda params: Judge(params),
        JUDGE_PARAMS,
        _available,
        FAMILY,
    )
)

__all__ = ["JUDGE_PARAMS", "Judge", "criterion_values", "parse_criteria"]
