"""Reading scores, labels and confidences out of LLM output, and weighting them by token
probabilities.

Rules, and why:

- **Nothing is guessed.** A score or label is read only where the output states it in a form
  the prompts ask for (or an unmistakable variant); anything else is None, and the judge stores
  it as missing (NaN) with the raw text kept, never as 0 or as the middle of the scale.
- **Rubric scores** (``find_rubric_score``): "Score: 4" / "Rating (1-5): 4" first, then an
  output that starts with the digit ("4", "**4** - ..."; not a numbered list, "1. Read the
  question", which small models write when they echo the prompt's steps), then "4/5" or
  "4 out of 5". A decimal ("4.5") or a number outside the scale is not a score.
- **Prometheus** (``find_prometheus_score``): the last "[RESULT] N" (its output format:
  feedback, then the result), "Result: N" accepted as well.
- **G-Eval weighting** (``weighted_score``): Liu et al. (2023) score with the expectation
  sum_s s * p(s) over the score tokens, so a judge torn between 3 and 4 gives 3.5 rather than a
  coin flip. p(s) is read from the log-probabilities of the alternatives at the position where
  the stated score's token was generated, summed per score (" 4" and "4" are both 4) and
  renormalised over the scale's tokens: only the relative weights of the scores matter, and the
  top-20 alternatives an API returns rarely hold all the probability mass. Without
  log-probabilities, or when the score's token is not a bare digit ("4." as one token), the
  stated integer is the score.
- **Labels** (``find_choice``): "Label: X" (or Answer/Verdict/Decision) first, then an output
  that starts with a label, then a label written in capitals when it is the only one that
  appears; longer labels win ("NOT GIVEN" is never read as "GIVEN").
- **Label confidence** (``label_reading``): the probability of the chosen label at the
  position of its first token, renormalised over the labels whose first token the alternatives
  there spell (``choice_probability``), when log-probabilities are available; else the stated
  "Confidence: 0.8" (or "80%"); else NaN.
- **Several samples**: scores give mean and sample standard deviation (ddof 1; NaN with fewer
  than two parsed samples); labels give the majority label (ties: the larger summed confidence,
  then the order of the labels), its share of all samples (agreement; an unparsed sample agrees
  with nobody), and the mean and sd of its confidence over the samples that gave it.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from nrp.llm.backends import Completion

TFN_LABELS = ("TRUE", "FALSE", "NOT GIVEN")
GIVEN_LABELS = ("GIVEN", "NOT GIVEN")
TRUTH_LABELS = ("TRUE", "FALSE")


@dataclass(frozen=True)
class Found:
    """A value read from a text, and the character offset where it was written."""

    value: int | str
    start: int


# -- rubric scores --------------------------------------------------------------------------------
def _digits(low: int, high: int) -> str:
    if not 0 <= low < high <= 9:
        raise ValueError(f"score scales are single digits, got {low}-{high}")
    return f"[{low}-{high}]"


def find_rubric_score(text: str, low: int = 1, high: int = 5) -> Found | None:
    """The score an output states (see the module docstring for the forms read)."""
    digit = _digits(low, high)
    end = r"(?!\d)(?!\.\d)"
    scale = rf"(?:\(\s*{low}\s*[-–]\s*{high}\s*\))?"
    patterns = (
        rf"(?i)\b(?:score|rating)\b\s*{scale}\s*(?:is|of|=|:)?\s*\**\s*({digit}){end}",
        rf"^[\s\"'*#]*({digit}){end}(?![.)]\s*\S)",  # not a list: "1. Read the question"
        rf"(?i)(?<![\d.])({digit})\s*(?:/\s*{high}|out\s+of\s+{high})(?!\d)",
    )
    for pattern in patterns:
        match = re.search(pattern, text)
        if match:
            return Found(int(match.group(1)), match.start(1))
    return None


def find_prometheus_score(text: str, low: int = 1, high: int = 5) -> Found | None:
    """The last "[RESULT] N" (or "Result: N") of a Prometheus-style output."""
    digit = _digits(low, high)
    pattern = rf"(?i)(?:\[\s*RESULT\s*\]|\bresult\s*:)\s*:?\s*\(?\s*\**\s*({digit})(?!\d)(?!\.\d)"
    matches = list(re.finditer(pattern, text))
    if not matches:
        return None
    last = matches[-1]
    return Found(int(last.group(1)), last.start(1))


def weighted_score(
    alternatives: Sequence[tuple[str, float]], low: int = 1, high: int = 5
) -> float | None:
    """sum_s s * p(s) / sum_s p(s) over the alternatives (token, log-probability) whose
    stripped text is a score of the scale; None when none is."""
    mass = dict.fromkeys(range(low, high + 1), 0.0)
    for token, logprob in alternatives:
        text = token.strip()
        if text.isdigit() and low <= int(text) <= high and math.isfinite(logprob):
            mass[int(text)] += math.exp(logprob)
    total = sum(mass.values())
    if total <= 0:
        return None
    return sum(score * p for score, p in mass.items()) / total


def _alternatives_at(completion: Completion, index: int) -> list[tuple[str, float]]:
    """The alternatives at a position, the generated token among them (added when the
    returned top list does not hold it)."""
    assert completion.logprobs is not None
    entry = completion.logprobs[index]
    alternatives = list(entry.top)
    chosen = entry.token.strip()
    if not any(
        a.strip() == chosen and math.isclose(v, entry.logprob, rel_tol=1e-6, abs_tol=1e-6)
        for a, v in alternatives
    ):
        alternatives.append((entry.token, entry.logprob))
    return alternatives


@dataclass(frozen=True)
class ScoreReading:
    """A rubric score read from one completion: ``score`` (NaN when unparseable), the stated
    integer, and whether ``score`` is the probability-weighted one."""

    score: float
    stated: int | None
    weighted: bool


def rubric_score(
    completion: Completion, style: str = "geval", low: int = 1, high: int = 5
) -> ScoreReading:
    """``geval``: the weighted score when log-probabilities allow, else the stated integer;
    ``prometheus``: the "[RESULT] N" integer."""
    if style == "prometheus":
        found = find_prometheus_score(completion.text, low, high)
        if found is None:
            return ScoreReading(math.nan, None, False)
        return ScoreReading(float(found.value), found.value, False)
    found = find_rubric_score(completion.text, low, high)
    if found is None:
        return ScoreReading(math.nan, None, False)
    if completion.logprobs:
        located = find_rubric_score(completion.token_text, low, high)
        index = completion.token_at(located.start) if located else None
        if (
            located is not None
            and located.value == found.value
            and index is not None
            and completion.logprobs[index].token.strip() == str(found.value)
        ):
            weighted = weighted_score(_alternatives_at(completion, index), low, high)
            if weighted is not None:
                return ScoreReading(weighted, found.value, True)
    return ScoreReading(float(found.value), found.value, False)


# -- labels and confidences ------------------------------------------------------------------------
def _choice_pattern(choices: Sequence[str]) -> str:
    ordered = sorted(choices, key=len, reverse=True)
    return "|".join(r"\s+".join(map(re.escape, c.split())) for c in ordered)


def _normalise(text: str, choices: Sequence[str]) -> str:
    words = " ".join(text.split()).upper()
    return next(c for c in choices if c.upper() == words)


def find_choice(
    text: str, choices: Sequence[str] = TFN_LABELS, keyed_only: bool = False
) -> Found | None:
    """The label an output states (see the module docstring): the normalised choice and its
    offset. ``keyed_only``: only "Label: X" counts (a reasoning step may mention a label
    without choosing it)."""
    alternatives = _choice_pattern(choices)
    keyed = re.search(
        rf"(?i)\b(?:label|answer|verdict|decision)\s*[:=]\s*[\"'*]*\s*({alternatives})(?![A-Za-z])",
        text,
    )
    if keyed:
        return Found(_normalise(keyed.group(1), choices), keyed.start(1))
    if keyed_only:
        return None
    leading = re.match(rf"(?i)^[\s\"'*#:.-]*({alternatives})(?![A-Za-z])", text)
    if leading:
        return Found(_normalise(leading.group(1), choices), leading.start(1))
    capitals = list(re.finditer(rf"(?<![A-Za-z])({alternatives})(?![A-Za-z])", text))
    named = {_normalise(m.group(1), choices) for m in capitals}
    if len(named) == 1:
        return Found(named.pop(), capitals[0].start(1))
    return None


def find_confidence(text: str) -> float | None:
    """A stated confidence in [0, 1] ("Confidence: 0.8", "confidence: 80%"); None when absent
    or outside [0, 1] (a bare "8" could be out of 10: not guessed)."""
    match = re.search(
        r"(?i)\bconfidence\b(?:\s+(?:level|score))?\s*(?:[:=]|is)?\s*\**\s*"
        r"(\d+(?:\.\d+)?|\.\d+)\s*(%)?",
        text,
    )
    if not match:
        return None
    value = float(match.group(1))
    if match.group(2):
        value /= 100.0
    return value if 0.0 <= value <= 1.0 else None


def choice_probability(
    alternatives: Sequence[tuple[str, float]], chosen: str, choices: Sequence[str] = TFN_LABELS
) -> float | None:
    """p(chosen) / sum over choices of p(choice), where p(choice) sums the probabilities of the
    alternatives (token, log-probability) that begin exactly that one choice (" TRUE", "T",
    "NOT"); None when no alternative begins ``chosen``."""
    mass = dict.fromkeys(choices, 0.0)
    for token, logprob in alternatives:
        text = " ".join(token.split()).upper()
        if not text or not math.isfinite(logprob):
            continue
        matching = [c for c in choices if c.upper().startswith(text)]
        if len(matching) == 1:
            mass[matching[0]] += math.exp(logprob)
    total = sum(mass.values())
    if mass.get(chosen, 0.0) <= 0 or total <= 0:
        return None
    return mass[chosen] / total


@dataclass(frozen=True)
class LabelReading:
    """A label read from one completion, its confidence (NaN when none) and where the
    confidence came from ("logprobs", "stated" or "")."""

    label: str | None
    confidence: float
    source: str


def label_reading(
    completion: Completion, choices: Sequence[str] = TFN_LABELS, use_logprobs: bool = True
) -> LabelReading:
    """The label and its confidence (see the module docstring)."""
    found = find_choice(completion.text, choices)
    if found is None:
        return LabelReading(None, math.nan, "")
    if use_logprobs and completion.logprobs:
        located = find_choice(completion.token_text, choices)
        index = completion.token_at(located.start) if located else None
        if located is not None and located.value == found.value and index is not None:
            first = " ".join(completion.logprobs[index].token.split()).upper()
            if first and found.value.upper().startswith(first):
                p = choice_probability(_alternatives_at(completion, index), found.value, choices)
                if p is not None:
                    return LabelReading(found.value, p, "logprobs")
    stated = find_confidence(completion.text)
    if stated is not None:
        return LabelReading(found.value, stated, "stated")
    return LabelReading(found.value, math.nan, "")


def confidence_product(confidences: Sequence[float | None]) -> float:
    """The product of step confidences; NaN when there are none or one is missing."""
    if not confidences:
        return math.nan
    product = 1.0
    for value in confidences:
        if value is None or not math.isfinite(value):
            return math.nan
        product *= value
    return product


# -- several samples ------------------------------------------------------------------------------
def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof 1) of the non-NaN values; NaN mean when none,
    NaN sd with fewer than two."""
    valid = [float(v) for v in values if v is not None and math.isfinite(v)]
    mean = statistics.fmean(valid) if valid else math.nan
    sd = statistics.stdev(valid) if len(valid) >= 2 else math.nan
    return mean, sd


@dataclass(frozen=True)
class LabelVote:
    """The majority over samples: label (None when no sample gave one), agreement (its share
    of all samples), and mean / sd of its confidence over the samples that gave it."""

    label: str | None
    agreement: float
    confidence: float
    confidence_sd: float


def majority_label(
    readings: Sequence[tuple[str | None, float]], order: Sequence[str] = TFN_LABELS
) -> LabelVote:
    """The majority of (label, confidence) samples (ties: larger summed confidence, then
    ``order``)."""
    labels = [label for label, _ in readings if label is not None]
    if not labels:
        return LabelVote(None, 0.0, math.nan, math.nan)
    counts = {label: labels.count(label) for label in dict.fromkeys(labels)}

    def strength(label: str) -> tuple[int, float, int]:
        summed = sum(c for lab, c in readings if lab == label and math.isfinite(c))
        rank = order.index(label) if label in order else len(order)
        return (counts[label], summed, -rank)

    winner = max(counts, key=strength)
    mean, sd = mean_sd([c for lab, c in readings if lab == winner])
    return LabelVote(winner, counts[winner] / len(readings), mean, sd)
