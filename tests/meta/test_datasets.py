"""Loaders of the shared meta-evaluation sets: exact counts from the real files (the shared
README's and SOURCE files' figures), item layout for the evaluators, and real-data values: the
DialogADV files' own ROUGE-L against negated responses, SummEval crowd vs expert ratings."""

from __future__ import annotations

import pytest

from nrp.errors import ConfigError
from nrp.evaluators.base import ITEM_COLUMNS
from nrp.meta.correlation import meta_evaluate, paired_preference
from nrp.meta.datasets import META_SETS, evaluator_specs, load_meta_set

pytestmark = pytest.mark.shared_data


@pytest.fixture
def meta_root(shared_data):
    return shared_data("meta")


def test_dstc7_adv_counts_and_pairs(meta_root):
    data = load_meta_set("dstc7-adv", meta_root)
    # 684 examples x 6 responses = 4,104; the 342 original references (res_0) left out
    assert data.counts == {
        "examples": 684,
        "dialogues": 342,
        "responses": 4104,
        "references_left_out": 342,
        "items": 3762,
    }
    items = data.items
    assert list(items.columns[: len(ITEM_COLUMNS)]) == list(ITEM_COLUMNS)
    assert items["qid"].nunique() == 342
    assert items["subset"].value_counts().to_dict() == {"adversarial": 2052, "original": 1710}
    # every query: 5 original + 6 negated responses, one reference (the original res_0)
    assert set(items.groupby("qid").size()) == {11}
    assert set(items.groupby("qid")["references"].nunique()) == {1}
    first = items.iloc[0]
    assert first["references"] == ("he appears to be in front of the main door to the house",)
    assert first["text"] == "i can 't tell . i can see only a door ."
    adversarial_res0 = items[items["answer_id"] == "dstc7-000-adversarial-res0"].iloc[0]
    assert "do not" in adversarial_res0["text"]  # the negated reference is a candidate
    assert len(data.human) == 3762 and data.dimensions == [
        "coherence",
        "relevance",
        "consistency",
        "fluency",
    ]
    assert len(load_meta_set("dstc7-adv", meta_root, include_references=True).items) == 4104

    # the file's own ROUGE-L ranks the original above its negation in 1,390 of 1,710 pairs
    # (246 ties); the human coherence does in all of them
    joined = data.joined(data.precomputed)
    pairs = paired_preference(
        joined, ["paper.rouge_L", "coherence"], "pair_id", "subset", "original", "adversarial"
    ).set_index("column")
    assert pairs.loc["paper.rouge_L", "n_pairs"] == 1710
    assert round(pairs.loc["paper.rouge_L", "better_higher"] * 1710) == 1390
    assert round(pairs.loc["paper.rouge_L", "equal"] * 1710) == 246
    assert pairs.loc["coherence", "better_higher"] == 1.0


def test_kdconv_adv_counts(meta_root):
    data = load_meta_set("kdconv-adv", meta_root)
    assert data.counts == {"examples": 182, "responses": 728, "references_left_out": 182,
                           "items": 546}  # fmt: skip
    assert data.items["subset"].value_counts().to_dict() == {"close": 273, "open": 273}
    assert data.language == "zh"
    assert evaluator_specs(data, "bleu,rouge") == "bleu:tokenize=zh,rouge"
    assert evaluator_specs(data, "bleu:tokenize=char") == "bleu:tokenize=char"
    assert len(load_meta_set("kdconv-adv", meta_root, include_references=True).items) == 728


def test_summeval_counts_and_crowd_vs_experts(meta_root):
    data = load_meta_set("summeval", meta_root)
    assert data.counts == {"summaries": 1200, "systems": 12, "documents": 100}
    assert set(data.items.groupby("system").size()) == {100}
    assert set(data.items["references"].map(len)) == {1}
    assert set(data.items["contexts"].map(len)) == {1}  # the source article
    first = data.human.iloc[0]
    # expert ratings of the first M8 summary: coherence 3, 1, 1; relevance 2, 3, 2
    assert first["coherence"] == pytest.approx(5 / 3)
    assert first["relevance"] == pytest.approx(7 / 3)
    assert first["crowd_coherence"] == 5.0
    every = load_meta_set("summeval", meta_root, references="all")
    assert set(every.items["references"].map(len)) == {11}
    # crowd coherence barely agrees with the experts' (Fabbri et al.'s finding): across the
    # 12 systems tau-b = -0.061 (no ties: 31 concordant, 35 discordant of 66 pairs)
    result = meta_evaluate(
        data.joined(), ["crowd_coherence"], ["coherence"], system_column="system", n_bootstrap=0
    )
    row = result.row("crowd_coherence", "coherence")
    assert row.n_systems == 12 and row.queries_used == 100
    assert row.tau_system == pytest.approx(-4 / 66)


@pytest.mark.parametrize(
    ("name", "contexts", "responses", "items", "systems"),
    [("usr-topical", 60, 360, 300, 5), ("usr-persona", 60, 300, 240, 4)],
)
def test_usr_counts(meta_root, name, contexts, responses, items, systems):
    data = load_meta_set(name, meta_root)
    assert data.counts == {
        "contexts": contexts,
        "responses": responses,
        "items": items,
        "systems": systems,
    }
    assert "Original Ground Truth" not in set(data.items["system"])
    assert data.dimensions == [
        "understandable",
        "natural",
        "maintains_context",
        "engaging",
        "uses_knowledge",
        "overall",
    ]
    assert data.human["overall"].between(1, 5).all()
    assert data.human["understandable"].between(0, 1).all()


def test_chatbot_vi_counts(meta_root):
    data = load_meta_set("chatbot-vi", meta_root)
    assert data.categorical
    assert data.counts == {"rows": 299, "TRUE": 238, "FALSE": 31, "NOT GIVEN": 30}
    assert "id_268" not in set(data.items["answer_id"])
    assert all(len(refs) == 1 for refs in data.items["references"])


def test_limit_and_unknown_set(meta_root):
    data = load_meta_set("usr-topical", meta_root, limit=3)
    assert data.items["qid"].nunique() == 3 and len(data.items) == 15
    assert len(data.human) == 15
    with pytest.raises(ConfigError, match="unknown meta-evaluation set"):
        load_meta_set("nope", meta_root)
    assert set(META_SETS) == {"dstc7-adv", "kdconv-adv", "summeval", "usr-topical",
                              "usr-persona", "chatbot-vi"}  # fmt: skip
