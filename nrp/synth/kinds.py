"""Question kinds of a synthetic test set, their prompts, and reading a question/answer pair
out of what the LLM wrote.

Four kinds, each a versioned prompt template in ``nrp/synth/templates`` (``KIND-vN.txt``, the
format of answer-generation prompts: one ``[[prompt]]`` section whose ``{{query}}`` receives the
passage text), so generation, its seeds, its resumable store and its record of the template's
name and SHA-256 are those of ``nrp generate`` (``nrp.generation``):

- ``factual``: a question whose answer is a fact the passage states (name, number, date, place);
- ``yesno``: a yes/no question; the answer must start with a yes or no word (English or
  Vietnamese: yes/no, có/không, đúng/sai, phải/không phải), else the pair is unreadable;
- ``instruction``: a request (list, explain, summarise, compare) the passage fulfils;
- ``multi``: a question that needs two consecutive passages of one document.

A folder of one's own templates (``KIND-vN.txt``, same format; e.g. prompts written in the
knowledge base's language) replaces the packaged ones (``templates=DIR``). Every packaged prompt
asks for one pair as ``Question: ...`` / ``Answer: ...``. ``parse_pair`` reads the
first such pair; the labels may be in Vietnamese (``Câu hỏi``, ``Trả lời``, ``Câu trả lời``,
``Đáp án``), short (``Q``, ``A``), bold (``**Question:**``); the question runs to the answer's
label, the answer to the next question label or the end. A reply with a question label and
no answer label ("Question: Is it X? Yes, it is.", small models' habit) is read as a question
ending at its first question mark and the answer after it. Nothing else is guessed: a reply
without such a pair, or with a question or answer without a letter or digit (empty, or the
prompt's own "Question: ..." copied), is unreadable (counted, never an error).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from nrp.errors import ConfigError

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
SUPPORT_TEMPLATE = "support"
_VERSIONED = re.compile(r"^(?P<name>.+)-v(?P<version>\d+)$")


@dataclass(frozen=True)
class Kind:
    """A question kind: its name, how many consecutive passages its prompt shows, and the words
    its answer must start with (none: any)."""

    name: str
    passages: int
    description: str
    answer_starts: tuple[str, ...] = ()


YES_NO_WORDS = ("yes", "no", "có", "không", "đúng", "sai", "phải", "không phải")

KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("factual", 1, "a fact the passage states (name, number, date, place)"),
        Kind("yesno", 1, "a yes/no question the passage answers", YES_NO_WORDS),
        Kind("instruction", 1, "a request (list, explain, summarise) the passage fulfils"),
        Kind("multi", 2, "a question that needs two consecutive passages of one document"),
    )
}
KIND_NAMES = tuple(KINDS)


def parse_kinds(value: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Kind names from a comma-separated string or a list; unknown or repeated ones refused."""
    names = [k.strip() for k in value.split(",")] if isinstance(value, str) else list(value)
    names = [n for n in names if n]
    if not names:
        raise ConfigError(f"no question kinds given (use some of {', '.join(KIND_NAMES)})")
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        raise ConfigError(
            f"unknown question kind(s) {', '.join(unknown)} (use {', '.join(KIND_NAMES)})"
        )
    if len(set(names)) != len(names):
        raise ConfigError("a question kind is named twice")
    return tuple(names)


def template_file(name: str, folder: str | Path | None = None) -> Path:
    """The newest template ``NAME-vN.txt`` (``factual`` -> ``factual-v1.txt``) in ``folder``
    (a user's own prompts, e.g. written in the knowledge base's language), else packaged."""
    where = Path(folder) if folder else TEMPLATE_DIR
    if not where.is_dir():
        raise ConfigError(f"{where}: prompt template folder not found")
    best: tuple[int, Path] | None = None
    for path in where.glob(f"{name}-v*.txt"):
        match = _VERSIONED.match(path.stem)
        if match and match.group("name") == name:
            version = int(match.group("version"))
            if best is None or version > best[0]:
                best = (version, path)
    if best is None:
        raise ConfigError(f"{where}: no prompt template {name}-vN.txt for kind {name!r}")
    return best[1]


def prompt_spec(kind: str, folder: str | Path | None = None) -> str:
    """The prompt strategy spec of a kind for ``nrp.generation``: its template file, sent
    through the model's chat template (the generation prompts' ``:chat``)."""
    return f"{template_file(kind, folder)}:chat"


def passages_block(texts: list[str]) -> str:
    """What a prompt's ``{{query}}`` receives: one passage as it is, two under headings."""
    if len(texts) == 1:
        return texts[0]
    return "\n\n".join(f"Passage {i}:\n{text}" for i, text in enumerate(texts, start=1))


# -- reading the reply --------------------------------------------------------------------------
_QUESTION = r"question|q|câu hỏi|yêu cầu|request"
_ANSWER = r"answer|a|trả lời|câu trả lời|đáp án|đáp"
_LABEL = (  # at a line start, after list or quote marks: the name, a number, ":" (bold or not)
    r"(?:^|\n)[ \t>*#_-]*(?:\*\*|__)?\s*(?:{names})\s*(?:\d+\s*)?"
    r"(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?"
)
QUESTION_LABEL = re.compile(_LABEL.format(names=_QUESTION), re.IGNORECASE)
ANSWER_LABEL = re.compile(_LABEL.format(names=_ANSWER), re.IGNORECASE)
_WRAPPING = " \t\n\"'“”‘’*`_"


class Pair(NamedTuple):
    question: str
    answer: str


def _clean(text: str) -> str:
    return " ".join(text.split()).strip(_WRAPPING).strip()


def parse_pair(text: str) -> Pair | None:
    """The first ``Question:`` / ``Answer:`` pair of a reply (module docstring), or None."""
    text = unicodedata.normalize("NFC", text or "")
    question_label = QUESTION_LABEL.search(text)
    if question_label is None:
        return None
    answer_label = ANSWER_LABEL.search(text, question_label.end())
    if answer_label is None:  # "Question: X? Y": the question ends at its question mark
        next_question = QUESTION_LABEL.search(text, question_label.end())
        rest = text[question_label.end() : next_question.start() if next_question else None]
        mark = re.search(r"[?？]", rest)
        if mark is None:
            return None
        question, answer = _clean(rest[: mark.end()]), _clean(rest[mark.end() :])
    else:
        next_question = QUESTION_LABEL.search(text, answer_label.end())
        end = next_question.start() if next_question else len(text)
        question = _clean(text[question_label.end() : answer_label.start()])
        answer = _clean(text[answer_label.end() : end])
    if not re.search(r"\w", question) or not re.search(r"\w", answer):
        return None  # empty, or the template's own "Question: ..." copied
    return Pair(question, answer)


def answer_fits(kind: Kind, answer: str) -> bool:
    """Whether the answer starts as its kind requires (a yes/no answer with a yes/no word)."""
    if not kind.answer_starts:
        return True
    lowered = answer.casefold()
    return any(
        lowered.startswith(word) and not lowered[len(word) : len(word) + 1].isalnum()
        for word in kind.answer_starts
    )
