"""Martin Porter's stemmer as Terrier runs it (``terms/PorterStemmer.java``), in plain Python.

Why a port of our own: the lexical rankers stem with NLTK's ``PorterStemmer`` in
``MARTIN_EXTENSIONS`` mode (the 1980 algorithm with the departures of Porter's own published
implementations, which Terrier's PorterStemmer.java is; see ``nrp.rankers.text_pipeline``), and
importing NLTK loads scipy.stats and most of NLTK: about 1.3 s, as long as stemming every
distinct word of 100,000 answers. ``stem`` applies the same rules as NLTK's ``MARTIN_EXTENSIONS``
mode, rule for rule and in the same order (``nltk/stem/porter.py``, the paper's steps 1a to 5b),
with the departures that mode takes: "bli" -> "ble" (not "abli" -> "able"), the added
"logi" -> "log", step 1c's plain ``(*v*) Y -> I``, ``*o`` only for three letters or more, words of
one or two letters left alone. Terms are already lowercased (``stem`` does not lowercase).
The tests compare it with NLTK on every distinct token of the MEDIQA 2019, LiveQA 2017 and
CLEF eHealth files.

A rule is (suffix, replacement, least measure of the stem or None). As in the paper (and NLTK's
``_apply_rule_list``), only the first rule of a step whose suffix the word ends with is tried:
when its condition fails the word is left as it is.
"""

from __future__ import annotations

_VOWELS = frozenset("aeiou")

Rule = tuple[str, str, int]

_STEP1A: tuple[tuple[str, str], ...] = (("sses", "ss"), ("ies", "i"), ("ss", "ss"), ("s", ""))
#: step 2, (m>0) each; "bli" and "logi" as in Porter's published implementations
_STEP2: tuple[tuple[str, str], ...] = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
    ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"),
    ("ization", "ize"), ("ation", "ate"), ("ator", "ate"), ("alism", "al"), ("iveness", "ive"),
    ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"),
    ("logi", "log"),
)  # fmt: skip
#: step 3, (m>0) each
_STEP3: tuple[tuple[str, str], ...] = (
    ("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""),
    ("ness", ""),
)  # fmt: skip
#: step 4, (m>1) each; "ion" also needs the stem to end in "s" or "t"
_STEP4: tuple[str, ...] = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
    "ism", "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip


def _consonants(word: str) -> list[bool]:
    """Per letter, True for a consonant: not a vowel, and a "y" only at the start or after a
    vowel (the paper's definition; NLTK's ``_consonant_flags``)."""
    flags: list[bool] = []
    for i, letter in enumerate(word):
        if letter in _VOWELS:
            flags.append(False)
        elif letter == "y":
            flags.append(i == 0 or not flags[i - 1])
        else:
            flags.append(True)
    return flags


def _measure(stem: str) -> int:
    """The paper's m: the number of vowel-consonant sequences, [C](VC){m}[V]."""
    flags = _consonants(stem)
    return sum(1 for i in range(1, len(flags)) if flags[i] and not flags[i - 1])


def _has_vowel(stem: str) -> bool:
    """The paper's ``*v*``."""
    return not all(_consonants(stem))


def _ends_double_consonant(word: str) -> bool:
    """The paper's ``*d``."""
    return len(word) >= 2 and word[-1] == word[-2] and _consonants(word)[-1]


def _ends_cvc(word: str) -> bool:
    """The paper's ``*o``: consonant, vowel, consonant other than w, x or y (three letters or
    more, as Porter's implementations)."""
    if len(word) < 3 or word[-1] in "wxy":
        return False
    flags = _consonants(word)
    return flags[-3] and not flags[-2] and flags[-1]


def _first_rule(word: str, rules: tuple[tuple[str, str], ...], least: int) -> str:
    """The first rule whose suffix ``word`` ends with, applied when the stem's measure exceeds
    ``least - 1``; the word unchanged when that rule's condition fails or none matches."""
    for suffix, replacement in rules:
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            return stem + replacement if _measure(stem) >= least else word
    return word


def _step1b(word: str) -> str:
    """(m>0) EED -> EE; (*v*) ED, ING -> removed, then AT, BL, IZ -> +E, a double consonant
    other than l, s, z undoubled, or (m=1 and *o) -> +E."""
    if word.endswith("eed"):
        stem = word[:-3]
        return stem + "ee" if _measure(stem) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            stem = word[: -len(suffix)]
            break
    else:
        return word
    if stem.endswith(("at", "bl", "iz")):
        return stem + "e"
    if _ends_double_consonant(stem):
        return stem[:-1] if stem[-1] not in "lsz" else stem
    if _measure(stem) == 1 and _ends_cvc(stem):
        return stem + "e"
    return stem


def _step4(word: str) -> str:
    """(m>1) suffixes removed; (m>1 and (*S or *T)) ION removed."""
    for suffix in _STEP4:
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            keep = _measure(stem) > 1 and (suffix != "ion" or stem[-1] in "st")
            return stem if keep else word
    return word


def _step5(word: str) -> str:
    """5a: (m>1) E, and (m=1 and not *o) E, removed; 5b: (m>1 and *d and *L) -> single letter."""
    if word.endswith("e"):
        stem = word[:-1]
        measure = _measure(stem)
        if measure > 1 or (measure == 1 and not _ends_cvc(stem)):
            word = stem
    if word.endswith("ll") and _measure(word[:-1]) > 1:
        word = word[:-1]
    return word


def stem(word: str) -> str:
    """The stem of a lowercased word, as NLTK's ``PorterStemmer(mode=MARTIN_EXTENSIONS)
    .stem(word, to_lowercase=False)`` gives it."""
    if len(word) <= 2:
        return word
    for suffix, replacement in _STEP1A:
        if word.endswith(suffix):
            word = word[: -len(suffix)] + replacement
            break
    word = _step1b(word)
    if word.endswith("y") and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    word = _first_rule(word, _STEP2, 1)
    word = _first_rule(word, _STEP3, 1)
    return _step5(_step4(word))
