#!/usr/bin/env python3
"""GPU benchmark: monoT5-base, duoT5-base and ColBERT (BERT-base) in fp32, fp16 and bf16.

No real monoT5, duoT5 or ColBERT checkpoint exists offline, so each model is built with random
weights from its published configuration (t5-base: 12+12 layers, d_model 768, d_ff 3072, 12
heads, vocabulary 32,128, 512 input positions; bert-base: 12 layers, hidden 768, 12 heads,
vocabulary 30,522, plus ColBERTv2's 128-dim projection, 32 query and 180 document tokens). The
work per pair is that of the real models (same FLOPs); only the scores mean nothing. The T5
tokenizer is a small sentencepiece model, so every MEDIQA document fills the 512-token input:
each monoT5 pair is query + document = 512 tokens, the issue's "query + 512-token passage".

For each model, dtype and batch size the benchmark times, in one process on the same inputs:

- **nrp**: the ranker's own scoring path (``MonoT5Ranker.transform``, ``DuoT5Ranker.score_pairs``,
  ``ColBERTRanker.score_frame``): tokenising, length sorting, padding, forward, read-out;
- **forward**: the bare model forward on the same token ids in the same batches (the limit);

and prints pairs/s of each, the share of nrp's time that the forward passes take
(forward time / nrp time; goal >= 0.9), and the peak GPU memory of nrp's run
(``torch.cuda.max_memory_allocated``). The device is printed with the figures.

Without a CUDA GPU it prints the rows empty and says so: GPU figures are never estimated.

    .venv/bin/python scripts/bench_gpu.py
    .venv/bin/python scripts/bench_gpu.py --dtypes bf16 --batches 64,128 --pairs 2048
    .venv/bin/python scripts/bench_gpu.py --texts pairs.jsonl   # {"query", "text"} per line
    .venv/bin/python scripts/bench_gpu.py --save-texts pairs.jsonl  # MEDIQA pairs, to carry
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "rankers"))
from benchkit import ROOT, ratio

MEDIQA = ROOT / "manifests" / "mediqa-2019.yaml"
DEMO = ROOT / "nrp" / "data" / "demo" / "manifest.yaml"
MODELS = ("monot5", "duot5", "colbert")
GOAL_PAIRS = 2000  # monoT5-base pairs/s on one H100 (query + 512-token passage)
GOAL_FORWARD_SHARE = 0.9

# published configurations (t5-base's config.json; bert-base-uncased's; ColBERTv2's settings)
T5_BASE = dict(
    d_model=768,
    d_kv=64,
    d_ff=3072,
    num_layers=12,
    num_decoder_layers=12,
    num_heads=12,
    relative_attention_num_buckets=32,
    relative_attention_max_distance=128,
    vocab_size=32128,
    n_positions=512,
    feed_forward_proj="relu",
    dropout_rate=0.0,
)
BERT_BASE = dict(
    vocab_size=30522,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
)
COLBERT_V2 = dict(dim=128, query_maxlen=32, doc_maxlen=180)


# -- inputs ----------------------------------------------------------------------------------------
def mediqa_pairs() -> tuple[list[dict], str]:
    """(query, document) pairs of MEDIQA 2019 (from ../shared/data), else the demo collection."""
    from nrp import ingest
    from nrp.collection.collection import Collection

    with tempfile.TemporaryDirectory(prefix="nrp-bench-gpu-") as tmp:
        source = "MEDIQA 2019"
        try:
            result = ingest(str(MEDIQA), indexes_dir=tmp)
        except Exception:  # data absent: the embedded demo collection
            result, source = ingest(str(DEMO), indexes_dir=tmp), "the demo collection (FALLBACK)"
        frame = Collection.load(result.name, tmp).candidates()
    pairs = [{"query": q, "text": t} for q, t in zip(frame["query"], frame["text"], strict=True)]
    return pairs, source


def frame_of(pairs: list[dict], n: int):
    """n rows (pairs repeated as needed), 8 documents per query id."""
    import pandas as pd

    rows = [pairs[i % len(pairs)] for i in range(n)]
    return pd.DataFrame(
        {
            "qid": [f"q{i // 8}" for i in range(n)],
            "query": [r["query"] for r in rows],
            "docno": [f"d{i}" for i in range(n)],
            "text": [r["text"] for r in rows],
        }
    )


# -- random full-size checkpoints ------------------------------------------------------------------
def build_t5_base(folder: Path, tokenizer_folder: Path) -> Path:
    import torch
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    tokenizer = T5Tokenizer.from_pretrained(str(tokenizer_folder))
    config = T5Config(
        **T5_BASE,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_colbert_base(folder: Path, pairs: list[dict]) -> Path:
    """A ColBERT checkpoint of bert-base's size: WordPiece vocabulary of the benchmark's words,
    padded with unused entries to bert-base's 30,522 (the embedding matrix of the real model)."""
    import re
    import string

    import torch
    from colbert.infra import ColBERTConfig
    from colbert.modeling.hf_colbert import class_factory
    from transformers import BertConfig, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    words: dict[str, None] = {}
    for pair in pairs:
        for word in re.findall(r"[a-z0-9]+", (pair["query"] + " " + pair["text"]).lower()):
            words.setdefault(word)
    vocab = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += list(string.punctuation) + list(words)[: BERT_BASE["vocab_size"] - 100]
    vocab += [f"[unused{i}]" for i in range(2, 2 + BERT_BASE["vocab_size"] - len(vocab))]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(
        folder
    )
    config = BertConfig(**BERT_BASE)
    config.save_pretrained(folder)
    settings = ColBERTConfig(**COLBERT_V2)
    torch.manual_seed(0)
    class_factory(str(folder))(config, settings).save_pretrained(folder)
    settings.save_for_checkpoint(str(folder))
    return folder


