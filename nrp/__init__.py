"""nrp: grade generated answers by where a validated ranker puts them among human-judged documents.

The library API mirrors the CLI: ``nrp.ingest(manifest, name)`` builds a collection store,
``nrp.Collection.load(name)`` reads it (topics, docs, qrels per dimension as PyTerrier frames),
``nrp.validate``, ``nrp.score``, ``nrp.evaluate`` ... Every name of ``nrp.api`` is reachable as
``nrp.NAME``; nothing is imported until it is used, so ``import nrp`` and the CLI's start stay
quick and no package of nrp imports this one's names back.
"""

from nrp.version import __version__

__all__ = ["Collection", "NRPScorer", "__version__", "ingest", "list_collections", "score"]


def __getattr__(name: str):
    import importlib

    if name == "meta":  # the package, callable as nrp meta (nrp.meta.__init__)
        return importlib.import_module("nrp.meta")
    api = importlib.import_module("nrp.api")
    if name in api._EXPORTS:
        return getattr(api, name)
    raise AttributeError(f"module 'nrp' has no attribute {name!r}")
