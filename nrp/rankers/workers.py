"""A ranker on an executor's worker: the GPUs its actor needs, and the ranker built there from
its spec (or the shipped object), bound to the collection and checked against the driver's
fingerprint. Shared by every task that ranks (positioning answers, scoring judged documents for
validation)."""

from __future__ import annotations

from pathlib import Path

from nrp.collection.collection import Collection
from nrp.collection.shipping import CollectionRef
from nrp.errors import NrpError
from nrp.executors.base import remove_tree
from nrp.models.device import device_needs_gpu
from nrp.rankers.base import Ranker
from nrp.rankers.registry import make_ranker


def ranker_gpus(ranker: str | Ranker, cluster_has_gpus: bool) -> float:
    """GPUs an actor needs for ``ranker`` (a spec or the object): 1 for its device cuda (or
    auto on a cluster with GPUs), else 0."""
    if isinstance(ranker, str):
        from nrp.rankers.registry import parse_spec

        params = parse_spec(ranker)[1]
    else:
        params = ranker.params
    return 1.0 if device_needs_gpu(params.get("device"), cluster_has_gpus) else 0.0


def open_ranker(
    collection_ref: CollectionRef, ranker: str | Ranker, ranker_spec: str, fingerprint: str
) -> tuple[Collection, Ranker, list[Path]]:
    """On a worker: the collection (and the worker-local folders to remove with the state), and
    the ranker built from its spec (or the shipped object) and bound to it; refused when its
    fingerprint is not the driver's (other model files or library versions on this node)."""
    collection, copied = collection_ref.open()
    folders = [copied] if copied is not None else []
    try:
        built = make_ranker(ranker) if isinstance(ranker, str) else ranker
        built.bind_collection(collection)
        found = built.fingerprint()
        if found != fingerprint:
            raise NrpError(
                f"{ranker_spec}: the ranker built on this worker has fingerprint {found}, the "
                f"driver's {fingerprint} (other model files or library versions on this node): "
                "refusing to score"
            )
    except BaseException:
        for folder in folders:
            remove_tree(folder)
        raise
    return collection, built, folders
