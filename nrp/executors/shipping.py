"""What a task carries to a worker: a reference to the collection and the spec of a component.

- ``CollectionRef``: the collection's name, path and fingerprint, and (on Ray) an object-store
  reference to the bytes of its store file (``collection.sqlite``, one file by design). A worker
  opens the path when it can read it and finds the same fingerprint there (one machine, or a
  shared filesystem); otherwise it fetches the bytes once, writes them to a worker-local folder
  and opens that copy. So a cluster without a shared disk needs nothing but the driver, and a
  worker never serves a different build of the collection than the driver's.
- ``component_spec``: a ranker or evaluator as the spec string that rebuilds it with all its
  parameters (``device`` and ``batch`` included), so a task ships a short string instead of a
  pickled object that may already hold a loaded model. When no registry spec rebuilds the
  object (a subclass, a value with a comma) the object itself is shipped. Either way the worker
  compares its component's fingerprint with the driver's before computing anything: a node with
  other model files or library versions fails loudly instead of caching wrong scores under the
  driver's key.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nrp.collection.collection import Collection
from nrp.collection.store import STORE_FILE, read_meta, store_path
from nrp.errors import NrpError
from nrp.spec import Param


@dataclass(frozen=True)
class CollectionRef:
    """A collection as a task carries it (see the module docstring)."""

    name: str
    path: str
    fingerprint: str
    store: Any = None  # Ray ObjectRef of the store file's bytes, or None

    @classmethod
    def of(cls, collection: Collection, store: Any = None) -> CollectionRef:
        return cls(
            collection.name, str(collection.path), str(collection.meta.get("fingerprint")), store
        )

    def readable_here(self) -> bool:
        """The driver's store file is readable here and is the same build."""
        path = store_path(Path(self.path))
        if not path.is_file():
            return False
        try:
            return str(read_meta(path).get("fingerprint")) == self.fingerprint
        except Exception:  # unreadable or another format: use the shipped copy
            return False

    def open(self) -> tuple[Collection, Path | None]:
        """The collection, and a worker-local folder to remove when done (None when the
        driver's path was opened)."""
        if self.readable_here():
            return Collection(Path(self.path)), None
        if self.store is None:
            raise NrpError(
                f"collection {self.name!r}: {self.path} is not readable on this worker and no "
                "copy was shipped"
            )
        import ray

        data = self.store if isinstance(self.store, bytes) else ray.get(self.store)
        folder = Path(tempfile.mkdtemp(prefix="nrp-collection-"))
        partial = folder / f".{STORE_FILE}.part"
        partial.write_bytes(data)
        os.replace(partial, folder / STORE_FILE)
        found = str(read_meta(folder / STORE_FILE).get("fingerprint"))
        if found != self.fingerprint:
            raise NrpError(f"collection {self.name!r}: shipped copy has fingerprint {found}")
        return Collection(folder), folder


def component_spec(
    component: Any, registry: Mapping[str, Any], build: Callable[[str], Any]
) -> str | None:
    """The spec that rebuilds ``component`` (a Ranker or Evaluator) with all its parameters,
    or None when none does. ``registry``: name -> info with ``params`` (``Param`` by key)."""
    info = registry.get(getattr(component, "name", ""))
    if info is None:
        return None
    declared: Mapping[str, Param] = info.params
    parts = []
    for key, value in sorted(component.params.items()):
        if value is None:
            continue
        text = str(value)
        if key not in declared or "," in text:  # a comma would split the spec
            return None
        parts.append(f"{key}={text}")
    spec = f"{component.name}:{','.join(parts)}" if parts else str(component.name)
    try:
        rebuilt = build(spec)
    except Exception:
        return None
    return spec if type(rebuilt) is type(component) else None


def shipped_component(
    component: Any, registry: Mapping[str, Any], build: Callable[[str], Any]
) -> tuple[Any, str]:
    """What a task carries for ``component``: (its ``component_spec``, "") when a spec rebuilds
    it, else (the object, a fresh instance id: each shipped object is a worker state of its
    own, since no spec names it)."""
    spec = component_spec(component, registry, build)
    return (spec, "") if spec is not None else (component, uuid.uuid4().hex)
