"""A small OpenAI-compatible server for a local model: ``python -m nrp.llm.server --model M``.

Serves one ``LocalBackend`` at ``POST /v1/chat/completions`` (messages, ``max_tokens`` or
``max_completion_tokens``, ``temperature``, ``top_p``, ``seed``, ``n``, ``logprobs``,
``top_logprobs``, and the vLLM extensions ``top_k`` and ``repetition_penalty``) and
``GET /v1/models``, so any OpenAI client, ``nrp.llm.openai_compat.OpenAIBackend`` included,
can use a model that runs on this machine. ``GET /health`` answers once the model is loaded.

Why it exists: users get a local endpoint for tools that only speak OpenAI's protocol, and the
tests exercise the HTTP client over real HTTP against the same model the local backend runs
(results must agree sample by sample: both use ``ChatBackend.complete`` with the same seeds).
For the client's retry and timeout paths the server can misbehave on purpose:
``--fail-first N`` answers the first N chat requests with ``--fail-status`` (503) and an
optional ``Retry-After``; ``--delay S`` waits S seconds before each answer. ``GET /stats``
counts chat requests and injected failures.

Errors use OpenAI's shape (``{"error": {"message", "type", "code"}}``): 400 for a malformed
request (FastAPI's 422 is turned into 400, as OpenAI answers), 404 for an unknown model. One
request is generated at a time (the backend holds a lock per model); FastAPI runs the handlers
in its thread pool, so ``/health`` and ``/v1/models`` answer while a generation runs.
"""

from __future__ import annotations

import argparse
import math
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from nrp.errors import NrpError
from nrp.llm.backends import MAX_TOP_LOGPROBS, Completion

if TYPE_CHECKING:
    from nrp.llm.backends import ChatBackend

DEFAULT_MAX_TOKENS = 512


class ContentPart(BaseModel):
    type: str = "text"
    text: str = ""


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant", "developer"]
    content: str | list[ContentPart]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content if part.type == "text")


class ChatRequest(BaseModel):
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0)
    repetition_penalty: float = Field(default=1.0, gt=0.0)
    seed: int | None = None
    n: int = Field(default=1, ge=1, le=16)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_TOP_LOGPROBS)
    stream: bool = False


def _finite(value: float) -> float:
    """JSON has no infinities: a token the model rules out gets a very low log-probability."""
    return value if math.isfinite(value) else -9999.0


def completion_choice(index: int, completion: Completion, logprobs: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": index,
        "message": {"role": "assistant", "content": completion.text},
        "finish_reason": completion.finish_reason,
        "logprobs": None,
    }
    if logprobs and completion.logprobs is not None:
        choice["logprobs"] = {
            "content": [
                {
                    "token": t.token,
                    "logprob": _finite(t.logprob),
                    "bytes": list(t.token.encode("utf-8")),
                    "top_logprobs": [
                        {"token": a, "logprob": _finite(v), "bytes": list(a.encode("utf-8"))}
                        for a, v in t.top
                    ],
                }
                for t in completion.logprobs
            ]
        }
    return choice


def _error(status: int, message: str, kind: str, code: str | None = None) -> JSONResponse:
    """An error in OpenAI's shape."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(status_code=status, content=body)


def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's 422 for a malformed body, answered as OpenAI does: 400, every problem named."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'body'}: {e.get('msg')}"
        for e in exc.errors()
    )
    return _error(400, f"invalid request: {problems}", "invalid_request_error")


class _Misbehaviour:
    """Counts chat requests and fails the first ``fail_first`` on purpose (``--fail-first``,
    for tests of a client's retries); ``stats`` is what ``GET /stats`` shows."""

    def __init__(self, fail_first: int, fail_status: int, retry_after: float | None):
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.retry_after = retry_after
        self.stats = {"chat_requests": 0, "failed_on_purpose": 0}
        self.lock = threading.Lock()

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.stats)

    def failure(self) -> JSONResponse | None:
        """Count one chat request; the injected failure it gets, if any."""
        with self.lock:
            self.stats["chat_requests"] += 1
            failing = self.stats["chat_requests"] <= self.fail_first
            if failing:
                self.stats["failed_on_purpose"] += 1
        if not failing:
            return None
        response = _error(self.fail_status, "injected failure (--fail-first)", "server_error")
        if self.retry_after is not None:
            response.headers["Retry-After"] = f"{self.retry_after:g}"
        return response


