"""The text filters of a synthetic test set: language kept, no reference to "the text", no
verbatim copy of the passage, no near-duplicates. (The fifth filter, support by the passage,
is the LLM judge: ``nrp.synth.synth``.) Each is a pure function of texts, so a test states its
exact outcome.

- **Language** (``detect_language``): a small dependency-free detector of script and
  diacritics, enough to tell the cases a test set needs apart: Vietnamese (Latin letters of which
  at least ``VIETNAMESE_SHARE`` are letters no other Latin-script language writes: đ, ă, ơ, ư,
  ĩ, ũ and the Vietnamese block U+1EA0-U+1EF9, e.g. ả, ạ, ế, ữ; é or ô alone are French too),
  other Latin-script text (``latin``: English, French, ... are not told apart), and other
  scripts by name (``cjk``, ``cyrillic``, ``arabic``, ...). Text with fewer than ``MIN_LETTERS``
  letters is ``und`` (a number, "Có") and matches any language. A question or answer whose
  language differs from its passage's is dropped: a Vietnamese knowledge base gets Vietnamese
  questions, whatever a small model drifts into. Known miss: a short Vietnamese text without
  any of those letters ("Có không?") reads as ``latin``.
- **Refers to the text** (``refers_to_text``): a question a user could not ask without the
  passage in front of them ("according to the passage", "theo văn bản", "trong đoạn văn trên")
  measures reading, not the chatbot; English and Vietnamese phrasings are matched
  (``TEXT_REFERENCES``, case-insensitive, on NFC text).
- **Verbatim overlap** (``verbatim_overlap``): the longest run of words the question shares with
  the passage, as a share of the question's words; at ``max_overlap`` or more the question is a
  copied sentence turned into a question, which retrieval finds by string match alone.
- **Near-duplicates** (``shingle_set``, ``jaccard``, ``NearDuplicates``): character 5-gram
  shingles of the lower-cased question with punctuation and spacing removed; a question whose
  Jaccard similarity with a question kept before it is at least ``threshold`` is dropped (the
  first one stays). Exact Jaccard over shingle sets (each shingle hashed to 8 bytes, so the sets
  stay small): test sets of thousands of questions compare in seconds, with no MinHash
  approximation to explain.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable

MIN_LETTERS = 4
VIETNAMESE_SHARE = 0.03
#: letters only Vietnamese writes among Latin-script languages (lower case, NFC)
VIETNAMESE_LETTERS = frozenset("đăơưĩũ") | frozenset(map(chr, range(0x1EA0, 0x1EFA)))
_SCRIPTS = (  # (name, first code point, last code point)
    ("cjk", 0x2E80, 0x9FFF),
    ("cjk", 0xAC00, 0xD7AF),  # Hangul syllables
    ("cjk", 0xF900, 0xFAFF),
    ("cyrillic", 0x0400, 0x052F),
    ("greek", 0x0370, 0x03FF),
    ("arabic", 0x0600, 0x06FF),
    ("hebrew", 0x0590, 0x05FF),
    ("thai", 0x0E00, 0x0E7F),
    ("devanagari", 0x0900, 0x097F),
)

TEXT_REFERENCES = re.compile(
    "|".join(
        (
            # English
            r"\b(according to|as (stated|mentioned|described|said|shown) in|based on|"
            r"from|in|per) (the|this|that) (given |above |following )?"
            r"(text|passage|passages|document|article|paragraph|excerpt|context)\b",
            r"\b(the|this) (given |above |following )?(text|passage|document|article|"
            r"paragraph|excerpt) (says?|states?|mentions?|describes?|above|below)\b",
            r"\b(the|this) (given|above|following) (text|passage|document|article|excerpt)\b",
            # Vietnamese
            r"\btheo (nội dung )?(văn bản|đoạn văn|đoạn trích|bài viết|bài báo|tài liệu|"
            r"thông tin (trên|trong bài|đã cho|được cung cấp))\b",
            r"\b(trong|dựa (trên|vào)|từ) (nội dung )?(văn bản|đoạn văn|đoạn trích|bài viết|"
            r"bài báo|tài liệu)\b",
            r"\b(văn bản|đoạn văn|đoạn trích|bài viết|bài báo|tài liệu) (trên|này|đã cho|"
            r"nói|cho biết|đề cập)\b",
        )
    ),
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")
SHINGLE = 5


def _letters(text: str) -> list[str]:
    return [c for c in unicodedata.normalize("NFC", text).casefold() if c.isalpha()]


def detect_language(text: str) -> str:
    """``vi``, ``latin``, a script name, or ``und`` (module docstring)."""
    letters = _letters(text)
    if len(letters) < MIN_LETTERS:
        return "und"
    scripts: dict[str, int] = {}
    for c in letters:
        point = ord(c)
        if point < 0x0250 or 0x1E00 <= point <= 0x1EFF:
            name = "latin"
        else:
            name = next((s for s, lo, hi in _SCRIPTS if lo <= point <= hi), "other")
        scripts[name] = scripts.get(name, 0) + 1
    script = max(scripts, key=lambda s: (scripts[s], s))
    if script != "latin":
        return script
    vietnamese = sum(1 for c in letters if c in VIETNAMESE_LETTERS)
    return "vi" if vietnamese / scripts["latin"] >= VIETNAMESE_SHARE else "latin"


def same_language(passage: str, *texts: str) -> bool:
    """Whether every text is in the passage's language (``und`` matches any)."""
    expected = detect_language(passage)
    if expected == "und":
        return True
    return all(detect_language(t) in (expected, "und") for t in texts)


