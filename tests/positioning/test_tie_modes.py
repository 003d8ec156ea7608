"""The tie rules are written once (nrp.ranks): the CLI's --ties choices, the service's
request schemas and the nrp evaluator's parameter read that one constant."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from nrp import engine
from nrp.evaluators.nrp_scores import NRP_PARAMS
from nrp.ranks import DEFAULT_TIE_MODE, TIE_MODES
from nrp.service.schemas import JobRequest, ScoreRequest

ROOT = Path(__file__).resolve().parents[2]
#: modules that still spell the rules out: nrp/cli/score.py is being edited on another branch
#: (issue 28); give its --ties choices=engine.TIE_MODES, default=engine.DEFAULT_TIE_MODE and
#: empty this
STILL_SPELLED: set[str] = set()


def test_the_tie_rules_and_their_default():
    assert TIE_MODES == ("mid", "optimistic", "pessimistic", "strict")
    assert DEFAULT_TIE_MODE == "mid"
    assert (engine.TIE_MODES, engine.DEFAULT_TIE_MODE) == (TIE_MODES, DEFAULT_TIE_MODE)


def test_the_service_and_the_nrp_evaluator_offer_the_same_rules():
    for model in (ScoreRequest, JobRequest):
        field = model.model_fields["ties"]
        assert typing.get_args(field.annotation) == TIE_MODES
        assert field.default == DEFAULT_TIE_MODE
    assert (NRP_PARAMS["ties"].choices, NRP_PARAMS["ties"].default) == (TIE_MODES, "mid")


def test_nrp_agreement_offers_the_same_rules(capsys):
    from nrp.cli import main

    try:
        main(["agreement", "--help"])
    except SystemExit as done:
        assert done.code == 0
    assert "--ties {mid,optimistic,pessimistic,strict}" in capsys.readouterr().out


def test_no_other_module_spells_the_rules_out():
    spelled = re.compile(r"""["']optimistic["'],\s*["']pessimistic["']""")
    found = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "nrp").rglob("*.py")
        if spelled.search(path.read_text(encoding="utf-8"))
    }
    assert found == {"nrp/ranks.py", *STILL_SPELLED}
