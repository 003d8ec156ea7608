"""Measuring code shared by the benchmarks in scripts/ (bench_ingest, bench_rankers, bench_nrp,
bench_ray, bench_score, bench_guard, bench_positioning, bench_scaling).

Why a module: each benchmark measures the same way, and the numbers of two benchmarks must mean
the same thing. A measurement runs in a child process of its own (``run_child``), so its peak
memory is its own; the child reports one marked JSON line (``emit``). Peak memory is the
process's RSS high-water mark (``peak_rss_mib``); wall time is ``time.perf_counter`` around the
measured call, after a CUDA synchronisation (``sync``) when the model runs on a GPU. Ratios
divide by at least 1e-9 s (``ratio``). The rankers under test are completed and loaded the same
way in every benchmark (``complete_specs``, ``load_ranker``): a neural ranker without a real
checkpoint offline runs on a tiny random one built by the test suite's own builders. A whole
``nrp`` command is timed as a process of its own (``timed_process``: wall time and the child's
peak RSS from ``os.wait4``), on this checkout's nrp (``checkout_env``). Synthetic inputs are made
from MEDIQA 2019's judged documents, deterministically: answer sets (``write_answers``) and
collections written as TSV files with a manifest (``write_table_collection``), their texts drawn
from the documents' sentences (``sentences_of``, ``sentence_text``). A scaling curve is read by
its log-log slope (``loglog_slope``). A benchmark on MEDIQA runs in a temporary folder of its
own (``on_mediqa``), and may run another source tree's nrp beside this one
(``before_option``). A collection a benchmark or study script reads comes from its indexes
folder, ingested from ``manifests/`` first when it is missing there (``load_or_ingest``: on a
fresh clone every collection is).

Importing this module imports nothing heavy (nrp, torch and pandas load inside the functions that
need them), so a parent process that only starts children stays small.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the MEDIQA 2019 test set the benchmarks run on: its manifest, and its data in ../shared
MEDIQA_MANIFEST = ROOT / "manifests" / "mediqa-2019.yaml"
MEDIQA_DATA = ROOT.parent / "shared" / "data" / "mediqa-2019"
RESULT_MARK = "BENCH_RESULT "
TINY_NOTE = "tiny random checkpoint: measures the code path, not a real model's speed"
# Tiny checkpoints: T5 with T5's real input limit (512 positions: every input is as long as a
# real monoT5's, the sentencepiece vocabulary being tiny), ColBERT at the most its 64 position
# embeddings allow (ColBERTv2 reads 32 query and 180 document tokens).
TINY_T5_POSITIONS = 512
TINY_COLBERT_LIMITS = {"query_maxlen": 32, "doc_maxlen": 64}
# (ranker, parameter) -> the tiny checkpoint that fills it when the spec does not give it
TINY_KEYS = {
    "monot5": {"model": "monot5"},
    "duot5": {"model": "duot5", "mono_model": "monot5"},
    "colbert": {"model": "colbert"},
}


# -- child processes -------------------------------------------------------------------------------
def run_child(
    script: str | Path, mode: str, payload: dict, timeout: float | None = None,
    env: dict[str, str] | None = None,
) -> dict:  # fmt: skip
    """Run ``script`` in ``mode`` in a fresh interpreter (offline; ``env``, else this process's
    environment); its last RESULT_MARK line, parsed. A ``ChildError`` (a RuntimeError) with the
    child's last line when it fails or reports nothing."""
    env = dict(os.environ if env is None else env)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = subprocess.run(
        [sys.executable, str(Path(script).resolve()), mode, json.dumps(payload)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip() or out.stdout.strip() or "no output").splitlines()[-1]
        raise ChildError(out.returncode, tail)
    return json.loads(lines[-1][len(RESULT_MARK) :])


class ChildError(RuntimeError):
    """A child that failed or reported nothing: ``exit N: its last line``."""

    def __init__(self, returncode: int, tail: str):
        self.returncode, self.tail = returncode, tail
        super().__init__(f"exit {returncode}: {tail}")


def child_main(modes: dict[str, Callable[[dict], None]]) -> bool:
    """In a child started by ``run_child``: run the handler of its mode on its payload and say
    so (True); in the parent: False."""
    if len(sys.argv) == 3 and sys.argv[1] in modes:
        modes[sys.argv[1]](json.loads(sys.argv[2]))
        return True
    return False


def emit(result: dict) -> None:
    """The child's result, as the line ``run_child`` reads."""
    print(RESULT_MARK + json.dumps(result), flush=True)


# -- measuring -------------------------------------------------------------------------------------
def peak_rss_mib() -> float:
    """This process's RSS high-water mark: VmHWM (Linux), else ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def sync(device: str) -> None:
    """Wait for the GPU's queued work, so a wall time covers it."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def torch_stats(device: str) -> dict[str, Any]:
    """torch's thread count and (CUDA) peak GPU memory in MiB, when torch was used at all."""
    if "torch" not in sys.modules:
        return {}
    import torch

    stats: dict[str, Any] = {"torch_threads": torch.get_num_threads()}
    if device.startswith("cuda"):
        stats["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return stats


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, the denominator at least 1e-9 (a time that rounds to 0)."""
    return numerator / max(denominator, 1e-9)


def loglog_slope(points: list[tuple[float, float]], floor: float = 0.0) -> float:
    """Least-squares slope of log10(time - ``floor``) against log10(x) over ``points`` (x, time)
    (1 = linear, 0 = flat); NaN for fewer than two points or a time not above the floor."""
    if len(points) < 2 or any(t <= floor for _, t in points):
        return math.nan
    xs = [math.log10(x) for x, _ in points]
    ys = [math.log10(t - floor) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    if spread == 0:
        return math.nan
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread


# -- whole processes -------------------------------------------------------------------------------
def checkout_env() -> dict[str, str]:
    """The environment of a child ``python -m nrp``: this checkout's nrp first on the path
    (whatever is installed), offline."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": path}


def timed_process(command: list[str], env: dict) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit status) of one whole process; its stderr's end is
    printed when it fails."""
    started = time.perf_counter()
    # run elsewhere than the checkout: ``python -m`` puts the working folder first on the path
    process = subprocess.Popen(command, env=env, cwd=tempfile.gettempdir(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    assert process.stderr is not None
    tail = process.stderr.read()[-2000:]
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        print(tail.decode(errors="replace"), file=sys.stderr)
    return seconds, usage.ru_maxrss / 1024, process.returncode


def before_option(parser: Any, runs: str) -> None:
    """``--before DIR``: a source tree whose nrp also runs (on ``PYTHONPATH``), ``runs`` saying
    when, so that before and after are measured in the same run."""
    parser.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help=f"also run {runs} (e.g. `git worktree add DIR main`), on PYTHONPATH, "
        "before/after in the same run",
    )


def on_mediqa(prefix: str, run: Callable[[Path], None], note: str) -> int:
    """``run`` in a new temporary folder (``prefix``; removed after), then the ``measured``
    line with ``note``: 0; 1 (and why, on stderr) when MEDIQA 2019's data is not there."""
    if not MEDIQA_DATA.exists():
        print(f"MEDIQA 2019 not found in {MEDIQA_DATA}: nothing to benchmark", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        run(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(measured(note))
    return 0


# -- synthetic inputs from MEDIQA ------------------------------------------------------------------
def sentences_of(texts: list[str]) -> list[str]:
    """The sentences of ``texts`` (split after . ! or ?), in order."""
    return [s for d in texts for s in re.split(r"(?<=[.!?])\s+", d) if s.strip()]


def sentence_text(rng: Any, sentences: list[str]) -> str:
    """300 to 1,700 characters of sentences drawn by ``rng`` (a ``random.Random``), at most
    1,800: a generated answer's or a synthetic document's text."""
    parts: list[str] = []
    size = rng.randint(300, 1700)
    while sum(map(len, parts)) < size:
        parts.append(rng.choice(sentences))
    return " ".join(parts)[:1800]


def write_answers(collection: Any, path: str | Path, count: int, seed: int = 28) -> None:
    """``count`` answers to ``collection``'s queries as JSON Lines (llm, prompt, qid, text),
    deterministic: answer i goes to query i mod |Q|; one in 50 is a judged document of its own
    query, one in 50 the question, the rest ``sentence_text`` of the judged documents (drawn
    with ``seed``: another seed, other texts)."""
    import random

    candidates = collection.candidates()
    topics = collection.topics
    questions = dict(zip(topics["qid"].astype(str), topics["query"].astype(str), strict=True))
    qids = list(dict.fromkeys(candidates["qid"].astype(str)))
    docs = candidates["text"].fillna("").astype(str).tolist()
    by_query: dict[str, list[str]] = {}
    for qid, text in zip(candidates["qid"].astype(str), docs, strict=True):
        by_query.setdefault(qid, []).append(text)
    sentences = sentences_of(docs)
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        for i in range(count):
            qid = qids[i % len(qids)]
            if i % 50 == 0:
                text = rng.choice(by_query[qid])[:1500]
            elif i % 50 == 1:
                text = questions[qid]
            else:
                text = sentence_text(rng, sentences)
            llm, prompt = ("llm-a", "llm-b")[(i // 7) % 2], ("zero", "few")[(i // 3) % 2]
            record = {"llm": llm, "prompt": prompt, "qid": qid, "text": text}
            out.write(json.dumps(record) + "\n")


def write_table_collection(
    folder: Path, name: str, description: str, topics: list[tuple[str, str]],
    documents: list[tuple[str, str, str]],
) -> Path:  # fmt: skip
    """A collection as TSV files in ``folder`` (new): ``topics`` (qid, query) and ``documents``
    (qid, docno, text), each document judged relevant (grade 1) for its query; returns its
    manifest. A docno may be judged for several queries (pools share documents), with one text.
    Texts keep single spaces only (no tab or line break in a field)."""
    import pandas as pd

    folder.mkdir(parents=True)
    pd.DataFrame(
        {"qid": [q for q, _ in topics], "query": [" ".join(t.split()) for _, t in topics]}
    ).to_csv(folder / "topics.tsv", sep="\t", index=False)
    texts: dict[str, str] = {}
    for _, docno, text in documents:
        if texts.setdefault(docno, text) != text:
            raise ValueError(f"docno {docno!r} is given two texts")
    pd.DataFrame(
        {"docno": list(texts), "text": [" ".join(t.split()) for t in texts.values()]}
    ).to_csv(folder / "documents.tsv", sep="\t", index=False)
    pd.DataFrame(
        {"qid": [d[0] for d in documents], "docno": [d[1] for d in documents], "relevance": 1}
    ).to_csv(folder / "qrels.tsv", sep="\t", index=False)
    manifest = folder / "manifest.yaml"
    manifest.write_text(
        f"name: {name}\ndescription: {description}\ncitation: nrp benchmark\n"
        "data_root: .\nrepeated_judgments: {policy: error}\ndimensions:\n  relevance:\n"
        "    description: judged\n    grades: {0: no, 1: yes}\nsources:\n"
        "  - {format: table, path: topics.tsv, holds: topics}\n"
        "  - {format: table, path: documents.tsv, holds: documents}\n"
        "  - {format: table, path: qrels.tsv, holds: judgments, dimensions: [relevance]}\n"
    )
    return manifest


# -- collections -----------------------------------------------------------------------------------
def load_or_ingest(name: str, indexes: str | Path) -> Any:
    """The collection ``name`` in ``indexes``, ingested from ``manifests/NAME.yaml`` first when
    it is not there."""
    import nrp
    from nrp.errors import NrpError

    try:
        return nrp.Collection.load(name, indexes)
    except NrpError:
        nrp.ingest(ROOT / "manifests" / f"{name}.yaml", indexes_dir=indexes)
        return nrp.Collection.load(name, indexes)


# -- printing --------------------------------------------------------------------------------------
def machine() -> str:
    """``arch, N CPUs, Python x.y.z``: the machine a table was measured on."""
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def measured(note: str = "") -> str:
    """The last line of every benchmark table: when it was measured (and how, ``note``)."""
    return f"(measured {time.strftime('%Y-%m-%d %H:%M')}{', ' + note if note else ''})"


# -- the rankers under test ------------------------------------------------------------------------
def complete_specs(rankers: str, models: Path, device: str, batch: int = 0) -> list[dict]:
    """Each ranker spec of ``rankers`` as ``{"shown", "spec", "tiny", "error"}``: ``spec`` adds
    a tiny checkpoint (built into ``models``) for each model parameter the spec does not give,
    ``device``, ``batch`` (when > 0) and ``verbose=False`` where the ranker has them; ``error``
    says why a spec cannot be measured ('' when it can)."""
    from nrp.rankers.registry import parse_spec, split_specs

    tiny_paths: dict[str, str] = {}

    def tiny(kind: str) -> str:
        if kind not in tiny_paths:
            try:
                tiny_paths[kind] = build_tiny(kind, models)
            except KeyboardInterrupt:
                raise
            except BaseException as error:  # pytest's Skipped (colbert absent) is one
                raise RuntimeError(f"cannot build the tiny {kind} checkpoint: {error}") from None
        return tiny_paths[kind]

    specs = []
    for shown in split_specs(rankers):
        entry = {"shown": shown, "spec": shown, "tiny": False, "error": ""}
        try:
            info, _ = parse_spec(shown)
            rest = shown.partition(":")[2]
            given = {item.partition("=")[0].strip() for item in rest.split(",") if item.strip()}
            extra: dict[str, object] = {}
            for key, kind in TINY_KEYS.get(info.name, {}).items():
                if key not in given:
                    extra[key] = tiny(kind)
                    entry["tiny"] = True
            if info.name == "colbert" and entry["tiny"]:
                extra.update({k: v for k, v in TINY_COLBERT_LIMITS.items() if k not in given})
            if "device" in info.params and "device" not in given:
                extra["device"] = device
            if "batch" in info.params and batch and "batch" not in given:
                extra["batch"] = batch
            if "verbose" in info.params and "verbose" not in given:
                extra["verbose"] = False
            if extra:
                items = [item for item in rest.split(",") if item.strip()]
                items += [f"{k}={v}" for k, v in extra.items()]
                entry["spec"] = f"{info.name}:{','.join(items)}"
        except Exception as error:
            entry["error"] = str(error).splitlines()[0] if str(error) else type(error).__name__
        specs.append(entry)
    return specs


def build_tiny(kind: str, models: Path) -> str:
    """A tiny random checkpoint (``monot5``, ``duot5`` or ``colbert``) from the test suite's
    builders; the two T5 ones share a tokenizer and differ by seed."""
    tests = str(ROOT / "tests" / "rankers")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    folder = models / kind
    if kind == "colbert":
        from test_colbert import build_tiny_colbert

        return str(build_tiny_colbert(folder))
    from tiny_models import build_tiny_t5, build_tiny_t5_tokenizer

    tokenizer = models / "t5-tokenizer"
    if not tokenizer.is_dir():
        build_tiny_t5_tokenizer(tokenizer)
    seed = {"monot5": 0, "duot5": 1}[kind]
    build_tiny_t5(folder, tokenizer, seed=seed, n_positions=TINY_T5_POSITIONS)
    return str(folder)


def load_ranker(spec: str, collection: Any) -> tuple[Any, str, float]:
    """(ranker, its device, seconds): the ranker built, bound to ``collection`` and its model
    loaded, timed as one, so that a later timing covers scoring only."""
    from nrp.models.device import resolve_device
    from nrp.rankers.registry import make_ranker

    start = time.perf_counter()
    ranker = make_ranker(spec)
    ranker.bind_collection(collection)
    _load_model(ranker)
    device = "cpu"
    if "device" in ranker.params:
        device = resolve_device(str(ranker.params["device"]))
    sync(device)
    return ranker, device, time.perf_counter() - start


def _load_model(ranker: object) -> None:
    """Load what the ranker loads lazily on first use."""
    from nrp.rankers import text_pipeline
    from nrp.rankers.colbert import ColBERTRanker
    from nrp.rankers.dense import DenseRanker
    from nrp.rankers.lexical import LexicalRanker
    from nrp.rankers.t5 import DuoT5Ranker, MonoT5Ranker

    if isinstance(ranker, LexicalRanker):
        text_pipeline.analyse("loading")  # imports NLTK's Porter stemmer (seconds)
        _ = ranker.background  # stats=collection: the corpus statistics
    elif isinstance(ranker, DuoT5Ranker):
        ranker.mono.t5.load()
        ranker.t5.load()
    elif isinstance(ranker, MonoT5Ranker):
        ranker.t5.load()
    elif isinstance(ranker, DenseRanker):
        _ = ranker.model
    elif isinstance(ranker, ColBERTRanker):
        _ = ranker.checkpoint
