"""Label Studio exports of ranking projects nrp did not create (no data.nrp_item, the query as
text): `nrp meta` reads them as human rankings, `nrp annotators` as one coder per annotator.
Hand-written exports, hand-computed tau-b and alpha; bad exports are one line and exit 2."""

from __future__ import annotations

import json
import math
from importlib import resources

import pandas as pd
import pytest

from nrp import Collection, ingest
from nrp.cli import main
from nrp.errors import InputError
from nrp.meta.human import read_human
from nrp.meta.labelstudio import QueryMap

# The demo collection's topics d1 "can vitamin c prevent colds" and d3 "how much sleep do
# teenagers need". Task 1 lists five items (Label Studio id c1..c5, docno a..e); task 2 lists
# three by docno only. An item's name is its docno.
ITEMS_1 = [{"id": f"c{i}", "docno": d, "text": f"text {d}"} for i, d in enumerate("abcde", 1)]
ITEMS_2 = [{"docno": d, "text": f"text {d}"} for d in "abc"]
QUERY_1 = "Can  Vitamin C prevent colds"  # case and white space differ from the topic
QUERY_2 = "how much sleep do teenagers need"

# alice, task 1: buckets best [c2] > ok [c1, c4] (a tie) > bad [c3]; c5 stays in the list
# ("_"), so e is not ranked. Labels (items ranked strictly below): b 3, a 1, d 1, c 0.
# alice, task 2: one strict order [c, a, b] by docno: c 2, a 1, b 0.
ALICE_1 = {"_": ["c5"], "best": ["c2"], "ok": ["c1", "c4"], "bad": ["c3"]}
ALICE_2 = {"rank": ["c", "a", "b"]}
# bob, task 1: one strict order [c2, c1, c4, c3]: b 3, a 2, d 1, c 0.
# bob, task 2: buckets good [a, c] > poor [b]: a 1, c 1, b 0.
BOB_1 = {"rank": ["c2", "c1", "c4", "c3"]}
BOB_2 = {"good": ["a", "c"], "poor": ["b"]}

SCORES = """\
qid,answer_id,judge
d1,a,0.9
d1,b,0.8
d1,c,0.1
d1,d,0.5
d1,e,0.3
d3,a,0.7
d3,b,0.2
d3,c,0.4
"""


def annotation(who: str, ranker: dict, cancelled: bool = False) -> dict:
    value = {"ranker": ranker}
    result = [{"id": "r1", "from_name": "rank", "to_name": "items", "type": "ranker",
               "value": value}]  # fmt: skip
    return {"completed_by": {"email": who}, "was_cancelled": cancelled, "result": result}


def export(*tasks: tuple[str, list, list]) -> list[dict]:
    """Tasks (query, items, annotations) as Label Studio writes them."""
    return [
        {"id": 10 + n, "data": {"query": query, "items": items}, "annotations": annotations}
        for n, (query, items, annotations) in enumerate(tasks, start=1)
    ]


def write(path, tasks) -> str:
    path.write_text(json.dumps(tasks, indent=1), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    """The embedded demo collection, built (its topics map query texts to qids)."""
    folder = tmp_path_factory.mktemp("indexes")
    ingest(resources.files("nrp") / "data" / "demo" / "manifest.yaml", indexes_dir=folder)
    return str(folder)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "scores.csv").write_text(SCORES, encoding="utf-8")
    (tmp_path / "map.csv").write_text(f"qid,query\nd1,{QUERY_1.lower()}\nd3,{QUERY_2}\n")
    cancelled = annotation("carol@lab.org", {"rank": ["nonsense"]}, cancelled=True)
    alice = export(
        (QUERY_1, ITEMS_1, [annotation("alice@lab.org", ALICE_1), cancelled]),
        (QUERY_2, ITEMS_2, [annotation("alice@lab.org", ALICE_2)]),
        ("what is not annotated", ITEMS_2, []),
    )
    bob = export(
        (QUERY_1, ITEMS_1, [annotation("bob@lab.org", BOB_1)]),
        (QUERY_2, ITEMS_2, [annotation("bob@lab.org", BOB_2)]),
    )
    a, b = "alice@lab.org", "bob@lab.org"
    both = export(
        (QUERY_1, ITEMS_1, [annotation(a, ALICE_1), annotation(b, BOB_1)]),
        (QUERY_2, ITEMS_2, [annotation(a, ALICE_2), annotation(b, BOB_2)]),
    )
    write(tmp_path / "alice.json", alice)
    write(tmp_path / "bob.json", bob)
    write(tmp_path / "both.json", both)
    return tmp_path


