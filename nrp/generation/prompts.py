"""Prompt strategies of answer generation: how a query becomes the text an LLM continues.

A strategy is a versioned template file (``nrp/generation/templates/NAME-vN.txt``, the format of
``nrp.llm.prompts``: one ``[[prompt]]`` section with a ``{{query}}`` placeholder). The source
study's four are packaged: ``none`` (the query alone), ``short-qa`` (``Q: {query} A:``),
``long-qa`` (``Question: {query} Answer:``) and ``multimedqa`` (the consumer-health instruction
prompt). A user's own template is given by path (its label is the file's stem).

Spec: ``NAME`` or ``PATH``, optionally followed by ``:chat``.

Design choices, and why:

- **Completion mode by default.** The study prompted base and instruction models alike with the
  template as plain text to continue (``... Answer:``); that is what ``NAME`` does with a local
  model: the text is tokenised as it is (the tokenizer's own BOS, no chat template).
- **Chat mode on request** (``short-qa:chat``): the rendered template is sent as one user
  message through the tokenizer's chat template (an instruction model's native format). An
  OpenAI-compatible endpoint only has chat messages, so it always gets chat mode; the mode
  used is recorded with every answer.
- **Versioned, hashed.** A bare name resolves to its newest packaged version (``short-qa`` ->
  ``short-qa-v1``); the label stored in answers is the name the user gave (the study's prompt
  names), while the template's file name and SHA-256 go into every answer's ``params`` and into
  the resume check, so an edited template is never mixed with answers from the old text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from nrp.errors import ConfigError
from nrp.llm.prompts import PromptTemplate, load_template

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
STUDY_PROMPTS = ("none", "short-qa", "long-qa", "multimedqa")
SECTION = "prompt"
PLACEHOLDERS = ("query",)
CHAT_SUFFIX = ":chat"
_VERSIONED = re.compile(r"^(?P<name>.+)-v(?P<version>\d+)$")


@dataclass(frozen=True)
class PromptStrategy:
    """A loaded strategy: ``label`` (the answers' prompt column), its template, chat mode."""

    label: str
    template: PromptTemplate
    chat: bool = False

    def render(self, query: str) -> str:
        """The prompt text for ``query`` (inserted verbatim)."""
        return self.template.render(SECTION, {"query": query})

    def describe(self) -> dict[str, object]:
        """What identifies the strategy in an answer's recorded parameters."""
        return {
            "prompt": self.label,
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "chat": self.chat,
        }


def packaged_prompts() -> dict[str, Path]:
    """Short name -> the newest packaged template file (``short-qa`` -> ``short-qa-v1.txt``),
    plus every versioned name itself."""
    newest: dict[str, tuple[int, Path]] = {}
    found: dict[str, Path] = {}
    for path in sorted(TEMPLATE_DIR.glob("*.txt")):
        found[path.stem] = path
        match = _VERSIONED.match(path.stem)
        if match:
            version = int(match.group("version"))
            name = match.group("name")
            if name not in newest or newest[name][0] < version:
                newest[name] = (version, path)
    return {**{name: path for name, (_, path) in newest.items()}, **found}


def load_prompt(spec: str) -> PromptStrategy:
    """The strategy a spec names: ``NAME[:chat]`` (packaged) or ``PATH[:chat]`` (a file)."""
    value = spec.strip()
    chat = value.endswith(CHAT_SUFFIX)
    if chat:
        value = value[: -len(CHAT_SUFFIX)].strip()
    if not value:
        raise ConfigError(f"empty prompt strategy in {spec!r}")
    packaged = packaged_prompts()
    if value in packaged:
        path, label = packaged[value], value
    else:
        path = Path(value).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"unknown prompt strategy {value!r}: neither a packaged one "
                f"({', '.join(sorted(packaged))}) nor a template file"
            )
        label = path.stem
    template = load_template(str(path.resolve()), required=(SECTION,), allowed=PLACEHOLDERS)
    return PromptStrategy(label + (CHAT_SUFFIX if chat else ""), template, chat)


def load_prompts(specs: str | list[str] | tuple[str, ...]) -> list[PromptStrategy]:
    """Several strategies (a comma-separated string or a list); labels must be distinct."""
    if isinstance(specs, str):
        specs = [s for s in (p.strip() for p in specs.split(",")) if s]
    strategies = [load_prompt(s) for s in specs]
    if not strategies:
        raise ConfigError("no prompt strategies given")
    labels = [s.label for s in strategies]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise ConfigError(f"prompt strategy named twice: {', '.join(duplicates)}")
    return strategies
