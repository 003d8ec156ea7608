"""Label Studio JSON in and out: the format research groups already hold their annotations in.

Label Studio's export is a JSON list of tasks, each with ``data`` (what was shown) and
``annotations``, each annotation with ``completed_by`` and a ``result`` list. A project's items
map to two of its task types:

- **ranking** (a ``List`` + ``Ranker`` labeling config): ``data.items`` is the list of
  candidates ``{"id": cid, "title": cid, "body": text}``; a result of ``type: "ranker"`` holds
  ``value.ranker``: ``{RANKER_NAME: [ids best first]}`` for a strict order, or, with ``Bucket``
  tags, ``{bucket: [ids], ...}`` with the buckets in order best first, each a tie group
  (``nrp.meta.labelstudio.ranker_groups`` reads it).
- **choices** (``Choices`` tags): a result of ``type: "choices"`` per question, ``from_name``
  the dimension (grade items) or ``label`` (verify items), ``value.choices`` one label.

``data.nrp_item`` names the project item a task is for (an export without it, of a project
nrp did not create, is read by ``nrp.meta.labelstudio``: ``nrp meta``, ``nrp annotators``);
``completed_by`` is the reviewer (a name, or an object whose ``email`` is the name or
``name@...``). ``labeling_configs`` gives the labeling configuration of each task type, to
create the matching Label Studio project.
Exporting then importing gives the reviews back unchanged (a tie exported as buckets comes
back as the same groups).
"""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path
from typing import Any

from nrp import jsontext
from nrp.errors import InputError
from nrp.meta.labelstudio import RANKER, ranker_groups
from nrp.review.project import ReviewItem, ReviewProject
from nrp.review.store import Review, ReviewStore

LIST = "items"
VERDICT = "label"
TARGET = "answer"


def _task_data(item: ReviewItem) -> dict[str, Any]:
    shown = item.shown
    if item.kind == "rank":
        return {
            "nrp_item": item.id,
            "question": shown["question"],
            LIST: [
                {"id": c["cid"], "title": c["cid"], "body": c["text"]} for c in shown["candidates"]
            ],
        }
    data = {"nrp_item": item.id, "question": shown["question"], TARGET: shown["answer"]}
    if item.kind == "verify":
        data.update(
            reference=shown["reference"],
            judge_label=shown["judge_label"],
            confidence=shown["confidence"],
        )
    return data


def _result(item: ReviewItem, value: dict[str, Any]) -> list[dict[str, Any]]:
    if item.kind == "rank":
        groups = value["ranking"]
        if all(len(g) == 1 for g in groups):
            ranker = {RANKER: [g[0] for g in groups]}
        else:
            ranker = {f"tier-{i + 1}": list(g) for i, g in enumerate(groups)}
        return [
            {"id": "r0", "from_name": RANKER, "to_name": LIST, "type": "ranker",
             "value": {"ranker": ranker}}
        ]  # fmt: skip
    if item.kind == "grade":
        return [
            {"id": f"r{i}", "from_name": d, "to_name": TARGET, "type": "choices",
             "value": {"choices": [label]}}
            for i, (d, label) in enumerate(value["labels"].items())
        ]  # fmt: skip
    return [
        {"id": "r0", "from_name": VERDICT, "to_name": TARGET, "type": "choices",
         "value": {"choices": [value["label"]]}}
    ]  # fmt: skip


def to_label_studio(project: ReviewProject, reviews: list[Review]) -> list[dict[str, Any]]:
    """One task per item (project order), one annotation per saved review."""
    by_item: dict[str, list[Review]] = {}
    for review in reviews:
        by_item.setdefault(review.item_id, []).append(review)
    tasks = []
    annotation_id = 0
    for number, item in enumerate(project.items, start=1):
        annotations = []
        for review in sorted(by_item.get(item.id, []), key=lambda r: r.reviewer):
            annotation_id += 1
            annotations.append(
                {
                    "id": annotation_id,
                    "completed_by": {"email": review.reviewer},
                    "result": _result(item, review.value),
                    "was_cancelled": False,
                }
            )
        tasks.append({"id": number, "data": _task_data(item), "annotations": annotations})
    return tasks


def _xml(text: str) -> str:
    return html.escape(str(text), quote=True)


def labeling_configs(project: ReviewProject) -> dict[str, str]:
    """Label Studio labeling configuration (XML) per item kind of the project."""
    configs = {}
    if "rank" in project.kinds:
        configs["rank"] = (
            '<View><Header value="$question"/>'
            f'<List name="{LIST}" value="${LIST}" title="Candidates"/>'
            f'<Ranker name="{RANKER}" toName="{LIST}"/></View>'
        )
    if "grade" in project.kinds:
        choices = "".join(
            f'<Header value="{_xml(d)}"/><Choices name="{_xml(d)}" toName="{TARGET}" '
            'choice="single">'
            + "".join(
                f'<Choice value="{_xml(g["label"])}" hint="{_xml(g["meaning"])}"/>'
                for g in s["grades"]
            )
            + "</Choices>"
            for d, s in project.scales.items()
        )
        configs["grade"] = (
            f'<View><Header value="$question"/><Text name="{TARGET}" value="${TARGET}"/>'
            f"{choices}</View>"
        )
    if "verify" in project.kinds:
        labels = sorted(
            {c for i in project.items if i.kind == "verify" for c in i.shown["choices"]}
        )
        configs["verify"] = (
            '<View><Header value="$question"/><Text name="reference" value="$reference"/>'
            f'<Text name="{TARGET}" value="${TARGET}"/>'
            f'<Choices name="{VERDICT}" toName="{TARGET}" choice="single">'
            + "".join(f'<Choice value="{_xml(label)}"/>' for label in labels)
            + "</Choices></View>"
        )
    return configs