@pytest.fixture
def nrp_here(capsys):
    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def test_an_export_reads_as_rankings_with_bucket_ties(files):
    human = read_human(files / "alice.json", query_map=files / "map.csv")
    assert human.attrs["kind"] == "ranking" and human.attrs["dimensions"] == ["ranking"]
    labels = {(r.qid, r.answer_id): r.ranking for r in human.itertuples()}
    assert labels == {
        ("d1", "b"): 3.0, ("d1", "a"): 1.0, ("d1", "d"): 1.0, ("d1", "c"): 0.0,
        ("d3", "c"): 2.0, ("d3", "a"): 1.0, ("d3", "b"): 0.0,
    }  # fmt: skip
    # without a map the query text (case and white space folded) stands for the qid
    plain = read_human(files / "alice.json")
    assert sorted(set(plain["qid"])) == ["can vitamin c prevent colds", QUERY_2]
    assert plain.attrs["by_text"]


def meta_per_query(nrp_here, out, *args: str) -> tuple[str, pd.DataFrame]:
    """``nrp meta ARGS --bootstrap 0 --out OUT``: its output and the per-query table."""
    code, stdout, stderr = nrp_here("meta", *args, "--bootstrap", "0", "--out", str(out))
    assert code == 0, stderr
    return stdout, pd.read_csv(out / "meta_per_query.csv", dtype={"qid": str}).set_index("qid")


def test_meta_on_an_export_gives_hand_computed_tau_b(files, indexes, nrp_here):
    out = files / "out"
    stdout, per_query = meta_per_query(
        nrp_here, out, str(files / "scores.csv"), str(files / "alice.json"), "--collection",
        "demo", "--indexes", indexes,
    )  # fmt: skip
    # e is scored but alice left it in the list (the "_" key): not ranked, not joined
    assert "7 items joined" in stdout and "1 scored items without human labels" in stdout
    # d1: judge a .9, b .8, c .1, d .5 against alice's b 3, a 1, d 1, c 0. Pairs:
    #   (a, b) discordant; (a, c) concordant; (a, d) tied in the human labels only;
    #   (b, c), (b, d), (c, d) concordant: C 4, D 1, of 6 pairs 0 tied in x, 1 tied in y:
    #   tau-b = (4 - 1) / sqrt((6 - 0) * (6 - 1)) = 3 / sqrt(30) = 0.5477
    assert per_query.loc["d1", "kendall_tau"] == pytest.approx(3 / math.sqrt(30))
    # d3: judge a .7, b .2, c .4 against c 2, a 1, b 0: (a, b) C, (a, c) D, (b, c) C: 1/3
    assert per_query.loc["d3", "kendall_tau"] == pytest.approx(1 / 3)
    assert per_query.loc["d1", "n_items"] == 4
    summary = pd.read_csv(out / "meta_summary.csv").iloc[0]
    mean = (3 / math.sqrt(30) + 1 / 3) / 2  # 0.4405, the mean over the two queries
    assert summary["tau_mean"] == pytest.approx(mean)
    assert (summary["dimension"], summary["queries_used"]) == ("ranking", 2)
    assert f"{mean:.3f}" in stdout


def scored(items: list[dict], qid: str) -> list[dict]:
    """The items with the judge's scores of SCORES in ``score`` (as the study's export carries
    each candidate's monoT5 score) and a field that holds no number."""
    judge = {tuple(line.split(",")[:2]): float(line.split(",")[2])
             for line in SCORES.splitlines()[1:]}  # fmt: skip
    return [{**item, "score": judge[qid, item["docno"]], "shown": "yes"} for item in items]


