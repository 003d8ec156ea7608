"""liveqa-med-xml, medquad-judged-qrels and medquad-answers: the real TREC 2017 LiveQA-Med test
questions and the 2,479 judged MedQuAD answers with exact counts, the question-number mapping
(qrels N = XML TQN), the manifest end to end, and every error path on small hand-made files."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from nrp import Collection, ingest
from nrp.collection.formats import ReadReport, get_format, read_format
from nrp.collection.formats.liveqa_med import FORMATS
from nrp.collection.records import Document, Judgment, Origin, Reference, Topic
from nrp.errors import ConfigError, InputError

ROOT = Path(__file__).resolve().parents[2]
TEST_XML = ("liveqa-med-2017", "liveqa_test", "TREC-2017-LiveQA-Medical-Test.xml")
SUMMARIES_XML = (
    "liveqa-med-2017",
    "liveqa_test",
    "TREC-2017-LiveQA-Medical-Test-Questions-w-summaries.xml",
)
QRELS = (
    "liveqa-med-2017",
    "medquad_judged",
    "All-qrels_LiveQAMed2017-TestQuestions_2479_Judged-Answers.txt",
)
ANSWERS = ("liveqa-med-2017", "medquad_judged", "All-2479-Answers-retrieved-from-MedQuAD.csv")


def read(name: str, path: Path, **options) -> tuple[list, ReadReport]:
    """Read as ingest does: the format's declared defaults, then the given options."""
    return read_format(name, path, **options)


