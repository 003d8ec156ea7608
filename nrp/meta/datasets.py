"""The public meta-evaluation sets: items for ``nrp.evaluators`` and the human labels beside them.

``load_meta_set(name)`` reads one set from the shared data folder (``meta/`` under
``$NRP_SHARED_DATA``, else ``../shared/data`` beside the repository) and returns a ``MetaSet``:

- ``items``: one row per judged response with ``nrp.evaluators.base.ITEM_COLUMNS`` (answer_id,
  qid, question = the dialogue history / empty for summaries, text = the response or summary,
  references, reference_kind, contexts = knowledge the response may use) plus the set's group
  columns (system, subset, ...);
- ``human``: answer_id, qid and one column per human dimension (``dimensions``; numbers, or the
  text class for the categorical Vietnamese set);
- ``precomputed``: metric values shipped in the files, where there are (DialogADV's BLEU,
  ROUGE, METEOR, chrF, BERTScore), named ``paper.<metric>``: a cross-check for our evaluators.

Choices common to the sets: the query (``qid``) is the dialogue context or source document, so
per-query correlations compare responses to the same input. A response that *is* the reference
(BLEU = 1 against itself) is left out by default (``include_references=True`` keeps it): it
would reward every reference-based metric for recognising the reference, which is not what a
meta-evaluation asks. ``limit`` keeps the first N queries in file order, with all their items.

Registry (``META_SETS``), with the counts the tests check:

- ``dstc7-adv``: DialogADV DSTC7-ADV (Liu et al. 2023, English, DSTC7-AVSD video dialogue).
  ``all.json`` is JSON Lines, 684 examples x 6 responses = 4,104; lines 1-342 (``close.json``)
  are original examples, lines 343-684 (``close_adv.json``) the same 342 dialogues with every
  response negated (adversarial: "he is *not* standing in front of the door"). In an original
  example ``res_0`` is the reference; in its adversarial copy ``res_0`` is the negated
  reference, a candidate. Both copies of dialogue i share qid ``dstc7-i`` and the original
  reference, so a query holds 5 original + 6 adversarial responses: 3,762 items (the 342
  references left out). ``subset``: original / adversarial; ``pair_id`` pairs a response with
  its negated copy (1,710 pairs). Human dimensions coherence, relevance, consistency, fluency,
  each in [0, 1].
- ``kdconv-adv``: DialogADV KdConv-ADV (Chinese, knowledge-grounded). ``close.json`` (91
  dialogues): three responses with wrong facts (humans score them low, mean coherence 0.14);
  ``open.json`` (91): three valid responses that differ from the reference (humans score them
  high, 0.96) — the cases where overlap with a reference fails in both directions. 182 x 4 =
  728 responses, ``res_0`` the reference in both: 546 items. ``subset``: close / open. Chinese
  text is not split into words: BLEU needs sacrebleu's ``tokenize=zh`` (characters), and
  ROUGE's default tokenizer drops non-Latin characters (see ``evaluator_specs``).
- ``summeval``: SummEval (Fabbri et al. 2021), the 12 abstractive systems x 100 CNN/DailyMail
  articles = 1,200 summaries. qid = the article, ``system`` = the model (M8 ... M23), contexts
  = the source article, references = the first of the 11 references (the original highlights;
  ``references="all"`` gives all 11). Human: the mean of 3 expert ratings (1-5) of coherence,
  consistency, fluency, relevance; ``crowd_<dimension>``: the mean of 5 crowd ratings.
- ``usr-topical`` / ``usr-persona``: USR (Mehri & Eskenazi 2020), 60 contexts x 6 responses
  (Topical-Chat: Original Ground Truth, New Human Generated, Argmax Decoding, Nucleus p =
  0.3/0.5/0.7) and x 5 (Persona-Chat: Original Ground Truth, New Human Generated, KV-MemNN,
  Language Model, Seq2Seq). The Original Ground Truth is the reference and is left out: 300
  and 240 items. question = the dialogue context, contexts = the fact / persona, ``system`` =
  the model. Human: the mean of 3 annotators for understandable (0-1), natural, maintains
  context, engaging (1-3), uses knowledge (0-1), overall (1-5).
- ``chatbot-vi``: ChatbotEvaluation (Dang et al., ACIIDS 2026), 299 Vietnamese question /
  expected answer / chatbot answer rows (id_268 is absent) with human labels T 238, F 31, N
  30, read as TRUE / FALSE / NOT GIVEN (column ``label``, categorical). The expected answer is
  the item's reference (what the TRUE / FALSE / NOT GIVEN judge compares against).
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from nrp import jsontext
from nrp.errors import ConfigError, InputError
from nrp.evaluators.base import ITEM_COLUMNS
from nrp.evaluators.items import REFERENCE
from nrp.tables import require_columns

DIALOG_DIMENSIONS = ("coherence", "relevance", "consistency", "fluency")
DIALOG_METRICS = (
    "bleu_1",
    "bleu_2",
    "bleu_3",
    "bleu_4",
    "rouge_1",
    "rouge_2",
    "rouge_L",
    "meteor",
    "chrf",
    "bertscore",
)
SUMMEVAL_DIMENSIONS = ("coherence", "consistency", "fluency", "relevance")
SUMMEVAL_SYSTEMS = (
    "M8",
    "M9",
    "M10",
    "M11",
    "M12",
    "M13",
    "M14",
    "M15",
    "M17",
    "M20",
    "M22",
    "M23",
)
USR_DIMENSIONS = {
    "Understandable": "understandable",
    "Natural": "natural",
    "Maintains Context": "maintains_context",
    "Engaging": "engaging",
    "Uses Knowledge": "uses_knowledge",
    "Overall": "overall",
}
USR_REFERENCE_SYSTEM = "Original Ground Truth"
VI_LABELS = {"T": "TRUE", "F": "FALSE", "N": "NOT GIVEN"}


@dataclass
class MetaSet:
    """One meta-evaluation set (see the module docstring)."""

    name: str
    items: pd.DataFrame
    human: pd.DataFrame
    dimensions: list[str]
    language: str
    query_column: str = "qid"
    system_column: str | None = None
    subset_column: str | None = None
    categorical: bool = False
    precomputed: pd.DataFrame | None = None
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def joined(self, scores: pd.DataFrame | None = None) -> pd.DataFrame:
        """Items' group columns, human labels and (when given) a score table, by answer_id."""
        keep = ["answer_id", "qid"] + [
            c for c in (self.system_column, self.subset_column, "pair_id") if c and c in self.items
        ]
        frame = self.items[keep].merge(self.human.drop(columns=["qid"]), on="answer_id")
        if scores is not None:
            extra = [c for c in scores.columns if c not in frame.columns or c == "answer_id"]
            frame = frame.merge(scores[extra], on="answer_id", how="left")
        return frame


