"""An OpenAI-compatible chat API (``/v1/chat/completions``) as a ``ChatBackend``.

Works with OpenAI and with servers that speak its protocol (vLLM, llama.cpp's server, Ollama,
nrp's own ``nrp.llm.server``). Settings, the parameter first, then the environment:

- base URL: ``base_url`` > ``NRP_OPENAI_BASE_URL`` > ``OPENAI_BASE_URL`` >
  ``https://api.openai.com/v1``; ``/v1`` is appended when the URL does not end in ``/vN``;
- API key: ``api_key`` > ``NRP_OPENAI_API_KEY`` > ``OPENAI_API_KEY`` > none (local servers
  need none); sent as ``Authorization: Bearer``;
- model: ``model``; "" asks ``GET /v1/models`` and takes the server's only model.

Design choices, and why:

- **One request per sample** (``n=1``, ``seed + j``): see ``nrp.llm.backends``; many
  compatible servers ignore ``n`` or ``seed`` with ``n > 1``.
- **Retries** with exponential backoff (``backoff * 2**attempt``, at most ``max_backoff`` s)
  on 429, 5xx, timeouts and connection errors, which pass; a ``Retry-After`` header (seconds
  or an HTTP date) is honoured instead of the computed wait. Other 4xx answers are the
  caller's mistake: no retry, one ``NrpError`` line with the server's message and a hint.
- **Bounded concurrency**: a thread pool of ``concurrency`` workers over one shared
  ``httpx.Client`` (its connection pool sized to match); results keep the prompts' order. The
  first failure cancels the requests not yet sent.
- ``top_k`` and ``repetition_penalty`` are not OpenAI parameters; they are sent only when set
  (vLLM and nrp's server read them; OpenAI would refuse them).
"""

from __future__ import annotations

import email.utils
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, ClassVar

from nrp.errors import ConfigError, NrpError
from nrp.llm.backends import (
    ChatBackend,
    Completion,
    GenerationOptions,
    Messages,
    TokenLogprob,
    sample_seed,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
BASE_URL_VARIABLES = ("NRP_OPENAI_BASE_URL", "OPENAI_BASE_URL")
API_KEY_VARIABLES = ("NRP_OPENAI_API_KEY", "OPENAI_API_KEY")
#: answers worth retrying besides every 5xx (timeout, conflict, rate limit), as OpenAI's SDK does
RETRY_STATUSES = frozenset({408, 409, 429})
#: the longest Retry-After wait honoured (a server asking for more is answered with an error)
MAX_RETRY_AFTER = 600.0


def resolve_base_url(base_url: str = "") -> str:
    """The API root ending in ``/vN`` (parameter, then environment, then OpenAI's)."""
    url = (base_url or "").strip()
    if not url:
        url = next((os.environ[v] for v in BASE_URL_VARIABLES if os.environ.get(v)), "")
    url = (url or DEFAULT_BASE_URL).strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"LLM base URL {url!r} must start with http:// or https://")
    last = url.rsplit("/", 1)[-1]
    if not (last.startswith("v") and last[1:].isdigit()):
        url += "/v1"
    return url


def resolve_api_key(api_key: str | None = None) -> str | None:
    if api_key:
        return api_key
    return next((os.environ[v] for v in API_KEY_VARIABLES if os.environ.get(v)), None)


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header as seconds (a number, or an HTTP date); None when absent or
    unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def retryable(status: int) -> bool:
    return status in RETRY_STATUSES or status >= 500


