"""``nrp synth``: question/answer test sets written by an LLM from a knowledge base.

- ``nrp.synth.documents``: reading a folder or table of documents, cutting passages;
- ``nrp.synth.kinds``: the question kinds (factual, yesno, instruction, multi), their versioned
  prompt templates (``nrp/synth/templates``), reading a pair out of a reply;
- ``nrp.synth.filters``: language, references to "the text", verbatim overlap, near-duplicates;
- ``nrp.synth.synth``: ``synthesize``, the run (generation, filters, the support judge);
- ``nrp.synth.output``: the collection folder, ``items.jsonl`` and the report.
"""

from nrp.synth.output import format_report
from nrp.synth.synth import SynthResult, SynthSettings, synthesize

__all__ = ["SynthResult", "SynthSettings", "format_report", "synthesize"]
