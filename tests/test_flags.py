"""Flags of degenerate answers (``nrp.validation.flags``) on hand-written answers, each with the
flags and numbers worked out by hand from Terrier's terms (tokens less Terrier's stopwords,
Porter-stemmed) and lower-cased word 5-grams; and ``nrp.flag_answers`` on a collection."""

from __future__ import annotations

import pandas as pd
import pytest
from flag_collection import (
    ANSWERS,
    COPY,
    DOCUMENT,
    ECHO,
    QUESTION,
    REAL,
    RESTATED,
    write_collection,
)

import nrp
from nrp.errors import InputError, NrpError
from nrp.validation.flags import (
    FLAG_NAMES,
    answer_flags,
    content_terms,
    flag_answers,
    word_grams,
)

# "c" and "in" are Terrier stopwords, "can" is not; colds -> cold
QUESTION_TERMS = {"can", "vitamin", "prevent", "cold", "children"}


def flags_of(answer: str, documents=(DOCUMENT,)) -> dict:
    return answer_flags(answer, QUESTION, [word_grams(d) for d in documents])


def names(found: dict) -> list[str]:
    return [n for n in FLAG_NAMES if found[n]]


def test_the_question_terms_are_terriers():
    assert content_terms(QUESTION) == QUESTION_TERMS
    assert content_terms(RESTATED) == QUESTION_TERMS | {"want", "know"}
    assert len(word_grams(DOCUMENT)) == 16
    assert word_grams("Washing hands helps.") == {("washing", "hands", "helps")}  # < 5 words
    assert word_grams("...") == frozenset()


def test_an_echo_is_question_words_and_little_content():
    found = flags_of(ECHO)
    assert names(found) == ["question_words", "little_content"]
    # 5 of 5 terms are the question's; no 5-gram of the question is in the document
    assert (found["question_share"], found["copy_share"], found["new_terms"]) == (1.0, 0.0, 0)


def test_a_restatement_with_two_new_words_is_little_content_only():
    found = flags_of(RESTATED)
    assert names(found) == ["little_content"]
    # 5 of its 7 terms are the question's: 0.714 < 0.8; 2 new terms < 5
    assert found["question_share"] == pytest.approx(5 / 7)
    assert found["new_terms"] == 2


def test_a_copy_of_a_judged_document_is_judged_copy_only():
    found = flags_of(COPY)
    assert names(found) == ["judged_copy"]
    assert found["copy_share"] == 15 / 16  # only "make a cold slightly milder" is new
    # terms: vitamin prevent cold children take dai mai slightli milder; the 5 new ones (take,
    # dai, mai, slightli, milder) are not fewer than 5, and 4 of 9 terms are the question's
    assert found["new_terms"] == 5
    assert found["question_share"] == pytest.approx(4 / 9)
    assert names(flags_of(COPY, documents=())) == []  # no judged document: nothing copied


def test_a_real_three_sentence_answer_has_no_flag():
    found = flags_of(REAL)
    assert names(found) == []
    # new terms ("stop", "make", "get", "enough", "better" are stopwords): peopl take dai
    # catch mai slightli shorter wash hand sleep protect = 11
    assert found["new_terms"] == 11
    assert found["question_share"] == pytest.approx(3 / 14)  # vitamin, children, cold
    assert found["copy_share"] == 0.0


def test_an_answer_without_content_terms_and_a_short_copy():
    found = flags_of("It is what it is.")  # every word a stopword
    assert names(found) == ["question_words", "little_content"]
    assert found["question_share"] == 1.0
    # under 5 words the whole sequence is one gram: it must be the whole of a document
    short = "Washing hands helps."
    assert names(flags_of(short, documents=[short])) == ["judged_copy", "little_content"]
    assert not flags_of(short, documents=["Washing hands helps a lot."])["judged_copy"]


def test_flag_answers_gives_one_row_per_answer_with_the_flags_in_order():
    answers = pd.DataFrame(
        {
            "answer_id": ["e", "r", "c", "a"],
            "llm": ["m", "m", "m", "n"],
            "prompt": ["p", "p", "p", "p"],
            "qid": ["1", "1", "1", "1"],
            "sample": [0, 1, 2, 0],
            "text": [ECHO, RESTATED, COPY, REAL],
        }
    )
    frame = flag_answers(answers, {"1": QUESTION}, {"1": [DOCUMENT, "Oranges are rich in it."]})
    assert list(frame.columns) == [
        "answer_id", "qid", "llm", "prompt", "sample", "flags", "empty", "question_words",
        "judged_copy", "little_content", "flagged", "question_share", "copy_share", "new_terms",
    ]  # fmt: skip
    assert frame["flags"].tolist() == [
        "question_words,little_content", "little_content", "judged_copy", "",
    ]  # fmt: skip
    assert frame["flagged"].tolist() == [True, True, True, False]
    assert frame["new_terms"].tolist() == [0, 2, 5, 11]
    bare = flag_answers(answers[["answer_id", "qid", "text"]], {"1": QUESTION}, {})
    assert list(bare.columns[:3]) == ["answer_id", "qid", "flags"]  # no llm, prompt, sample
    assert bare["flags"].tolist()[2] == ""  # no judged document for the copy to match
    with pytest.raises(NrpError, match="no question text for qid '1'"):
        flag_answers(answers, {"2": QUESTION}, {})
    with pytest.raises(NrpError, match=r"answers: missing column\(s\) 'text' \(found: "):
        flag_answers(answers.drop(columns="text"), {"1": QUESTION}, {})


