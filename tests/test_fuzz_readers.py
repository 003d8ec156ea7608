"""Fuzzing of every input reader through the real ``nrp`` command, in-process.

Hostile or careless input (random bytes, or the real shared files with random cuts, insertions,
duplications and odd tokens: quotes, tabs, NUL, invalid UTF-8, NFD letters, huge numbers) must
end in success or in one line ``nrp: error: FILE[:LINE]: ...`` with exit 2: never a traceback,
never a message that quotes a whole field, and never a half-written store or results folder.

Seeds are excerpts of the real files of ../shared/data (a few records of each, cut at record
boundaries, so the unmutated excerpt ingests cleanly) read through the project's own manifests:
topics (TREC XML with narratives, Cranfield, LiveQA XML, ArgQuality CSV), judgments (TREC qrels,
Cranfield qrels, MedQuAD qrels, ArgQuality scores), documents (TSV table, Cranfield SMART,
MedQuAD CSV, MEDIQA XML), the manifests themselves, and answer sets (JSON Lines and the wide CSV
layout) given to ``nrp score``. Hypothesis runs derandomized (the same cases on every run) and
bounded: 600 + 150 + 80 + 200 = 1,030 cases in all, well under a minute on two cores.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from nrp.cli import main
from nrp.collection.manifest import Manifest

pytestmark = [pytest.mark.shared_data, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
MANIFESTS = ("argquality-20", "clef-ehealth-2021", "cranfield", "liveqa-med-2017", "mediqa-2019")
DEMO = ROOT / "nrp" / "data" / "demo"
#: a one-line error may quote values (each clipped to 200 characters), paths and a little prose
MAX_MESSAGE_CHARS = 1500

# Tokens that break readers in interesting ways, besides random bytes.
TOKENS = [
    b'"', b"'", b",", b"\t", b"\n", b"\r", b"\r\n", b" ", b"<", b">", b"/", b"&", b"</", b"]]>",
    b"<topic>", b"\x00", b"\xff", b"\xc3", b"\xef\xbb\xbf", b"9" * 25, b"9" * 5000, b"-", b"-1",
    b"1e400", b"nan", b"inf", "e\u0301".encode(), "\u00e9".encode(), "\u2028".encode(), b".I 7",
    b".W", b"{", b"}", b"[", b"]", b":", b"- ", b"\\", b"#", b"!!binary", b"&a;", b"*a", b"? ",
    b"=", b"x" * 300, b"\x0c", b"sample", b'"sample": 1180591620717411303424',
    b"relevance: {grades: {0: a}}\n", b"path: /etc/passwd", b"../", b"allow_outside_root: true\n",
    b"[" * 3000, b'{"x": ' * 300,  # nesting past nrp.jsontext's bound (issue 60)
]  # fmt: skip


@dataclass(frozen=True)
class Excerpt:
    """How a seed is cut from a real file: ``kind`` lines | csv | xml | smart, ``count`` records,
    ``tag`` the XML record element."""

    kind: str
    count: int
    tag: str = ""


# By format: a few records, enough for every reader's branches, small enough to be fast.
EXCERPTS = {
    "trec-topics-xml": Excerpt("xml", 6, "topic"),
    "trec-qrels": Excerpt("lines", 30),
    "table": Excerpt("csv", 10),
    "cranfield-docs": Excerpt("smart", 5),
    "cranfield-queries": Excerpt("smart", 6),
    "cranfield-qrels": Excerpt("lines", 30),
    "liveqa-med-xml": Excerpt("xml", 4, "NLM-QUESTION"),
    "medquad-judged-qrels": Excerpt("lines", 30),
    "medquad-answers": Excerpt("csv", 12),
    "mediqa-xml": Excerpt("xml", 3, "Question"),
    "argquality-topics": Excerpt("csv", 20),
    "argquality-arguments": Excerpt("csv", 12),
}


def excerpt(data: bytes, how: Excerpt, suffix: str) -> bytes:
    """The first ``how.count`` records of ``data``, cut where a record ends."""
    text = data.decode("utf-8-sig")
    if how.kind == "lines":
        return "".join(text.splitlines(keepends=True)[: how.count]).encode()
    if how.kind == "csv":
        reader = csv.reader(
            io.StringIO(text, newline=""), delimiter="\t" if suffix == ".tsv" else ","
        )
        for _ in zip(range(how.count + 1), reader, strict=False):
            pass
        lines = text.split("\n")[: reader.line_num]
        return ("\n".join(lines) + "\n").encode()
    if how.kind == "smart":
        starts = [m.start() for m in re.finditer(r"^\.I ", text, re.M)]
        return text[: starts[how.count]].encode() if len(starts) > how.count else data
    closing = f"</{how.tag}>"
    ends = [m.end() for m in re.finditer(re.escape(closing), text)]
    if len(ends) <= how.count:
        return data
    return (text[: ends[how.count - 1]] + text[ends[-1] :]).encode()


def _source_files(manifest: Manifest) -> list[tuple[str, Path]]:
    """(format, path) of every file a manifest reads, a topic file's narratives file included."""
    files = []
    for source in manifest.sources:
        files.append((source.format, source.path))
        narratives = source.options.get("narratives")
        if narratives:
            files.append((source.format, source.path.parent / narratives))
    return files


