"""Analysis of NRP results: ``summary`` (mean NRP per LLM and prompt with intervals, saturation,
paired tests) and ``agreement`` (leave-one-out: how well NRP with a ranker reproduces the judged
documents' own grades)."""
