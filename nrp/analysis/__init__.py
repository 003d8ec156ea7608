"""Analysis of NRP results: ``summary`` (mean NRP per LLM and prompt with intervals, saturation,
paired tests), ``agreement`` (leave-one-out: how well NRP with a ranker reproduces the judged
documents' own grades), ``flags`` (flags of degenerate answers on a collection, their shares per
LLM and prompt) and ``check`` (the CI gate)."""