@dataclass(frozen=True)
class Corpus:
    """Excerpts of the real collections, one folder per manifest (the manifest beside them),
    plus two built collections (the demo and the CLEF excerpt) and answer seeds to score."""

    root: Path
    targets: tuple[tuple[str, str], ...]  # (manifest, file relative to its data folder)
    indexes: Path
    answers: tuple[tuple[str, str], ...]  # (collection, answer file relative to root/answers)

    def data(self, name: str) -> Path:
        return self.root / name


def run_nrp(*argv: str) -> tuple[int, str, str]:
    """``nrp ARGV`` in this process: exit code, stdout, stderr. An exception escapes (a crash)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"shared data not available: {SHARED_DATA} (clone with ../shared beside the repo)"
        )
    root = tmp_path_factory.mktemp("corpus")
    targets = []
    for name in MANIFESTS:
        manifest_file = ROOT / "manifests" / f"{name}.yaml"
        real_root = SHARED_DATA / name
        manifest = Manifest.load(manifest_file, data_root=real_root)
        folder = root / name
        for fmt, path in _source_files(manifest):
            relative = path.relative_to(real_root)
            seed = excerpt(path.read_bytes(), EXCERPTS[fmt], path.suffix.lower())
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_bytes(seed)
            targets.append((name, str(relative)))
        shutil.copy(manifest_file, folder / "manifest.yaml")
        code, _, err = run_nrp("ingest", str(folder / "manifest.yaml"), "--data-root", str(folder),
                               "--indexes", str(root / "check"), "--name", name)  # fmt: skip
        assert code == 0, f"the unmutated excerpt of {name} must ingest: {err}"
    indexes = root / "indexes"
    assert run_nrp("ingest", str(DEMO / "manifest.yaml"), "--indexes", str(indexes))[0] == 0
    clef = root / "clef-ehealth-2021"
    assert run_nrp("ingest", str(clef / "manifest.yaml"), "--data-root", str(clef),
                   "--indexes", str(indexes), "--name", "clef")[0] == 0  # fmt: skip
    answers = root / "answers"
    (answers / "gpt2").mkdir(parents=True)
    demo_answers = "".join((DEMO / "answers.jsonl").read_text().splitlines(keepends=True)[:8])
    (answers / "demo.jsonl").write_text(demo_answers)
    wide = SHARED_DATA / "clef-ehealth-2021" / "answers" / "gpt2" / "q.csv"
    (answers / "gpt2" / "q.csv").write_bytes(excerpt(wide.read_bytes(), Excerpt("csv", 3), ".csv"))
    seeds = (("demo", "demo.jsonl"), ("clef", "gpt2/q.csv"))
    for collection, file in seeds:
        code, _, err = score(indexes, collection, answers / file, root / "out-check")
        assert code == 0, f"the unmutated answers {file} must score: {err}"
    return Corpus(root, tuple(targets), indexes, seeds)


def score(indexes: Path, collection: str, answers: Path, out: Path, *extra: str):
    return run_nrp("score", collection, str(answers), "--ranker", "tfidf", "--out", str(out),
                   "--indexes", str(indexes), "--no-cache", *extra)  # fmt: skip


# --- mutations -----------------------------------------------------------------------------------

# What a number in the data (an id, a grade, a sample) is replaced with by the "number" operation.
NUMBERS = [
    b"9" * 25, b"9" * 5000, b"0" * 30, "\u00b2".encode(), "\u0663".encode(), "\uff19".encode(),
    b"-1", b"+7", b"1e400", b"-1e400", b"nan", b"0x1F", b"1_000", b"2147483648",
    b"1180591620717411303424",
]  # fmt: skip
OPERATIONS = ("insert", "delete", "replace", "duplicate", "truncate", "swap", "number")
operation = st.tuples(
    st.sampled_from(OPERATIONS),
    st.floats(0, 1),
    st.integers(1, 80),
    st.one_of(st.sampled_from(TOKENS), st.binary(min_size=1, max_size=8)),
)
DIGITS = re.compile(rb"[0-9]+")


def mutate(seed: bytes, operations: list[tuple[str, float, int, bytes]]) -> bytes:
    """``seed`` with each operation applied at its relative position."""
    data = bytearray(seed)
    for name, where, length, token in operations:
        at = int(where * len(data))
        if name == "insert":
            data[at:at] = token
        elif name == "delete":
            del data[at : at + length]
        elif name == "replace":
            data[at : at + len(token)] = token
        elif name == "duplicate":
            data[at:at] = data[at : at + length * 8]
        elif name == "truncate":
            del data[at:]
        elif name == "number":  # the next number (an id, a grade, a sample) made odd
            found = DIGITS.search(data, at) or DIGITS.search(data)
            if found is not None:
                data[found.start() : found.end()] = NUMBERS[length % len(NUMBERS)]
        else:  # swap two lines: records out of order, a header moved down
            lines = bytes(data).split(b"\n")
            i, j = at % len(lines), length % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
    return bytes(data)


def contents(seed: bytes) -> st.SearchStrategy[bytes]:
    """Random bytes (a tenth of the cases) or mutations of the seed."""
    mutations = st.lists(operation, min_size=1, max_size=4).map(lambda ops: mutate(seed, ops))
    return st.one_of(st.binary(max_size=400), mutations, mutations, mutations, mutations)


# --- checks --------------------------------------------------------------------------------------


def assert_clean_failure(code: int, err: str, work: Path) -> None:
    """Exit 2 and one line ``nrp: error: ...`` that names a file of this case, not too long."""
    assert code == 2, f"exit {code}: {err}"
    event("one-line error" if re.search(r":\d+: ", err) else "one-line error without a line")
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("nrp: error: "), err
    assert str(work) in lines[0], f"the error names no input file: {err}"
    assert len(lines[0]) <= MAX_MESSAGE_CHARS, f"{len(lines[0])} characters: {lines[0][:300]}"


FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(FUZZ, max_examples=600)
@given(data=st.data())
def test_ingest_survives_mutated_inputs(corpus, data):
    """One input file of a real manifest mutated: ingest succeeds or fails in one line, and a
    failed ingest leaves no store (nor a partial one) behind."""
    name, relative = data.draw(st.sampled_from(corpus.targets), label="target")
    seed = (corpus.data(name) / relative).read_bytes()
    content = data.draw(contents(seed), label="content")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(corpus.data(name), work / "data")
        (work / "data" / relative).write_bytes(content)
        _check_ingest(work, work / "data" / "manifest.yaml")


@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_ingest_survives_mutated_manifests(corpus, data):
    """The manifest itself mutated (YAML syntax, keys, paths, label scales)."""
    name = data.draw(st.sampled_from(MANIFESTS), label="manifest")
    seed = (corpus.data(name) / "manifest.yaml").read_bytes()
    content = data.draw(contents(seed), label="content")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(corpus.data(name), work / "data")
        (work / "data" / "manifest.yaml").write_bytes(content)
        _check_ingest(work, work / "data" / "manifest.yaml")


@settings(FUZZ, max_examples=80)
@given(data=st.data())
def test_ingest_survives_mutated_toml_manifests(corpus, data):
    """The demo manifest as TOML, mutated: TOML errors name their line too."""
    import tomllib  # noqa: F401  (the TOML seed is written by hand below)

    seed = DEMO_TOML.encode()
    content = data.draw(contents(seed), label="content")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(DEMO, work / "data")
        (work / "data" / "manifest.toml").write_bytes(content)
        _check_ingest(work, work / "data" / "manifest.toml")


DEMO_TOML = """name = "demo"
data_root = "."