@dataclass(frozen=True)
class MetaSetInfo:
    name: str
    description: str
    folder: str  # under the meta data root
    load: Callable[..., MetaSet]


def default_meta_root() -> Path:
    """``$NRP_SHARED_DATA/meta``, else ``../shared/data/meta`` beside the repository."""
    env = os.environ.get("NRP_SHARED_DATA")
    if env:
        return Path(env) / "meta"
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "meta"


def load_meta_set(
    name: str,
    root: str | Path | None = None,
    limit: int | None = None,
    include_references: bool = False,
    **options: Any,
) -> MetaSet:
    """The set ``name`` of ``META_SETS`` from ``root`` (default ``default_meta_root()``);
    ``limit``: the first N queries; ``options``: the set's own (summeval: references)."""
    if name not in META_SETS:
        raise ConfigError(f"unknown meta-evaluation set {name!r}; known: {', '.join(META_SETS)}")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be >= 1, got {limit}")
    info = META_SETS[name]
    folder = Path(root) if root is not None else default_meta_root()
    folder = folder / info.folder
    if not folder.is_dir():
        raise InputError(folder, None, f"meta-evaluation set {name!r} not found here")
    meta_set = info.load(folder, include_references=include_references, **options)
    if limit is not None:
        kept = list(dict.fromkeys(meta_set.items["qid"]))[:limit]
        meta_set.items = meta_set.items[meta_set.items["qid"].isin(kept)].reset_index(drop=True)
        meta_set.human = meta_set.human[
            meta_set.human["answer_id"].isin(meta_set.items["answer_id"])
        ]
        meta_set.human = meta_set.human.reset_index(drop=True)
        if meta_set.precomputed is not None:
            pre = meta_set.precomputed
            meta_set.precomputed = pre[pre["answer_id"].isin(meta_set.items["answer_id"])]
        meta_set.counts["items_kept"] = len(meta_set.items)
        meta_set.notes.append(f"limited to the first {len(kept)} queries")
    return meta_set