def test_meta_on_an_export_alone_reads_the_scores_its_items_carry(files, indexes, nrp_here):
    carried = export(
        (QUERY_1, scored(ITEMS_1, "d1"), [annotation("alice@lab.org", ALICE_1)]),
        (QUERY_2, scored(ITEMS_2, "d3"), [annotation("alice@lab.org", ALICE_2)]),
    )
    path = write(files / "carried.json", carried)
    for options in ((), ("--scores", "items.score")):
        out = files / f"out{len(options)}"
        stdout, per_query = meta_per_query(
            nrp_here, out, path, *options, "--collection", "demo", "--indexes", indexes
        )
        assert "7 items joined" in stdout and "items.score" in stdout
        # the same scores as scores.csv's judge column: the hand-computed tau-b above
        assert per_query.loc["d1", "kendall_tau"] == pytest.approx(3 / math.sqrt(30))
        assert per_query.loc["d3", "kendall_tau"] == pytest.approx(1 / 3)


def test_scores_of_a_query_in_two_tasks_count_once_and_unannotated_tasks_are_skipped(files):
    from nrp.meta.labelstudio import read_label_studio_scores

    alice, bob = annotation("alice@lab.org", ALICE_1), annotation("bob@lab.org", BOB_1)
    split = export(
        (QUERY_1, scored(ITEMS_1, "d1"), [alice]),
        (QUERY_1, scored(ITEMS_1, "d1"), [bob]),  # the same query for another annotator
        ("a query no map holds", ITEMS_2, []),  # nobody annotated it: never looked up
    )
    path = write(files / "split.json", split)
    found = read_label_studio_scores(path, query_map=files / "map.csv")
    assert found[["qid", "answer_id"]].values.tolist() == [["d1", d] for d in "abcde"]
    assert found["items.score"].tolist() == [0.9, 0.8, 0.1, 0.5, 0.3]
    other = scored(ITEMS_1, "d1")
    other[1] = {**other[1], "score": 0.05}
    path = write(files / "clash.json", export((QUERY_1, scored(ITEMS_1, "d1"), [alice]),
                                              (QUERY_1, other, [bob])))  # fmt: skip
    with pytest.raises(InputError, match="answer_id 'b' is given twice for qid 'd1'"):
        read_label_studio_scores(path, query_map=files / "map.csv")


def test_an_export_without_the_scores_asked_for_is_one_line_and_exit_2(files, nrp_here):
    items = scored(ITEMS_1, "d1")
    items[2] = {k: v for k, v in items[2].items() if k != "score"}
    path = write(files / "partly.json", export((QUERY_1, items, [annotation("a@b", ALICE_1)])))
    code, _, stderr = nrp_here("meta", path, "--scores", "items.score")
    assert code == 2 and stderr == (
        f"nrp: error: {path}: task 1 (id 11): data.items entry 3 has no number in 'score' "
        "(found None)\n"
    )
    code, _, stderr = nrp_here("meta", str(files / "scores.csv"))
    assert code == 2 and stderr == (
        f"nrp: error: give the human labels file after {files / 'scores.csv'} (only a Label "
        "Studio export holds both the rankings and the scores)\n"
    )


