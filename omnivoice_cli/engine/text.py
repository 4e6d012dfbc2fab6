"""Everything about text, by one name: the face of the text modules (re-exports only).

These are small pure functions that reproduce the reference (omnivoice 0.2.1) exactly; each idea
lives in its own module:

- `tokenizer`: `TextTokenizer`, the Qwen2 byte-level BPE from the checkpoint's `tokenizer.json`.
- `languages`: `resolve_language`, `list_languages`: language codes, tags and names.
- `vocabulary`: `instruct_vocabulary`, `instruct_synonyms`, `instruct_category`: the voice-design
  items (`data/instruct.json`) and their everyday synonyms (`data/instruct_synonyms.json`);
  `instructs`: `resolve_instruct`, the strict check; `phrases`: `find_instruct_phrases`, the
  items and synonyms free text names (for the server's free-text `instructions`).
- `canvastext`: `combine_text`, `tokenize_with_nonverbal_tags`, `add_punctuation`: the canvas text.
- `duration`: `estimate_target_tokens`, `resolve_target_len`: how many audio frames to generate
  (`data/duration.json`); `speech_seconds`, `check_ref_transcript`: a transcript's speaking time
  against its recording's length.
- `textcheck`: `check_text`, the one check of a text to speak (valid Unicode, something to say).
- `chunking`: `chunk_text`, `chunk_len_for`: splitting long text (`data/text.json`);
  `cut_to_length`: cutting a stretch without sentence punctuation at words (else characters).
- `pauses`: `split_pauses`, the `[pause 1.5s]` tags.

New code imports from those modules; this face keeps `from omnivoice_cli.engine.text import X`
and `text.X` working.
"""

from __future__ import annotations

from .canvastext import add_punctuation, combine_text, nonverbal_tags, tokenize_with_nonverbal_tags
from .chunking import chunk_len_for, chunk_text, cut_to_length, is_sentence_break
from .duration import (
    check_ref_transcript,
    estimate_duration,
    estimate_target_tokens,
    resolve_target_len,
    speech_seconds,
    text_weight,
)
from .instructs import check_instruct_text, resolve_instruct
from .languages import language_display_name, list_languages, resolve_language
from .pauses import DEFAULT_PAUSE_SECONDS, MAX_PAUSE_SECONDS, MAX_TOTAL_PAUSE_SECONDS, split_pauses
from .phrases import NEGATION_REACH, InstructPhrase, find_instruct_phrases
from .textcheck import check_text, has_words, is_blank, unicode_problem, wordless_warning
from .tokenizer import MARKER_TOKENS, TextTokenizer
from .vocabulary import (
    MAX_INSTRUCT_ITEMS,
    InstructCategory,
    contains_chinese,
    instruct_category,
    instruct_synonyms,
    instruct_vocabulary,
)

__all__ = [
    "MARKER_TOKENS",
    "TextTokenizer",
    "resolve_language",
    "list_languages",
    "language_display_name",
    "contains_chinese",
    "resolve_instruct",
    "check_instruct_text",
    "instruct_vocabulary",
    "instruct_synonyms",
    "instruct_category",
    "find_instruct_phrases",
    "InstructPhrase",
    "InstructCategory",
    "NEGATION_REACH",
    "MAX_INSTRUCT_ITEMS",
    "combine_text",
    "tokenize_with_nonverbal_tags",
    "add_punctuation",
    "nonverbal_tags",
    "text_weight",
    "estimate_duration",
    "estimate_target_tokens",
    "resolve_target_len",
    "chunk_len_for",
    "chunk_text",
    "is_sentence_break",
    "cut_to_length",
    "speech_seconds",
    "check_ref_transcript",
    "unicode_problem",
    "is_blank",
    "has_words",
    "check_text",
    "wordless_warning",
    "split_pauses",
    "DEFAULT_PAUSE_SECONDS",
    "MAX_PAUSE_SECONDS",
    "MAX_TOTAL_PAUSE_SECONDS",
]
