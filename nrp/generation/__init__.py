"""Answer generation (``nrp generate``): prompt strategies and batched, resumable generation."""

from nrp.generation.generate import (
    STUDY_OPTIONS,
    STUDY_SAMPLES,
    derive_seed,
    generate_answers,
    parse_llm,
)
from nrp.generation.prompts import STUDY_PROMPTS, load_prompt, load_prompts
from nrp.generation.records import strip_echo

__all__ = [
    "STUDY_OPTIONS",
    "STUDY_PROMPTS",
    "STUDY_SAMPLES",
    "derive_seed",
    "generate_answers",
    "load_prompt",
    "load_prompts",
    "parse_llm",
    "strip_echo",
]
