"""What every model in nrp shares, whichever layer loads it (rankers, BERTScore, LLMs):
``device`` (device and dtype, length-sorted batches, progress), ``checksums`` (what identifies a
model's files in fingerprints), ``folders`` (where models come from without a hub: nrp's model
folder and the models that ship inside PyPI packages)."""
