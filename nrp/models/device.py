"""What every model in nrp shares (rankers, BERTScore, LLMs): device and dtype, length-sorted
batching, progress bars.

Why one module: the dense, ColBERT and T5 rankers, BERTScore and the local LLM must agree on
what ``device=auto``,
``dtype=bf16`` or ``passages=150`` mean, and must fail the same way on a bad combination (half
precision on a CPU). Nothing here imports torch at import time (the registry imports every
ranker module to list them); torch is imported inside the functions that need it.

API (small on purpose):

- ``resolve_device(device)`` -> ``"cpu"`` / ``"cuda"`` / ``"cuda:N"``
- ``resolve_dtype(dtype, device)`` -> ``torch.dtype`` (``fp32`` / ``fp16`` / ``bf16``)
- ``weight_dtype(dtype)`` and ``autocast(dtype, device)``: the weights' dtype of a model that
  runs ``dtype``, and the context it runs in: ``bf16`` keeps fp32 weights under autocast (its
  matrix products in bfloat16, accumulated and normalised in fp32), on a GPU or on a CPU with
  bfloat16 matrix units (``native_bf16``)
- ``run_length_sorted(items, fn, batch_size, ...)`` -> ``fn`` applied to batches of items
  sorted by length, results back in the original order (less padding; the same numbers up to
  float rounding: a text's score moves by ~1e-7 in fp32 with the batch it shares, which is why
  neural rankers compare scores with ``SCORE_TOLERANCE``)
- ``progress(iterable, ...)`` -> a tqdm bar, silent when not on a TTY or ``verbose=False``
- ``iter_chunks(items, size)``: consecutive slices, for callers that keep the input order

Passage splitting and the parameters every neural ranker declares live with the rankers
(``nrp.rankers.passages``).
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from nrp import lazy_libs
from nrp.errors import ConfigError
from nrp.progress import Ticker

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

T = TypeVar("T")

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("fp32", "fp16", "bf16")
#: relative tolerance under which two scores of a neural ranker count as tied, per dtype: above
#: the batch-to-batch rounding of each precision (fp32 ~1e-7, half precision ~1e-3), below the
#: gaps between the scores of different texts (see ``nrp.ranks``)
SCORE_TOLERANCE = {"fp32": 1e-5, "fp16": 5e-3, "bf16": 2e-2}
#: the same under ``autocast`` (fp32 weights, bfloat16 matrix products): a text's score moves
#: with its batch by up to about 7e-4 (MiniLM, 6,000 question-answer cosines embedded in
#: batches of 64 and of 7), which this bounds with room
AUTOCAST_TOLERANCE = {"bf16": 2e-3}
#: the CPU flags (Linux ``/proc/cpuinfo``) of bfloat16 matrix units: Intel AMX, AVX512-BF16
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


# -- device and dtype ---------------------------------------------------------------------------
def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when a GPU is usable, else ``cpu``. ``cuda`` (or ``cuda:N``) without a
    GPU is an error rather than a silent fallback: a run the user asked to be on a GPU would
    otherwise take hours on the CPU without saying so."""
    torch = lazy_libs.torch()

    device = (device or "auto").strip().lower()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return "cpu"
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ConfigError(
                f"device={device} asked for, but no CUDA GPU is available here "
                "(use device=auto or device=cpu)"
            )
        return device
    raise ConfigError(f"unknown device {device!r} (use one of {', '.join(DEVICES)})")


def resolve_dtype(dtype: str, device: str, cpu_bf16: bool = False) -> torch.dtype:
    """``fp32`` anywhere; ``fp16``/``bf16`` on a GPU. Half precision on a CPU is refused: it is
    slower than fp32 there and changes the scores, so it is never what a user wants. Except
    (``cpu_bf16``, for a model that runs it under ``autocast``) ``bf16`` on a CPU with bfloat16
    matrix units (``native_bf16``), which multiply in bfloat16 faster than in fp32."""
    torch = lazy_libs.torch()

    dtype = (dtype or "fp32").strip().lower()
    table = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    if dtype not in table:
        raise ConfigError(f"unknown dtype {dtype!r} (use one of {', '.join(DTYPES)})")
    if dtype == "fp32" or str(device).startswith("cuda"):
        return table[dtype]
    if dtype == "bf16" and cpu_bf16:
        if native_bf16():
            return table[dtype]
        raise ConfigError(
            f"dtype=bf16 on a CPU needs bfloat16 matrix units ({' or '.join(NATIVE_BF16_FLAGS)}),"
            " which this CPU lacks (it would run slower than fp32); use dtype=fp32"
        )
    raise ConfigError(f"dtype={dtype} needs a GPU (device is {device}); use dtype=fp32 on CPU")


def native_bf16() -> bool:
    """Whether this machine's CPU has bfloat16 matrix units (``NATIVE_BF16_FLAGS`` among the
    flags Linux lists; False where it lists none)."""
    return bool(set(NATIVE_BF16_FLAGS) & _cpu_flags())


