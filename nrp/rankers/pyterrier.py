"""Any PyTerrier transformer as an nrp ranker: pyterrier_t5's ``MonoT5ReRanker``, a pyterrier_dr
model, or a user's own ``pt.apply.doc_score(f)`` can validate a collection and grade answers.

nrp's own rankers are already transformers; a transformer that is not one lacks what validation
and NRP rely on (``score_frame``, ``fingerprint``, ``injection``, ``bind_collection``).
``TransformerRanker`` adds them around the transformer, which it treats as a **pointwise scorer**
of (qid, query, docno, text) rows: it is given rows and must return a score for each of them
(a re-ranker, not a retriever). Choices, and why:

- **Pointwise.** A row's score is taken to depend on that row alone, so NRP runs in its fast mode:
  D_q is scored once (then served by the score cache) and each answer is one more row, one model
  call per answer. A transformer whose scores depend on the other rows it is given (a listwise
  re-ranker, scores normalised per query) needs ``depends_on_candidate_set=True``: NRP then
  re-ranks D_q plus the answer in full for every answer (exact, slower).
- **The score-cache key is the user's.** nrp cannot see what model files or code are behind a
  transformer, so ``fingerprint="my-monot5-v1"`` names its scores; change the name when the
  model changes. Without one, the key is derived from ``repr(t)`` (``str(t)`` where the class
  keeps object's address-bearing repr, so a key survives a restart) and, for ``pt.apply``
  transformers, from their function (``derived_key``). Such a key can collide (two transformers
  whose reprs hide different settings, a function that reads a global) and go stale (new weights
  under the same path, edited code the function calls): give a fingerprint for anything but a
  quick experiment.
- **Ties are declared.** ``tolerance`` is the relative margin under which two scores count as
  tied (``nrp.ranks``): 0 (exact) by default, which suits deterministic scorers;
  a neural model should declare one (1e-5 for fp32, as nrp's own models do), since its scores
  move with the batch they are computed in.
- **Batch dependence is probed.** When the ranker is bound to a collection (every entry that
  validates or positions binds it), a few rows of D_q (``PROBE_QUERIES`` queries,
  ``PROBE_ROWS`` rows each) are scored together and each alone. Scores that differ by more than
  ``BATCH_TOLERANCE`` (relative; at least the declared ``tolerance``) mean the transformer is not
  pointwise (pyterrier_t5's ``MonoT5ReRanker`` with ``batch_size`` > 1 pads a batch together):
  a warning, once per spec in a process, and ``depends_on_candidate_set`` is set, so NRP re-ranks
  D_q plus each answer in full; ``description`` says so. ``check_batch=False`` skips the probe.
- **A display name.** ``name`` is what result tables show for the ranker (``str(ranker)``, the
  validation's system name); the spec (and the score cache) keeps the key. Without a name and
  a fingerprint, a ``pt.apply`` transformer is shown by its function's name and another by its
  short repr (``shown_name``); a fingerprint given is shown as the spec that names it.
- **Found again by spec in this process.** The ranker's spec is ``pyterrier:key=KEY``; a
  validation result that chose it names that spec, and ``nrp.rankers.coerce.as_ranker`` turns
  it back into the wrapped transformer, in the process that wrapped it (a spec cannot carry a
  Python object to another one).
"""

from __future__ import annotations

import hashlib
import math
import warnings
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd
import pyterrier as pt

from nrp.errors import ConfigError, NrpError
from nrp.rankers.base import REQUIRED_COLUMNS, Ranker
from nrp.spec import format_spec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from nrp.collection.collection import Collection

#: the spec name of a wrapped transformer (``pyterrier:key=KEY``)
NAME = "pyterrier"
_WRAPPED: dict[str, TransformerRanker] = {}  # spec -> the latest ranker wrapped under it
#: the batch probe: rows of D_q per query, and queries, scored together and each alone
PROBE_ROWS, PROBE_QUERIES = 2, 2
#: relative difference beyond which a row's score alone and in a batch differ
BATCH_TOLERANCE = 1e-6
_WARNED: set[str] = set()  # specs whose batch dependence was warned about in this process


