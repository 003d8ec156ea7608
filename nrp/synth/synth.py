"""``synthesize(docs, llm, out)``: a question/answer test set written by an LLM from documents,
filtered, and written as an nrp collection.

Steps: read the documents and cut them into passages (``nrp.synth.documents``); for each passage
and question kind (``nrp.synth.kinds``; ``multi`` over each two consecutive passages of a
document) the LLM writes one question/answer pair per sample; then the filters, in this order,
each counting what it drops:

1. ``parse``: the reply holds a readable ``Question:`` / ``Answer:`` pair (an empty reply, a
   reply in another form, a yes/no answer without its yes or no are dropped);
2. ``language``: question and answer are in the passage's language;
3. ``refers_to_text``: the question does not point at the passage ("according to the text");
4. ``verbatim``: the question does not copy ``max_overlap`` or more of its words in one run
   from the passage;
5. ``near_duplicate``: the question is not a near-duplicate of one kept before it;
6. ``support``: the judge (``nrp.evaluators.judge``, TRUE / FALSE / NOT GIVEN, strategy
   single, template ``support-v1``: the passage as the expected answer) says TRUE with
   confidence at least ``support_threshold``.

The cheap text filters run first and the judge last, so the LLM is asked to judge only the
pairs that can still be kept; the price is that near-duplicates are removed before support is
known (a duplicate is dropped even when the question it duplicates fails support later).

Resumable and cached as answer generation is: generation is ``nrp.generation.generate_answers``
itself (one seed per (passage, kind, sample) derived from the base seed, a JSON-lines store per
kind under ``OUT/.synth/`` appended batch by batch, settings checked against the store), and
the judge runs through ``nrp.evaluators.run.evaluate`` with a per-item cache
(``.synth/support.sqlite``).
An interrupted run continues where it stopped; a finished run re-run makes no LLM call
(``report["llm_calls"]``).

The collection (``nrp.synth.output``): topics (the kept questions), the passages as documents,
the generating passage(s) of each question judged relevant (``relevance``: 1), the generated
answers as reference answers, and ``items.jsonl`` with every candidate, kept or dropped (stage
and reason), with its provenance (model, checksum, prompt template and its SHA-256, seed).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from nrp.errors import ConfigError
from nrp.llm.backends import ChatBackend, GenerationOptions
from nrp.progress import Progress
from nrp.settings import settings_with
from nrp.synth.documents import (
    DocumentReport,
    Passage,
    TableColumns,
    document_passages,
    read_documents,
)
from nrp.synth.filters import (
    NearDuplicates,
    detect_language,
    refers_to_text,
    same_language,
    verbatim_overlap,
)
from nrp.synth.kinds import (
    KIND_NAMES,
    KINDS,
    SUPPORT_TEMPLATE,
    answer_fits,
    parse_kinds,
    parse_pair,
    passages_block,
    prompt_spec,
    template_file,
)
from nrp.synth.output import check_out_folder, write_outputs

if TYPE_CHECKING:
    from nrp.evaluators.judge import Judge
    from nrp.generation.generate import LlmSpec

STAGES = ("parse", "language", "refers_to_text", "verbatim", "near_duplicate", "support")
WORK_DIR = ".synth"
SUPPORT_CACHE = "support.sqlite"
#: decoding of the question writer: sampled (several samples differ), moderately long
SYNTH_OPTIONS = GenerationOptions(max_new_tokens=160, temperature=0.7, top_p=0.95, seed=0)
#: the judge's own parameters; the user's --judge spec is laid over them
JUDGE_DEFAULTS = {"mode": "tfn", "strategy": "single", "max_new_tokens": 16}


@dataclass(frozen=True)
class SynthSettings:
    """How a test set is made (CLI options of ``nrp synth``).

    ``kinds``: question kinds; ``passage_chars`` / ``min_passage_chars``: passage size;
    ``passages_per_document``: questions are asked about the first N passages of each
    document (0: all; ``multi`` shows the passage after as well); ``limit_documents``: the
    first N documents (0: all); ``kinds_per_passage``: each of those passages gets this many
    kinds, rotating over them (0: all; see ``make_units``); ``samples``: pairs per
    (passage, kind); ``options``: the writer's decoding (``n`` ignored, seeds per pair);
    ``templates``: a folder of one's own ``KIND-vN.txt`` prompts replacing the packaged ones;
    ``judge``: judge parameters laid over ``JUDGE_DEFAULTS`` (``decoding=choice``,
    ``backend=local``); without ``backend``/``model``/``base_url`` the judge uses the writer's
    LLM; ``support_threshold``: the least judge confidence kept; ``max_overlap``,
    ``dedup_threshold``: filters 4 and 5; ``columns``: a table's id, text and title columns;
    ``backend``: an already built backend for the LLM (tests, sharing); ``progress``: a line
    per step."""

    kinds: tuple[str, ...] = KIND_NAMES
    passage_chars: int = 1000
    min_passage_chars: int = 200
    passages_per_document: int = 0
    limit_documents: int = 0
    kinds_per_passage: int = 0
    samples: int = 1
    options: GenerationOptions = SYNTH_OPTIONS
    templates: str = ""
    judge: str = ""
    support_threshold: float = 0.5
    max_overlap: float = 0.8
    dedup_threshold: float = 0.8
    columns: TableColumns = field(default_factory=TableColumns)
    backend: ChatBackend | None = None
    progress: Progress | None = None

    def check(self) -> SynthSettings:
        kinds = parse_kinds(self.kinds)
        for kind in kinds:  # every kind has its prompt before any work
            template_file(kind, self.templates or None)
        if self.passage_chars < 50:
            raise ConfigError(f"passage_chars must be at least 50, got {self.passage_chars}")
        if not 0 <= self.min_passage_chars <= self.passage_chars:
            raise ConfigError("min_passage_chars must be between 0 and passage_chars")
        for name in ("passages_per_document", "limit_documents", "kinds_per_passage"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0 (0: all), got {getattr(self, name)}")
        if self.samples < 1:
            raise ConfigError(f"samples must be at least 1, got {self.samples}")
        for name in ("support_threshold", "max_overlap", "dedup_threshold"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        return replace(self, kinds=kinds)


@dataclass(frozen=True)
class Unit:
    """What one prompt is about: ``uid`` (``P0001``, or ``P0001+P0002`` for two passages), the
    kind, and its passage(s)."""

    uid: str
    kind: str
    passages: tuple[Passage, ...]

    @property
    def text(self) -> str:
        return passages_block([p.text for p in self.passages])


@dataclass
class SynthResult:
    """The run: ``items`` (every candidate, kept or dropped, with provenance), the ``report``
    (counts per stage, examples), and where the collection was written (None when no item
    was kept)."""

    items: pd.DataFrame
    report: dict[str, Any]
    out: Path
    collection: Path | None


# -- units -------------------------------------------------------------------------------------
def make_units(
    passages: list[Passage], kinds: tuple[str, ...], kinds_per_passage: int, per_document: int
) -> list[Unit]:
    """The prompts of a run, kind by kind in ``kinds`` order, passages in reading order.

    The first ``per_document`` passages of each document (0: all) are the anchors: a
    single-passage kind is asked about an anchor, ``multi`` about an anchor and the passage
    after it in its document (none after it: no ``multi`` there). With ``kinds_per_passage``
    k > 0, anchor n (counted over the whole input) gets k of the kinds, rotating:
    ``kinds[(n - 1 + r) % len(kinds)]`` for r = 0, 1, ...; one that cannot apply (``multi``
    on a document's last passage) gives way to the next. A cost knob: one prompt per anchor
    with the kinds balanced over the set."""
    numbers = {p.docno: n for n, p in enumerate(passages, start=1)}
    following = {
        first.docno: second
        for first, second in itertools.pairwise(passages)
        if first.source == second.source
    }
    seen: dict[str, int] = {}
    anchors = []
    for passage in passages:
        seen[passage.source] = seen.get(passage.source, 0) + 1
        if per_document == 0 or seen[passage.source] <= per_document:
            anchors.append(passage)

    def applies(kind: str, passage: Passage) -> bool:
        return KINDS[kind].passages == 1 or passage.docno in following

    chosen: dict[str, set[str]] = {}
    for n, anchor in enumerate(anchors, start=1):
        possible = [kinds[(n - 1 + r) % len(kinds)] for r in range(len(kinds))]
        possible = [k for k in possible if applies(k, anchor)]
        take = kinds_per_passage if 0 < kinds_per_passage < len(possible) else len(possible)
        chosen[anchor.docno] = set(possible[:take])
    units = []
    for kind in kinds:
        for anchor in anchors:
            if kind not in chosen[anchor.docno]:
                continue
            uid = f"P{numbers[anchor.docno]:04d}"
            if KINDS[kind].passages == 1:
                units.append(Unit(uid, kind, (anchor,)))
            else:
                second = following[anchor.docno]
                units.append(Unit(f"{uid}+P{numbers[second.docno]:04d}", kind, (anchor, second)))
    return units


def used_passages(passages: list[Passage], units: list[Unit]) -> list[Passage]:
    """The passages the prompts show, in reading order (the collection's documents)."""
    used = {p.docno for unit in units for p in unit.passages}
    return [p for p in passages if p.docno in used]


# -- the run -----------------------------------------------------------------------------------
def synthesize(
    docs: str | Path,
    llm: str | Mapping[str, Any],
    out: str | Path,
    settings: SynthSettings | None = None,
    **overrides: Any,
) -> SynthResult:
    """A filtered synthetic test set from ``docs`` (a table or a folder) by ``llm`` (an LLM
    spec, as ``nrp generate --llm``), written as a collection in the folder ``out`` (its name
    is the folder's name); see the module docstring. ``settings`` and ``overrides`` (its
    fields): see ``SynthSettings``."""
    from nrp.generation.generate import parse_llm

    run = settings_with(SynthSettings, settings, overrides).check()
    out = Path(out)
    check_out_folder(out)
    spec = parse_llm(llm)
    documents, doc_report = read_documents(docs, run.columns)
    if run.limit_documents:
        documents = documents[: run.limit_documents]
        doc_report.read = len(documents)
    passages = document_passages(documents, run.passage_chars, run.min_passage_chars, doc_report)
    units = make_units(passages, run.kinds, run.kinds_per_passage, run.passages_per_document)
    passages = used_passages(passages, units)
    backend = run.backend or spec.build()
    calls = Counter()
    work = out / WORK_DIR
    candidates = _generate(spec, backend, units, run, work, calls)
    _filter(candidates, run, backend, work, calls)
    report = build_synth_report(
        docs, spec.label, run, doc_report, passages, units, candidates, calls
    )
    collection = write_outputs(out, candidates, passages, report)
    report["collection"] = str(collection) if collection else None
    items = pd.DataFrame([{k: v for k, v in c.items() if k != "_text"} for c in candidates])
    return SynthResult(items, report, out, collection)


def _generate(
    spec: LlmSpec,
    backend: ChatBackend,
    units: list[Unit],
    run: SynthSettings,
    work: Path,
    calls: Counter,
) -> list[dict[str, Any]]:
    """One candidate per (unit, sample): the pair read from the reply (filter 1) and where it
    came from."""
    from nrp.generation.generate import generate_answers

    candidates: list[dict[str, Any]] = []
    for kind in run.kinds:
        kind_units = [u for u in units if u.kind == kind]
        if not kind_units:
            continue
        topics = pd.DataFrame(
            {"qid": [u.uid for u in kind_units], "query": [u.text for u in kind_units]}
        )
        answers = generate_answers(
            topics,
            spec,
            [prompt_spec(kind, run.templates)],
            run.samples,
            run.options,
            work / f"generated-{kind}.jsonl",
            backend=backend,
            progress=run.progress,
        )
        counts = answers.attrs["counts"]
        calls["generation"] += counts["generated"]
        calls["generation_from_store"] += counts["from_store"]
        by_id = {row["answer_id"]: row for row in answers.to_dict("records")}
        for unit in kind_units:
            for sample in range(run.samples):
                candidates.append(_candidate(unit, sample, spec.label, by_id, answers.attrs, run))
    return candidates


def _candidate(
    unit: Unit,
    sample: int,
    label: str,
    by_id: Mapping[str, Any],
    attrs: Mapping[str, Any],
    run: SynthSettings,
) -> dict[str, Any]:
    """The candidate of one (unit, sample), with its provenance: from its answer record, or,
    for an empty reply (which ``generate_answers`` leaves out), from the run's model, the
    template file and the seed ``generate_answers`` derived."""
    from nrp.generation.generate import derive_seed

    path = template_file(unit.kind, run.templates)
    prompt = f"{path.stem}:chat"
    answer_id = f"{label}/{prompt}/{unit.uid}/{sample}"  # generate_answers' answer id
    record = by_id.get(answer_id)
    params = json.loads(record["params"]) if record is not None else {}
    if record is None:
        params = {
            "template": path.stem,
            "template_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
    candidate: dict[str, Any] = {
        "item_id": f"{unit.kind}-{unit.uid}-{sample}",
        "kind": unit.kind,
        "unit": unit.uid,
        "sample": sample,
        "passages": [p.docno for p in unit.passages],
        "question": None,
        "answer": None,
        "raw": record["text"] if record is not None else "",
        "llm": label,
        "model": record["model"] if record is not None else attrs.get("model"),
        "checksum": record["checksum"] if record is not None else attrs.get("checksum"),
        "prompt": params["template"],
        "prompt_sha256": params["template_sha256"],
        "seed": int(record["seed"])
        if record is not None
        else derive_seed(run.options.seed, unit.uid, prompt, sample),
        "kept": False,
        "stage": None,
        "reason": None,
        "detail": None,
        "_text": unit.text,
    }
    if record is None:  # generate_answers leaves empty replies out of its answers
        return _drop(candidate, "parse", "empty reply")
    pair = parse_pair(record["text"])
    if pair is None:
        return _drop(candidate, "parse", "no Question:/Answer: pair in the reply")
    candidate["question"], candidate["answer"] = pair.question, pair.answer
    if not answer_fits(KINDS[unit.kind], pair.answer):
        return _drop(candidate, "parse", "yes/no answer does not start with yes or no")
    return candidate


def _drop(
    candidate: dict[str, Any], stage: str, reason: str, detail: str | None = None
) -> dict[str, Any]:
    """Mark a candidate dropped at ``stage``: ``reason`` is what the report counts, ``detail``
    what is particular to this candidate."""
    candidate["stage"], candidate["reason"], candidate["detail"] = stage, reason, detail
    return candidate


def _filter(
    candidates: list[dict[str, Any]],
    run: SynthSettings,
    backend: ChatBackend,
    work: Path,
    calls: Counter,
) -> None:
    """Filters 2 to 6 (module docstring), in place: ``kept``, ``stage``, ``reason``."""
    duplicates = NearDuplicates(run.dedup_threshold)
    for c in candidates:
        if c["stage"] is not None:
            continue
        passage, question, answer = c["_text"], c["question"], c["answer"]
        if not same_language(passage, question, answer):
            found = f"question {detect_language(question)}, answer {detect_language(answer)}"
            _drop(
                c, "language", "not the passage's language",
                f"{found}, passage {detect_language(passage)}",
            )  # fmt: skip
        elif phrase := refers_to_text(question):
            _drop(c, "refers_to_text", "question refers to the text", repr(phrase))
        elif (overlap := verbatim_overlap(question, passage)) >= run.max_overlap:
            _drop(
                c, "verbatim", f"question copies >= {run.max_overlap:g} of its words",
                f"{overlap:.2f} of its words in one run",
            )  # fmt: skip
        elif (duplicate := duplicates.check(c["item_id"], question)) is not None:
            _drop(
                c, "near_duplicate", f"Jaccard >= {run.dedup_threshold:g} with a kept question",
                f"Jaccard {duplicate[1]:.2f} with {duplicate[0]}",
            )  # fmt: skip
    _support(candidates, run, backend, work, calls)


def make_judge(params: str, backend: ChatBackend) -> Judge:
    """The support judge: ``JUDGE_DEFAULTS``, the ``support-v1`` template, and ``params``
    (``key=value,...``) over them; the writer's backend unless ``params`` name their own."""
    from nrp.evaluators.base import make_evaluator
    from nrp.evaluators.judge import Judge

    given: dict[str, str] = {}
    for part in (p.strip() for p in params.split(",")):
        if part:
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"judge parameters: {part!r} is not key=value")
            given[key.strip()] = value.strip()
    values = {**JUDGE_DEFAULTS, "template": str(template_file(SUPPORT_TEMPLATE)), **given}
    parsed = make_evaluator("judge:" + ",".join(f"{k}={v}" for k, v in values.items())).params
    if parsed["mode"] != "tfn":
        raise ConfigError("judge parameters: the support check is the judge's tfn mode")
    own = bool({"backend", "model", "base_url"} & set(given))
    return Judge(parsed, backend=None if own else backend)


def _support(
    candidates: list[dict[str, Any]],
    run: SynthSettings,
    backend: ChatBackend,
    work: Path,
    calls: Counter,
) -> None:
    """Filter 6: the judge over the pairs still in, cached per item."""
    from nrp.evaluators.cache import EvaluationCache
    from nrp.evaluators.run import evaluate

    judge = make_judge(run.judge, backend)
    todo = [c for c in candidates if c["stage"] is None]
    for c in candidates:
        c["support_label"], c["support_confidence"] = None, None
    if not todo:
        return
    items = pd.DataFrame(
        {
            "answer_id": [c["item_id"] for c in todo],
            "qid": [c["item_id"] for c in todo],
            "question": [c["question"] for c in todo],
            "text": [c["answer"] for c in todo],
            "references": [(c["_text"],) for c in todo],
            "reference_kind": ["passage"] * len(todo),
            "contexts": [()] * len(todo),
        }
    )
    work.mkdir(parents=True, exist_ok=True)
    result = evaluate(items, [judge], EvaluationCache(work / SUPPORT_CACHE), progress=run.progress)
    counts = next(iter(result.attrs["evaluators"].values()))
    calls["support"] += counts["computed"]
    calls["support_from_cache"] += counts["from_cache"]
    for c, label, confidence in zip(
        todo, result["judge.label"], result["judge.confidence"], strict=True
    ):
        confidence = float(confidence)
        c["support_label"] = label
        c["support_confidence"] = None if math.isnan(confidence) else round(confidence, 4)
        if label is None:
            _drop(c, "support", "judge output has no label")
        elif label != "TRUE":
            _drop(c, "support", f"judge says {label}")
        elif math.isnan(confidence) or confidence < run.support_threshold:
            _drop(c, "support", f"TRUE with confidence below {run.support_threshold:g}")
        else:
            c["kept"] = True


# -- the report --------------------------------------------------------------------------------
EXAMPLES_PER_STAGE = 2
EXAMPLES_KEPT = 4


def _example(c: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("item_id", "kind", "question", "answer", "reason", "detail", "support_label")
    out = {k: c.get(k) for k in keys}
    if c.get("question") is None:
        out["raw"] = str(c.get("raw", ""))[:300]
    return out


def build_synth_report(
    docs: str | Path,
    llm_label: str,
    run: SynthSettings,
    doc_report: DocumentReport,
    passages: list[Passage],
    units: list[Unit],
    records: list[dict[str, Any]],
    calls: Counter,
) -> dict[str, Any]:
    """Counts per stage (overall and per kind), reasons, examples, settings and LLM calls."""
    remaining = len(records)
    stages = []
    for stage in STAGES:
        dropped = [r for r in records if r["stage"] == stage]
        remaining -= len(dropped)
        stages.append(
            {
                "stage": stage,
                "dropped": len(dropped),
                "remaining": remaining,
                "reasons": dict(Counter(r["reason"] for r in dropped).most_common()),
            }
        )
    per_kind = {
        kind: {
            "candidates": sum(1 for r in records if r["kind"] == kind),
            **{s: sum(1 for r in records if r["kind"] == kind and r["stage"] == s) for s in STAGES},
            "kept": sum(1 for r in records if r["kind"] == kind and r["kept"]),
        }
        for kind in run.kinds
    }
    options = asdict(run.options)
    return {
        "docs": str(docs),
        "llm": llm_label,
        "model": records[0]["model"] if records else None,
        "checksum": records[0]["checksum"] if records else None,
        "documents": {"read": doc_report.read, "skipped": dict(doc_report.skipped)},
        "passages": len(passages),
        "prompts": len(units),
        "candidates": len(records),
        "kept": sum(1 for r in records if r["kept"]),
        "stages": stages,
        "kinds": per_kind,
        "llm_calls": {
            key: int(calls.get(key, 0))
            for key in ("generation", "generation_from_store", "support", "support_from_cache")
        },
        "settings": {
            "kinds": list(run.kinds),
            "passage_chars": run.passage_chars,
            "min_passage_chars": run.min_passage_chars,
            "passages_per_document": run.passages_per_document,
            "limit_documents": run.limit_documents,
            "kinds_per_passage": run.kinds_per_passage,
            "samples": run.samples,
            "templates": run.templates or "packaged",
            "decoding": {k: options[k] for k in ("max_new_tokens", "temperature", "top_p", "seed")},
            "judge": run.judge,
            "support_threshold": run.support_threshold,
            "max_overlap": run.max_overlap,
            "dedup_threshold": run.dedup_threshold,
        },
        "examples": {
            "kept": [_example(r) for r in records if r["kept"]][:EXAMPLES_KEPT],
            **{
                stage: [_example(r) for r in records if r["stage"] == stage][:EXAMPLES_PER_STAGE]
                for stage in STAGES
            },
        },
    }


__all__ = [
    "STAGES",
    "SYNTH_OPTIONS",
    "SynthResult",
    "SynthSettings",
    "make_units",
    "synthesize",
]
