"""Synchronous score requests batched together get the rows each would get alone.

The worker positions the answers of every request in a batch that shares a ranker together
and builds the rows of every request that shares rankers, tie rule and weights in one
``result_frame`` call (``nrp.service.compute.score_requests``). Here the worker's own function
runs over a real pool and the hand-built ``synth`` collection (two dimensions) with requests
that repeat each other's answer ids, mix tie rules, weights and rankers, and hold answers that
cannot be ranked; every reply must equal the reply to the request scored alone, and the rows
of ``score_answers`` for the same answers.
"""

from __future__ import annotations

import pandas as pd
import pytest
from service_helpers import write_synth

from nrp import ingest
from nrp.positioning.scoring import score_answers
from nrp.service.compute import score_requests
from nrp.service.keys import BatchKey, PositionKey, RowKey
from nrp.service.pool import ModelPool
from nrp.service.store import json_value


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> ModelPool:
    root = tmp_path_factory.mktemp("batch")
    ingest(write_synth(root / "data"), indexes_dir=root / "indexes")
    return ModelPool(root / "indexes")


def answer(answer_id: str, qid: str, text: str, ranked: bool = True, **extra) -> dict:
    record = {"answer_id": answer_id, "llm": "", "prompt": "", "qid": qid, "sample": 0}
    return {**record, **extra, "text": text, "ranked": ranked}


def request(number: int, answers: list[dict], rankers: dict, ties="mid", weights=None) -> dict:
    return {
        "id": f"r{number}",
        "collection": "synth",
        "rankers": rankers,
        "answers": answers,
        "ties": ties,
        "frozen_stats": False,
        "full_rerank": False,
        "weights": weights,
    }


BM25 = {"relevance": "bm25", "readability": "bm25"}
MIXED = {"relevance": "bm25", "readability": "tfidf"}
REQUESTS = [
    request(0, [answer("a", "t0", "fever fever rest"), answer("b", "t1", "cough doctor")], BM25),
    # the same answer ids as request 0, other texts, another tie rule
    request(1, [answer("a", "t1", "cough cough"), answer("b", "t0", "fever")], BM25, "strict"),
    request(2, [answer("a", "t2", "asthma asthma treatment", llm="m", sample=3)], MIXED),
    request(
        3,
        [answer("x", "t3", "insulin dose daily")],
        BM25,
        weights={"relevance": 3, "readability": 1},
    ),
    request(4, [answer("n", "empty", "x y", ranked=False), answer("a", "t4", "migraine")], BM25),
    request(5, [answer("n", "empty", "nothing", ranked=False)], BM25),
    # the same (qid, answer id) as request 0's first answer: positioned in a second round
    request(6, [answer("a", "t0", "rest and fever doctor"), answer("c", "t0", "fever")], BM25),
]


def test_batched_replies_equal_each_request_alone_and_score_answers(pool):
    alone = {}
    for payload in REQUESTS:
        alone.update(score_requests(pool, [payload], 16))
    batched = score_requests(pool, REQUESTS, 16)
    assert batched == alone
    assert batched["r5"]["rows"] == []
    assert [row[0] for row in batched["r1"]["rows"]] == ["a", "a", "a", "b", "b", "b"]
    assert batched["r6"]["rows"][0][7] != batched["r0"]["rows"][0][7]  # other text, other score
    collection = pool.collection("synth")
    for payload in REQUESTS[:5] + REQUESTS[6:]:
        ranked = pd.DataFrame([a for a in payload["answers"] if a["ranked"]])
        expected = score_answers(
            collection,
            ranked.drop(columns="ranked"),
            payload["rankers"],
            ties=payload["ties"],
            weights=payload["weights"],
            cache=False,
        )
        rows = [[json_value(v) for v in r] for r in expected.itertuples(index=False, name=None)]
        assert batched[payload["id"]]["rows"] == rows
        assert batched[payload["id"]]["columns"] == list(expected.columns)


def test_batch_keys_are_read_by_name_and_stored_as_before():
    # the text a store holds for queued units is the JSON list it always held, so a store
    # written before the typed key keeps its queue; reading it back gives the same key
    rank = BatchKey.rank("synth", "bm25", frozen_stats=True, full_rerank=False)
    assert rank.text == '["rank", "synth", "bm25", {"frozen_stats": true, "full_rerank": false}]'
    assert BatchKey.parse(rank.text) == rank
    evaluate = BatchKey.evaluate("synth", "bleu", "auto")
    assert evaluate.text == '["evaluate", "synth", "bleu", {"references": "auto"}]'
    assert BatchKey.parse(evaluate.text) == evaluate
    assert evaluate != BatchKey.evaluate("synth", "bleu", "judged")
    # requests 0 and 6 share rankers, options, tie rule and weights; 1 has another tie rule;
    # 3 has weights: four requests, three groups of rows
    keys = [RowKey.of(REQUESTS[n]) for n in (0, 6, 1, 3)]
    assert keys[0] == keys[1] and len(set(keys)) == 3
    assert keys[3].weights == (("relevance", 3), ("readability", 1))
    assert keys[0].position_key("bm25") == PositionKey.of(REQUESTS[1], "bm25")
