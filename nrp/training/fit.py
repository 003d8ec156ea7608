"""One model's training run: steps over groups of one query's documents, RankNet loss, AdamW.

A step holds whole groups of documents of one query (a query with more documents than ``batch``
is dealt, in a seeded random order, into groups of near-equal size), several small groups
together up to ``batch`` documents; pairs are formed within a query only. Groups whose documents
share one grade carry no pair and are skipped, so no forward pass is spent on them. The order of
documents and groups is drawn from ``numpy.random.default_rng([seed, model, epoch])`` and torch
is seeded before the run, so the same seed on the same machine gives the same model
(``torch.use_deterministic_algorithms`` is on while it trains).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nrp import lazy_libs
from nrp.executors.base import pack_whole
from nrp.models.device import progress as progress_bar
from nrp.training.loss import ranknet_loss
from nrp.training.model import Features, freeze
from nrp.training.settings import TrainSettings


@dataclass(frozen=True)
class Arrays:
    """Per example: gain, weight per grade step, and its query as a number (pairs need it)."""

    gains: np.ndarray
    weights: np.ndarray
    groups: np.ndarray


@dataclass(frozen=True)
class FitPlan:
    """What one model trains on: ``train`` and (fold models) ``held_out``, query key ->
    example indices. ``number``: the model's place (folds 0..k-1, then the all-queries model),
    which seeds its data order."""

    name: str
    number: int
    train: Mapping[str, Sequence[int]]
    held_out: Mapping[str, Sequence[int]] = field(default_factory=dict)


@dataclass
class FitHistory:
    """Mean training loss per epoch, held-out loss per epoch (fold models), steps taken and
    documents passed through the model while training; ``planned``: the documents of every
    planned step (more than ``documents`` when ``max_steps`` cut the run short)."""

    loss: list[float] = field(default_factory=list)
    held_out_loss: list[float] = field(default_factory=list)
    steps: int = 0
    documents: int = 0
    planned: int = 0
    seconds: float = 0.0
    held_out_seconds: float = 0.0


def plan_steps(
    groups: Mapping[str, Sequence[int]],
    gains: np.ndarray,
    batch: int,
    rng: np.random.Generator | None,
) -> list[list[int]]:
    """The steps of one epoch (lists of example indices); ``rng=None``: in query order, for
    the held-out loss."""
    chunks: list[list[int]] = []
    for key in sorted(groups):
        indices = np.asarray(groups[key], dtype=np.int64)
        if rng is not None:
            indices = indices[rng.permutation(len(indices))]
        for part in np.array_split(indices, math.ceil(len(indices) / batch)):
            if len(np.unique(gains[part])) > 1:
                chunks.append(part.tolist())
    order = rng.permutation(len(chunks)) if rng is not None else range(len(chunks))
    return pack_whole((chunks[position] for position in order), batch)


@contextlib.contextmanager
def deterministic() -> Iterator[None]:
    """torch's deterministic algorithms on (warning where an operation has none), restored."""
    torch = lazy_libs.torch()

    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def _batch_loss(model: Any, features: Features, arrays: Arrays, step: list[int]) -> Any:
    return _loss_of(features.scores(model, step).float(), arrays, step, 0)


def held_out_loss(
    model: Any, features: Features, arrays: Arrays, plan: FitPlan, batch: int
) -> float | None:
    """The weighted RankNet loss over the held-out queries' pairs (None without any): their
    documents scored in length-sorted batches, the loss summed query by query."""
    torch = lazy_libs.torch()

    indices = [i for key in sorted(plan.held_out) for i in plan.held_out[key]]
    if not indices:
        return None
    model.eval()
    with torch.inference_mode():
        parts = [indices[i : i + batch] for i in range(0, len(indices), batch)]
        scores = torch.cat([features.scores(model, part) for part in parts]).float()
    total = weight = 0.0
    start = 0
    for key in sorted(plan.held_out):
        count = len(plan.held_out[key])
        loss, pair_weight = _loss_of(scores[start : start + count], arrays, indices, start)
        total += float(loss) * float(pair_weight)
        weight += float(pair_weight)
        start += count
    return total / weight if weight else None


def _loss_of(scores: Any, arrays: Arrays, indices: list[int], start: int) -> Any:
    torch = lazy_libs.torch()

    at = np.asarray(indices[start : start + len(scores)])
    return ranknet_loss(
        scores,
        torch.as_tensor(arrays.gains[at], device=scores.device),
        torch.as_tensor(arrays.groups[at], device=scores.device),
        torch.as_tensor(arrays.weights[at], device=scores.device),
    )


def fit(
    model: Any,
    features: Features,
    arrays: Arrays,
    plan: FitPlan,
    settings: TrainSettings,
    report: Callable[[str], None] | None = None,
) -> FitHistory:
    """Train ``model`` (its top, see ``nrp.training.model``) on ``plan.train``, in place."""
    torch = lazy_libs.torch()
    get_linear_schedule_with_warmup = lazy_libs.transformers().get_linear_schedule_with_warmup

    epochs = [
        plan_steps(
            plan.train,
            arrays.gains,
            settings.batch,
            np.random.default_rng([settings.seed, plan.number, epoch]),
        )
        for epoch in range(settings.epochs)
    ]
    history = FitHistory(planned=sum(len(step) for steps in epochs for step in steps))
    if settings.max_steps:
        epochs = _first_steps(epochs, settings.max_steps)
    total = sum(len(steps) for steps in epochs)
    parameters = freeze(model, features.frozen)
    optimizer = torch.optim.AdamW(parameters, lr=settings.lr, weight_decay=settings.weight_decay)
    schedule = get_linear_schedule_with_warmup(
        optimizer, int(settings.warmup * total), max(total, 1)
    )
    start = time.perf_counter()
    torch.manual_seed(settings.seed)
    with deterministic():
        for epoch, steps in enumerate(epochs, 1):
            model.train()
            summed = weight = 0.0
            desc = f"training {plan.name}, epoch {epoch}"
            for step in progress_bar(steps, len(steps), desc, settings.verbose):
                loss, pair_weight = _batch_loss(model, features, arrays, step)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, 1.0)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                summed += float(loss.detach()) * float(pair_weight)
                weight += float(pair_weight)
                history.steps += 1
                history.documents += len(step)
            history.loss.append(summed / weight if weight else float("nan"))
            held_start = time.perf_counter()
            held = held_out_loss(model, features, arrays, plan, settings.batch)
            history.held_out_seconds += time.perf_counter() - held_start
            if held is not None:
                history.held_out_loss.append(held)
            if report:
                report(_epoch_line(plan, epoch, len(epochs), history, held))
    model.eval()
    history.seconds = time.perf_counter() - start - history.held_out_seconds
    return history


def _first_steps(epochs: list[list[list[int]]], limit: int) -> list[list[list[int]]]:
    """The epochs cut to ``limit`` steps in all (empty epochs dropped)."""
    out, left = [], limit
    for steps in epochs:
        if left <= 0:
            break
        out.append(steps[:left])
        left -= len(out[-1])
    return out


def _epoch_line(
    plan: FitPlan, epoch: int, epochs: int, history: FitHistory, held: float | None
) -> str:
    held_text = "" if held is None else f", held-out loss {held:.4f}"
    return (
        f"{plan.name}: epoch {epoch}/{epochs}: loss {history.loss[-1]:.4f}{held_text} "
        f"({history.steps} steps, {history.documents} documents)"
    )
