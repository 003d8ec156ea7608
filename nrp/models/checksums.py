"""Checksums of model files: what identifies a model in a fingerprint (score cache keys, the
checksums a worker compares with the driver's, generated answers' provenance)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def checksum_path(
    path: str | Path,
    patterns: tuple[str, ...] = (
        "*.json",
        "*.safetensors",
        "*.bin",
        "*.model",
        "*.txt",
        "*.pt",
        "*.gguf",
    ),
) -> str:
    """SHA-256 over a model folder's (or file's) weight and config files, names included.

    Hub ids (not a local path) are returned as given: their revision is what identifies them.
    """
    path = Path(path)
    if not path.exists():
        return f"hub:{path}"
    files = (
        [path]
        if path.is_file()
        else sorted({f for pattern in patterns for f in path.rglob(pattern) if f.is_file()})
    )
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode())
        with open(file, "rb") as handle:
            for block in iter(lambda h=handle: h.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:20]