# -- measuring -------------------------------------------------------------------------------------
def timed(fn, device: str) -> float:
    from benchkit import sync

    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def t5_forward_limit(t5, inputs: list[list[int]]) -> float:
    """The bare forward passes of ``inputs`` in nrp's batches (length-sorted, right-padded),
    tensors built and moved to the GPU before the clock starts."""
    import torch

    order = sorted(range(len(inputs)), key=lambda i: len(inputs[i]))
    batches = []
    pad = t5._tokenizer.pad_token_id
    device = t5._model.device
    for start in range(0, len(order), t5.batch):
        rows = [inputs[i] for i in order[start : start + t5.batch]]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        dec = torch.full((len(rows), 1), t5._model.config.decoder_start_token_id)
        batches.append((ids.to(device), mask.to(device), dec.to(device)))

    def run():
        with torch.inference_mode():
            for ids, mask, dec in batches:
                t5._model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec)

    return timed(run, str(device))


def colbert_forward_limit(ranker, frame, device_name: str) -> float:
    """ColBERT's bare encoder passes: the documents' and the distinct queries' token tensors
    built before the clock starts, then ``checkpoint.doc`` / ``checkpoint.query`` per batch."""
    import torch

    ckpt = ranker.checkpoint
    batch = int(ranker.params["batch"])
    texts = frame["text"].astype(str).tolist()
    queries = list(dict.fromkeys(frame["query"].astype(str)))
    doc_batches = [
        ckpt.doc_tokenizer.tensorize(texts[i : i + batch]) for i in range(0, len(texts), batch)
    ]
    query_batches = [
        ckpt.query_tokenizer.tensorize(queries[i : i + batch])
        for i in range(0, len(queries), batch)
    ]
    device = next(ckpt.parameters()).device

    def run():
        with torch.inference_mode():
            for ids, mask in doc_batches:
                ckpt.doc(ids.to(device), mask.to(device), keep_dims="return_mask")
            for ids, mask in query_batches:
                ckpt.query(ids.to(device), mask.to(device))

    return timed(run, device_name)


def measure(
    kind: str, folder: Path, mono: Path, dtype: str, batch: int, frame, device: str = "cuda"
) -> dict:
    import torch

    from nrp.rankers.registry import make_ranker
    from nrp.rankers.t5 import ordered_pairs

    spec = {
        "monot5": f"monot5:model={folder},device={device},dtype={dtype},batch={batch},"
        "verbose=false",
        "duot5": f"duot5:model={folder},mono_model={mono},device={device},dtype={dtype},"
        f"batch={batch},verbose=false",
        "colbert": f"colbert:model={folder},device={device},dtype={dtype},batch={batch},"
        "verbose=false",
    }[kind]
    ranker = make_ranker(spec)
    if kind == "duot5":
        pairs = ordered_pairs(frame.assign(score=0.0)).head(len(frame))

        def nrp_run():
            return ranker.score_pairs(pairs)

        n = len(pairs)
    elif kind == "monot5":

        def nrp_run():
            return ranker.transform(frame)

        n = len(frame)
    else:

        def nrp_run():
            return ranker.score_frame(frame)

        n = len(frame)
    warm = frame.head(min(len(frame), batch))
    # load the model and warm the kernels on one batch before any clock starts
    if kind == "duot5":
        ranker.score_pairs(ordered_pairs(warm.assign(score=0.0)).head(batch))
    elif kind == "monot5":
        ranker.transform(warm)
    else:
        ranker.score_frame(warm)
    gpu = device.startswith("cuda")
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    try:
        nrp_s = timed(nrp_run, device)
    except RuntimeError as error:  # fp16 T5 overflows: a row that says so
        return {"error": str(error).splitlines()[0][:100]}
    peak = torch.cuda.max_memory_allocated() / 2**20 if gpu else float("nan")
    if kind == "monot5":
        inputs, _ = ranker.t5.mono_inputs(frame["query"].tolist(), frame["text"].tolist())
        forward_s = t5_forward_limit(ranker.t5, inputs)
    elif kind == "duot5":
        inputs, _ = ranker.t5.duo_inputs(
            pairs["query"].tolist(), pairs["text_a"].tolist(), pairs["text_b"].tolist()
        )
        forward_s = t5_forward_limit(ranker.t5, inputs)
    else:
        forward_s = colbert_forward_limit(ranker, frame, device)
    ranker = None  # free the model before the next one loads
    if gpu:
        torch.cuda.empty_cache()
    return {
        "pairs": n,
        "nrp_pairs_s": n / max(nrp_s, 1e-9),
        "forward_pairs_s": n / max(forward_s, 1e-9),
        "forward_share": ratio(forward_s, nrp_s),
        "peak_gpu_mib": peak,
    }