class TransformerRanker(Ranker):
    """A PyTerrier transformer as a pointwise nrp ranker (module docstring); build it with
    ``from_transformer``."""

    name: ClassVar[str] = NAME
    injection: ClassVar[str] = "pointwise"

    def __init__(
        self,
        transformer: pt.Transformer,
        fingerprint: str | None = None,
        tolerance: float = 0.0,
        depends_on_candidate_set: bool = False,
        *,
        name: str | None = None,
        check_batch: bool = True,
    ):
        if not isinstance(transformer, pt.Transformer):
            raise ConfigError(f"not a PyTerrier transformer: {transformer!r}")
        if isinstance(transformer, Ranker):
            raise ConfigError(f"{transformer.spec()} is already an nrp ranker: use it as it is")
        if not (isinstance(tolerance, int | float) and math.isfinite(tolerance) and tolerance >= 0):
            raise ConfigError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
        key = derived_key(transformer) if fingerprint is None else str(fingerprint).strip()
        if not key or any(c in key for c in ",:=") or key != " ".join(key.split()):
            raise ConfigError(
                f"fingerprint {fingerprint!r}: give a non-empty name without commas, colons, "
                "'=' or spaces (it becomes the spec pyterrier:key=NAME)"
            )
        super().__init__({"key": key})
        self.transformer = transformer
        self.key_is_derived = fingerprint is None
        self.tolerance = float(tolerance)
        self.depends_on_candidate_set = bool(depends_on_candidate_set)
        self.label = _checked_name(name)
        if self.label is None and self.key_is_derived:
            self.label = shown_name(transformer, key)
        self.check_batch = bool(check_batch)
        #: the batch probe's largest relative difference (None: not probed)
        self.batch_difference: float | None = None

    @property
    def score_tolerance(self) -> float:
        return self.tolerance

    @property
    def batch_dependent(self) -> bool:
        """The probe found scores that change with the batch (``bind_collection``)."""
        limit = max(BATCH_TOLERANCE, self.tolerance)
        return self.batch_difference is not None and self.batch_difference > limit

    @property
    def description(self) -> str:
        """What this ranker is and how NRP positions answers with it, in one line."""
        what = f"PyTerrier transformer {describe(self.transformer)}"
        if self.batch_dependent:
            return (
                f"{what}; its scores depend on the batch (a row alone and in a batch differ by "
                f"up to {self.batch_difference:.3g}, relative): NRP re-ranks D_q plus each "
                "answer in full"
            )
        if self.depends_on_candidate_set:
            return f"{what}; its scores depend on the other rows: NRP re-ranks D_q in full"
        return f"{what}; pointwise: D_q scored once, each answer one more row"

    def spec(self, complete: bool = False) -> str:
        return format_spec(NAME, {"key": self.params["key"]})

    def __str__(self) -> str:
        return self.label or self.spec()

    def __repr__(self) -> str:
        return f"<TransformerRanker {self.spec()} of {describe(self.transformer)}>"

    def bind_collection(self, collection: Collection) -> None:
        """The base's binding, then the batch probe (module docstring), once per ranker."""
        super().bind_collection(collection)
        if not self.check_batch or self.depends_on_candidate_set:
            return
        if self.batch_difference is None:
            rows = self.formulate(probe_rows(collection.candidates()))
            self.batch_difference = batch_difference(self, rows)
        if self.batch_dependent:
            self.depends_on_candidate_set = True
            if self.spec() not in _WARNED:
                _WARNED.add(self.spec())
                warnings.warn(f"{self.spec()}: {self.description}", stacklevel=2)

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        """The transformer's score of each row, in row order (found by qid and docno, so a
        transformer may reorder its output; it may not drop or repeat rows)."""
        if frame.empty:
            return np.zeros(0)
        rows = frame[list(REQUIRED_COLUMNS)].reset_index(drop=True)
        keys = list(zip(rows["qid"].astype(str), rows["docno"].astype(str), strict=True))
        if len(set(keys)) != len(keys):
            raise NrpError(f"{self.spec()}: rows to score repeat a (qid, docno) pair")
        out = self.transformer(rows.copy())
        what = f"{self.spec()} ({describe(self.transformer)})"
        if not isinstance(out, pd.DataFrame) or "score" not in out.columns:
            raise NrpError(f"{what} returned no score column: it must score the rows it is given")
        found = dict(
            zip(
                zip(out["qid"].astype(str), out["docno"].astype(str), strict=True),
                pd.to_numeric(out["score"], errors="coerce").astype(float),
                strict=True,
            )
        )
        scores = np.array([found.get(k, np.nan) for k in keys], dtype=float)
        if len(out) != len(rows) or not np.all(np.isfinite(scores)):
            raise NrpError(
                f"{what} returned {len(out)} rows for {len(rows)}, or scores that are not "
                "finite numbers: an nrp ranker must give every row it is given one score "
                "(a re-ranker, not a retriever)"
            )
        return scores


def from_transformer(
    transformer: pt.Transformer,
    fingerprint: str | None = None,
    tolerance: float = 0.0,
    *,
    depends_on_candidate_set: bool = False,
    name: str | None = None,
    check_batch: bool = True,
) -> TransformerRanker:
    """``transformer`` (any ``pt.Transformer`` that scores the rows it is given) as an nrp
    ranker. ``fingerprint``: the score cache's key for its scores (derived from ``repr`` when
    None: see the module docstring). ``tolerance``: relative margin of a tie (0: exact).
    ``depends_on_candidate_set``: its scores depend on the other rows (NRP re-ranks in full).
    ``name``: what result tables show (default: the spec). ``check_batch``: probe, when bound
    to a collection, whether its scores change with the batch (then re-ranked in full).
    The ranker can be found again by its spec (``pyterrier:key=KEY``) in this process."""
    ranker = TransformerRanker(
        transformer,
        fingerprint,
        tolerance,
        depends_on_candidate_set,
        name=name,
        check_batch=check_batch,
    )
    _WRAPPED[ranker.spec()] = ranker
    return ranker


