"""nrp.api is the user's face: a verb per command of the command line and the values they take, a
screen of names; nrp.engine holds the parts the shells compose beside them. Both are plain
imports: the import graph (grimp, which import-linter reads) has an edge from each to every module
it exports from and from the shells to them, and importing them loads none of the heavy
libraries."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

import nrp
from nrp import api, engine
from nrp.cli import build_parser


def _exported_from(module=api) -> dict[str, str]:
    """name -> module of every ``from MODULE import NAME`` statement of nrp/api.py (or another
    face module)."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    return {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("nrp.")
        for alias in node.names
    }


def test_every_name_is_a_real_import_the_graph_sees():
    graph = grimp.build_graph("nrp")
    for face in (api, engine):
        exported = _exported_from(face)
        assert sorted(exported) == sorted(n for n in face.__all__ if n != "CLI_VERBS")
        for module in set(exported.values()):
            assert graph.direct_import_exists(importer=face.__name__, imported=module), module
    # the walk from a shell through the API into the domain: nrp.cli -> nrp.api -> nrp.validation
    assert graph.direct_import_exists(importer="nrp.cli.validate", imported="nrp.api")
    assert graph.direct_import_exists(importer="nrp.service.compute", imported="nrp.api")
    chain = graph.find_shortest_chain(
        importer="nrp.cli.validate", imported="nrp.validation.validate"
    )
    assert chain is not None and chain[1] in ("nrp.api", "nrp.engine") and len(chain) == 3
    assert graph.direct_import_exists(importer="nrp.api", imported="nrp.validation.validate")


def test_the_face_is_a_screen_of_names_with_a_verb_per_command():
    assert 40 <= len(api.__all__) <= 70 and not set(api.__all__) & set(engine.__all__)
    commands = build_parser()._subparsers._group_actions[0].choices
    assert sorted(api.CLI_VERBS) == sorted(set(commands) - {"serve"})
    for command, verb in api.CLI_VERBS.items():
        assert verb in api.__all__ and callable(getattr(api, verb)), command
    # the engine's parts and the files' readers are not the user's: not reachable as nrp.NAME
    for part in ("PositionJob", "Positioner", "PositionCaches", "result_rows", "DuplicateKey"):
        assert part in engine.__all__ and part not in api.__all__
        assert not hasattr(nrp, part)
    assert nrp.score is api.score and nrp.RankerSpec is api.RankerSpec


def test_the_package_root_reaches_the_api_names():
    assert nrp.make_ranker is api.make_ranker
    assert nrp.Collection is api.Collection
    assert nrp.__version__ == "0.1.0"


def test_importing_the_api_loads_no_heavy_library():
    heavy = ["torch", "transformers", "sentence_transformers", "spacy", "matplotlib", "scipy.stats"]
    code = f"import sys, nrp.api, nrp.engine; print(sorted(set({heavy!r}) & set(sys.modules)))"
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