@functools.cache
def _cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def weight_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a model's weights are held in to run ``dtype``: fp32 for bfloat16 (run under
    ``autocast``), else ``dtype`` itself."""
    torch = lazy_libs.torch()

    return torch.float32 if dtype == torch.bfloat16 else dtype


def autocast(dtype: torch.dtype, device: str) -> contextlib.AbstractContextManager[Any]:
    """The context a model with fp32 weights runs ``dtype`` in: ``torch.autocast`` for bfloat16
    (matrix products in bfloat16, accumulated in fp32; norms and softmax in fp32), nothing
    for fp32."""
    torch = lazy_libs.torch()

    if dtype != torch.bfloat16:
        return contextlib.nullcontext()
    kind = "cuda" if str(device).startswith("cuda") else "cpu"
    return torch.autocast(kind, dtype=torch.bfloat16)


# -- batching and progress ----------------------------------------------------------------------
#: the least items of a ``run_length_sorted`` call that report their progress (``Ticker``): a
#: few batches end before anyone would look
TICKED_ITEMS = 512


def progress(
    iterable: Iterable[T], total: int | None = None, desc: str = "", verbose: bool = True
) -> Iterable[T]:
    """Wrap an iterable in a tqdm bar (with its rate and time left); no bar when ``verbose`` is
    False or nobody watches (``interactive``: logs and CI output stay clean)."""
    from tqdm.auto import tqdm

    disable = not verbose or not interactive()
    return tqdm(iterable, total=total, desc=desc, disable=disable, leave=False)


def interactive() -> bool:
    """Whether someone watches the progress: stderr is a terminal, or the code runs in a Jupyter
    kernel (whose stderr is no terminal, but where tqdm.auto draws a notebook widget)."""
    if "ipykernel" in sys.modules:
        return True
    return hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Index arrays of batches over items sorted by decreasing length (stable, so equal lengths
    keep their order). The longest batch comes first, so an out-of-memory error shows at once."""
    if batch_size < 1:
        raise ConfigError(f"batch size must be at least 1, got {batch_size}")
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def run_length_sorted(
    items: Sequence[T],
    fn: Callable[[list[T]], Any],
    batch_size: int,
    key: Callable[[T], int] = len,
    desc: str = "",
    verbose: bool = True,
    unit: str = "done",
) -> np.ndarray:
    """Apply ``fn`` to batches of items sorted by ``key`` (text length by default) and return
    its results stacked in the ORIGINAL order of ``items``.

    ``fn`` takes a list of items and returns one row per item (a 1-D array of scores or a 2-D
    array / tensor of embeddings; tensors are moved to CPU float32 numpy). Sorting by length
    keeps padding small; the numbers are those of any other batching. Inside a reported step
    (``nrp.progress.reporting``) of at least ``TICKED_ITEMS`` items: ``desc: DONE/TOTAL unit``
    every few seconds (``Ticker``).
    """
    n = len(items)
    if n == 0:
        return np.zeros((0,), dtype=np.float32)
    batches = length_sorted_batches([key(item) for item in items], batch_size)
    # Results stay where ``fn`` made them until every batch is queued: on a GPU the host builds
    # the next batch while the device computes this one, and waits once at the end.
    ticker = Ticker(desc, n, unit, min_total=TICKED_ITEMS)  # inside a reported step: lines
    parts = []
    for index in progress(batches, total=len(batches), desc=desc, verbose=verbose):
        parts.append(fn([items[i] for i in index]))
        ticker.add(len(index))
        release_freed_memory()  # glibc would keep each batch's freed activations
    stacked = np.concatenate([_to_numpy(part) for part in parts], axis=0)
    if stacked.shape[0] != n:
        raise RuntimeError(f"batch function returned {stacked.shape[0]} rows for {n} items")
    out = np.empty_like(stacked)
    out[np.concatenate(batches)] = stacked
    return out


#: freed memory the C allocator may keep for later before ``release_freed_memory`` hands it back
KEPT_FREE_BYTES = 768 << 20


def release_freed_memory(kept: int = KEPT_FREE_BYTES) -> bool:
    """Hand the pages the C allocator holds freed back to the system when they are more than
    ``kept`` bytes (glibc: ``mallinfo2`` and ``malloc_trim``; nothing elsewhere); whether it
    did. A model's batches free tens of MB of activations each, which glibc keeps for later
    and lets add up: ``run_length_sorted`` calls this after each batch. ``KEPT_FREE_BYTES``
    trades the peak against the time pages take to be mapped again (docs/performance.md)."""
    libc = _glibc()
    if libc is None or libc.mallinfo2().fordblks <= kept:
        return False
    libc.malloc_trim(0)
    return True


@functools.cache
def _glibc() -> Any:
    import ctypes
    import ctypes.util

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                         "uordblks", "fordblks", "keepcost")
        ]  # fmt: skip

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallinfo2.restype = MallInfo2
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        return libc
    except (OSError, AttributeError):
        return None


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor (bf16 has no numpy dtype: go through float32)
        return value.detach().float().cpu().numpy()
    return np.asarray(value)


def iter_chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of ``size`` items (for callers that must keep the input order)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def device_needs_gpu(device: str | None, cluster_has_gpus: bool) -> bool:
    """Whether a model on ``device`` needs a GPU of an executor's worker: cuda[:N], or auto on
    a cluster that has GPUs."""
    text = str(device or "").strip().lower()
    return text.startswith("cuda") or (text == "auto" and cluster_has_gpus)
