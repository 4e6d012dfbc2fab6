"""The checkpoint's text tokenizer (`tokenizer.json`) and the seven OmniVoice marker tokens."""

from __future__ import annotations

from pathlib import Path

from ..errors import CheckpointError

__all__ = ["MARKER_TOKENS", "TextTokenizer"]

# The seven OmniVoice markers, added tokens of the checkpoint's tokenizer (ids 151669..151675
# in the real one).
MARKER_TOKENS: tuple[str, ...] = (
    "<|denoise|>",
    "<|lang_start|>",
    "<|lang_end|>",
    "<|instruct_start|>",
    "<|instruct_end|>",
    "<|text_start|>",
    "<|text_end|>",
)


class TextTokenizer:
    """The checkpoint's text tokenizer (`tokenizer.json`, Qwen2-style byte-level BPE).

    The reference calls a transformers `Qwen2Tokenizer`; this tokenizer has no bos token and its
    post-processor adds nothing, so both its normal call and `add_special_tokens=False` give
    the plain ids that `encode` returns. Added tokens (the markers) are matched in the input
    text and come out as single ids.
    """

    def __init__(self, tokenizer, source: str = "<memory>") -> None:
        self._tok = tokenizer  # a tokenizers.Tokenizer
        self.source = source
        self._special: dict[str, int] = {}
        for marker in MARKER_TOKENS:
            tid = tokenizer.token_to_id(marker)
            if tid is None:
                raise CheckpointError(f"{source}: the tokenizer lacks the OmniVoice marker token {marker}")
            if tokenizer.encode(marker, add_special_tokens=False).ids != [tid]:
                raise CheckpointError(
                    f"{source}: the marker {marker} is not an added token (it does not encode to its single id {tid})"
                )
            self._special[marker] = tid

    @classmethod
    def from_file(cls, path: str | Path) -> "TextTokenizer":
        """Load `tokenizer.json`; `CheckpointError` if it is missing, corrupt, or lacks the markers."""
        from tokenizers import Tokenizer

        path = Path(path)
        if not path.is_file():
            raise CheckpointError(f"checkpoint file missing: {path}")
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises plain Exception subclasses
            raise CheckpointError(f"cannot read tokenizer {path}: {e}") from None
        return cls(tok, source=str(path))

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, no special tokens added (markers in the text are single ids)."""
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def special_id(self, name: str) -> int:
        """Id of a marker, given as '<|lang_start|>' or 'lang_start'."""
        key = name if name.startswith("<|") else f"<|{name}|>"
        try:
            return self._special[key]
        except KeyError:
            tid = self._tok.token_to_id(key)
            if tid is None:
                raise KeyError(f"unknown special token {name!r}") from None
            return tid

    @property
    def vocab_size(self) -> int:
        """Size of the vocabulary including added tokens."""
        return self._tok.get_vocab_size(with_added_tokens=True)