def test_meta_with_a_query_map_file_and_two_annotators_in_one_export(files, nrp_here):
    out = files / "out"
    code, _, stderr = nrp_here(
        "meta", str(files / "scores.csv"), str(files / "both.json"),
        "--query-map", str(files / "map.csv"), "--bootstrap", "0", "--out", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    per_query = pd.read_csv(out / "meta_per_query.csv", dtype={"qid": str}).set_index("qid")
    # each item's label is the mean over alice and bob: d1 a 1.5, b 3, c 0, d 1 against judge
    # a .9, b .8, c .1, d .5: (a, b) D, the five other pairs C: (5 - 1) / 6 = 2/3
    assert per_query.loc["d1", "kendall_tau"] == pytest.approx(2 / 3)
    # d3 a 1, b 0, c 1.5 against a .7, b .2, c .4: (a, b) C, (a, c) D, (b, c) C: 1/3
    assert per_query.loc["d3", "kendall_tau"] == pytest.approx(1 / 3)


# alice against bob, per query:
#   d1: alice b 3, a 1, d 1, c 0; bob b 3, a 2, d 1, c 0: (a, d) tied for alice, the other five
#       pairs concordant: tau-b = 5 / sqrt((6 - 1) * 6) = 5 / sqrt(30) = 0.9129
#   d3: alice c 2, a 1, b 0; bob a 1, c 1, b 0: (a, c) tied for bob, (a, b), (b, c) concordant:
#       tau-b = 2 / sqrt(3 * (3 - 1)) = 2 / sqrt(6) = 0.8165
TAU = (5 / math.sqrt(30) + 2 / math.sqrt(6)) / 2  # 0.8647
# Krippendorff's alpha, ordinal, over the 7 items both ranked (pairs of labels):
#   d1 a (1, 2), b (3, 3), c (0, 0), d (1, 1); d3 a (1, 1), b (0, 0), c (2, 1).
#   Coincidences: o00 4, o11 4, o12 = o21 2, o33 2; n0 4, n1 6, n2 2, n3 2, n 14.
#   Ordinal distances (sum of n_g from c to k - (n_c + n_k) / 2)^2: d01 25, d02 81, d03 121,
#   d12 16, d13 36, d23 4. Observed sum o_ck d_ck = 2 * 2 * 16 = 64; expected
#   sum n_c n_k d_ck = 2 * (24*25 + 8*81 + 8*121 + 12*16 + 12*36 + 4*4) = 5712.
#   alpha = 1 - (n - 1) * 64 / 5712 = 1 - 13 * 64 / 5712 = 0.8543
ALPHA = 1 - 13 * 64 / 5712


def test_annotators_on_two_exports_and_on_one_with_two_annotators(files, nrp_here):
    table = files / "agreement.csv"
    code, stdout, stderr = nrp_here(
        "annotators", str(files / "alice.json"), str(files / "bob.json"),
        "--query-map", str(files / "map.csv"), "--out", str(table),
    )  # fmt: skip
    assert code == 0, stderr
    row = pd.read_csv(table).iloc[0]
    assert (row["dimension"], row["kind"], row["coders"], row["units"]) == (
        "ranking",
        "ranking",
        2,
        7,
    )
    assert row["tau_pairwise_mean"] == pytest.approx(TAU)
    assert row["alpha"] == pytest.approx(ALPHA)
    assert "0.854 (ordinal)" in stdout and "0.865" in stdout
    # the same annotations in one export, two per task: one coder per annotator; the query
    # texts need no map here (both coders name the queries alike)
    code, _, stderr = nrp_here("annotators", str(files / "both.json"), "--out", str(table))
    assert code == 0, stderr
    row = pd.read_csv(table).iloc[0]
    assert row["tau_pairwise_mean"] == pytest.approx(TAU)
    assert row["alpha"] == pytest.approx(ALPHA)


def bad_exports(tmp_path) -> dict[str, tuple[str, str]]:
    """name -> (file content, the end of the one-line error)."""
    good = annotation("alice@lab.org", ALICE_2)
    unknown = annotation("alice@lab.org", {"rank": ["c", "z9", "b"]})
    twice = annotation("alice@lab.org", {"top": ["c", "a"], "low": ["a"]})
    return {
        "notjson.json": (
            '[{"data": {"query": "x", ',
            "notjson.json:1: not a JSON file (Expecting property name enclosed in double quotes: "
            "line 1 column 26 (char 25))",
        ),
        "noitems.json": (
            json.dumps([*export((QUERY_2, ITEMS_2, [good])), {"id": 3, "data": {"query": "x"}}]),
            "task 2 (id 3): no data.items (a ranking task lists its candidates there)",
        ),
        "unknown.json": (
            json.dumps(export((QUERY_2, ITEMS_2, [unknown]))),
            "task 1 (id 11): the ranker names 'z9', not an item of data.items",
        ),
        "unmapped.json": (
            json.dumps(export((QUERY_2, ITEMS_2, [good]), ("is coffee bad", ITEMS_2, [good]))),
            f"task 2 (id 12): query 'is coffee bad' is not in {tmp_path / 'map.csv'}",
        ),
        "twice.json": (
            json.dumps(export((QUERY_2, ITEMS_2, [twice]))),
            "task 1 (id 11): item 'a' ranked twice",
        ),
        "noranker.json": (
            json.dumps(export((QUERY_2, ITEMS_2, [{"completed_by": 7, "result": []}]))),
            "task 1 (id 11): one ranker result expected, found 0",
        ),
        # issue 60, item 5: taken silently before (the last key kept, NaN an id, one item lost)
        "dupkey.json": (
            json.dumps(export((QUERY_2, ITEMS_2, [good]))).replace('"id": 11', '"id": 1, "id": 2'),
            "dupkey.json: not a JSON file (key 'id' given twice in one object)",
        ),
        "nanid.json": (
            json.dumps(export((QUERY_2, ITEMS_2, [good]))).replace('"id": 11', '"id": NaN'),
            "nanid.json: not a JSON file (NaN is not a JSON value)",
        ),
        "sameid.json": (
            json.dumps(export((QUERY_2, [{**i, "id": "x"} for i in ITEMS_2], [good]))),
            "task 1 (id 11): id 'x' names two items ('a' and 'b')",
        ),
        "nrp.json": (
            json.dumps([{"id": 1, "data": {"nrp_item": "rank-1", "items": ITEMS_2}}]),
            "task 1 (id 1): an export of an nrp review project (data.nrp_item): import it with "
            "nrp review --import-label-studio and read the project's human files",
        ),
    }


@pytest.mark.parametrize(
    "name",
    ["notjson.json", "noitems.json", "unknown.json", "unmapped.json",
     "twice.json", "noranker.json", "nrp.json", "dupkey.json", "nanid.json", "sameid.json"],
)  # fmt: skip
@pytest.mark.parametrize("command", ["meta", "annotators"])
def test_a_bad_export_is_one_line_and_exit_2(files, nrp_here, name, command):
    text, message = bad_exports(files)[name]
    (files / name).write_text(text, encoding="utf-8")
    first = str(files / "scores.csv") if command == "meta" else str(files / "bob.json")
    code, _, stderr = nrp_here(
        command, first, str(files / name), "--query-map", str(files / "map.csv")
    )
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"nrp: error: {files / name}:")
    assert lines[0].endswith(message)