def evaluator_specs(meta_set: MetaSet, specs: str) -> str:
    """The evaluator specs adapted to the set's language: for Chinese, ``bleu`` gets sacrebleu's
    ``tokenize=zh`` (each CJK character a token) unless the spec sets a tokenizer."""
    if meta_set.language != "zh":
        return specs
    from nrp.evaluators.base import split_specs

    adapted = []
    for spec in split_specs(specs):
        name, _, params = spec.partition(":")
        if name == "bleu" and "tokenize=" not in params:
            spec = f"{name}:{params},tokenize=zh" if params else "bleu:tokenize=zh"
        adapted.append(spec)
    return ",".join(adapted)


# -- readers ---------------------------------------------------------------------------------------
def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise InputError(path, None, "file not found")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = jsontext.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(path, number, f"not valid JSON: {error.msg}") from None
        if not isinstance(value, dict):
            raise InputError(path, number, "expected a JSON object")
        value["_line"] = number
        rows.append(value)
    return rows


def _responses(row: dict[str, Any], path: Path) -> list[tuple[int, dict[str, Any]]]:
    keys = sorted((k for k in row if re.fullmatch(r"res_\d+", k)), key=lambda k: int(k[4:]))
    if not keys or keys[0] != "res_0":
        raise InputError(path, row["_line"], "no res_0 response")
    out = []
    for key in keys:
        value = row[key]
        if not isinstance(value, dict) or "context" not in value:
            raise InputError(path, row["_line"], f"{key} has no 'context' (the response text)")
        out.append((int(key[4:]), value))
    return out


def _human_value(response: dict[str, Any], dimension: str, path: Path, line: int) -> float:
    try:
        return float(response[dimension]["human"])
    except (KeyError, TypeError, ValueError):
        raise InputError(path, line, f"no numeric human {dimension} label") from None


def _paper_metric(value: Any) -> float:
    if isinstance(value, list):
        value = value[0] if value else None
    return float("nan") if value is None else float(value)


@dataclass(frozen=True)
class _DialogPart:
    """One part of a DialogADV set (a file, or a half of one) and how its items are named:
    ``qid(i)`` of the i-th row, ``reference_of(i, row)`` its reference; ``res0_is_reference``:
    the row's first response is the reference (a candidate otherwise); ``pair_prefix(i)``: the
    pair id of the i-th row's responses (None: no pairs); ``subset_in_id``: the subset is part
    of the answer ids."""

    path: Path
    rows: list[dict[str, Any]]
    qid: Callable[[int], str]
    subset: str
    reference_of: Callable[[int, dict[str, Any]], str]
    res0_is_reference: bool
    pair_prefix: Callable[[int], str] | None = None
    subset_in_id: bool = True


