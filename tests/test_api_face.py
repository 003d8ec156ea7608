"""nrp.api is plain imports: the import graph (grimp, which import-linter reads) has an edge from
nrp.api to every module it exports from and from the shells to nrp.api, and importing it loads
none of the heavy libraries."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

import nrp
from nrp import api

API_FILE = Path(api.__file__)


def _exported_from() -> dict[str, str]:
    """name -> module of every ``from MODULE import NAME`` statement of nrp/api.py."""
    tree = ast.parse(API_FILE.read_text(encoding="utf-8"))
    return {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("nrp.")
        for alias in node.names
    }


def test_every_name_is_a_real_import_the_graph_sees():
    exported = _exported_from()
    assert sorted(exported) == sorted(api.__all__)
    assert len(exported) > 100 and "make_ranker" in exported
    graph = grimp.build_graph("nrp")
    for module in set(exported.values()):
        assert graph.direct_import_exists(importer="nrp.api", imported=module), module
    # the walk from a shell through the API into the domain: nrp.cli -> nrp.api -> nrp.validation
    assert graph.direct_import_exists(importer="nrp.cli.validate", imported="nrp.api")
    assert graph.direct_import_exists(importer="nrp.service.compute", imported="nrp.api")
    chain = graph.find_shortest_chain(importer="nrp.cli", imported="nrp.validation.validate")
    assert chain is not None and chain[-2:] == ("nrp.api", "nrp.validation.validate")
    assert chain[0] == "nrp.cli" and len(chain) <= 4  # nrp.cli itself imports nrp.api too


def test_the_package_root_reaches_the_api_names():
    assert nrp.make_ranker is api.make_ranker
    assert nrp.Collection is api.Collection
    assert nrp.__version__ == "0.1.0"


def test_importing_the_api_loads_no_heavy_library():
    heavy = ["torch", "transformers", "sentence_transformers", "spacy", "matplotlib", "scipy.stats"]
    code = f"import sys, nrp.api; print(sorted(set({heavy!r}) & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr


def test_former_circles_stay_open():
    """Each pair imports one way only: the irds manifest is built by ingest, not Manifest.load;
    as_ranker lives in nrp.rankers.coerce; the synth report text in nrp.synth.output; the fuse
    ranker calls its weight fitter, which reads it through a Protocol."""
    graph = grimp.build_graph("nrp")
    for lower, upper in [
        ("nrp.collection.manifest", "nrp.collection.formats.irds"),
        ("nrp.rankers.registry", "nrp.rankers.base"),
        ("nrp.synth.output", "nrp.synth.synth"),
        ("nrp.rankers.fusion_weights", "nrp.rankers.fusion"),
    ]:
        assert graph.find_shortest_chain(importer=lower, imported=upper) is None, (lower, upper)
        assert graph.find_shortest_chain(importer=upper, imported=lower) is not None
