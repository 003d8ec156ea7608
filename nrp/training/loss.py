"""The training loss: RankNet (Burges et al. 2005, "Learning to Rank using Gradient Descent")
over the pairs of documents of one query that have different grades, each pair weighted by its
grade difference.

For documents i, j of the same query with gains g_i > g_j and scores s_i, s_j:

    loss = sum_ij w_ij * log(1 + exp(-(s_i - s_j))) / sum_ij w_ij,   w_ij = (g_i - g_j) * c

with ``c`` = 1 / (highest - lowest gain of the collection's label scale), so one grade step
weighs the same whatever the scale. Why pairwise and not listwise (ListNet): see the package
docstring (``nrp.training``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nrp import lazy_libs

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch


def ranknet_loss(
    scores: torch.Tensor, gains: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean weighted pair loss, total pair weight) of one batch. ``groups``: the query of each
    row (pairs are formed within a query only); ``weights``: each row's weight per grade step.
    A batch without a pair of different grades gives a zero loss and weight 0."""
    torch = lazy_libs.torch()

    better = (gains[:, None] > gains[None, :]) & (groups[:, None] == groups[None, :])
    pair_weight = (gains[:, None] - gains[None, :]).to(scores.dtype) * weights[:, None]
    pair_weight = torch.where(better, pair_weight, torch.zeros_like(pair_weight))
    total = pair_weight.sum()
    if float(total) <= 0:
        return scores.sum() * 0.0, total
    margins = scores[:, None] - scores[None, :]
    losses = torch.nn.functional.softplus(-margins)
    return (losses * pair_weight).sum() / total, total