def write_label_studio(
    project: ReviewProject, reviews: list[Review], path: str | Path
) -> list[Path]:
    """The tasks as ``path`` (JSON), and beside it ``STEM.KIND.xml``, the labeling
    configuration of each item kind (to create the matching Label Studio project)."""
    from nrp.tables import write_text

    path = Path(path)
    tasks = to_label_studio(project, reviews)
    write_text(path, json.dumps(tasks, indent=1, ensure_ascii=False) + "\n")
    written = [path]
    for kind, config in labeling_configs(project).items():
        written.append(path.with_name(f"{path.stem}.{kind}.xml"))
        write_text(written[-1], config + "\n")
    return written


def _reviewer(project: ReviewProject, completed_by: Any, where: str, path: Path) -> str:
    name = completed_by.get("email") if isinstance(completed_by, dict) else completed_by
    name = "" if name is None else str(name)
    if name not in project.reviewers and "@" in name:
        name = name.split("@", 1)[0]
    if name not in project.reviewers:
        raise InputError(path, None, f"{where}: completed_by {completed_by!r} is not a reviewer")
    return name


def _value(item: ReviewItem, result: list[Any], where: str, path: Path) -> dict[str, Any]:
    if item.kind == "rank":
        return {"ranking": ranker_groups(result, where, path)}
    if not isinstance(result, list) or not all(isinstance(r, dict) for r in result):
        raise InputError(path, None, f"{where}: result must be a list of objects")
    choices = {}
    for r in result:
        if r.get("type") != "choices":
            continue
        picked = r.get("value", {}).get("choices")
        if not isinstance(picked, list) or len(picked) != 1:
            raise InputError(path, None, f"{where}: {r.get('from_name')}: one choice expected")
        choices[str(r.get("from_name"))] = str(picked[0])
    if item.kind == "grade":
        return {"labels": choices}
    if VERDICT not in choices:
        raise InputError(path, None, f"{where}: no {VERDICT!r} choice")
    return {"label": choices[VERDICT]}


def read_label_studio(project: ReviewProject, path: str | Path) -> list[Review]:
    """The reviews in a Label Studio JSON export (``data.nrp_item`` names each task's item);
    values checked against their items. Versions are 0 (not yet stored)."""
    path = Path(path)
    try:
        tasks = jsontext.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(path, getattr(err, "lineno", None), f"not a JSON file ({err})") from None
    if not isinstance(tasks, list):
        raise InputError(path, None, "a Label Studio export is a JSON list of tasks")
    out = []
    for number, task in enumerate(tasks, start=1):
        where = f"task {task.get('id', number) if isinstance(task, dict) else number}"
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            raise InputError(path, None, f"{where}: no data object")
        item_id = task["data"].get("nrp_item")
        if item_id is None and "items" in task["data"]:
            raise InputError(
                path, None, f"{where}: no data.nrp_item: an export of a project nrp did not "
                "create; read its rankings with nrp meta or nrp annotators",
            )  # fmt: skip
        item = project.item(str(item_id)) if item_id is not None else None
        if item is None:
            raise InputError(path, None, f"{where}: data.nrp_item {item_id!r} is not an item")
        for annotation in task.get("annotations") or []:
            if annotation.get("was_cancelled"):
                continue
            reviewer = _reviewer(project, annotation.get("completed_by"), where, path)
            value = _value(item, annotation.get("result"), where, path)
            try:
                checked = project.check_value(item, value)
            except InputError as err:
                raise InputError(path, None, f"{where}: {err.problem}") from None
            out.append(Review(item.id, reviewer, checked, 0))
    return out


def import_reviews(store: ReviewStore, reviews: list[Review]) -> int:
    """Store each review as the next version of its (item, reviewer); the same review imported
    twice is stored once (its save id is a digest of its content). The number stored."""
    before = len(store.save_ids())
    for review in reviews:
        digest = hashlib.sha256(
            json.dumps([review.item_id, review.reviewer, review.value], sort_keys=True).encode()
        ).hexdigest()[:24]
        current = store.get(review.item_id, review.reviewer)
        if current is not None and current.value == review.value:
            continue
        store.save(
            review.item_id,
            review.reviewer,
            review.value,
            current.version if current else 0,
            f"labelstudio:{digest}:{current.version if current else 0}",
        )
    return len(store.save_ids()) - before
