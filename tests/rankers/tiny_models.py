"""Tiny random checkpoints built on the fly for ranker tests (no model hub here or in CI).

Functions are named by the model family they build (``build_tiny_t5*``), so builders of other
families can live beside them. A random model gives meaningless but deterministic scores: tests
compare the ranker's numbers with numbers computed directly from the same model.
"""

from __future__ import annotations

import io
from pathlib import Path

# Enough text for sentencepiece to learn the pieces of the monoT5 / duoT5 prompts.
T5_TOKENIZER_CORPUS = [
    "Query: what is diabetes Document: diabetes is a disease of blood sugar Relevant: true",
    "Query: cure for a cold Document: rest and fluids help with a cold Relevant: false",
    "Query: aspirin dose Document0: aspirin reduces fever Document1: water is wet Relevant: true",
    "the quick brown fox jumps over the lazy dog while the cat sleeps in the sun",
    "patients with high blood pressure should reduce salt and exercise every day",
]


def build_tiny_t5_tokenizer(folder: str | Path, special_true_false: bool = True) -> Path:
    """A T5 sentencepiece tokenizer trained offline on ``T5_TOKENIZER_CORPUS``, saved with
    ``T5Tokenizer.save_pretrained``. monoT5 scoring reads the logits of ``encode('true')[0]``
    and ``encode('false')[0]``: with ``special_true_false`` the pieces ``▁true`` and ``▁false``
    are user-defined symbols, so each word is one real token (a corpus this small would
    otherwise split them). Ids: 0 <pad>, 1 </s>, 2 <unk>, as T5 expects; no <extra_id_*>."""
    import sentencepiece as spm
    from transformers import T5Tokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(T5_TOKENIZER_CORPUS * 10),
        model_writer=model,
        vocab_size=120,
        hard_vocab_limit=False,  # the corpus is too small for a fixed size; take what it gives
        model_type="unigram",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        character_coverage=1.0,
        user_defined_symbols=["▁true", "▁false"] if special_true_false else [],
        minloglevel=2,
    )
    (folder / "spiece.model").write_bytes(model.getvalue())
    T5Tokenizer(str(folder / "spiece.model"), extra_ids=0, legacy=True).save_pretrained(folder)
    return folder


def build_tiny_t5(
    folder: str | Path,
    tokenizer_folder: str | Path,
    seed: int = 0,
    n_positions: int = 64,
    d_model: int = 16,
) -> Path:
    """A random 1-layer T5ForConditionalGeneration (d_model 16) saved with its tokenizer, so the
    folder alone is a complete checkpoint. ``n_positions`` must be in the config: pyterrier-t5
    and nrp's T5 rankers read the input limit from it (a plain T5Config has none); a small value
    makes truncation easy to provoke. ``seed`` gives different weights."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    tokenizer = T5Tokenizer.from_pretrained(str(tokenizer_folder))
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=d_model,
        d_kv=8,
        d_ff=2 * d_model,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        n_positions=n_positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        dropout_rate=0.0,
    )
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(config).eval()
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# -- BERT sequence classifiers (cross-encoders) ---------------------------------------------------
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_bert_classifier(
    folder: str | Path,
    words: list[str],
    seed: int = 0,
    num_labels: int = 1,
    layers: int = 2,
    max_positions: int = 64,
    hidden: int = 32,
    init_range: float = 0.2,
) -> Path:
    """A random BertForSequenceClassification (``layers`` layers, hidden size ``hidden``) with a
    WordPiece vocabulary of the special tokens and ``words`` (lower-cased, whole words only),
    saved with its BertTokenizer: a complete cross-encoder checkpoint. ``max_positions`` is the
    input limit (position embeddings); the tokenizer declares no limit of its own, so the
    model's is the one that counts. ``seed`` gives different weights; ``init_range`` (the
    weights' standard deviation, 0.02 in BERT) spreads a random model's scores apart."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = BERT_SPECIALS + sorted({w.lower() for w in words} - set(BERT_SPECIALS))
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizer(str(vocab_file))
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=max_positions,
        num_labels=num_labels,
        pad_token_id=tokenizer.pad_token_id,
        initializer_range=init_range,
    )
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
