"""Prompt templates: the packaged files load, render verbatim, and bad files fail on one line."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest

from nrp.errors import ConfigError, InputError
from nrp.llm.prompts import TEMPLATE_DIR, load_template, template_names

ROOT = Path(__file__).resolve().parents[2]


def test_packaged_templates_and_package_data():
    assert template_names() == [
        "geval-v1",
        "prometheus-v1",
        "tfn-adaptive-v1",
        "tfn-sequential-v1",
        "tfn-single-v1",
    ]
    # the templates ship in the wheel: pyproject's package-data covers them
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["nrp"]
    assert "llm/templates/*" in package_data
    assert (TEMPLATE_DIR / "criteria-v1.yaml").is_file()


def test_geval_template_sections_and_hash():
    template = load_template("geval-v1", ("system", "user", "reference"))
    assert template.name == "geval-v1"
    assert (
        template.sha256 == hashlib.sha256((TEMPLATE_DIR / "geval-v1.txt").read_bytes()).hexdigest()
    )
    assert template.placeholders("user") == {
        "criterion_title",
        "criterion_description",
        "question",
        "answer",
        "reference_block",
    }
    assert not template.sections["system"].startswith("#")  # the header comment is not content


def test_render_is_verbatim_and_single_pass():
    template = load_template("tfn-single-v1")
    values = {"question": "Q {{answer}}", "reference": "R {x}", "answer": "A"}
    messages = template.messages("user", values)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "Q {{answer}}" in user  # a value holding a placeholder stays as written
    assert "R {x}" in user and "Answer to check:\nA" in user
    with pytest.raises(ConfigError, match="no value for"):
        template.render("user", {"question": "q"})


def test_a_template_given_by_path(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("# my template\n[[user]]\nRate {{answer}} for {{question}}.\n")
    template = load_template(str(path), ("user",), {"answer", "question"})
    assert template.name == "mine"
    assert template.render("user", {"answer": "a", "question": "q"}) == "Rate a for q."


def test_bad_templates_name_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("[[user]]\nfine {{answer}}\nnot fine {{secret}}\n")
    with pytest.raises(InputError, match=r"bad\.txt:3: unknown placeholder\(s\) \{\{secret\}\}"):
        load_template(str(path), ("user",), {"answer"})
    path.write_text("text before\n[[user]]\nx\n")
    with pytest.raises(InputError, match=r"bad\.txt:1: text before the first"):
        load_template(str(path))
    path.write_text("[[user]]\nx\n[[user]]\ny\n")
    with pytest.raises(InputError, match=r"bad\.txt:3: section \[\[user\]\] appears twice"):
        load_template(str(path))
    path.write_text("[[user]]\nx\n")
    with pytest.raises(InputError, match=r"missing section\(s\) \[\[given\]\], \[\[truth\]\]"):
        load_template(str(path), ("given", "truth"))
    with pytest.raises(ConfigError, match="unknown prompt template 'geval-v9'"):
        load_template("geval-v9")
