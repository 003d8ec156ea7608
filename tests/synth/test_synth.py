"""``nrp synth``: passages, reading pairs, each filter with exact outcomes, the whole run with a
scripted LLM (known pairs, known drops), resume and cache (a re-run makes no LLM call), the
command end to end over real HTTP against nrp's OpenAI-compatible server, and bad input."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_llm import EXPECTED, ScriptedLLM, Served, write_documents

from nrp.cli import main
from nrp.collection.collection import Collection
from nrp.errors import InputError
from nrp.generation.generate import derive_seed
from nrp.synth.documents import read_documents, sentence_chunks, sentences
from nrp.synth.filters import (
    NearDuplicates,
    detect_language,
    jaccard,
    refers_to_text,
    same_language,
    shingle_set,
    verbatim_overlap,
)
from nrp.synth.kinds import KINDS, answer_fits, parse_pair, template_file
from nrp.synth.synth import _support, make_units, synthesize, used_passages

#: the test documents cut as the tests cut them: the English document's two paragraphs are two
#: passages (together they are over 260 characters), the Vietnamese one is one
SETTINGS = {"passage_chars": 260, "min_passage_chars": 100}


# -- passages ----------------------------------------------------------------------------------
def test_sentences_split_at_ends_even_without_a_space():
    text = "bão Trà Mi (bão số 6).Theo báo cáo, gần 190.000 người sơ tán. Xong rồi"
    assert sentences(text) == [
        "bão Trà Mi (bão số 6).",
        "Theo báo cáo, gần 190.000 người sơ tán.",
        "Xong rồi",
    ]


def test_sentence_chunks_packs_sentences_and_joins_a_short_tail():
    text = "Aaaa aaaa. Bbbb bbbb.\nCccc cccc cccc. Dd."
    # max 25: "Aaaa aaaa. Bbbb bbbb." (21) is full; "Cccc cccc cccc. Dd." (19) next
    assert sentence_chunks(text, 25, 5) == ["Aaaa aaaa. Bbbb bbbb.", "Cccc cccc cccc. Dd."]
    # min 20: the 19-character tail joins the passage before it
    assert sentence_chunks(text, 25, 20) == ["Aaaa aaaa. Bbbb bbbb. Cccc cccc cccc. Dd."]
    # a sentence over the limit is cut at the last space before it
    assert sentence_chunks("one two three four five six", 10, 1) == [
        "one two",
        "three four",
        "five six",
    ]
    assert sentence_chunks("Too short.", 100, 50) == []


def test_units_rotate_kinds_and_pair_consecutive_passages(tmp_path):
    from nrp.synth.documents import document_passages

    docs, report = read_documents(write_documents(tmp_path / "docs"))
    passages = document_passages(docs, 260, 100, report)
    assert [p.docno for p in passages] == ["pho#p1", "river#p1", "river#p2"]
    every = make_units(passages, ("factual", "multi"), 0, 0)
    assert [(u.kind, u.uid) for u in every] == [
        ("factual", "P0001"),
        ("factual", "P0002"),
        ("factual", "P0003"),
        ("multi", "P0002+P0003"),
    ]
    # one kind per anchor (the first passage of each document), rotating: anchor 1 gets
    # kinds[0] (multi, impossible on pho's only passage: factual), anchor 2 kinds[1] (factual)
    one = make_units(passages, ("multi", "factual", "yesno"), 1, 1)
    assert [(u.kind, u.uid) for u in one] == [("factual", "P0001"), ("factual", "P0002")]
    one = make_units(passages, ("yesno", "multi", "factual"), 1, 1)
    assert [(u.kind, u.uid) for u in one] == [("yesno", "P0001"), ("multi", "P0002+P0003")]
    assert [p.docno for p in used_passages(passages, one)] == ["pho#p1", "river#p1", "river#p2"]
    assert [p.docno for p in used_passages(passages, every[:1])] == ["pho#p1"]


# -- reading pairs -----------------------------------------------------------------------------
def test_parse_pair_forms():
    assert parse_pair("Question: Where?\nAnswer: Here.") == ("Where?", "Here.")
    assert parse_pair("Sure!\n**Q1:** Where is it?\n**A1:** In Hue.\nQ2: more?\nA2: x") == (
        "Where is it?",
        "In Hue.",
    )
    assert parse_pair("Câu hỏi: Ở đâu?\nCâu trả lời: Ở Huế.") == ("Ở đâu?", "Ở Huế.")
    assert parse_pair('Question: spans\ntwo lines\nAnswer: "quoted"') == (
        "spans two lines",
        "quoted",
    )
    assert parse_pair('Question: "Is it far?" Yes, 3 km.\nQuestion: next?') == (
        "Is it far?",
        "Yes, 3 km.",
    )
    unreadable_replies = (
        "",
        "Q: Q: nothing else",
        "Question: Is it far?",
        "Answer: no question",
        "Question: \nAnswer: x",
        "Question: ...\nAnswer: ...",
    )
    for unreadable in unreadable_replies:
        assert parse_pair(unreadable) is None


def test_yes_no_answers_need_a_yes_or_no_word():
    yesno = KINDS["yesno"]
    assert [answer_fits(yesno, a) for a in ("Yes, it is.", "Không, vì...", "Có.", "Yesterday")] == [
        True,
        True,
        True,
        False,
    ]
    assert answer_fits(KINDS["factual"], "Yesterday")


# -- filters -----------------------------------------------------------------------------------
def test_language_detection_and_matching():
    assert detect_language("Bão Trami có thể tăng liền 3 cấp") == "vi"
    assert detect_language("The storm may strengthen") == "latin"
    assert detect_language("Café crème brûlée") == "latin"  # é, è, û: not Vietnamese alone
    assert detect_language("Шторм усилится") == "cyrillic"
    assert detect_language("台风可能增强") == "cjk"
    assert detect_language("190.000") == "und"
    vietnamese = "Bão Trami có thể tăng liền 3 cấp sau khi vào Biển Đông."
    assert same_language(vietnamese, "Bão có mạnh lên không?", "Có, 3 cấp.")
    assert not same_language(vietnamese, "Will the storm strengthen?", "Có, 3 cấp.")
    assert same_language(vietnamese, "Bão tăng mấy cấp?", "3")  # a number matches any


def test_refers_to_text_in_english_and_vietnamese():
    found = [
        refers_to_text(q)
        for q in (
            "According to the text, who won?",
            "What does the passage say about dams?",
            "Based on this article, when did it open?",
            "Theo văn bản, ai thắng?",
            "Theo bài viết, bão đổ bộ khi nào?",
            "Trong đoạn văn trên, tỉnh nào được nhắc đến?",
            "Đoạn văn này nói về điều gì?",
            "Who won the 2024 election?",
            "Bão Trami đổ bộ vào đâu?",
            "What is the text of the law?",
        )
    ]
    assert found == [
        "According to the text",
        "the passage say",
        "Based on this article",
        "Theo văn bản",
        "Theo bài viết",
        "Trong đoạn văn",
        "Đoạn văn này",
        None,
        None,
        None,
    ]


def test_verbatim_overlap_is_the_longest_shared_run():
    passage = "The Alder River rises in the Grey Hills and flows east."
    # "the grey hills" (3 words) of 6: 0.5
    assert verbatim_overlap("Where are the Grey Hills located?", passage) == pytest.approx(3 / 6)
    assert verbatim_overlap("The Alder River rises in the Grey Hills?", passage) == 1.0
    assert verbatim_overlap("???", passage) == 0.0


def test_near_duplicates_by_shingle_jaccard():
    a, b = shingle_set("How long is the Alder?"), shingle_set("how long is the alder??")
    assert a == b and jaccard(a, b) == 1.0
    # "abcdef" and "abcdeg": 5-grams {abcde, bcdef} and {abcde, bcdeg}: 1 shared of 3
    assert jaccard(shingle_set("abcdef"), shingle_set("abcdeg")) == pytest.approx(1 / 3)
    seen = NearDuplicates(0.8)
    assert seen.check("q1", "How long is the Alder?") is None
    assert seen.check("q2", "How long is the Alder river?") is None  # 18/23 shared: 0.78
    assert seen.check("q3", "HOW LONG is the alder") == ("q1", 1.0)
    assert [i for i, _ in seen.kept] == ["q1", "q2"]


def test_support_filter_outcomes(tmp_path):
    passage = "The Alder River flows 412 kilometres."
    answers = ["412 kilometres.", "Yes, every hour.", "Not in the passage.", "Wrong.", "Odd."]
    candidates = [
        {"item_id": f"i{n}", "question": "How long?", "answer": a, "_text": passage, "stage": None}
        for n, a in enumerate(answers)
    ]
    candidates.append({**candidates[0], "item_id": "gone", "stage": "parse"})
    llm = ScriptedLLM()
    from collections import Counter

    from nrp.synth.synth import SynthSettings

    calls = Counter()
    _support(candidates, SynthSettings(support_threshold=0.5), llm, tmp_path, calls)
    outcome = [(c.get("kept"), c["stage"], c.get("reason")) for c in candidates]
    assert outcome == [
        (True, None, None),
        (None, "support", "TRUE with confidence below 0.5"),
        (None, "support", "judge says NOT GIVEN"),
        (None, "support", "judge says FALSE"),
        (None, "support", "judge output has no label"),
        (None, "parse", None),
    ]
    assert [c["support_confidence"] for c in candidates] == [0.9, 0.3, 0.9, 0.9, None, None]
    assert calls["support"] == 5 and llm.calls == 5


# -- the whole run -----------------------------------------------------------------------------
def _stages(result) -> dict[str, str]:
    return {
        r["item_id"]: "kept" if r["kept"] else r["stage"] for r in result.items.to_dict("records")
    }


def test_run_with_a_scripted_llm_and_resume(tmp_path):
    docs = write_documents(tmp_path / "docs")
    llm = ScriptedLLM()
    out = tmp_path / "indexes" / "synth-test"
    result = synthesize(docs, "openai:name=scripted", out, backend=llm, **SETTINGS)
    assert _stages(result) == EXPECTED
    report = result.report
    assert report["documents"] == {
        "read": 2,
        "skipped": {"empty document": 1, "not UTF-8": 1, "not .txt/.md/.html/.htm": 1},
    }
    assert (report["passages"], report["prompts"], report["candidates"]) == (3, 10, 10)
    assert [(s["stage"], s["dropped"], s["remaining"]) for s in report["stages"]] == [
        ("parse", 2, 8),
        ("language", 1, 7),
        ("refers_to_text", 2, 5),
        ("verbatim", 1, 4),
        ("near_duplicate", 1, 3),
        ("support", 1, 2),
    ]
    assert report["stages"][0]["reasons"] == {
        "empty reply": 1,
        "yes/no answer does not start with yes or no": 1,
    }
    assert report["kept"] == 2
    assert report["llm_calls"] == {
        "generation": 10,
        "generation_from_store": 0,
        "support": 3,
        "support_from_cache": 0,
    }
    assert llm.calls == 13
    # provenance per item
    kept = result.items[result.items["kept"]].set_index("item_id")
    row = kept.loc["factual-P0002-0"]
    template = template_file("factual")
    assert (row["model"], row["checksum"], row["prompt"]) == (
        "scripted",
        "scripted-v1",
        "factual-v1",
    )
    assert row["prompt_sha256"] == hashlib.sha256(template.read_bytes()).hexdigest()
    assert row["seed"] == derive_seed(0, "P0002", "factual-v1:chat", 0)
    # the collection
    collection = Collection(out)
    assert collection.topics["qid"].tolist() == ["factual-P0002-0", "yesno-P0001-0"]
    assert collection.topics["query"].tolist() == [
        "How long is the Alder River?",
        "Phở có xuất hiện ở miền Bắc không?",
    ]
    assert sorted(collection.docs["docno"]) == ["pho#p1", "river#p1", "river#p2"]
    lines = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert [x["item_id"] for x in lines] == list(EXPECTED)
    empty = lines[2]  # factual-P0003-0: the empty reply, kept with its provenance
    assert (empty["question"], empty["raw"], empty["reason"]) == (None, "", "empty reply")
    assert empty["prompt"] == "factual-v1" and empty["checksum"] == "scripted-v1"
    assert empty["seed"] == derive_seed(0, "P0003", "factual-v1:chat", 0)
    assert empty["prompt_sha256"] == row["prompt_sha256"]
    assert "near_duplicate" in (out / "report.md").read_text()

    # a finished run re-run: no LLM call, the same items
    again = ScriptedLLM()
    rerun = synthesize(docs, "openai:name=scripted", out, backend=again, **SETTINGS)
    assert again.calls == 0
    assert rerun.report["llm_calls"] == {
        "generation": 0,
        "generation_from_store": 10,
        "support": 0,
        "support_from_cache": 3,
    }
    assert _stages(rerun) == EXPECTED


def test_an_interrupted_run_continues(tmp_path):
    docs = write_documents(tmp_path / "docs")
    out = tmp_path / "indexes" / "synth-resume"
    with pytest.raises(RuntimeError, match="stopped"):
        synthesize(docs, "openai:name=scripted", out, backend=ScriptedLLM(fail_after=4), **SETTINGS)
    assert not (out / "collection.sqlite").exists()
    llm = ScriptedLLM()
    result = synthesize(docs, "openai:name=scripted", out, backend=llm, **SETTINGS)
    assert result.report["llm_calls"]["generation_from_store"] == 4
    assert result.report["llm_calls"]["generation"] == 6
    assert llm.calls == 6 + 3
    assert _stages(result) == EXPECTED


def test_table_input_counts_empty_documents(tmp_path):
    table = tmp_path / "articles.csv"
    pd.DataFrame(
        {
            "url": ["u1", "u2", "u3", "u1"],
            "content": ["Một. Hai.", "", "Ba.", "Một.  Hai."],
            "title": ["T1", "", "", "T1"],
        }
    ).to_csv(table, index=False)
    from nrp.synth.documents import TableColumns

    docs, report = read_documents(table, TableColumns("url", "content", "title"))
    assert [(d.docno, d.text, d.title) for d in docs] == [
        ("u1", "Một. Hai.", "T1"),
        ("u3", "Ba.", None),
    ]
    assert (report.read, dict(report.skipped)) == (
        2,
        {"empty document": 1, "identical duplicate document": 1},
    )
    table.write_text("url,content\nu1,Một.\nu1,Hai.\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"articles.csv:3: document id 'u1' appears twice with"):
        read_documents(table, TableColumns("url", "content"))


# -- the command, over HTTP --------------------------------------------------------------------
def test_command_end_to_end_over_http(tmp_path, capsys):
    docs = write_documents(tmp_path / "docs")
    indexes = tmp_path / "indexes"
    llm = ScriptedLLM()
    with Served(llm) as server:
        spec = f"openai:base_url={server.base_url},name=scripted"
        code = main(
            ["synth", str(docs), "--llm", spec, "--out", str(indexes / "qa"),
             "--passage-chars", "260", "--min-passage-chars", "100"]
        )  # fmt: skip
        printed = capsys.readouterr()
        assert code == 0, printed.err
        assert "near_duplicate" in printed.out and "kept: 2" in printed.out
        # the collection works with the other commands
        assert main(["info", "qa", "--indexes", str(indexes)]) == 0
        info = capsys.readouterr().out
        assert "qa" in info
        answers = tmp_path / "answers.jsonl"
        code = main(
            ["generate", "qa", "--llm", spec, "--prompts", "short-qa", "--samples", "1",
             "--out", str(answers), "--indexes", str(indexes)]
        )  # fmt: skip
        assert code == 0
    assert llm.calls == 13 + 2  # synth's 10 + 3, then an answer per kept question
    code = main(
        ["evaluate", "qa", str(answers), "--evaluators", "bleu", "--out", str(tmp_path / "ev"),
         "--indexes", str(indexes)]
    )  # fmt: skip
    assert code == 0
    items = [json.loads(x) for x in (indexes / "qa" / "items.jsonl").read_text().splitlines()]
    kept = [x for x in items if x["kept"]]
    assert {x["checksum"] for x in kept} == {"openai:scripted"}
    assert {x["model"] for x in kept} == {"scripted"}


# -- bad input ---------------------------------------------------------------------------------
def _one_line_error(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "\n" not in err and "Traceback" not in err
    return err


def test_bad_command_input_is_one_line_exit_2(tmp_path, capsys):
    docs = write_documents(tmp_path / "docs")
    out = str(tmp_path / "indexes" / "qa")
    missing = _one_line_error(
        capsys, ["synth", str(tmp_path / "nope"), "--llm", "local", "--out", out]
    )
    assert "nope: file or folder not found" in missing
    bad_llm = _one_line_error(
        capsys, ["synth", str(docs), "--llm", "openai:colour=red", "--out", out]
    )
    assert "colour" in bad_llm
    bad_kind = _one_line_error(
        capsys, ["synth", str(docs), "--llm", "local", "--out", out, "--kinds", "riddles"]
    )
    assert "unknown question kind(s) riddles" in bad_kind
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "mine.txt").write_text("x")
    taken = _one_line_error(capsys, ["synth", str(docs), "--llm", "local", "--out", str(occupied)])
    assert "folder is not empty and holds no nrp synth output" in taken
    latin1 = tmp_path / "docs.csv"
    latin1.write_bytes("docno,text\nd1,Caf\xe9 au lait\n".encode("latin-1"))
    not_utf8 = _one_line_error(capsys, ["synth", str(latin1), "--llm", "local", "--out", out])
    assert f"{latin1}:2: not valid UTF-8" in not_utf8
    no_column = _one_line_error(
        capsys, ["synth", str(docs / ".." / "docs.csv"), "--llm", "local", "--out", out,
                 "--text-column", "body"]
    )  # fmt: skip
    assert "docs.csv" in no_column
    assert not Path(out).exists()


def test_own_templates_replace_the_packaged_ones(tmp_path, capsys):
    from nrp.generation.prompts import load_prompt
    from nrp.synth.kinds import KIND_NAMES, prompt_spec

    examples = Path(__file__).resolve().parents[2] / "docs" / "examples" / "synth-vi"
    for kind in KIND_NAMES:
        strategy = load_prompt(prompt_spec(kind, examples))
        assert strategy.label == f"{kind}-v1:chat"
        assert "Câu hỏi: ..." in strategy.render("PASSAGE") and "PASSAGE" in strategy.render(
            "PASSAGE"
        )
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "factual-v1.txt").write_text("[[prompt]]\nAsk: {{query}}\n")
    (tmp_path / "mine" / "factual-v2.txt").write_text("[[prompt]]\nQuestion please: {{query}}\n")
    assert template_file("factual", tmp_path / "mine").name == "factual-v2.txt"
    docs = write_documents(tmp_path / "docs")
    err = _one_line_error(
        capsys, ["synth", str(docs), "--llm", "local", "--out", str(tmp_path / "qa"),
                 "--templates", str(tmp_path / "mine")]
    )  # fmt: skip
    assert "no prompt template yesno-vN.txt for kind 'yesno'" in err


def test_no_pair_kept_writes_the_report_and_no_collection(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "other.txt").write_text("Nothing in the script mentions this text. " * 8)
    llm = ScriptedLLM()
    out = tmp_path / "indexes" / "none"
    result = synthesize(docs, "openai:name=scripted", out, backend=llm, kinds="factual")
    assert result.collection is None and result.report["kept"] == 0
    assert result.report["stages"][0]["reasons"] == {"no Question:/Answer: pair in the reply": 1}
    assert (out / "report.md").exists() and not (out / "collection.sqlite").exists()
