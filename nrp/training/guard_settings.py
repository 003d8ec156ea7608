"""``GuardTrainSettings``: everything ``train_guard`` is told besides the collection and the output
file, as one object, checked (``checked``) before anything is read, generated or written."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from nrp.errors import ConfigError


@dataclass(frozen=True)
class GuardTrainSettings:
    """What the guard is fitted with (docs/guard.md, "Fitting a guard"):

    - ``dimension``: the graded dimension whose judgments tell real answers (None: relevance
      where the collection has it, else its first).
    - ``reference_queries``: qid patterns (``fnmatch``, e.g. ``t1-*``) of the questions whose
      documents form the fluency and term references and are never fitted on (a fitted answer's
      own word pairs must not make it look fluent); empty: every fourth question, drawn with
      ``seed``. ``leave_out``: qids neither fitted on nor read (questions an evaluated
      collection asks again).
    - ``held_out``: the degenerate family (``nrp.validation.degenerate.FAMILIES``) no detector is
      fitted on, to measure what the guard does with forms it never saw.
    - ``per_kind``/``seed``: degenerate texts per kind and question, and every random draw.
    - ``boilerplate_questions``: a sentence in the documents of at least this many questions is
      boilerplate. ``near_best``: the best judged documents of the N closest other questions join
      ``off_topic``'s negatives (0: none).
    - ``written_llm``/``written_tokens``: the LLM that writes the non-answers and its own
      answers (``nrp generate``'s ``--llm``; ``local``: the packaged SmolLM2) and their new
      tokens; generated once, kept beside the collection.
    - ``frequent``/``pair_docs``: the fluency reference's function words and the least number of
      reference documents a pair of them is adjacent in. ``fluency_collections``: collections
      whose documents join the fluency reference.
    - ``restated_grade``: judged documents of at least this grade, after their question, are real
      answers too (0: none). ``terse_answers``: the share of the best documents cut to their
      first sentence that are real answers too.
    - ``l2``/``direction_l2``: the detectors' and ``answer_like``'s L2 penalties.
      ``max_flagged``: the share of the fitting answers each detector's threshold flags.
    - ``cross_fit``: also measure each kind's flagged share with a guard fitted without the
      text's question (K folds; 0: not).
    - ``rest_words``: the rest's features read the rest's first N words (0: the whole rest); the
      fitted model carries it (``GuardModel.rest_words``), so the guard reads what it was
      fitted on.
    """

    dimension: str | None = None
    reference_queries: Sequence[str] = ()
    leave_out: Sequence[str] = ()
    held_out: str = "evasion"
    per_kind: int = 2
    seed: int = 0
    boilerplate_questions: int = 5
    near_best: int = 0
    written_llm: str = "local"
    written_tokens: int = 96
    frequent: int = 150
    pair_docs: int = 3
    fluency_collections: Sequence[str] = ()
    restated_grade: float = 3
    terse_answers: float = 1.0
    l2: float = 1.0
    direction_l2: float = 10.0
    max_flagged: float = 0.01
    cross_fit: int = 0
    rest_words: int = 0

    def checked(self) -> GuardTrainSettings:
        """These settings with every number in range and the lists as tuples; a ``ConfigError``
        of one line naming the first setting out of range."""
        from nrp.validation.degenerate import FAMILIES

        if self.held_out not in FAMILIES:
            raise ConfigError(
                f"guard training: held_out must be a family ({', '.join(FAMILIES)}), "
                f"got {self.held_out!r}"
            )
        limits = [
            ("per_kind", self.per_kind >= 1, "at least 1"),
            ("seed", 0 <= self.seed < 2**32, "from 0 to 2**32 - 1"),
            ("boilerplate_questions", self.boilerplate_questions >= 2, "at least 2"),
            ("near_best", self.near_best >= 0, "at least 0"),
            ("written_tokens", self.written_tokens >= 1, "at least 1"),
            ("frequent", self.frequent >= 1, "at least 1"),
            ("pair_docs", self.pair_docs >= 1, "at least 1"),
            ("restated_grade", math.isfinite(self.restated_grade), "a finite number"),
            ("terse_answers", 0 <= self.terse_answers <= 1, "a share from 0 to 1"),
            ("l2", 0 < self.l2 < math.inf, "a finite number above 0"),
            ("direction_l2", 0 < self.direction_l2 < math.inf, "a finite number above 0"),
            ("max_flagged", 0 <= self.max_flagged < 1, "a share in [0, 1)"),
            ("cross_fit", self.cross_fit == 0 or self.cross_fit >= 2, "0 (none) or at least 2"),
            ("rest_words", self.rest_words >= 0, "at least 0 (0: the whole rest)"),
        ]
        for name, ok, what in limits:
            if not ok:
                raise ConfigError(
                    f"guard training: {name} must be {what}, got {getattr(self, name)}"
                )
        return replace(
            self,
            reference_queries=_names(self.reference_queries),
            leave_out=_names(self.leave_out),
            fluency_collections=_names(self.fluency_collections),
        )

    def recorded(self) -> dict[str, Any]:
        """The settings as the model file's ``fitted_on`` records them (lists as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def _names(value: Sequence[str] | str) -> tuple[str, ...]:
    """A tuple of names from a list or a comma-separated string (blanks dropped)."""
    items = value.split(",") if isinstance(value, str) else value
    return tuple(s for s in (str(v).strip() for v in items) if s)