def _chat(
    backend: ChatBackend, served_name: str, request: ChatRequest, delay: float
) -> JSONResponse | dict[str, Any]:
    """One chat completion request answered by ``backend`` after ``delay`` seconds (or an
    error response)."""
    if request.model != served_name:
        return _error(
            404,
            f"the model {request.model!r} does not exist; this server serves {served_name!r}",
            "invalid_request_error",
            "model_not_found",
        )
    if request.stream:
        return _error(400, "stream=true is not supported", "invalid_request_error")
    if delay > 0:
        time.sleep(delay)
    messages = [
        {"role": "system" if m.role == "developer" else m.role, "content": m.text()}
        for m in request.messages
    ]
    top = int(request.top_logprobs or 0)
    try:
        completions = backend.complete(
            [messages],
            max_new_tokens=request.max_completion_tokens
            or request.max_tokens
            or DEFAULT_MAX_TOKENS,
            temperature=request.temperature,
            top_k=request.top_k,
            top_p=request.top_p,
            repetition_penalty=request.repetition_penalty,
            seed=request.seed if request.seed is not None else 0,
            n=request.n,
            logprobs=request.logprobs or top > 0,
            top_logprobs=top,
        )[0]
    except NrpError as exc:
        return _error(400, str(exc), "invalid_request_error")
    return _chat_response(served_name, completions, request.logprobs or top > 0)


def _chat_response(
    served_name: str, completions: list[Completion], logprobs: bool
) -> dict[str, Any]:
    prompt_tokens = completions[0].prompt_tokens
    completion_tokens = sum(c.completion_tokens for c in completions)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": served_name,
        "choices": [completion_choice(i, c, logprobs) for i, c in enumerate(completions)],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def create_app(
    backend: ChatBackend,
    served_name: str,
    *,
    fail_first: int = 0,
    fail_status: int = 503,
    retry_after: float | None = None,
    delay: float = 0.0,
) -> FastAPI:
    """The FastAPI app serving ``backend`` (a ``LocalBackend``) as model ``served_name``."""
    app = FastAPI(title="nrp LLM server", docs_url=None, redoc_url=None)
    misbehaviour = _Misbehaviour(fail_first, fail_status, retry_after)
    app.state.stats = misbehaviour.stats
    app.exception_handler(RequestValidationError)(_invalid)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "model": served_name}

    @app.get("/stats")
    def get_stats() -> dict[str, int]:
        return misbehaviour.snapshot()

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        model = {"id": served_name, "object": "model", "created": 0, "owned_by": "nrp",
                 "checksum": backend.checksum()}  # fmt: skip
        return {"object": "list", "data": [model]}

    @app.post("/v1/chat/completions")
    def chat(request: ChatRequest) -> Any:
        failure = misbehaviour.failure()
        if failure is not None:
            return failure
        return _chat(backend, served_name, request, delay)

    return app


def default_model_id(model: str) -> str:
    """The default model id: the folder's or file's name (``smollm2`` for the default)."""
    from pathlib import Path

    from nrp.llm.local import DEFAULT_MODEL_ALIAS

    model = (model or "").strip().rstrip("/")
    if not model or model == DEFAULT_MODEL_ALIAS:
        return DEFAULT_MODEL_ALIAS
    path = Path(model)
    if path.exists():
        return path.stem if path.suffix == ".gguf" else path.name
    return model  # a hub id


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m nrp.llm.server",
        description="Serve a local LLM at an OpenAI-compatible /v1/chat/completions.",
    )
    parser.add_argument(
        "--model", default="", help="folder, hub id or .gguf file (default: packaged SmolLM2)"
    )
    parser.add_argument(
        "--name", default="", help="model id to serve it as (default: the folder or file name)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "fp16", "bf16"))
    parser.add_argument("--batch", type=int, default=8, help="rows per forward pass (n samples)")
    parser.add_argument(
        "--fail-first",
        type=int,
        default=0,
        help="answer the first N chat requests with --fail-status (tests of client retries)",
    )
    parser.add_argument("--fail-status", type=int, default=503)
    parser.add_argument(
        "--retry-after", type=float, default=None, help="Retry-After seconds on injected failures"
    )
    parser.add_argument(
        "--delay", type=float, default=0.0, help="seconds to wait before each chat answer"
    )
    parser.add_argument("--log-level", default="warning")
    return parser


def main(argv: list[str] | None = None) -> int:
    import sys

    import uvicorn

    from nrp.llm.local import LocalBackend

    args = build_parser().parse_args(argv)
    try:
        backend = LocalBackend(
            args.model, device=args.device, dtype=args.dtype, batch_size=args.batch
        )
        backend.load()  # before serving: /health means ready
        backend.checksum()
    except NrpError as exc:
        print(f"nrp: error: {exc}", file=sys.stderr)
        return 2
    app = create_app(
        backend,
        args.name or default_model_id(args.model),
        fail_first=args.fail_first,
        fail_status=args.fail_status,
        retry_after=args.retry_after,
        delay=args.delay,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