[dimensions.relevance.grades]
0 = "not relevant"
1 = "partly relevant"
2 = "highly relevant"

[dimensions.readability.grades]
0 = "hard"
1 = "somewhat"
2 = "easy"

[[sources]]
format = "table"
path = "topics.tsv"
holds = "topics"

[[sources]]
format = "table"
path = "documents.tsv"
holds = "documents"

[[sources]]
format = "table"
path = "qrels.tsv"
holds = "judgments"
dimensions = ["relevance", "readability"]
"""


def _check_ingest(work: Path, manifest: Path) -> None:
    indexes = work / "indexes"
    code, _, err = run_nrp("ingest", str(manifest), "--data-root", str(manifest.parent),
                           "--indexes", str(indexes), "--name", "fuzzed")  # fmt: skip
    store = indexes / "fuzzed"
    if code == 0:
        event("ingested")
        assert (store / "collection.sqlite").is_file()
        return
    assert_clean_failure(code, err, work)
    leftovers = sorted(p.name for p in store.iterdir()) if store.is_dir() else []
    assert leftovers == [], f"a failed ingest left {leftovers} in {store}"


@settings(FUZZ, max_examples=200)
@given(data=st.data())
def test_score_survives_mutated_answers(corpus, data):
    """An answer file (JSON Lines, or the wide CSV layout) mutated and scored: results or one
    line; a failure writes no results folder."""
    collection, relative = data.draw(st.sampled_from(corpus.answers), label="answers")
    seed = (corpus.root / "answers" / relative).read_bytes()
    content = data.draw(contents(seed), label="content")
    skip = data.draw(st.booleans(), label="skip_invalid")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        answers = work / relative
        answers.parent.mkdir(parents=True, exist_ok=True)
        answers.write_bytes(content)
        out = work / "out"
        flags = ("--skip-invalid",) if skip else ()
        code, _, err = score(corpus.indexes, collection, answers, out, *flags)
        if code == 0:
            event("scored")
            assert (out / "results.parquet").is_file() and (out / "results.csv").is_file()
            return
        assert_clean_failure(code, err, work)
        assert not out.exists(), f"a failed score left {sorted(out.iterdir())}"
