"""Versioned prompt templates: text files in ``nrp/llm/templates/`` (package data), or any file.

A template is named ``STYLE-vN`` (``geval-v1``, ``prometheus-v1``, ``tfn-single-v1``, ...); a
changed prompt is a new file with a new version, never an edit of an old one, so results
computed with ``geval-v1`` stay reproducible. The judge's cache key holds the template's name
and the SHA-256 of its file: even an edited file (or a user's own template, given by path) is
never served results computed with another text.

File format: ``#`` lines before the first section are comments (what the template is for,
where it comes from). Sections start with a line ``[[name]]`` (``system``, ``user``, or the
steps a mode needs) and run to the next section; surrounding blank lines are dropped.
Placeholders are ``{{name}}``; only declared names are allowed (``load_template`` checks them,
naming the file and line), values are inserted verbatim in one pass (an answer that contains
``{{question}}`` stays as written), and single braces are plain text (JSON examples need no
escaping).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from nrp.errors import ConfigError, InputError

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
SECTION_LINE = re.compile(r"^\[\[([A-Za-z][\w-]*)\]\]\s*$")
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")


@dataclass(frozen=True)
class PromptTemplate:
    """A loaded template: its name (file stem), file, SHA-256 (hex) and sections."""

    name: str
    path: Path
    sha256: str
    sections: Mapping[str, str]

    def placeholders(self, section: str) -> set[str]:
        return set(PLACEHOLDER.findall(self.sections[section]))

    def render(self, section: str, values: Mapping[str, str]) -> str:
        """A section with its placeholders replaced (every placeholder must have a value)."""
        if section not in self.sections:
            raise ConfigError(f"template {self.name} ({self.path}) has no [[{section}]] section")

        def value(match: re.Match[str]) -> str:
            key = match.group(1)
            if key not in values:
                raise ConfigError(f"template {self.name}: no value for {{{{{key}}}}}")
            return str(values[key])

        return PLACEHOLDER.sub(value, self.sections[section])

    def messages(
        self, section: str, values: Mapping[str, str], system: str = "system"
    ) -> list[dict[str, str]]:
        """Chat messages: the ``system`` section (when the template has one) and ``section``
        as the user message."""
        out = []
        if system in self.sections:
            out.append({"role": "system", "content": self.render(system, values)})
        out.append({"role": "user", "content": self.render(section, values)})
        return out


def template_names() -> list[str]:
    """Names of the packaged templates."""
    return sorted(p.stem for p in TEMPLATE_DIR.glob("*.txt"))


def template_path(name_or_path: str) -> Path:
    """A packaged template's file by name (``geval-v1``), or the file a path names."""
    value = name_or_path.strip()
    packaged = TEMPLATE_DIR / f"{value}.txt"
    if "/" not in value and "\\" not in value and packaged.is_file():
        return packaged
    path = Path(value).expanduser()
    if path.is_file():
        return path
    raise ConfigError(
        f"unknown prompt template {value!r}: neither a packaged template "
        f"({', '.join(template_names())}) nor a file"
    )


def parse_template(text: str, path: Path) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = SECTION_LINE.match(line)
        if header:
            name = header.group(1)
            if name in sections:
                raise InputError(path, number, f"section [[{name}]] appears twice")
            current = sections[name] = []
        elif current is not None:
            current.append(line)
        elif line.strip() and not line.startswith("#"):
            raise InputError(path, number, "text before the first [[section]] line")
    if not sections:
        raise InputError(path, None, "no [[section]] lines: not a prompt template")
    return {name: "\n".join(lines).strip("\n") for name, lines in sections.items()}


def load_template(
    name_or_path: str,
    required: Iterable[str] = (),
    allowed: Iterable[str] | None = None,
) -> PromptTemplate:
    """Load and check a template: ``required`` sections present, placeholders among
    ``allowed`` (when given). Errors name the file (and line)."""
    path = template_path(name_or_path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, None, "not UTF-8 text") from None
    sections = parse_template(text, path)
    missing = [s for s in required if s not in sections]
    if missing:
        raise InputError(path, None, f"missing section(s) {', '.join(f'[[{s}]]' for s in missing)}")
    if allowed is not None:
        allowed = set(allowed)
        in_sections = False
        for number, line in enumerate(text.splitlines(), start=1):
            in_sections = in_sections or bool(SECTION_LINE.match(line))
            if not in_sections:  # the header comment
                continue
            unknown = sorted(set(PLACEHOLDER.findall(line)) - allowed)
            if unknown:
                raise InputError(
                    path,
                    number,
                    f"unknown placeholder(s) {', '.join('{{' + u + '}}' for u in unknown)} "
                    f"(allowed: {', '.join(sorted(allowed))})",
                )
    return PromptTemplate(path.stem, path, hashlib.sha256(data).hexdigest(), sections)
