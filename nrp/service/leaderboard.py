"""``GET /v1/leaderboard``: the library's ``summarize`` over the NRP rows of a collection's
finished jobs.

An answer scored by several jobs counts once, from the latest job. The summary of the last
(collection, finished jobs) asked for is kept: it changes only when a job finishes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from nrp import api
from nrp.service import inputs
from nrp.service.store import DONE, Store
from nrp.tables import records


class Leaderboards:
    """Leaderboards of the collections in ``indexes``, the last one kept (module docstring)."""

    def __init__(self, indexes: Path):
        self.indexes = indexes
        self.kept: dict[tuple, dict[str, Any]] = {}

    def of(self, store: Store, collection: str) -> dict[str, Any]:
        inputs.check_collection_name(collection, self.indexes)
        jobs = [
            j
            for j in store.list_jobs(collection=collection, status=DONE, limit=100_000)
            if "nrp" in j["info"].get("tables", {})
        ]
        key = (collection, tuple(j["id"] for j in jobs))
        if key in self.kept:
            return self.kept[key]
        frames = [
            store.result_frame(j["id"], "nrp", j["info"]["tables"]["nrp"]).assign(_job=n)
            for n, j in enumerate(jobs)
        ]
        frames = [f for f in frames if len(f)]
        if not frames:
            result = {
                "collection": collection,
                "jobs": [],
                "answers": 0,
                "settings": {},
                "rows": [],
                "warnings": ["no finished job with NRP results for this collection"],
            }
        else:
            combined = pd.concat(frames, ignore_index=True)
            # an answer scored by several jobs counts once: the latest job's row
            combined = combined.drop_duplicates(
                ["answer_id", "dimension", "ranker"], keep="last"
            ).drop(columns="_job")
            summary = api.summarize(combined)
            result = {
                "collection": collection,
                "jobs": [j["id"] for j in jobs],
                "answers": int(combined["answer_id"].nunique()),
                "settings": summary.settings,
                "rows": records(summary.means),
                "warnings": list(summary.warnings),
            }
        self.kept = {key: result}
        return result