def test_the_library_call_reads_questions_and_judged_documents_from_the_collection(tmp_path):
    ix = tmp_path / "ix"
    nrp.ingest(write_collection(tmp_path / "data"), indexes_dir=ix)
    collection = nrp.Collection.load("flag-tiny", ix)
    frame = nrp.flag_answers(collection, pd.DataFrame(ANSWERS))
    by_id = frame.set_index("answer_id")["flags"]
    assert by_id["echo/plain/q1/0"] == "question_words,little_content"
    assert by_id["copy/plain/q1/0"] == "judged_copy"
    assert by_id["real/plain/q1/0"] == "" and by_id["real/plain/q2/0"] == ""


def test_flags_aside_shares_the_slices_and_gives_the_bytes_of_flag_answers(tmp_path, monkeypatch):
    """The forked worker and the caller each measure the slices the other has not claimed (both
    slowed down here, the worker more, so each takes some); flags.csv's bytes equal those of
    ``flag_answers`` on the whole answer set, every slice measured once."""
    import os
    import time

    from nrp.analysis import flags as analysis
    from nrp.validation.flags import FlagMeasures

    ix = tmp_path / "ix"
    nrp.ingest(write_collection(tmp_path / "data"), indexes_dir=ix)
    collection = nrp.Collection.load("flag-tiny", ix)
    answers = pd.concat([pd.DataFrame(ANSWERS)] * 6, ignore_index=True)
    answers["answer_id"] = [f"a{i}" for i in range(len(answers))]
    log, caller, rows = tmp_path / "slices.log", os.getpid(), FlagMeasures.rows

    def logged(self, start):
        # the caller is slowed too, so the worker gets a slice however late it starts
        time.sleep(0.3 if os.getpid() != caller else 0.1)
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid() == caller} {start}\n")
        return rows(self, start)

    monkeypatch.setattr(analysis, "ASIDE_MIN_ANSWERS", 1)
    monkeypatch.setattr(FlagMeasures, "SLICE", 3)
    monkeypatch.setattr(FlagMeasures, "rows", logged)
    found = analysis.flags_aside(collection, answers)()
    entries = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
    assert sorted(int(start) for _, start in entries) == list(range(0, len(answers), 3))
    assert {by for by, _ in entries} == {"True", "False"}  # both measured some
    log.unlink()
    expected = analysis.FlagsFile.of(analysis.flag_answers(collection, answers))
    assert found == expected and found.flagged > 0


@pytest.mark.shared_data
def test_flag_answers_equals_answer_flags_on_mediqa_texts(shared_data):
    """``flag_answers`` (content terms as arrays of term ids, word grams compared only for the
    answers whose hashed grams meet a judged document's) gives every number ``answer_flags``
    gives one answer at a time: on lines of the MEDIQA 2019 files as judged documents (8 per
    query) and answers made of them: whole documents, halves, sentences of the query's own
    documents and of others', a few words, nothing."""
    import random

    path = shared_data("mediqa-2019", "MEDIQA2019-Task3-QA-ValidationSet.xml")
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if len(line) > 40]
    queries = {f"q{i}": lines[i * 9] for i in range(len(lines) // 9)}
    judged = {qid: lines[i * 9 + 1 : i * 9 + 9] for i, qid in enumerate(queries)}
    rng, qids, texts = random.Random(6), [], []
    for i in range(3000):
        qid = f"q{i % len(queries)}"
        own, other = rng.choice(judged[qid]), rng.choice(lines)
        words = own.split()
        texts.append(
            [own, own[: len(own) // 2], f"{other} {own} {other}", " ".join(words[:4]), "",
             queries[qid], other, " ".join(words[2:9]) + " " + other][i % 8]
        )  # fmt: skip
        qids.append(qid)
    answers = pd.DataFrame({"answer_id": [str(i) for i in range(len(texts))], "qid": qids,
                            "text": texts})  # fmt: skip
    frame = flag_answers(answers, queries, judged)
    documents = {qid: [word_grams(d) for d in docs] for qid, docs in judged.items()}
    expected = [answer_flags(t, queries[q], documents[q]) for t, q in zip(texts, qids, strict=True)]
    columns = ["empty", "question_words", "judged_copy", "little_content", "question_share",
               "copy_share", "new_terms"]  # fmt: skip
    assert frame[columns].to_dict("records") == expected
    assert frame["empty"].sum() == 375 and frame.loc[frame["empty"], "flags"].eq("empty").all()
    assert 0 < frame["judged_copy"].sum() < len(frame)
    assert (frame["copy_share"].between(0, 1, inclusive="neither")).any()


def test_a_flags_file_written_before_the_empty_flag_reads_it_as_false(tmp_path):
    """flags.csv of an nrp before ``empty`` existed: read, every answer not empty; the shares
    per LLM x prompt counted as before (one of two flagged), share_empty 0."""
    from nrp.analysis.flags import flag_shares, read_flags

    path = tmp_path / "flags.csv"
    path.write_text(
        "answer_id,qid,llm,prompt,sample,flags,question_words,judged_copy,little_content,flagged\n"
        "a,1,m,p,0,little_content,False,False,True,True\n"
        "b,1,m,p,1,,False,False,False,False\n"
    )
    flags = read_flags(path)
    assert flags["empty"].tolist() == [False, False]
    shares = flag_shares(flags).iloc[0]
    assert (shares["n_answers"], shares["n_flagged"], shares["share_empty"]) == (2, 1, 0.0)
    assert shares["share_little_content"] == 0.5
    # a file that has the column is read as it says, and checked like every flag
    path.write_text(
        "answer_id,flagged,empty,question_words,judged_copy,little_content\n"
        "a,True,True,False,False,False\nb,False,maybe,False,False,False\n"
    )
    with pytest.raises(InputError, match="empty 'maybe' is not True or False"):
        read_flags(path)
