"""SSML tests' shared helper: a document's refusal, checked to be one line."""

import pytest

from omnivoice_cli.app.ssml.parse import SsmlError, parse_ssml


def ssml_refusal(text: str) -> str:
    """The one-line message `text` is refused with (it must be refused)."""
    with pytest.raises(SsmlError) as e:
        parse_ssml(text, "en")
    message = str(e.value)
    assert "\n" not in message
    return message
