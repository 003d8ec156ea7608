"""The heavy libraries, each imported on first use, in one place (as ir_datasets' ``lazy_libs``).

``import nrp`` and ``import nrp.api`` load none of them (``tests/test_api_face.py`` checks it):
a module of nrp that needs one calls the function of that name when it needs it
(``torch = lazy_libs.torch()``), never imports it at module level, so listing rankers, reading a
collection or printing ``--help`` never pays for torch, transformers or spaCy. A submodule a
caller needs (``colbert.infra``, ``bert_score.utils``) comes from ``module(NAME)``. What is
installed is asked with ``installed`` (``importlib.util.find_spec``, which imports nothing).

Type annotations name these libraries under ``TYPE_CHECKING`` only.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

#: the heavy libraries nrp may use, each loaded only by the function of its name here
HEAVY = (
    "torch",
    "transformers",
    "sentence_transformers",
    "faiss",
    "spacy",
    "matplotlib",
    "colbert",
    "bert_score",
    "sacrebleu",
    "nltk",
    "ray",
    "ir_datasets",
    "autojudge_base",
)


def module(name: str) -> ModuleType:
    """The module ``name`` (a heavy library or one of its submodules), imported on first use."""
    if name.partition(".")[0] not in HEAVY:
        raise ValueError(f"{name}: not one of the heavy libraries ({', '.join(HEAVY)})")
    return importlib.import_module(name)


def installed(name: str) -> bool:
    """Whether the library ``name`` can be imported here (nothing is imported to tell)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def torch() -> ModuleType:
    return module("torch")


def transformers() -> ModuleType:
    return module("transformers")


def sentence_transformers() -> ModuleType:
    return module("sentence_transformers")


def faiss() -> ModuleType:
    return module("faiss")


def spacy() -> ModuleType:
    return module("spacy")


def ray() -> ModuleType:
    return module("ray")


def ir_datasets() -> ModuleType:
    return module("ir_datasets")


def nltk() -> ModuleType:
    return module("nltk")


def autojudge_base() -> ModuleType:
    return module("autojudge_base")
