"""What a task carries to a worker for a collection: a reference to it.

- ``CollectionRef``: the collection's name, path and fingerprint, and (on Ray) an object-store
  reference to the bytes of its store file (``collection.sqlite``, one file by design). A worker
  opens the path when it can read it and finds the same fingerprint there (one machine, or a
  shared filesystem); otherwise it fetches the bytes once, writes them to a worker-local folder
  and opens that copy. So a cluster without a shared disk needs nothing but the driver, and a
  worker never serves a different build of the collection than the driver's.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrp import lazy_libs
from nrp.collection.collection import Collection
from nrp.collection.store import STORE_FILE, read_meta, store_path
from nrp.errors import NrpError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from nrp.executors.base import Executor


@dataclass(frozen=True)
class CollectionRef:
    """A collection as a task carries it (see the module docstring)."""

    name: str
    path: str
    fingerprint: str
    store: Any = None  # Ray ObjectRef of the store file's bytes, or None

    @classmethod
    def of(cls, collection: Collection, executor: Executor | None = None) -> CollectionRef:
        """The reference a task of ``executor`` carries: with the store file's bytes shared
        through the executor (``Executor.share``) where its workers may not read this disk."""
        fingerprint = str(collection.meta.get("fingerprint"))
        store = None
        if executor is not None:
            store = executor.share(fingerprint, lambda: store_path(collection.path).read_bytes())
        return cls(collection.name, str(collection.path), fingerprint, store)

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
        ray = lazy_libs.ray()

        data = self.store if isinstance(self.store, bytes) else ray.get(self.store)
        folder = Path(tempfile.mkdtemp(prefix="nrp-collection-"))
        partial = folder / f".{STORE_FILE}.part"
        partial.write_bytes(data)
        os.replace(partial, folder / STORE_FILE)
        found = str(read_meta(folder / STORE_FILE).get("fingerprint"))
        if found != self.fingerprint:
            raise NrpError(f"collection {self.name!r}: shipped copy has fingerprint {found}")
        return Collection(folder), folder