def wrapped(spec: str) -> TransformerRanker:
    """The ranker last wrapped under ``spec`` (``pyterrier:key=KEY``) in this process."""
    found = _WRAPPED.get(spec.strip())
    if found is None:
        key = spec.partition("key=")[2] or "KEY"
        raise ConfigError(
            f"ranker {spec!r} is a PyTerrier transformer that was not wrapped in this process: "
            f"wrap it first, nrp.rankers.pyterrier.from_transformer(t, fingerprint={key!r})"
        )
    return found


def probe_rows(candidates: pd.DataFrame) -> pd.DataFrame:
    """The rows of the batch probe: the first ``PROBE_ROWS`` rows of each of the first
    ``PROBE_QUERIES`` queries of ``candidates`` (their ``REQUIRED_COLUMNS``)."""
    rows = candidates[list(REQUIRED_COLUMNS)]
    first = rows.groupby("qid", sort=False).head(PROBE_ROWS)
    queries = first["qid"].drop_duplicates().head(PROBE_QUERIES)
    return first[first["qid"].isin(queries)].reset_index(drop=True)


def batch_difference(ranker: TransformerRanker, rows: pd.DataFrame) -> float:
    """The largest relative difference between a row's score in one batch of ``rows`` and
    its score alone (0.0 for fewer than two rows)."""
    if len(rows) < 2:
        return 0.0
    together = ranker.score_frame(rows)
    alone = np.concatenate([ranker.score_frame(rows.iloc[[i]]) for i in range(len(rows))])
    scale = np.maximum(1.0, np.maximum(np.abs(together), np.abs(alone)))
    return float(np.max(np.abs(together - alone) / scale))


def _checked_name(name: str | None) -> str | None:
    """A display name: None, or a non-empty single-line string."""
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip() or "\n" in name:
        raise ConfigError(f"name {name!r}: give a non-empty one-line string")
    return name.strip()


#: the longest repr a wrapped transformer is shown by when no name is given (``shown_name``)
SHOWN_REPR_LIMIT = 60
_SHOWN: dict[str, str] = {}  # name shown -> the key of the first ranker shown by it


def shown_name(transformer: pt.Transformer, key: str) -> str | None:
    """The name result tables show for a transformer wrapped without ``name`` and without a
    fingerprint: a ``pt.apply`` transformer's function name (``overlap_score``; not a lambda's),
    else its short repr as PyTerrier shows it (``BM25(k1=0.9)``; not one with a memory address
    or the generic ``pt.apply...`` one), else None (the spec, ``pyterrier:key=repr-...``). A
    name another key took first in this process gets the key's first characters
    (``score [repr-71a39bc1]``), so two functions of one name stay apart in a table."""
    fn = getattr(transformer, "fn", None)
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        text = describe(transformer)
        shown = (
            len(text) <= SHOWN_REPR_LIMIT
            and " at 0x" not in text
            and "\n" not in text
            and not text.startswith("pt.apply")
        )
        name = text if shown else None
    if name is None:
        return None
    first = _SHOWN.setdefault(name, key)
    return name if first == key else f"{name} [{key[:13]}]"


def describe(transformer: pt.Transformer) -> str:
    """What the derived key reads: ``repr(t)``, or ``str(t)`` when the class keeps object's
    repr (its memory address would give a new key in every process) and has its own str."""
    kind = type(transformer)
    if kind.__repr__ is object.__repr__ and kind.__str__ is not object.__str__:
        return str(transformer)
    return repr(transformer)


def derived_key(transformer: pt.Transformer) -> str:
    """A key from the transformer's class and ``describe`` text, plus its function for
    ``pt.apply`` transformers (whose repr, ``pt.apply.doc_score()``, is the same for all): the
    function's name, code, defaults and the reprs of the values it closes over; a callable
    without code (an object) by its repr. A repr with a memory address makes a key of this
    process alone: never shared by two objects, never found again after a restart."""
    kind = type(transformer)
    parts = [f"{kind.__module__}.{kind.__qualname__}", describe(transformer)]
    fn = getattr(transformer, "fn", None)
    code = getattr(fn, "__code__", None)
    if code is not None:
        cells = [repr(cell.cell_contents) for cell in getattr(fn, "__closure__", None) or ()]
        parts += [
            f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}",
            code.co_code.hex(),
            repr(code.co_consts),
            repr(code.co_names),
            repr(getattr(fn, "__defaults__", None)),
            *cells,
        ]
    elif fn is not None:
        parts.append(repr(fn))
    return "repr-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
