"""The review app in a real headless Chromium: two reviewers at work side by side.

alice signs in with her token, ranks q1 by dragging a card (and ties two with ``=``), ranks q2
with the keyboard, grades three answers (keys and a click), confirms one judge label and
corrects another, reloads, and finds everything kept; a change from a stale second tab of hers
is refused and that tab shows the saved ranking. bob works in another tab at the same time,
with the keyboard only. The export then gives ``nrp meta`` the numbers computed by hand
in ``test_two_reviewers_rank_grade_and_verify``. Screenshots of every screen go to
``$NRP_SCREENSHOTS`` (default: the test's tmp folder).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from devtools import Browser, find_chromium
from review_project import study_project
from review_server import TOKENS, ReviewServer

from nrp.meta.report import meta_from_files
from nrp.review.desk import ReviewDesk

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

RANKING = (
    "[...document.querySelectorAll('#ranking .group')].map(g => [...g.querySelectorAll('.card')]"
    ".map(c => c.dataset.cid).join('=')).join(' > ')"
)
SAVED = "document.querySelector('#status').textContent.startsWith('saved ✓')"


def saved_after(page, action) -> None:
    """Do ``action`` and wait until the page says the change is saved."""
    page.eval("document.querySelector('#status').textContent = ''")
    action()
    page.wait_for(SAVED)


def open_item(page, item_id: str) -> None:
    page.eval(f"location.hash = '#/p/study/i/' + encodeURIComponent({item_id!r})")
    page.wait_for(f"document.querySelector('.label') && document.querySelector('.label')"
                  f".textContent.startsWith({item_id.split(':')[0]!r})")  # fmt: skip


def test_two_reviewers_rank_grade_and_verify(tmp_path):
    """Candidates: q1 c1 a1, c2 a2, c3 d9 (a judged document), c4 a3; q2 c1 b1, c2 b2, c3 b3.

    alice: q1 c4 > c1 > c2 = c3, that is a3 > a1 > [a2, d9] (labels 3, 2, 0, 0); q2 c2 > c1 >
    c3 = b2 > b1 > b3; grades a1 2, a2 1, a3 0; verdicts a1 TRUE (confirmed), a2 FALSE.
    bob: q1 as shown, a1 > a2 > d9 > a3; q2 as shown, b1 > b2 > b3; grades 2, 2, 0; verdicts
    TRUE, NOT GIVEN.

    Scores s: a1 .9, a2 .5, a3 .1; b1 .3, b2 .2, b3 .1 (d9 unscored, left out).
    alice q1 (a1 2, a2 0, a3 3): (a1, a2) concordant, (a1, a3) and (a2, a3) discordant:
    tau = -1/3; q2 (b1 1, b2 2, b3 0): (b1, b2) discordant, the others concordant: 1/3; mean 0.
    bob: both queries in the score's order: tau 1 and 1.
    grades.csv (mean of both): a1 2, a2 1.5, a3 0: in the score's order, tau 1.
    The judge said TRUE for a1 (0.3) and a2 (0.4): against alice's verdicts, 1 of 2 right."""
    shots = Path(os.environ.get("NRP_SCREENSHOTS") or tmp_path / "screens")
    project = study_project(("alice", "bob"), 2).write(tmp_path / "study.json")
    server = ReviewServer(project, tmp_path / "review.log").start()
    try:
        with Browser(CHROMIUM, tmp_path / "profile") as browser:
            alice, bob = browser.page(), browser.page()
            # alice signs in with the form; bob with the login link nrp review prints
            alice.goto(f"{server.url}/review/")
            alice.wait_for("document.querySelector('#token')")
            alice.screenshot(shots / "01-login.png")
            alice.eval(f"document.querySelector('#token').value = {TOKENS['alice']!r}")
            alice.click("#login")
            alice.wait_for("document.querySelector('#items')")
            assert alice.eval("document.querySelector('#who').textContent") == "reviewer: alice"
            bob.goto(f"{server.url}/review/#token={TOKENS['bob']}")
            bob.wait_for("document.querySelector('#items')")
            alice.screenshot(shots / "02-items.png")

            # -- ranking: alice drags c4 to the top, then ties c3 with c2 by keys
            alice.key("Enter")  # the first item to do: rank:q1
            alice.wait_for("document.querySelector('#ranking')")
            assert alice.eval(RANKING) == "c1 > c2 > c3 > c4"
            saved_after(alice, lambda: alice.drag(".card[data-cid='c4']", ".gap[data-gap='0']"))
            assert alice.eval(RANKING) == "c4 > c1 > c2 > c3"
            for key in "jjj":  # focus moves from the dropped card c4 down to c3
                alice.key(key)
            saved_after(alice, lambda: alice.key("="))
            assert alice.eval(RANKING) == "c4 > c1 > c2=c3"
            alice.screenshot(shots / "03-rank.png")
            # bob, meanwhile, keeps q1 as shown: Enter saves it and opens the next item
            bob.key("Enter")
            bob.wait_for("document.querySelector('#ranking')")
            saved_after(bob, lambda: bob.key("Enter"))
            bob.wait_for("document.querySelector('#question').textContent == 'question q2'")

            alice.key("Enter")
            alice.wait_for("document.querySelector('#question').textContent == 'question q2'")
            saved_after(alice, lambda: alice.key("d"))  # c1 below c2
            assert alice.eval(RANKING) == "c2 > c1 > c3"
            saved_after(bob, lambda: bob.key("Enter"))

            # -- grading: a key for a1, a click for a2, a key for a3
            alice.key("Enter")
            alice.wait_for("document.querySelector('#grades')")
            saved_after(alice, lambda: alice.key("2"))
            alice.screenshot(shots / "04-grade.png")
            alice.key("Enter")
            alice.wait_for("document.querySelector('#answer').textContent == 'answer a2'")
            saved_after(alice, lambda: alice.click("input[name='relevance'][value='1']"))
            alice.key("Enter")
            alice.wait_for("document.querySelector('#answer').textContent == 'answer a3'")
            saved_after(alice, lambda: alice.key("0"))
            for answer, label in zip(("a1", "a2", "a3"), "220", strict=True):
                bob.wait_for(
                    f"document.querySelector('#answer') && "
                    f"document.querySelector('#answer').textContent == 'answer {answer}'"
                )
                saved_after(bob, lambda label=label: bob.key(label))
                bob.key("Enter")

            # -- verifying: alice confirms a1's TRUE, corrects a2 to FALSE by a click
            alice.key("Enter")
            alice.wait_for("document.querySelector('#judge')")
            assert "confidence 0.30" in alice.eval("document.querySelector('#judge').textContent")
            saved_after(alice, lambda: alice.key("c"))
            alice.key("Enter")
            alice.wait_for("document.querySelector('#answer').textContent == 'answer a2'")
            saved_after(alice, lambda: alice.click("button[data-choice='FALSE']"))
            alice.screenshot(shots / "05-verify.png")
            bob.wait_for("document.querySelector('#judge')")
            saved_after(bob, lambda: bob.key("t"))
            bob.key("Enter")
            bob.wait_for("document.querySelector('#answer').textContent == 'answer a2'")
            saved_after(bob, lambda: bob.key("n"))

            # -- a reload keeps the work: the verdict, the tie, the grades
            alice.reload()
            alice.wait_for("document.querySelector('#judge')")
            chosen = "document.querySelector('#verdicts .chosen').dataset.choice"
            assert alice.eval(chosen) == "FALSE"
            open_item(alice, "rank:q1")
            assert alice.eval(RANKING) == "c4 > c1 > c2=c3"
            open_item(alice, "grade:a2")
            assert alice.eval("document.querySelector('input[value=\"1\"]').checked") is True
            alice.eval("location.hash = '#/p/study'")
            alice.wait_for("document.querySelector('#progress')")
            assert alice.eval("document.querySelectorAll('#items .done').length") == 7
            alice.screenshot(shots / "06-progress.png")

            # -- alice in a second tab, on a ranking she then changes in the first: the second
            # tab's change is refused (409) and it shows the saved ranking instead
            second = browser.page()
            second.goto(f"{server.url}/review/#token={TOKENS['alice']}")
            second.wait_for("document.querySelector('#items')")
            open_item(second, "rank:q2")
            assert second.eval(RANKING) == "c2 > c1 > c3"
            open_item(alice, "rank:q2")
            saved_after(alice, lambda: alice.key("d"))  # c2 below c1
            assert alice.eval(RANKING) == "c1 > c2 > c3"
            second.key("d")
            second.wait_for("document.querySelector('#status').textContent.startsWith('saved "
                            "elsewhere')")  # fmt: skip
            assert second.eval(RANKING) == "c1 > c2 > c3"
            second.screenshot(shots / "07-conflict.png")
            saved_after(alice, lambda: alice.key("u"))  # back to c2 > c1 > c3
            assert alice.eval(RANKING) == "c2 > c1 > c3"
            assert alice.errors() == [] and bob.errors() == [] and second.errors() == []
    finally:
        server.stop()

    desk = ReviewDesk.open(project)
    assert [(p["reviewer"], p["done"]) for p in desk.progress()] == [("alice", 7), ("bob", 7)]
    out = tmp_path / "export"
    desk.export_human(out)
    assert (out / "rankings.alice.jsonl").read_text() == (
        '{"qid": "q1", "ranking": ["a3", "a1", ["a2", "d9"]]}\n'
        '{"qid": "q2", "ranking": ["b2", "b1", "b3"]}\n'
    )
    scores = tmp_path / "scores.csv"
    scores.write_text(
        "answer_id,qid,s\na1,q1,0.9\na2,q1,0.5\na3,q1,0.1\nb1,q2,0.3\nb2,q2,0.2\nb3,q2,0.1\n"
    )
    alice_meta = meta_from_files(scores, out / "rankings.alice.jsonl", n_bootstrap=0)
    per_query = alice_meta.result.per_query.set_index("qid")["kendall_tau"].to_dict()
    assert per_query == {"q1": pytest.approx(-1 / 3), "q2": pytest.approx(1 / 3)}
    assert alice_meta.result.row("s", "ranking")["tau_mean"] == pytest.approx(0.0)
    bob_meta = meta_from_files(scores, out / "rankings.bob.jsonl", n_bootstrap=0)
    assert bob_meta.result.row("s", "ranking")["tau_mean"] == pytest.approx(1.0)
    grades = meta_from_files(scores, out / "grades.csv", n_bootstrap=0)
    assert grades.result.row("s", "relevance")["tau_mean"] == pytest.approx(1.0)
    assert (out / "grades.csv").read_text().splitlines()[1:] == [
        "a1,q1,2.0", "a2,q1,1.5", "a3,q1,0.0"
    ]  # fmt: skip
    judge = tmp_path / "judge.csv"
    judge.write_text("answer_id,qid,judge.label,judge.confidence\na1,q1,TRUE,0.3\na2,q1,TRUE,0.4\n")
    verdicts = meta_from_files(
        judge, out / "verify.alice.csv", categorical=True, label_column="judge.label",
        human_columns=["label"],
    )  # fmt: skip
    assert verdicts.result.summary["accuracy"] == pytest.approx(0.5)
