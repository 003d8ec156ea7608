"""nrp: grade generated answers by where a validated ranker puts them among human-judged documents.

The library API mirrors the CLI: ``nrp.ingest(manifest, name)`` builds a collection store,
``nrp.Collection.load(name)`` reads it (topics, docs, qrels per dimension as PyTerrier frames),
``nrp.validate``, ``nrp.score``, ``nrp.evaluate`` ... Every name of ``nrp.api`` is reachable as
``nrp.NAME``; ``nrp.api`` is imported on the first such use, so ``import nrp`` stays quick and no
package of nrp imports this one's names back.
"""

from nrp.version import __version__

__all__ = ["Collection", "NRPScorer", "__version__", "ingest", "list_collections", "score"]


def __getattr__(name: str):
    import importlib
    import importlib.util

    if name.startswith("_"):
        raise AttributeError(f"module 'nrp' has no attribute {name!r}")
    if importlib.util.find_spec(f"nrp.{name}") is not None:
        # a module of the package (nrp.meta, nrp.statistics ...): imported
        # itself, so ``from nrp import statistics`` inside the package never loads nrp.api
        return importlib.import_module(f"nrp.{name}")
    api = importlib.import_module("nrp.api")
    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'nrp' has no attribute {name!r}")