def refers_to_text(question: str) -> str | None:
    """The phrase by which ``question`` refers to the passage, or None."""
    match = TEXT_REFERENCES.search(unicodedata.normalize("NFC", question))
    return match.group(0) if match else None


def words(text: str) -> list[str]:
    """Lower-cased words (NFC), punctuation dropped."""
    return _WORD.findall(unicodedata.normalize("NFC", text).casefold())


def verbatim_overlap(question: str, passage: str) -> float:
    """The longest run of consecutive words shared by question and passage, over the question's
    word count (0 for a question without words)."""
    asked, source = words(question), words(passage)
    if not asked:
        return 0.0
    best = 0
    previous = [0] * (len(source) + 1)
    for a in asked:
        current = [0] * (len(source) + 1)
        for j, s in enumerate(source, start=1):
            if a == s:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best / len(asked)


def shingle_set(text: str, size: int = SHINGLE) -> frozenset[bytes]:
    """Character ``size``-grams of the text lower-cased with everything but letters and digits
    removed, each hashed to 8 bytes (BLAKE2b)."""
    squeezed = "".join(words(text))
    if len(squeezed) <= size:
        grams: Iterable[str] = [squeezed] if squeezed else []
    else:
        grams = (squeezed[i : i + size] for i in range(len(squeezed) - size + 1))
    return frozenset(hashlib.blake2b(g.encode(), digest_size=8).digest() for g in grams)


def jaccard(a: frozenset[bytes], b: frozenset[bytes]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


class NearDuplicates:
    """Questions seen so far; ``check(id, question)`` returns the id of a kept question it
    nearly duplicates (Jaccard >= ``threshold``), else keeps it and returns None."""

    def __init__(self, threshold: float):
        self.threshold = float(threshold)
        self.kept: list[tuple[str, frozenset[bytes]]] = []

    def check(self, item_id: str, question: str) -> tuple[str, float] | None:
        shingles = shingle_set(question)
        for other_id, other in self.kept:
            # |A & B| <= min(|A|, |B|): skip sets whose sizes alone rule the threshold out
            if min(len(shingles), len(other)) < self.threshold * max(len(shingles), len(other)):
                continue
            similarity = jaccard(shingles, other)
            if similarity >= self.threshold:
                return other_id, similarity
        self.kept.append((item_id, shingles))
        return None