def _server_message(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        return " ".join(response.text.split())[:300]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return " ".join(str(error["message"]).split())[:300]
    if isinstance(body, dict) and body.get("detail"):
        return " ".join(str(body["detail"]).split())[:300]
    return " ".join(str(body).split())[:300]


class OpenAIBackend(ChatBackend):
    """``/v1/chat/completions`` over HTTP (see the module docstring)."""

    kind: ClassVar[str] = "openai"

    def __init__(
        self,
        model: str = "",
        base_url: str = "",
        api_key: str | None = None,
        timeout: float = 60.0,
        retries: int = 5,
        concurrency: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
    ):
        import httpx

        if timeout <= 0:
            raise ConfigError(f"timeout must be > 0 seconds, got {timeout}")
        if retries < 0:
            raise ConfigError(f"retries must be >= 0, got {retries}")
        if concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
        self.base_url = resolve_base_url(base_url)
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.concurrency = int(concurrency)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self._model = (model or "").strip()
        self._model_lock = threading.Lock()
        headers = {"Content-Type": "application/json"}
        key = resolve_api_key(api_key)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(self.timeout),
            limits=httpx.Limits(max_connections=self.concurrency),
        )

    # -- identity -----------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        with self._model_lock:
            if not self._model:
                self._model = self._only_model()
            return self._model

    def checksum(self) -> str:
        """The served model's name: a remote model's weights cannot be read (the judge's cache
        key also holds the base URL)."""
        return f"openai:{self.model_name}"

    def models(self) -> list[str]:
        """The model ids ``GET /v1/models`` lists."""
        body = self._request("GET", "/models")
        return [str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)]

    def _only_model(self) -> str:
        served = self.models()
        if len(served) == 1:
            return served[0]
        listed = ", ".join(served[:10]) or "none"
        raise ConfigError(
            f"{self.base_url} serves {len(served)} models ({listed}); name one with model=..."
        )

    # -- HTTP ---------------------------------------------------------------------------------
    def _wait(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        wait = min(self.max_backoff, self.backoff * (2**attempt))
        return wait * (0.5 + random.random() / 2)  # jitter: retries of many workers spread out

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One API call with retries; the decoded JSON answer, or an NrpError."""
        import httpx

        url = f"{self.base_url}{path}"
        attempts = self.retries + 1
        problem = ""
        for attempt in range(attempts):
            retry_after = None
            try:
                response = self._client.request(method, url, json=body)
            except httpx.TimeoutException:
                problem = f"no answer within {self.timeout:g} s (raise timeout=...)"
            except httpx.TransportError as exc:
                problem = f"cannot connect ({exc or type(exc).__name__}); is the server running?"
            else:
                if response.status_code < 400:
                    try:
                        return response.json()
                    except ValueError:
                        raise NrpError(
                            f"{method} {url}: the answer is not JSON: {response.text[:200]!r}"
                        ) from None
                message = _server_message(response)
                if not retryable(response.status_code):
                    raise NrpError(
                        f"{method} {url}: HTTP {response.status_code}: {message}"
                        f"{self._hint(response.status_code)}"
                    )
                problem = f"HTTP {response.status_code}: {message}"
                retry_after = retry_after_seconds(response.headers.get("Retry-After"))
                if retry_after is not None and retry_after > MAX_RETRY_AFTER:
                    raise NrpError(
                        f"{method} {url}: {problem} (the server asks to wait "
                        f"{retry_after:.0f} s before retrying)"
                    )
            if attempt + 1 < attempts:
                time.sleep(self._wait(attempt, retry_after))
        tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
        raise NrpError(f"{method} {url}: {problem} after {tries}")

    def _hint(self, status: int) -> str:
        if status in (401, 403):
            return f" (set {' or '.join(API_KEY_VARIABLES)} to a valid API key)"
        if status == 404:
            return (
                f" (check the base URL {self.base_url} and the model name; "
                "GET /v1/models lists the served models)"
            )
        return ""

    def close(self) -> None:
        self._client.close()

    # -- completions --------------------------------------------------------------------------
    def request_body(
        self, messages: Messages, options: GenerationOptions, seed: int
    ) -> dict[str, Any]:
        """The JSON body of one chat completion request."""
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": messages,
            "max_tokens": options.max_new_tokens,
            "temperature": options.temperature,
            "top_p": options.top_p,
            "seed": seed,
            "n": 1,
        }
        if options.logprobs:
            body["logprobs"] = True
            if options.top_logprobs > 0:
                body["top_logprobs"] = options.top_logprobs
        if options.top_k > 0:
            body["top_k"] = options.top_k
        if options.repetition_penalty != 1.0:
            body["repetition_penalty"] = options.repetition_penalty
        return body

    def _complete(
        self, messages: list[Messages], options: GenerationOptions
    ) -> list[list[Completion]]:
        tasks = [(p, j) for p in range(len(messages)) for j in range(options.n)]
        model = self.model_name  # resolved once, before the workers start

        def one(task: tuple[int, int]) -> Completion:
            p, j = task
            seed = sample_seed(options.seed, j)
            body = self._request(
                "POST", "/chat/completions", self.request_body(messages[p], options, seed)
            )
            return parse_chat_completion(body, seed, f"{self.base_url} ({model})")

        results: list[Completion] = _map_bounded(one, tasks, self.concurrency)
        out: list[list[Completion]] = [[] for _ in messages]
        for (p, _), completion in zip(tasks, results, strict=True):
            out[p].append(completion)
        return out


def _map_bounded(
    fn: Callable[[tuple[int, int]], Completion], tasks: Sequence[tuple[int, int]], workers: int
) -> list[Completion]:
    """``fn`` over ``tasks`` with at most ``workers`` at a time, results in order; the first
    exception cancels the tasks not started and is raised."""
    if workers <= 1 or len(tasks) <= 1:
        return [fn(t) for t in tasks]
    with ThreadPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
        futures = [pool.submit(fn, t) for t in tasks]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def parse_chat_completion(body: Any, seed: int | None, where: str = "server") -> Completion:
    """A ``Completion`` from a ``/v1/chat/completions`` answer (its first choice)."""
    try:
        choice = body["choices"][0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        finish = str(choice.get("finish_reason") or "stop")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise NrpError(f"{where}: the answer has no choices: {str(body)[:200]}") from None
    logprobs = None
    content = (choice.get("logprobs") or {}).get("content") if choice.get("logprobs") else None
    if content:
        logprobs = tuple(
            TokenLogprob(
                str(entry.get("token", "")),
                float(entry.get("logprob", float("nan"))),
                tuple(
                    (str(alt.get("token", "")), float(alt.get("logprob", float("nan"))))
                    for alt in entry.get("top_logprobs") or ()
                ),
            )
            for entry in content
        )
    usage = body.get("usage") or {}
    return Completion(
        text=str(text),
        finish_reason=finish,
        tokens=tuple(t.token for t in logprobs) if logprobs else (),
        logprobs=logprobs,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        seed=seed,
    )