def _dialog_rows(
    part: _DialogPart, include_references: bool
) -> tuple[list[dict], list[dict], list[dict], int]:
    path, qid, subset = part.path, part.qid, part.subset
    items, human, paper = [], [], []
    references_left_out = 0
    for index, row in enumerate(part.rows):
        history = str(row.get("history", ""))
        reference = part.reference_of(index, row)
        for k, response in _responses(row, path):
            is_reference = part.res0_is_reference and k == 0
            if is_reference and not include_references:
                references_left_out += 1
                continue
            answer_id = (
                f"{qid(index)}-{subset}-res{k}" if part.subset_in_id else f"{qid(index)}-res{k}"
            )
            item = {
                "answer_id": answer_id,
                "qid": qid(index),
                "question": history,
                "text": str(response["context"]),
                "references": (reference,),
                "reference_kind": REFERENCE,
                "contexts": (),
                "subset": subset,
                "response": k,
                "is_reference": is_reference,
            }
            if part.pair_prefix is not None:
                item["pair_id"] = f"{part.pair_prefix(index)}-res{k}"
            items.append(item)
            labels = {"answer_id": answer_id, "qid": qid(index)}
            for dimension in DIALOG_DIMENSIONS:
                labels[dimension] = _human_value(response, dimension, path, row["_line"])
            human.append(labels)
            paper.append(
                {"answer_id": answer_id}
                | {f"paper.{m}": _paper_metric(response.get(m)) for m in DIALOG_METRICS}
            )
    return items, human, paper, references_left_out


def _items_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(rows)
    rest = [c for c in frame.columns if c not in ITEM_COLUMNS]
    return frame[list(ITEM_COLUMNS) + rest]


def load_dstc7_adv(folder: Path, include_references: bool = False) -> MetaSet:
    path = folder / "all.json"
    rows = _jsonl(path)
    if len(rows) % 2:
        raise InputError(
            path, None, f"expected original + adversarial halves, got {len(rows)} lines"
        )
    half = len(rows) // 2
    original, adversarial = rows[:half], rows[half:]
    for a, b in zip(original, adversarial, strict=True):
        if a.get("history") != b.get("history"):
            raise InputError(path, b["_line"], f"history differs from line {a['_line']}'s")
    references = [str(_responses(r, path)[0][1]["context"]) for r in original]

    def qid(i: int) -> str:
        return f"dstc7-{i:03d}"

    def reference(i: int, _row: dict) -> str:
        return references[i]

    items, human, paper, left_out = [], [], [], 0
    for subset, part, res0_is_reference in (
        ("original", original, True),
        ("adversarial", adversarial, False),  # res_0 is the negated reference: a candidate
    ):
        i, h, p, n = _dialog_rows(
            _DialogPart(path, part, qid, subset, reference, res0_is_reference, pair_prefix=qid),
            include_references,
        )
        items += i
        human += h
        paper += p
        left_out += n
    responses = sum(len(_responses(r, path)) for r in rows)
    return MetaSet(
        name="dstc7-adv",
        items=_items_frame(items),
        human=pd.DataFrame(human),
        dimensions=list(DIALOG_DIMENSIONS),
        language="en",
        subset_column="subset",
        precomputed=pd.DataFrame(paper),
        counts={
            "examples": len(rows),
            "dialogues": half,
            "responses": responses,
            "references_left_out": left_out,
            "items": len(items),
        },
        notes=[
            "qid = dialogue (original and negated copies share it); reference = the original res_0"
        ],
    )


def load_kdconv_adv(folder: Path, include_references: bool = False) -> MetaSet:
    items, human, paper, left_out, examples, responses = [], [], [], 0, 0, 0
    for subset in ("close", "open"):
        path = folder / f"{subset}.json"
        rows = _jsonl(path)
        examples += len(rows)
        responses += sum(len(_responses(r, path)) for r in rows)

        def qid(i: int, subset: str = subset) -> str:
            return f"kdconv-{subset}-{i:03d}"

        def reference(_i: int, row: dict, path: Path = path) -> str:
            return str(_responses(row, path)[0][1]["context"])

        i, h, p, n = _dialog_rows(
            _DialogPart(path, rows, qid, subset, reference, True, subset_in_id=False),
            include_references,
        )
        items += i
        human += h
        paper += p
        left_out += n
    return MetaSet(
        name="kdconv-adv",
        items=_items_frame(items),
        human=pd.DataFrame(human),
        dimensions=list(DIALOG_DIMENSIONS),
        language="zh",
        subset_column="subset",
        precomputed=pd.DataFrame(paper),
        counts={
            "examples": examples,
            "responses": responses,
            "references_left_out": left_out,
            "items": len(items),
        },
        notes=["Chinese: BLEU with sacrebleu tokenize=zh (characters)"],
    )


