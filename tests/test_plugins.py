"""Another package plugs in through entry points: installed beside nrp, its ranker, evaluator and
input format are listed by ``nrp rankers`` / ``nrp evaluators`` / ``nrp formats`` and built from
specs, without a line of nrp changed. A broken plug-in is reported and skipped. The registry
itself: explicit registration, one declaration per name, a declaration named by an entry point.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from nrp.components import Registry
from nrp.rankers.base import Ranker

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"

PLUGIN_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "nrp-plugin-demo"
version = "0.1"

[project.entry-points."nrp.rankers"]
coverage = "nrp_plugin_demo.ranker"

[project.entry-points."nrp.evaluators"]
ref_recall = "nrp_plugin_demo.evaluator"

[project.entry-points."nrp.formats"]
question-lines = "nrp_plugin_demo.formats"

[tool.setuptools]
packages = ["nrp_plugin_demo"]
"""


def _env(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(map(str, (*paths, ROOT)))
    return env


def _run(paths: tuple[Path, ...], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], env=_env(*paths), capture_output=True, text=True, timeout=300
    )


def _nrp(paths: tuple[Path, ...], command: str) -> subprocess.CompletedProcess:
    done = _run(paths, "-m", "nrp", command)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The docs' three examples as a package of their own, pip-installed into a folder."""
    source = tmp_path_factory.mktemp("nrp-plugin-demo")
    (source / "pyproject.toml").write_text(PLUGIN_PYPROJECT)
    package = source / "nrp_plugin_demo"
    package.mkdir()
    (package / "__init__.py").write_text('"""nrp plug-ins from docs/examples."""\n')
    for example, module in [("my_ranker", "ranker"), ("my_evaluator", "evaluator")]:
        shutil.copy(EXAMPLES / f"{example}.py", package / f"{module}.py")
    shutil.copy(EXAMPLES / "my_format.py", package / "formats.py")
    site = tmp_path_factory.mktemp("site")
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(
        [*install, "--quiet", "--target", str(site), str(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (site / "nrp_plugin_demo" / "ranker.py").exists()
    return site


@pytest.fixture(scope="module")
def plain_listings() -> dict[str, str]:
    """What nrp lists without the plug-in."""
    return {command: _nrp((), command).stdout for command in ("rankers", "evaluators", "formats")}


def _adds_block(before: str, after: str, block: list[str]) -> bool:
    """Whether ``after`` is ``before`` with ``block``, a run of whole lines, inserted once."""
    lines, size = after.splitlines(), len(block)
    starts = [i for i in range(len(lines)) if lines[i : i + size] == block]
    return len(starts) == 1 and lines[: starts[0]] + lines[starts[0] + size :] == (
        before.splitlines()
    )


def test_nrp_rankers_lists_the_plug_in(plugin_site, plain_listings):
    listed = _nrp((plugin_site,), "rankers")
    assert listed.stderr == ""
    added = [
        "coverage [python] (available): share of the query's distinct words that the document "
        "contains",
        "    lowercase=True (bool): compare words in lower case",
    ]
    assert _adds_block(plain_listings["rankers"], listed.stdout, added)


def test_nrp_evaluators_and_formats_list_the_plug_in(plugin_site, plain_listings):
    evaluators = _nrp((plugin_site,), "evaluators").stdout
    added = [
        "  ref_recall (available): share of the best reference's distinct words that the "
        "answer repeats",
        "      min_length=3 (int): ignore words shorter than this",
        "      label='' (str): name prefixed to this evaluator's columns (LABEL.column)",
    ]
    assert _adds_block(plain_listings["evaluators"], evaluators, added)
    headers = [line for line in evaluators.splitlines() if not line.startswith(" ")]
    family = headers[headers.index("reference-based:") + 1]  # the family after it
    assert (
        evaluators.index("reference-based:")
        < evaluators.index("  ref_recall")
        < (evaluators.index(f"\n{family}\n"))
    )
    formats = _nrp((plugin_site,), "formats").stdout
    added = [
        "question-lines: topics, one per line as 'QID: question' (# comments and blank lines "
        "skipped) [provides topics]",
        "    separator (default ':'): what separates the qid from the question",
    ]
    assert _adds_block(plain_listings["formats"], formats, added)


BUILD_FROM_SPECS = """\
import pandas as pd
from nrp import api
from nrp.collection.formats import read_format

ranker = api.make_ranker("coverage:lowercase=false")
rows = pd.DataFrame({"qid": ["q", "q"], "query": ["Fever in children"] * 2,
                     "docno": ["a", "b"], "text": ["Fever in children", "fever IN children"]})
print(type(ranker).__module__, ranker.spec(), ranker.transform(rows)["score"].tolist())
evaluator = api.make_evaluator("ref_recall:min_length=1")
items = pd.DataFrame({"answer_id": ["a"], "qid": ["q"], "question": [""], "text": ["no fever"],
                      "references": [("a fever",)], "reference_kind": ["reference"],
                      "contexts": [()]})
print(type(evaluator).__module__, evaluator.spec(), evaluator.evaluate(items)["ref_recall"][0])
topics, report = read_format("question-lines", TOPICS)
print(topics[0].qid, topics[0].query)
"""


def test_specs_naming_the_plug_in_build_it(plugin_site, tmp_path):
    topics = tmp_path / "topics.txt"
    topics.write_text("q7: what is a fever\n")
    done = _run((plugin_site,), "-c", BUILD_FROM_SPECS.replace("TOPICS", repr(str(topics))))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "nrp_plugin_demo.ranker coverage:lowercase=False [1.0, 0.3333333333333333]",
        "nrp_plugin_demo.evaluator ref_recall:min_length=1 0.5",
        "q7 what is a fever",
    ]


def _dist_info(site: Path, name: str, entry_points: str) -> None:
    """A hand-written installed distribution: what importlib.metadata reads from a path."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def test_a_broken_plug_in_is_reported_and_skipped(tmp_path, plain_listings):
    _dist_info(tmp_path, "nrp_broken", "[nrp.rankers]\nbroken = nrp_missing_plugin.rankers\n")
    listed = _nrp((tmp_path,), "rankers")
    assert listed.stdout == plain_listings["rankers"]
    assert (
        "nrp: ranker plug-in broken = nrp_missing_plugin.rankers (entry point group "
        "nrp.rankers) could not be loaded: ModuleNotFoundError: No module named "
        "'nrp_missing_plugin'"
    ) in listed.stderr


def test_listing_imports_no_model_library():
    code = (
        "import sys; from nrp import api; api.all_rankers(); api.all_evaluators(); "
        "api.all_formats(); print(sorted({'torch', 'transformers', 'spacy'} & set(sys.modules)))"
    )
    done = _run((), "-c", code)
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr


# -- the registry itself ----------------------------------------------------------------------
@dataclass(frozen=True)
class Thing:
    name: str
    size: int = 0


def test_registry_takes_one_declaration_per_name():
    things: Registry[Thing] = Registry("thing", Thing, (), "nrp.tests.none")
    small = Thing("small", 1)
    things.register(small)
    things.register(small)  # the same declaration again: nothing changes
    things.register(Thing("big", 9))
    assert list(things.entries()) == ["big", "small"]
    with pytest.raises(RuntimeError, match="thing 'small' registered twice"):
        things.register(Thing("small", 2))
    with pytest.raises(TypeError, match=r"register\(\) takes a Thing, not str"):
        things.register("small")
    assert things.unregister("small") is small
    things.register(Thing("small", 2))
    assert things.entries()["small"].size == 2


REGISTRY_MODULE = """\
from dataclasses import dataclass

from nrp.components import Registry


@dataclass(frozen=True)
class Part:
    name: str
    size: int = 0


PARTS = Registry(
    "part", Part, ("nrp_test_builtin_parts",), "nrp.tests.parts",
    prepare=lambda part: Part(part.name, part.size * 10),
)
DECLARED = Part("declared", 3)
"""


def test_registry_imports_its_builtins_then_entry_points_once(tmp_path, monkeypatch):
    (tmp_path / "nrp_test_parts.py").write_text(REGISTRY_MODULE)
    (tmp_path / "nrp_test_builtin_parts.py").write_text(
        "from nrp_test_parts import PARTS, Part\n\nPARTS.register(Part('builtin', 1))\n"
    )
    _dist_info(
        tmp_path, "nrp_test_parts", "[nrp.tests.parts]\ndeclared = nrp_test_parts:DECLARED\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        from nrp_test_parts import PARTS, Part

        assert "nrp_test_builtin_parts" not in sys.modules  # nothing loads before a listing
        expected = {"builtin": Part("builtin", 10), "declared": Part("declared", 30)}
        assert PARTS.entries() == expected
        assert PARTS.entries() == expected  # loaded once: no "registered twice"
    finally:
        for name in ("nrp_test_parts", "nrp_test_builtin_parts"):
            sys.modules.pop(name, None)


def test_a_ranker_must_declare_a_known_injection_kind():
    with pytest.raises(TypeError, match=r"Sideways\.injection is 'listwise'; declare one of"):

        class Sideways(Ranker):
            injection = "listwise"

            def score_frame(self, frame):
                return frame


# -- a statistics ranker from another package ---------------------------------------------------
STATISTICS_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "nrp-plugin-bm25"
version = "0.1"

[project.entry-points."nrp.rankers"]
okapi = "nrp_plugin_bm25.ranker"

[tool.setuptools]
packages = ["nrp_plugin_bm25"]
"""

# Positions the demo answers with the plug-in's okapi and nrp's bm25, with recomputed and with
# frozen statistics, and prints what the test compares.
OKAPI_AGAINST_BM25 = """\
import json
from importlib import resources

import pandas as pd

from nrp import api

demo = resources.files("nrp") / "data" / "demo"
api.ingest(demo / "manifest.yaml", indexes_dir=INDEXES)
collection = api.Collection.load("demo", INDEXES)
answers = pd.read_json(demo / "answers.jsonl", lines=True, dtype={"qid": str})
columns = ["answer_id", "dimension", "score", "rank", "ties", "n_docs", "nrp"]
found = {"module": type(api.make_ranker("okapi")).__module__}
for frozen in (False, True):
    results = {
        spec: api.score_answers(collection, answers, spec, frozen_stats=frozen, cache=False)
        for spec in ("okapi", "bm25")
    }
    okapi, bm25 = (results[spec] for spec in ("okapi", "bm25"))
    found[f"frozen={frozen}"] = {
        "mode": okapi.attrs["injection"]["okapi"],
        "equal": okapi[columns].equals(bm25[columns]),
        "answers": int(okapi["answer_id"].nunique()),
        "distinct_nrp": int(okapi["nrp"].nunique()),
    }
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def statistics_plugin_site(tmp_path_factory) -> Path:
    """docs/examples/my_statistics_ranker.py as a package of its own, pip-installed."""
    source = tmp_path_factory.mktemp("nrp-plugin-bm25")
    (source / "pyproject.toml").write_text(STATISTICS_PYPROJECT)
    package = source / "nrp_plugin_bm25"
    package.mkdir()
    (package / "__init__.py").write_text('"""A BM25 plug-in with statistics over D_q."""\n')
    shutil.copy(EXAMPLES / "my_statistics_ranker.py", package / "ranker.py")
    site = tmp_path_factory.mktemp("site-bm25")
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(
        [*install, "--quiet", "--target", str(site), str(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def test_a_statistics_ranker_from_another_package_gives_bm25s_nrp(statistics_plugin_site, tmp_path):
    """The plug-in subclasses only ``Ranker`` and has what ``StatisticsScorer`` names: nrp
    positions its answers in the fast lexical modes (not the full re-rank), and every score,
    rank, tie count and NRP equals the built-in bm25's, bit for bit."""
    script = OKAPI_AGAINST_BM25.replace("INDEXES", repr(str(tmp_path / "indexes")))
    done = _run((statistics_plugin_site,), "-c", script)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["module"] == "nrp_plugin_bm25.ranker"  # built through the entry point
    recomputed, frozen = found["frozen=False"], found["frozen=True"]
    assert recomputed["mode"].startswith("okapi: fast:lexical-recomputed: D_q tokenised once")
    assert frozen["mode"].startswith("okapi: fast:lexical-frozen: statistics frozen")
    for run in (recomputed, frozen):
        assert run["equal"] is True
        assert run["answers"] == 64
        assert run["distinct_nrp"] > 10  # the answers land at many ranks, not one