def test_scores_with_qids_need_the_query_texts_mapped(files, nrp_here):
    code, _, stderr = nrp_here("meta", str(files / "scores.csv"), str(files / "alice.json"))
    assert code == 2
    assert "names its queries by their text" in stderr and "--query-map" in stderr
    # a map naming one text twice, for two qids, is ambiguous
    (files / "map2.csv").write_text(
        f"qid,query\nd1,{QUERY_1}\nd2,{QUERY_2}\nd3,{QUERY_2.upper()}\n"
    )
    with pytest.raises(InputError, match=r"task 2 \(id 12\): query .* names several queries"):
        read_human(files / "alice.json", query_map=QueryMap.read(files / "map2.csv"))


def test_the_collection_topics_map_query_texts(indexes):
    topics = Collection.load("demo", indexes).topics
    mapping = QueryMap.from_frame(topics, "demo")
    assert mapping.qid(QUERY_1, "task 1", "x.json") == "d1"
    assert mapping.qid(" HOW much sleep do teenagers   need ", "task 2", "x.json") == "d3"


def test_scores_without_qids_join_on_ids_and_the_export_gives_the_queries(files, nrp_here):
    """Scores keyed by item id alone: the export's queries (here its texts) group the items."""
    items = [{"id": d, "text": d} for d in ("x1", "x2", "x3")]
    ranked = annotation("alice@lab.org", {"top": ["x3"], "rest": ["x1", "x2"]})
    other = annotation("alice@lab.org", {"rank": ["y2", "y1"]})
    write(files / "small.json", export(
        (QUERY_2, items, [ranked]), ("q two", [{"id": "y1"}, {"id": "y2"}], [other])
    ))  # fmt: skip
    (files / "bare.csv").write_text("answer_id,judge\nx1,3\nx2,1\nx3,2\ny1,1\ny2,2\n")
    out = files / "out"
    code, _, stderr = nrp_here("meta", str(files / "bare.csv"), str(files / "small.json"),
                               "--bootstrap", "0", "--out", str(out))  # fmt: skip
    assert code == 0, stderr
    per_query = pd.read_csv(out / "meta_per_query.csv").set_index("qid")["kendall_tau"]
    # x: labels x3 2, x1 0, x2 0 against judge 3, 1, 2: (x1, x2) tied in the labels,
    # (x1, x3) D, (x2, x3) C: tau-b = 0 / sqrt(3 * 2) = 0; y: y2 1, y1 0 as the judge: 1
    assert per_query.to_dict() == {QUERY_2: 0.0, "q two": 1.0}
    # ids that repeat across queries need qids on both sides
    code, _, stderr = nrp_here("meta", str(files / "bare.csv"), str(files / "alice.json"))
    assert code == 2 and "names items of several queries" in stderr
