"""The request and response bodies of the HTTP API, in one place.

Pydantic models are the service's contract: FastAPI checks every request against them before a
handler runs (a 422 names the field) and writes them into the OpenAPI document
(``docs/openapi.json``), so a change here is a change of the API.

Every integer a request may carry has a declared range (``Sample``, ``IdInt``, and
``ROW_NUMBER_MAX`` for the offsets and limits of the routes), so ``sample: 2**70`` is a 422
naming the field, never an overflow deep in the store or pandas.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nrp import engine

TieRule = engine.TieMode
References = Literal["auto", "collection", "pseudo", "none"]
JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]

SAMPLE_MAX = 2**31 - 1  # an answer's sample number
SAFE_INT = 2**53 - 1  # the largest integer a JSON client reads exactly (an id given as a number)
ROW_NUMBER_MAX = 10**9  # offsets and page sizes of the routes' lists and result pages
Sample = Annotated[int, Field(ge=0, le=SAMPLE_MAX)]
IdInt = Annotated[int, Field(ge=-SAFE_INT, le=SAFE_INT)]


# -- requests --------------------------------------------------------------------------------------
class AnswerIn(BaseModel):
    """One generated answer, as a row of an answer file (``nrp.answers``)."""

    model_config = ConfigDict(extra="allow")
    answer_id: str | IdInt | None = None
    llm: str | IdInt
    prompt: str | IdInt
    qid: str | IdInt
    sample: Sample | None = None
    text: str


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    collection: str = Field(description="name of a built collection")
    answers: list[AnswerIn] | None = Field(
        None, description="the answers (or answers_path: a file or folder in a data root)"
    )
    answers_path: str | None = Field(
        None, description="answer file or folder, relative to a data root of the server"
    )
    rankers: str | dict[str, str] | None = Field(
        None,
        description="one ranker spec for every dimension, a mapping dimension -> spec, or "
        "'validation' (the collection's validation.json choice per dimension)",
    )
    evaluators: str | list[str] | None = Field(
        None, description="evaluator specs, comma-separated or a list, e.g. 'bleu,rouge'"
    )
    references: References = "auto"
    ties: TieRule = engine.DEFAULT_TIE_MODE
    frozen_stats: bool = False
    full_rerank: bool = False
    weights: dict[str, float] | None = None
    skip_invalid: bool = False


class ScoreAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer_id: str | None = None
    llm: str = ""
    prompt: str = ""
    qid: str | IdInt
    sample: Sample = 0
    text: str = Field(min_length=1)


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    collection: str
    rankers: str | dict[str, str]
    answers: list[ScoreAnswer] = Field(min_length=1)
    ties: TieRule = engine.DEFAULT_TIE_MODE
    frozen_stats: bool = False
    full_rerank: bool = False
    weights: dict[str, float] | None = None


class IngestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    manifest: str = Field(description="manifest path relative to a data root")
    name: str | None = None
    force: bool = False


# -- responses -------------------------------------------------------------------------------------
class Progress(BaseModel):
    units_done: int
    units_total: int
    answers: int
    fraction: float


class JobOut(BaseModel):
    id: str
    collection: str
    status: JobStatus
    created_at: float
    started_at: float | None
    finished_at: float | None
    progress: Progress
    requeued: int
    error: str | None
    params: dict[str, Any]
    info: dict[str, Any]
    results: dict[str, str]


class ResultsPage(BaseModel):
    job_id: str
    table: str
    columns: list[str]
    total: int
    offset: int
    limit: int
    next_offset: int | None
    rows: list[dict[str, Any]]


class ScoreOut(BaseModel):
    collection: str
    rankers: dict[str, str]
    columns: list[str]
    results: list[dict[str, Any]]
    skipped: list[dict[str, Any]]


class LeaderboardOut(BaseModel):
    collection: str
    jobs: list[str]
    answers: int
    settings: dict[str, Any]
    rows: list[dict[str, Any]]
    warnings: list[str]