def write(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def expect_error(name: str, path: Path, line: int | None, fragment: str, **options) -> None:
    with pytest.raises(InputError) as caught:
        read(name, path, **options)
    message = str(caught.value)
    where = f"{path}:{line}:" if line is not None else f"{path}:"
    assert message.startswith(where), message
    assert fragment in message, message
    assert "\n" not in message


def test_registered_with_their_options():
    assert [f.name for f in FORMATS] == [
        "liveqa-med-xml",
        "medquad-judged-qrels",
        "medquad-answers",
    ]
    defaults = {f.name: {k: o.default for k, o in f.options.items()} for f in FORMATS}
    assert defaults == {
        "liveqa-med-xml": {"query": "original"},
        "medquad-judged-qrels": {"dimension": "relevance", "qid_prefix": "TQ"},
        "medquad-answers": {"text": "answer"},
    }
    assert all(get_format(f.name) is f for f in FORMATS)


# --- real data: questions --------------------------------------------------------------------


@pytest.mark.shared_data
@pytest.mark.parametrize(("parts", "first_reference_line"), [(TEST_XML, 15), (SUMMARIES_XML, 16)])
def test_questions_and_references(shared_data, parts, first_reference_line):
    path = shared_data(*parts)
    records, report = read("liveqa-med-xml", path)
    topics = [r for r in records if isinstance(r, Topic)]
    references = [r for r in records if isinstance(r, Reference)]
    assert [t.qid for t in topics] == [f"TQ{n}" for n in range(1, 105)]
    assert len(references) == 167
    assert len({r.ref_id for r in references}) == 167
    assert all(r.ref_id.startswith(r.qid + "A") for r in references)
    assert Counter(Counter(r.qid for r in references).values()) == {1: 54, 2: 40, 3: 8, 4: 1, 5: 1}
    assert report.counts == {}

    first = topics[0]
    assert first.query == (
        "Noonan syndrome. What are the references with noonan syndrome and polycystic renal disease"
    )
    assert first.narrative == (
        "What is the relationship between Noonan syndrome and polycystic renal disease?"
    )
    assert first.origin == Origin(str(path), 3)
    # TQ1 writes <RefAnswer>, every other question <ReferenceAnswer>: both are read
    assert [r.ref_id for r in references[:4]] == ["TQ1A1", "TQ1A2", "TQ1A3", "TQ2A1"]
    assert references[1].text == (
        "10% of patients with Noonan syndrome have renal abnormalities but most do not need "
        "treatment."
    )
    assert references[0].origin == Origin(str(path), first_reference_line)
    # XML line wrapping inside <ANSWER> and <MESSAGE> is folded into single spaces
    assert "\t" not in references[0].text and "\n" not in references[0].text
    by_qid = {t.qid: t for t in topics}
    assert by_qid["TQ103"].query == "What can cause white cells ti uprate"  # empty SUBJECT
    assert by_qid["TQ53"].query.startswith("Nph. Nph. I am interested")  # no doubled period
    assert [q for q, t in by_qid.items() if t.narrative is None] == ["TQ10", "TQ34", "TQ103"]


@pytest.mark.shared_data
def test_original_query_is_the_mediqa_training_question(shared_data):
    """MEDIQA's TrainingSet1 holds the same 104 questions as "SUBJECT. MESSAGE": a cross-check of
    the default query. MEDIQA joined mechanically ("Nph.. Nph.", ". What can" for an empty
    SUBJECT), which this reader does not copy, and dropped the de-identification placeholders
    ([NAME], [DATE], [CONTACT], [LOCATION]) of four questions, which this reader keeps."""
    from nrp.collection.formats.mediqa import FORMAT as MEDIQA

    mediqa = shared_data("mediqa-2019", "MEDIQA2019-Task3-QA-TrainingSet1-LiveQAMed.xml")
    defaults = {k: o.default for k, o in MEDIQA.options.items()}
    training = {
        "TQ" + r.qid: r.query
        for r in MEDIQA.read(mediqa, defaults, ReadReport())
        if isinstance(r, Topic)
    }
    topics = [r for r in read("liveqa-med-xml", shared_data(*TEST_XML))[0] if isinstance(r, Topic)]
    assert len(training) == len(topics) == 104
    joined_differently = [t.qid for t in topics if training[t.qid] != t.query]
    assert len(joined_differently) == 18

    def undouble(text: str) -> str:
        return re.sub(r"([.?!:])\. ", r"\1 ", text.removeprefix(". "))

    differ = [t.qid for t in topics if undouble(training[t.qid]) != undouble(t.query)]
    assert differ == ["TQ14", "TQ24", "TQ28", "TQ53"]
    placeholders = [
        ("TQ14", "[CONTACT]"),
        ("TQ24", "[DATE]"),
        ("TQ28", "[NAME]"),
        ("TQ53", "[LOCATION]"),
    ]
    for qid, placeholder in placeholders:
        query = next(t.query for t in topics if t.qid == qid)
        assert placeholder in query and placeholder not in training[qid]


@pytest.mark.shared_data
def test_query_options(shared_data):
    path = shared_data(*SUMMARIES_XML)
    records, report = read("liveqa-med-xml", path, query="paraphrase")
    topics = {r.qid: r for r in records if isinstance(r, Topic)}
    assert topics["TQ2"].query == "Do 5 mg. Zolmitriptan tabkets contain gluten?"
    assert topics["TQ2"].narrative is None
    assert topics["TQ10"].query.startswith("Diabetes and pain control. How can I narrow")
    assert report.counts == {
        "liveqa-med-xml: empty NIST-PARAPHRASE, original question used as query": 3
    }
    assert len(report.warnings) == 3 and report.warnings[0].startswith(f"{path}:")

    records, report = read("liveqa-med-xml", path, query="summary")
    topics = {r.qid: r for r in records if isinstance(r, Topic)}
    assert topics["TQ2"].query == (
        "Do Zolmitriptan 5mg tablets manufactured by GLOBAL PHARMACEUTICALS, DIVISION OF IMPAX "
        "LABORATORIES INC. contain gluten?"
    )
    assert topics["TQ10"].query == (
        "What joint pain medications are indicated in type 2 diabetes patients?"
    )
    assert report.counts == {}

    plain = shared_data(*TEST_XML)
    expect_error("liveqa-med-xml", plain, 3, "has no <NLM-Summary>", query="summary")


@pytest.mark.shared_data
@pytest.mark.parametrize(("parts", "summaries"), [(TEST_XML, 0), (SUMMARIES_XML, 104)])
def test_every_formulation_is_a_topic_field(shared_data, parts, summaries):
    records, _ = read("liveqa-med-xml", shared_data(*parts))
    topics = {r.qid: r for r in records if isinstance(r, Topic)}
    counts = Counter(name for topic in topics.values() for name in topic.fields)
    # empty texts are left out: 3 NIST paraphrases (TQ10, TQ34, TQ103), TQ103's subject
    expected = {"original": 104, "subject": 103, "message": 104, "paraphrase": 101}
    expected |= {"focus": 104, "keywords": 57} | ({"summary": summaries} if summaries else {})
    assert counts == expected
    tq1 = {
        "original": "Noonan syndrome. What are the references with noonan syndrome and "
        "polycystic renal disease",
        "subject": "Noonan syndrome",
        "message": "What are the references with noonan syndrome and polycystic renal disease",
        "paraphrase": "What is the relationship between Noonan syndrome and polycystic renal "
        "disease?",
        "focus": "noonan syndrome; polycystic renal disease",
    }
    if summaries:
        tq1["summary"] = tq1["paraphrase"]  # TQ1's NLM summary repeats the paraphrase
    assert topics["TQ1"].fields == tq1
    # the field names do not depend on which formulation the query option picks
    by_summary, _ = read("liveqa-med-xml", shared_data(*SUMMARIES_XML), query="summary")
    first = next(r for r in by_summary if isinstance(r, Topic))
    assert first.query != tq1["original"] and first.fields["original"] == tq1["original"]


@pytest.mark.shared_data
def test_manifest_topic_fields(shared_data, tmp_path):
    shared_data("liveqa-med-2017")
    ingest(ROOT / "manifests" / "liveqa-med-2017.yaml", indexes_dir=tmp_path)
    collection = Collection.load("liveqa-med-2017", tmp_path)
    assert collection.query_fields == [
        "query", "narrative", "original", "subject", "message", "paraphrase", "summary",
        "focus", "keywords",
    ]  # fmt: skip
    fields = collection.topic_fields.set_index("qid")
    assert fields.shape == (104, 7)
    assert fields.loc["TQ10", "summary"] == (
        "What joint pain medications are indicated in type 2 diabetes patients?"
    )
    assert fields.loc["TQ10", "paraphrase"] is None
    # a topic without the field is ranked with its query
    paraphrases = collection.topic_texts("paraphrase")
    assert paraphrases["TQ10"] == collection.topics.set_index("qid").loc["TQ10", "query"]
    assert paraphrases["TQ2"] == "Do 5 mg. Zolmitriptan tabkets contain gluten?"
    d_q = collection.candidates("TQ2", query_field="paraphrase")
    assert len(d_q) == 24 and set(d_q["query"]) == {paraphrases["TQ2"]}


# --- real data: judgments and answers --------------------------------------------------------


@pytest.mark.shared_data
def test_qrels_counts_and_repeats(shared_data):
    path = shared_data(*QRELS)
    judgments, report = read("medquad-judged-qrels", path)
    assert len(judgments) == 2479
    assert judgments[0] == Judgment(
        "TQ1", "ADAM_0003147_Sec1.txt", "relevance", "1-Incorrect", Origin(str(path), 1)
    )
    assert judgments[-1].origin == Origin(str(path), 2479)
    qids = {j.qid for j in judgments}
    assert len(qids) == 103
    assert qids == {f"TQ{n}" for n in range(1, 105)} - {"TQ83"}
    assert Counter(j.grade for j in judgments) == {
        "1-Incorrect": 1436,
        "2-Related": 678,
        "3-Incomplete": 223,
        "4-Excellent": 142,
    }
    pairs: dict[tuple[str, str], list[str]] = defaultdict(list)
    for j in judgments:
        pairs[(j.qid, j.docno)].append(j.grade)
    assert len(pairs) == 2311
    repeated = {pair: grades for pair, grades in pairs.items() if len(grades) > 1}
    assert len(repeated) == 168
    assert all(len(grades) == 2 and grades[0] != grades[1] for grades in repeated.values())
    assert Counter(tuple(g) for g in repeated.values()) == {
        ("1-Incorrect", "2-Related"): 66,
        ("2-Related", "3-Incomplete"): 50,
        ("3-Incomplete", "4-Excellent"): 34,
        ("2-Related", "4-Excellent"): 14,
        ("1-Incorrect", "4-Excellent"): 4,
    }
    assert report.counts == {}

    bare, _ = read("medquad-judged-qrels", path, qid_prefix="", dimension="quality")
    assert bare[0][:4] == ("1", "ADAM_0003147_Sec1.txt", "quality", "1-Incorrect")


@pytest.mark.shared_data
def test_qrels_question_n_is_xml_tqn(shared_data):
    """The mapping, checked on content: every qrels id is a topic of the XML, and the answers
    judged correct (3-Incomplete, 4-Excellent) for question N are about the focus of TQN."""
    judgments, _ = read("medquad-judged-qrels", shared_data(*QRELS))
    docs = {d.docno: d for d in read("medquad-answers", shared_data(*ANSWERS))[0]}
    records = read("liveqa-med-xml", shared_data(*TEST_XML))[0]
    topics = {t.qid: t for t in records if isinstance(t, Topic)}
    assert {j.qid for j in judgments} <= set(topics)
    for qid, focus in [
        ("TQ4", "syphilis"),
        ("TQ82", "diabetes"),
        ("TQ2", "zolmitriptan"),
        ("TQ5", "glucagon"),
    ]:
        assert focus in (topics[qid].query + " " + (topics[qid].narrative or "")).lower()
        best = [
            docs[j.docno].title.lower()
            for j in judgments
            if j.qid == qid and j.grade in ("3-Incomplete", "4-Excellent")
        ]
        assert best and all(focus in title for title in best), (qid, best)


@pytest.mark.shared_data
def test_answers(shared_data):
    path = shared_data(*ANSWERS)
    docs, report = read("medquad-answers", path)
    assert len(docs) == 1935
    assert len({d.docno for d in docs}) == 1935
    assert report.counts == {
        "medquad-answers: repeated rows with identical text merged": 544,
        "medquad-answers: unmatched ')' closing the answer removed": 1934,
    }
    first = docs[0]
    assert first.docno == "ADAM_0003147_Sec1.txt"
    assert first.url == "https://www.nlm.nih.gov/medlineplus/ency/article/000369.htm"
    assert first.title.startswith("What is (are) Polycystic ovary syndrome ? (Also called:")
    assert first.text.startswith("Polycystic ovary syndrome is a condition in which a woman")
    assert first.text.endswith("trouble getting pregnant, and other health problems.")
    assert first.origin == Origin(str(path), 2)
    assert docs[1].origin == Origin(str(path), 6)  # quoted fields span lines
    assert all(d.text and not d.text.startswith("Answer:") for d in docs)
    judged = {j.docno for j in read("medquad-judged-qrels", shared_data(*QRELS))[0]}
    assert {d.docno for d in docs} == judged  # every judged answer has text, none unjudged

    full, _ = read("medquad-answers", path, text="full")
    assert full[0].text.startswith("Question: What is (are) Polycystic ovary syndrome ?")
    assert "\nURL: https://www.nlm.nih.gov/" in full[0].text
    assert full[0].text.endswith("other health problems.)")  # as written


@pytest.mark.shared_data
def test_manifest_ingests(shared_data, tmp_path):
    result = ingest(
        ROOT / "manifests" / "liveqa-med-2017.yaml",
        indexes_dir=tmp_path,
        data_root=shared_data("liveqa-med-2017"),
    )
    collection = Collection(result.path)
    assert len(collection.topics) == 104
    assert len(collection.docs) == 1935
    assert len(collection.references) == 167
    judgments = collection.judgments("relevance")
    assert len(judgments) == 2311
    assert int(judgments["lines"].sum()) == 2479
    assert result.counts["conflicting repeated judgments resolved by policy 'mean'"] == 168
    gains = dict(zip(judgments["raw_label"], judgments["grade"], strict=False))
    # mean rounded half up: one grade apart -> the upper; Related/Excellent, Incorrect/Excellent
    # -> Incomplete (gain 2)
    assert gains["1-Incorrect|2-Related"] == 1
    assert gains["2-Related|4-Excellent"] == 2
    assert gains["1-Incorrect|4-Excellent"] == 2
    assert Counter(collection.qrels("relevance")["label"]) == {0: 1366, 1: 614, 2: 207, 3: 124}


# --- hand-made files: errors and odd data ----------------------------------------------------

XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<LiveQA2017-Medical-Test-Set-Full>
  <NLM-QUESTION qid="TQ9">
    <Original-Question qfile="9.txt">
      <SUBJECT>gout</SUBJECT>
      <MESSAGE>what causes
        gout?</MESSAGE>
    </Original-Question>
    <NIST-PARAPHRASE>What causes gout?</NIST-PARAPHRASE>
    <ReferenceAnswers>
      <ReferenceAnswer aid="TQ9A1">
        <ANSWER>Uric acid.</ANSWER>
      </ReferenceAnswer>
      <ReferenceAnswer aid="TQ9A2">
        <ANSWER>  </ANSWER>
      </ReferenceAnswer>
    </ReferenceAnswers>
  </NLM-QUESTION>
</LiveQA2017-Medical-Test-Set-Full>
"""


def test_small_xml_exact_records(tmp_path):
    path = write(tmp_path, XML, "q.xml")
    records, report = read("liveqa-med-xml", path)
    p = str(path)
    assert records == [
        Topic(
            "TQ9",
            "gout. what causes gout?",
            "What causes gout?",
            Origin(p, 3),
            # every formulation as a topic field; no summary or annotations in this file
            {
                "original": "gout. what causes gout?",
                "subject": "gout",
                "message": "what causes gout?",
                "paraphrase": "What causes gout?",
            },
        ),
        Reference("TQ9", "Uric acid.", "TQ9A1", Origin(p, 11)),
    ]
    assert report.counts == {"liveqa-med-xml: empty reference answers skipped": 1}


def test_xml_errors(tmp_path):
    malformed = write(tmp_path, XML.replace("</SUBJECT>", "</SUBJ>"), "bad.xml")
    expect_error("liveqa-med-xml", malformed, 5, "malformed XML: mismatched tag")
    no_qid = write(tmp_path, XML.replace(' qid="TQ9"', ""), "noqid.xml")
    expect_error("liveqa-med-xml", no_qid, 3, "question without qid attribute")
    no_text = write(
        tmp_path,
        XML.replace("<SUBJECT>gout</SUBJECT>", "<SUBJECT/>").replace(
            "<MESSAGE>what causes\n        gout?</MESSAGE>", "<MESSAGE> </MESSAGE>"
        ),
        "notext.xml",
    )
    expect_error("liveqa-med-xml", no_text, 3, "question 'TQ9' has no SUBJECT or MESSAGE text")
    other = write(tmp_path, "<topics>\n</topics>\n", "other.xml")
    expect_error("liveqa-med-xml", other, 1, "no <NLM-QUESTION> element")
    latin = tmp_path / "latin.xml"
    latin.write_bytes(XML.replace("gout?", "goutte\xe0?").encode("latin-1"))
    expect_error("liveqa-med-xml", latin, 7, "not valid UTF-8: byte 0xe0")
    empty = write(tmp_path, "", "empty.xml")
    expect_error("liveqa-med-xml", empty, None, "file is empty")


def test_unknown_query_option(tmp_path):
    with pytest.raises(ConfigError, match="option 'query' must be one of original, paraphrase"):
        read("liveqa-med-xml", write(tmp_path, XML, "q.xml"), query="nist")


QRELS_TEXT = "9 4-Excellent A_1.txt\n\n9 1-Incorrect A_2.txt\n"


def test_small_qrels_exact_records(tmp_path):
    path = write(tmp_path, QRELS_TEXT, "qrels.txt")
    judgments, _ = read("medquad-judged-qrels", path)
    assert judgments == [
        Judgment("TQ9", "A_1.txt", "relevance", "4-Excellent", Origin(str(path), 1)),
        Judgment("TQ9", "A_2.txt", "relevance", "1-Incorrect", Origin(str(path), 3)),
    ]


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("9 4-Excellent", "expected 3 fields (question number, grade, AnswerID), found 2"),
        ("9 0 A_3.txt 4-Excellent", "expected 3 fields"),
        ("9 5-Perfect A_3.txt", "unknown grade label '5-Perfect'; expected one of 1-Incorrect"),
        ("9 Excellent A_3.txt", "unknown grade label 'Excellent'"),
        ("9 4 A_3.txt", "unknown grade label '4'"),
        ("TQ9 4-Excellent A_3.txt", "question number 'TQ9' is not a positive integer"),
        ("0 4-Excellent A_3.txt", "question number '0' is not a positive integer"),
    ],
)
def test_qrels_errors(tmp_path, line, fragment):
    path = write(tmp_path, QRELS_TEXT + line + "\n", "qrels.txt")
    expect_error("medquad-judged-qrels", path, 4, fragment)


def test_qrels_non_utf8_and_empty(tmp_path):
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"9 4-Excellent A_1.txt\n9 2-Related caf\xe9.txt\n")
    expect_error("medquad-judged-qrels", latin, 2, "not valid UTF-8: byte 0xe9")
    expect_error("medquad-judged-qrels", write(tmp_path, "\n\n", "e.txt"), None, "file is empty")


CSV_TEXT = (
    "AnswerID,Answer\r\n"
    'A_1.txt,"Question: What causes gout ?\nURL: https://example.org/gout\n'
    'Answer: Uric acid crystals (urate).)\n"\r\n'
    'A_2.txt,"no layout here"\r\n'
    'A_1.txt,"Question: What causes gout ?\nURL: https://example.org/gout\n'
    'Answer: Uric acid crystals (urate).)\n"\r\n'
    'A_3.txt,"Question: Brand names ?\nURL: https://example.org/b\n'
    'Answer: - Zyloprim (allopurinol)"\r\n'
)


def test_small_answers_exact_records(tmp_path):
    path = write(tmp_path, CSV_TEXT, "answers.csv")
    docs, report = read("medquad-answers", path)
    p = str(path)
    assert docs == [
        Document(
            "A_1.txt",
            "Uric acid crystals (urate).",
            "https://example.org/gout",
            "What causes gout ?",
            Origin(p, 2),
        ),
        Document("A_2.txt", "no layout here", None, None, Origin(p, 6)),
        Document(
            "A_3.txt",
            "- Zyloprim (allopurinol)",
            "https://example.org/b",
            "Brand names ?",
            Origin(p, 11),
        ),
    ]
    assert report.counts == {
        "medquad-answers: answers without the Question/URL/Answer layout (kept whole)": 1,
        "medquad-answers: repeated rows with identical text merged": 1,
        "medquad-answers: unmatched ')' closing the answer removed": 1,
    }


def test_answers_errors(tmp_path):
    wrong = write(tmp_path, "id,text\nA_1.txt,some answer\n", "wrong.csv")
    expect_error(
        "medquad-answers", wrong, 1, "expected the columns AnswerID, Answer; found id, text"
    )
    extra = write(tmp_path, "AnswerID,Answer\nA_1.txt,one,two\n", "extra.csv")
    expect_error("medquad-answers", extra, 2, "expected 2 fields (AnswerID, Answer), found 3")
    header_only = write(tmp_path, "AnswerID,Answer\n", "header.csv")
    expect_error("medquad-answers", header_only, 1, "no answer rows below the header")
    differ = write(tmp_path, "AnswerID,Answer\nA_1.txt,one\nA_2.txt,two\nA_1.txt,uno\n", "d.csv")
    expect_error(
        "medquad-answers",
        differ,
        4,
        "answer 'A_1.txt' given again with a different text (first at line 2)",
    )
    no_id = write(tmp_path, "AnswerID,Answer\n ,text\n", "noid.csv")
    expect_error("medquad-answers", no_id, 2, "AnswerID is empty")
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"AnswerID,Answer\nA_1.txt,caf\xe9\n")
    expect_error("medquad-answers", latin, 2, "not valid UTF-8: byte 0xe9")
    expect_error("medquad-answers", write(tmp_path, "", "empty.csv"), None, "file is empty")
    with pytest.raises(ConfigError, match="option 'text' must be answer or full"):
        read("medquad-answers", write(tmp_path, CSV_TEXT, "answers.csv"), text="title")
