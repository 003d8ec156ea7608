"""A project and its store together: what one reviewer sees, saves and has left to do.

The web app's handlers call these and nothing else, so the rules (an item is yours only when it
is assigned to you; a value is checked against the item before it is stored; when an item
counts as done) live in one place, used the same way by ``nrp serve`` and ``nrp review``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nrp.review.project import ReviewItem, ReviewProject, review_store_path
from nrp.review.store import Review, ReviewStore


class NotAssigned(LookupError):
    """The item does not exist or is not assigned to this reviewer (both answer 404)."""


def is_done(item: ReviewItem, value: dict[str, Any] | None) -> bool:
    """A ranking or a verdict is done once saved; grades once every dimension has a label."""
    if value is None:
        return False
    if item.kind == "grade":
        return set(item.shown["dimensions"]) <= set(value.get("labels", {}))
    return True


@dataclass
class ReviewDesk:
    project: ReviewProject
    store: ReviewStore

    @classmethod
    def open(cls, project_file: str | Path, store_file: str | Path | None = None) -> ReviewDesk:
        project = ReviewProject.load(project_file)
        return cls(project, ReviewStore(store_file or review_store_path(project_file)))

    @property
    def name(self) -> str:
        return self.project.name

    def _mine(self, reviewer: str, item_id: str) -> ReviewItem:
        item = self.project.item(item_id)
        if item is None or reviewer not in self.project.reviewers_of(item_id):
            raise NotAssigned(item_id)
        return item

    def items_of(self, reviewer: str) -> list[dict[str, Any]]:
        """The reviewer's items: id, kind, qid, question, done, version."""
        saved = {r.item_id: r for r in self.store.reviews(reviewer)}
        out = []
        for item in self.project.assigned(reviewer):
            review = saved.get(item.id)
            out.append(
                {
                    "id": item.id,
                    "kind": item.kind,
                    "qid": item.qid,
                    "question": item.shown.get("question", ""),
                    "done": is_done(item, review.value if review else None),
                    "version": review.version if review else 0,
                }
            )
        return out

    def view(self, reviewer: str, item_id: str) -> dict[str, Any]:
        """One item as the reviewer's screen shows it, with their saved value and version."""
        item = self._mine(reviewer, item_id)
        review = self.store.get(item_id, reviewer)
        out = {
            "item": item.public(),
            "value": review.value if review else None,
            "version": review.version if review else 0,
        }
        if item.kind == "grade":
            out["scales"] = {d: self.project.scales[d] for d in item.shown["dimensions"]}
        return out

    def save(
        self, reviewer: str, item_id: str, value: Any, base_version: int, save_id: str
    ) -> Review:
        """Check and store a value (``nrp.review.store``: StaleVersion on a stale version)."""
        item = self._mine(reviewer, item_id)
        checked = self.project.check_value(item, value)
        return self.store.save(item_id, reviewer, checked, base_version, f"{reviewer}:{save_id}")

    def progress(self) -> list[dict[str, Any]]:
        """Per reviewer: items assigned and done, per kind and in all."""
        saved: dict[tuple[str, str], Review] = {
            (r.item_id, r.reviewer): r for r in self.store.reviews()
        }
        rows = []
        for reviewer in self.project.reviewers:
            assigned = self.project.assigned(reviewer)
            row: dict[str, Any] = {"reviewer": reviewer, "assigned": len(assigned), "done": 0}
            for kind in self.project.kinds:
                row[kind] = {"assigned": 0, "done": 0}
            for item in assigned:
                review = saved.get((item.id, reviewer))
                done = is_done(item, review.value if review else None)
                row[item.kind]["assigned"] += 1
                row[item.kind]["done"] += int(done)
                row["done"] += int(done)
            rows.append(row)
        return rows

    # -- files in and out ------------------------------------------------------------------
    def export_human(self, out: str | Path) -> list[Path]:
        """The human files of ``nrp meta`` and the agreement (``nrp.review.export``)."""
        from nrp.review.export import write_review_human_files

        return write_review_human_files(self.project, self.store.reviews(), out)

    def export_label_studio(self, path: str | Path) -> list[Path]:
        """Label Studio tasks (JSON) and the labeling configuration of each item kind."""
        from nrp.review.labelstudio import write_label_studio

        return write_label_studio(self.project, self.store.reviews(), path)

    def import_label_studio(self, path: str | Path) -> int:
        """Reviews from a Label Studio export, each stored as its (item, reviewer)'s next
        version; the number stored (a review already stored as it is counts 0)."""
        from nrp.review.labelstudio import import_reviews, read_label_studio

        return import_reviews(self.store, read_label_studio(self.project, path))