def _ratings(value: Any, path: Path, line: int) -> list[dict[str, Any]]:
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise InputError(path, line, "annotations are not a list of ratings") from None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise InputError(path, line, "annotations are not a list of ratings")
    return value


def _mean_rating(ratings: list[dict[str, Any]], dimension: str, path: Path, line: int) -> float:
    try:
        values = [float(r[dimension]) for r in ratings]
    except (KeyError, TypeError, ValueError):
        raise InputError(path, line, f"a rating without a numeric {dimension}") from None
    return sum(values) / len(values) if values else float("nan")


def load_summeval(
    folder: Path, include_references: bool = False, references: str = "first"
) -> MetaSet:
    if references not in ("first", "all"):
        raise ConfigError(f"summeval references must be 'first' or 'all', not {references!r}")
    base = folder / "model_output_annotations"
    items, human = [], []
    for system in SUMMEVAL_SYSTEMS:
        path = base / f"{system}_outputs_annotations.jsonl"
        for row in _jsonl(path):
            line = row["_line"]
            refs = row.get("references") or []
            if not isinstance(refs, list) or not refs:
                raise InputError(path, line, "no references")
            doc = str(row.get("id", ""))
            if not doc:
                raise InputError(path, line, "no id")
            answer_id = f"{doc}-{system}"
            items.append(
                {
                    "answer_id": answer_id,
                    "qid": doc,
                    "question": "",
                    "text": str(row.get("decoded", "")),
                    "references": tuple(map(str, refs if references == "all" else refs[:1])),
                    "reference_kind": REFERENCE,
                    "contexts": (str(row.get("text", "")),),
                    "system": str(row.get("model_id", system)),
                }
            )
            experts = _ratings(row.get("expert_annotations"), path, line)
            crowd = _ratings(row.get("turker_annotations"), path, line)
            labels = {"answer_id": answer_id, "qid": doc}
            for dimension in SUMMEVAL_DIMENSIONS:
                labels[dimension] = _mean_rating(experts, dimension, path, line)
            for dimension in SUMMEVAL_DIMENSIONS:
                labels[f"crowd_{dimension}"] = _mean_rating(crowd, dimension, path, line)
            human.append(labels)
    frame = _items_frame(items)
    return MetaSet(
        name="summeval",
        items=frame,
        human=pd.DataFrame(human),
        dimensions=list(SUMMEVAL_DIMENSIONS),
        language="en",
        system_column="system",
        counts={
            "summaries": len(items),
            "systems": frame["system"].nunique(),
            "documents": frame["qid"].nunique(),
        },
        notes=[f"references: {references} (of 11); human = mean of 3 expert ratings"],
    )


def _load_usr(name: str, file: str, prefix: str) -> Callable[..., MetaSet]:
    def load(folder: Path, include_references: bool = False) -> MetaSet:
        path = folder / file
        if not path.is_file():
            raise InputError(path, None, "file not found")
        try:
            contexts = jsontext.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise InputError(path, error.lineno, f"not valid JSON: {error.msg}") from None
        items, human, responses = [], [], 0
        for index, context in enumerate(contexts):
            qid = f"{prefix}-{index:02d}"
            replies = context.get("responses") or []
            truth = [r for r in replies if r.get("model") == USR_REFERENCE_SYSTEM]
            if len(truth) != 1:
                raise InputError(path, None, f"context {index}: no single {USR_REFERENCE_SYSTEM}")
            reference = str(truth[0]["response"]).strip()
            for reply in replies:
                responses += 1
                model = str(reply.get("model", ""))
                if model == USR_REFERENCE_SYSTEM and not include_references:
                    continue
                slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
                answer_id = f"{qid}-{slug}"
                items.append(
                    {
                        "answer_id": answer_id,
                        "qid": qid,
                        "question": str(context.get("context", "")).strip(),
                        "text": str(reply.get("response", "")).strip(),
                        "references": (reference,),
                        "reference_kind": REFERENCE,
                        "contexts": (str(context.get("fact", "")).strip(),),
                        "system": model,
                    }
                )
                labels: dict[str, Any] = {"answer_id": answer_id, "qid": qid}
                for key, dimension in USR_DIMENSIONS.items():
                    values = reply.get(key)
                    if not isinstance(values, list) or not values:
                        raise InputError(path, None, f"context {index}, {model}: no {key} ratings")
                    labels[dimension] = sum(map(float, values)) / len(values)
                human.append(labels)
        frame = _items_frame(items)
        return MetaSet(
            name=name,
            items=frame,
            human=pd.DataFrame(human),
            dimensions=list(USR_DIMENSIONS.values()),
            language="en",
            system_column="system",
            counts={
                "contexts": len(contexts),
                "responses": responses,
                "items": len(items),
                "systems": frame["system"].nunique(),
            },
            notes=[f"reference = {USR_REFERENCE_SYSTEM}; human = mean of 3 annotators"],
        )

    return load


