"""``make_backend(kind, model, ...)``: a chat backend of either kind, by name.

The factory lives apart from the interface (``nrp.llm.backends``) because it is the one place
that knows the concrete backends: they import the interface, the factory imports them, and no
import runs back. Callers that only use a backend they are handed (the parsers, the server)
never load the factory, nor through it transformers or httpx.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nrp.errors import ConfigError
from nrp.llm.backends import ChatBackend
from nrp.settings import settings_with

BACKENDS = ("local", "openai")


@dataclass(frozen=True)
class BackendSettings:
    """How a backend is built: ``device``, ``dtype`` and ``batch_size`` for a local model;
    ``base_url``, ``api_key`` (base URL and key from the environment when not given),
    ``timeout``, ``retries`` and ``concurrency`` for an OpenAI-compatible server."""

    base_url: str = ""
    api_key: str | None = None
    device: str = "auto"
    dtype: str = "fp32"
    batch_size: int = 8
    timeout: float = 60.0
    retries: int = 5
    concurrency: int = 4


def make_backend(
    kind: str = "local",
    model: str = "",
    settings: BackendSettings | None = None,
    **overrides: Any,
) -> ChatBackend:
    """``local``: ``LocalBackend(model, device, dtype, batch_size)`` (``model`` "" = the offline
    SmolLM2); ``openai``: ``OpenAIBackend(model, base_url, api_key, timeout, retries,
    concurrency)``. ``overrides``: fields of ``BackendSettings`` (``device="cpu"``)."""
    options = settings_with(BackendSettings, settings, overrides)
    if kind == "local":
        from nrp.llm.local import LocalBackend

        return LocalBackend(
            model, device=options.device, dtype=options.dtype, batch_size=options.batch_size
        )
    if kind == "openai":
        from nrp.llm.openai_compat import OpenAIBackend

        return OpenAIBackend(
            model,
            base_url=options.base_url,
            api_key=options.api_key,
            timeout=options.timeout,
            retries=options.retries,
            concurrency=options.concurrency,
        )
    raise ConfigError(f"unknown LLM backend {kind!r} (use one of {', '.join(BACKENDS)})")