def print_row(kind: str, dtype: str, batch: int, row: dict | None) -> None:
    head = f"{kind:8} {dtype:5} {batch:6}"
    if row is None:
        print(f"{head} {'':>10} {'':>12} {'':>8} {'':>9}  (no GPU)")
    elif "error" in row:
        print(f"{head}  {row['error']}")
    else:
        print(
            f"{head} {row['nrp_pairs_s']:10.0f} {row['forward_pairs_s']:12.0f} "
            f"{row['forward_share']:8.2f} {row['peak_gpu_mib']:9.0f}"
        )
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--dtypes", default="fp32,fp16,bf16")
    parser.add_argument("--batches", default="16,32,64,128,256")
    parser.add_argument("--pairs", type=int, default=4096, help="pairs per measurement")
    parser.add_argument("--texts", help="JSON Lines of {query, text} (default: MEDIQA 2019)")
    parser.add_argument("--save-texts", help="write the MEDIQA pairs as JSON Lines and stop")
    parser.add_argument("--out", help="write the rows as JSON here too")
    parser.add_argument("--device", default="cuda", help="cuda (default); cpu only to try the code")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # every input is cut at 512 tokens and would say so

    import torch

    models = [m for m in args.models.split(",") if m]
    dtypes = [d for d in args.dtypes.split(",") if d]
    batches = [int(b) for b in args.batches.split(",") if b]
    gpu = torch.cuda.is_available() or args.device == "cpu"
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    if args.device == "cpu":
        device = "cpu (a trial of the code: not GPU figures)"
    pairs, source = [], "nothing (no GPU)"
    if gpu or args.save_texts:
        if args.texts:
            lines = Path(args.texts).read_text(encoding="utf-8").splitlines()
            pairs, source = [json.loads(line) for line in lines if line.strip()], args.texts
        else:
            pairs, source = mediqa_pairs()
    if args.save_texts:
        Path(args.save_texts).write_text("".join(json.dumps(p) + "\n" for p in pairs))
        print(f"{len(pairs)} pairs of {source} written to {args.save_texts}")
        return 0
    print(f"GPU benchmark on {device}; inputs: {len(pairs)} pairs of {source}; random weights")
    print(f"goal: monot5 fp16/bf16 >= {GOAL_PAIRS} pairs/s; forward share >= {GOAL_FORWARD_SHARE}")
    print(
        f"{'model':8} {'dtype':5} {'batch':>6} {'nrp p/s':>10} {'forward p/s':>12} "
        f"{'fwd/nrp':>8} {'peak MiB':>9}"
    )
    rows = []
    if not gpu:
        for kind in models:
            for dtype in dtypes:
                for batch in batches:
                    print_row(kind, dtype, batch, None)
        print("no CUDA GPU here: the GPU rows are left empty (never estimated)")
        return 0

    from tiny_models import build_tiny_t5_tokenizer

    frame = frame_of(pairs, args.pairs)
    with tempfile.TemporaryDirectory(prefix="nrp-bench-gpu-") as tmp:
        tmp_path = Path(tmp)
        tok = build_tiny_t5_tokenizer(tmp_path / "t5-tok")
        t5 = build_t5_base(tmp_path / "t5-base", tok) if {"monot5", "duot5"} & set(models) else None
        colbert = build_colbert_base(tmp_path / "colbert", pairs) if "colbert" in models else None
        folders = {"monot5": t5, "duot5": t5, "colbert": colbert}
        for kind in models:
            for dtype in dtypes:
                for batch in batches:
                    try:
                        row = measure(kind, folders[kind], t5, dtype, batch, frame, args.device)
                    except torch.cuda.OutOfMemoryError:
                        torch.cuda.empty_cache()
                        row = {"error": "out of GPU memory"}
                    print_row(kind, dtype, batch, row)
                    rows.append({"model": kind, "dtype": dtype, "batch": batch, **row})
    best = max(
        (r["nrp_pairs_s"] for r in rows if r["model"] == "monot5" and "nrp_pairs_s" in r),
        default=0.0,
    )
    print(f"monot5 best: {best:.0f} pairs/s (goal >= {GOAL_PAIRS}) on {device}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": device, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
