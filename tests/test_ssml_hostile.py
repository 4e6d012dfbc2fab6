"""SSML from someone hostile (app/ssml/): numbers too long to say, attribute values of any size;
each is one short line of refusal, at its line and column, never a crash or an endless normaliser."""

import pytest

from omnivoice_cli.app.ssml import sayas
from omnivoice_cli.app.ssml.parse import SsmlError, parse_ssml


def ssml_refused_with(text: str) -> str:
    with pytest.raises(SsmlError) as e:
        parse_ssml(text, "en")
    message = str(e.value)
    assert "\n" not in message
    return message


@pytest.fixture
def no_long_normalising(monkeypatch):
    """The normaliser is never handed a huge number (its time grows with the digits)."""

    def normalize_text(text, lang=None):
        assert sum(c.isdigit() for c in text) <= 200, f"the normaliser was handed {len(text)} characters"
        return text

    monkeypatch.setattr(sayas, "normalize_text", normalize_text)


@pytest.mark.parametrize("how", ["cardinal", "number", "ordinal", "time", "telephone"])
def test_a_say_as_of_five_thousand_digits_is_refused(how, no_long_normalising):
    message = ssml_refused_with(f'<speak>Hi <say-as interpret-as="{how}">{"9" * 5000}</say-as></speak>')
    assert "5000 digits" in message and "at most" in message and "SSML at line 1" in message


@pytest.mark.parametrize("fmt", ["y", "ymd"])
def test_a_date_of_a_huge_year_is_refused(fmt, no_long_normalising):
    date = "9" * 5000 + ("-01-02" if fmt == "ymd" else "")
    message = ssml_refused_with(f'<speak><say-as interpret-as="date" format="{fmt}">{date}</say-as></speak>')
    assert "digits" in message


def test_long_words_spelled_as_characters_are_still_spelled(no_long_normalising):
    (part,) = parse_ssml(f'<speak><say-as interpret-as="characters">{"7" * 300}</say-as></speak>', "en").parts
    assert part.text.count("7") == 300


@pytest.mark.parametrize(
    "body",
    [
        '<break time="{v}s"/>',
        '<break strength="{v}"/>',
        '<prosody rate="{v}%">hi</prosody>',
        '<say-as interpret-as="date" format="{v}">1</say-as>',
    ],
)
def test_a_huge_attribute_value_is_shown_cut_in_the_refusal(body):
    message = ssml_refused_with("<speak>" + body.format(v="9" * 150_000) + "</speak>")
    assert len(message) < 400


def test_huge_tag_and_attribute_names_are_cut_in_the_warnings():
    name = "x" * 50_000
    doc = parse_ssml(f'<speak><{name}>hi</{name}><prosody {name}="1">yo</prosody></speak>', "en")
    assert len(doc.warnings) == 2
    assert all(len(w) < 400 for w in doc.warnings)
