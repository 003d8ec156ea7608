"""Evaluators beside NRP: one interface, a registry of evaluators, a per-item cache and a runner.

``nrp.evaluators.base`` (the interface and the registry), ``items`` (answers joined with their
question, references or pseudo-references and context documents), ``cache`` (per-item results),
``run`` (``evaluate``: batched, cached, resumable), and one module per family of evaluators.
"""
