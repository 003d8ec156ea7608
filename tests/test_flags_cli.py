"""Flags of degenerate answers through the commands, on a hand-built collection
(tests/flag_collection.py) scored with TF-IDF: ``nrp score`` writes flags.csv beside unchanged
results, ``nrp summary`` and ``nrp report`` show the share of flagged answers per LLM x prompt,
``nrp check --max-flagged`` fails the echo system and passes real answers, and bad input is one
line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from flag_collection import ANSWERS, write_collection

from nrp import ingest
from nrp.cli import main
from nrp.positioning.scoring import RESULT_COLUMNS


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    root = tmp_path_factory.mktemp("flag-collection")
    ingest(write_collection(root / "data"), indexes_dir=root / "ix")
    return str(root / "ix")


def score(indexes, tmp_path, answers, name: str) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(a) + "\n" for a in answers))
    out = tmp_path / name
    code = main(["score", "flag-tiny", str(path), "--ranker", "relevance=tfidf",
                 "--out", str(out), "--indexes", indexes])  # fmt: skip
    assert code == 0
    return str(out)


@pytest.fixture(scope="module")
def scored(indexes, tmp_path_factory):
    return score(indexes, tmp_path_factory.mktemp("scored"), ANSWERS, "all")


def run(capsys, *args: str) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_score_writes_flags_beside_unchanged_results(scored):
    results = pd.read_csv(f"{scored}/results.csv")
    assert list(results.columns) == list(RESULT_COLUMNS)
    assert len(results) == 6 * 2  # 6 answers x (relevance + the weighted sum)
    flags = pd.read_csv(f"{scored}/flags.csv", dtype={"qid": str}, keep_default_na=False)
    assert flags["answer_id"].tolist() == [a["answer_id"] for a in ANSWERS]
    assert flags["flags"].tolist() == [
        "question_words,little_content", "question_words,little_content",  # echo
        "", "",  # real
        "judged_copy", "",  # copy: q1 a near copy of c1
    ]  # fmt: skip
    assert flags["flagged"].tolist() == [True, True, False, False, True, False]


def test_check_max_flagged_fails_the_echo_system(scored, capsys):
    code, lines, err = run(capsys, "check", scored, "--max-flagged", "0.5")
    assert (code, err) == (1, "")
    assert lines == [
        "nrp check: FAIL echo/plain flagged: share of flagged answers 1.000 > 0.5 "
        "(2 of 2 answers: question_words 2, little_content 2)",
        "nrp check: PASS real/plain flagged: share of flagged answers 0.000 <= 0.5 "
        "(0 of 2 answers)",
        "nrp check: PASS copy/plain flagged: share of flagged answers 0.500 <= 0.5 "
        "(1 of 2 answers: judged_copy 1)",  # on the limit: not above it
    ]
    # with an NRP threshold too: the NRP lines first, then the flags'
    code, lines, _ = run(capsys, "check", scored, "--min-nrp", "0", "--max-flagged", "1")
    assert code == 0 and len(lines) == 6
    assert [line.split(":")[1].split()[-1] for line in lines] == ["weighted"] * 3 + ["flagged"] * 3
    # a baseline without --no-worse is reported (itself: no difference), then the flags gate
    code, lines, err = run(capsys, "check", scored, "--baseline", scored, "--max-flagged", "0.5")
    assert (code, err) == (1, "") and len(lines) == 6
    assert all(line.endswith("(+0.000 on 2 common queries, Holm p 1.000 >= 0.05)")
               for line in lines[:3])  # fmt: skip
    assert [line.split(":")[1].split()[-1] for line in lines] == ["weighted"] * 3 + ["flagged"] * 3


def test_check_max_flagged_passes_real_answers(indexes, tmp_path, capsys):
    real = score(indexes, tmp_path, [a for a in ANSWERS if a["llm"] == "real"], "real")
    code, lines, _ = run(capsys, "check", real, "--max-flagged", "0")
    assert code == 0
    assert lines == [
        "nrp check: PASS real/plain flagged: share of flagged answers 0.000 <= 0 (0 of 2 answers)"
    ]


def test_summary_shows_the_share_of_flagged_answers(scored, tmp_path, capsys):
    code, lines, _ = run(capsys, "summary", scored, "--details", "--out", str(tmp_path / "summary"))
    assert code == 0
    start = lines.index("flagged answers (flags.csv): share of answers with any flag, and with "
                        "each flag")  # fmt: skip
    assert [line.split() for line in lines[start + 1 : start + 5]] == [
        [
            "llm",
            "prompt",
            "answers",
            "flagged",
            "empty",
            "question_words",
            "judged_copy",
            "little_content",
        ],
        ["echo", "plain", "2", "100.0%", "0.0%", "100.0%", "0.0%", "100.0%"],
        ["real", "plain", "2", "0.0%", "0.0%", "0.0%", "0.0%", "0.0%"],
        ["copy", "plain", "2", "50.0%", "0.0%", "0.0%", "50.0%", "0.0%"],
    ]
    data = json.loads((tmp_path / "summary" / "summary.json").read_text())
    assert [(r["llm"], r["n_flagged"], r["share_flagged"]) for r in data["flags"]] == [
        ("echo", 2, 1.0), ("real", 0, 0.0), ("copy", 1, 0.5),
    ]  # fmt: skip
    table = pd.read_csv(tmp_path / "summary" / "summary_flags.csv")
    assert table["share_judged_copy"].tolist() == [0.0, 0.0, 0.5]


def test_report_shows_the_share_per_llm_and_prompt(scored, tmp_path, capsys):
    code, _, err = run(capsys, "report", scored, "--out", str(tmp_path / "report"))
    assert code == 0, err
    table = pd.read_csv(tmp_path / "report" / "tables" / "nrp_flags.csv")
    assert table[["llm", "n_answers", "n_flagged", "share_flagged"]].values.tolist() == [
        ["echo", 2, 2, 1.0], ["real", 2, 0, 0.0], ["copy", 2, 1, 0.5],
    ]  # fmt: skip
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<th>share flagged</th>" in page and "nrp_flags.csv" in page
    manifest = json.loads((tmp_path / "report" / "report.json").read_text())
    assert manifest["inputs"]["flags"] == f"{scored}/flags.csv"


def test_without_flags_summary_shows_no_flag_table(scored, tmp_path, capsys):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "results.csv").write_bytes((Path(scored) / "results.csv").read_bytes())
    code, lines, _ = run(capsys, "summary", str(bare), "--out", str(tmp_path / "summary"))
    assert code == 0 and not any(line.startswith("flagged answers") for line in lines)
    assert json.loads((tmp_path / "summary" / "summary.json").read_text())["flags"] is None
    assert not (tmp_path / "summary" / "summary_flags.csv").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "{bare}", "--max-flagged", "0.5"], "{bare}/flags.csv: file not found"),
        (["check", "{missing}", "--max-flagged", "0.5"], "{missing}: file not found (the results)"),
        (
            ["check", "{scored}", "--max-flagged", "1.5"],
            "maximum share of flagged answers (--max-flagged) must lie in [0, 1], not 1.5",
        ),
        (
            ["check", "{bad}", "--max-flagged", "0.5"],
            "{bad}/flags.csv:3: flagged 'maybe' is not True or False",
        ),
        (["summary", "{bad}"], "{bad}/flags.csv:3: flagged 'maybe' is not True or False"),
        (["check", "{scored}"], "nothing to check"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, scored, tmp_path, capsys):
    results = (Path(scored) / "results.csv").read_bytes()
    names = {"scored": scored, "missing": str(tmp_path / "nope")}
    for name in ("bare", "bad"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.csv").write_bytes(results)
        names[name] = str(tmp_path / name)
    flags = pd.read_csv(f"{scored}/flags.csv", dtype=str, keep_default_na=False)
    flags.loc[1, "flagged"] = "maybe"  # the second answer: line 3 of the file
    flags.to_csv(tmp_path / "bad" / "flags.csv", index=False)
    code, lines, err = run(capsys, *[a.format(**names) for a in args])
    assert (code, lines) == (2, [])
    assert err.startswith("nrp: error: ") and err.count("\n") == 1
    assert message.format(**names) in err