def load_chatbot_vi(folder: Path, include_references: bool = False) -> MetaSet:
    from nrp.meta.readers import line_of, read_table

    path = folder / "qa_300.derived.csv"
    frame = read_table(
        path, text_columns=["id", "question", "expected_answer", "received_answer", "human_label"]
    )
    needed = ("id", "question", "expected_answer", "received_answer", "human_label")
    require_columns(frame, needed, path, line=1)
    items, human = [], []
    for position, row in enumerate(frame.itertuples(index=False)):
        label = VI_LABELS.get(row.human_label.strip().upper())
        if label is None:
            raise InputError(
                path, line_of(frame, position), f"human_label {row.human_label!r} is not T, F or N"
            )
        items.append(
            {
                "answer_id": row.id,
                "qid": row.id,
                "question": row.question.strip(),
                "text": row.received_answer.strip(),
                "references": (row.expected_answer.strip(),),
                "reference_kind": REFERENCE,
                "contexts": (),
            }
        )
        human.append({"answer_id": row.id, "qid": row.id, "label": label})
    labels = pd.DataFrame(human)
    return MetaSet(
        name="chatbot-vi",
        items=_items_frame(items),
        human=labels,
        dimensions=["label"],
        language="vi",
        query_column="qid",
        categorical=True,
        counts={"rows": len(items)} | labels["label"].value_counts().to_dict(),
        notes=["labels T/F/N read as TRUE/FALSE/NOT GIVEN; reference = expected_answer"],
    )


META_SETS: dict[str, MetaSetInfo] = {
    info.name: info
    for info in (
        MetaSetInfo(
            "dstc7-adv",
            "DialogADV DSTC7-ADV: original and negated responses, English",
            "dialogadv/DSTC7-ADV",
            load_dstc7_adv,
        ),
        MetaSetInfo(
            "kdconv-adv",
            "DialogADV KdConv-ADV: wrong-fact and open responses, Chinese",
            "dialogadv/KdConv-ADV",
            load_kdconv_adv,
        ),
        MetaSetInfo(
            "summeval",
            "SummEval: 1,200 summaries of 12 systems, expert ratings",
            "summeval",
            load_summeval,
        ),
        MetaSetInfo(
            "usr-topical",
            "USR Topical-Chat: 60 contexts x 5 systems, 6 dimensions",
            "usr-dialog-human-judgments",
            _load_usr("usr-topical", "usr_topical_chat.json", "usr-tc"),
        ),
        MetaSetInfo(
            "usr-persona",
            "USR Persona-Chat: 60 contexts x 4 systems, 6 dimensions",
            "usr-dialog-human-judgments",
            _load_usr("usr-persona", "usr_percona_chat.json", "usr-pc"),
        ),
        MetaSetInfo(
            "chatbot-vi",
            "Vietnamese chatbot answers: TRUE / FALSE / NOT GIVEN",
            "chatbot-evaluation-vi",
            load_chatbot_vi,
        ),
    )
}
