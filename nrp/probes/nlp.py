"""The probes' spaCy pipeline: the heuristics evaluator's model with what the perturbations and
the entity pool read, loaded once per process."""

from __future__ import annotations

from functools import cache


@cache
def spacy_pipeline():  # type: ignore[no-untyped-def]
    """The heuristics evaluator's spaCy model with what the perturbations read (tags, lemmas,
    named entities; the parser left out), loaded once per process. Its matrix products go
    through numpy's BLAS rather than BLIS (thinc's default): the probe's NER over the judged
    documents of 30 MEDIQA queries took 4.9 s instead of 7.0 on the 2-core machine of
    docs/studies/performance-study.md, with the same entities, tags and lemmas."""
    from nrp.evaluators.heuristics import DEFAULT_MODEL, check_model, import_spacy

    spacy = import_spacy()  # thinc without torch where nothing can need it
    from thinc.api import use_ops

    check_model(DEFAULT_MODEL)
    with use_ops("numpy", use_blis=False):  # the models keep the ops they are built with
        return spacy.load(DEFAULT_MODEL, exclude=["parser"])
