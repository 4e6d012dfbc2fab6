"""SSML-looking text and Markdown turned into the words to speak."""

from __future__ import annotations

import pytest

from omnivoice_cli.engine.markup import BREAK_STRENGTH_SECONDS, convert_ssml, looks_like_ssml, markdown_to_text
from omnivoice_cli.engine.text import split_pauses

# ---------------------------------------------------------------- SSML


@pytest.mark.parametrize(
    "text",
    [
        "<speak>Hi</speak>",
        'Hello <break time="1s"/> there',
        "a <break/> b",
        "<prosody rate='slow'>x</prosody>",
        '<say-as interpret-as="date">2024</say-as>',
        "<SPEAK>loud</SPEAK>",
        "<amazon:effect name='whispered'>x</amazon:effect>",
    ],
)
def test_ssml_detected(text):
    assert looks_like_ssml(text)


@pytest.mark.parametrize(
    "text",
    ["plain text", "a < b and c > d", "x <b>bold</b> y", "[pause 500ms] and [laughter]", "<3 you", "email <me@x.org>"],
)
def test_plain_text_is_not_ssml_and_stays_as_it_is(text):
    assert not looks_like_ssml(text)
    assert convert_ssml(text) == (text, None)


def test_breaks_become_pause_tags():
    text, warning = convert_ssml(
        '<speak>One <break time="500ms"/> two <break time="1.5s"/> three <break time="2 S" /> four '
        '<break strength="strong"/> five <break/> six <break strength="none"/> seven</speak>'
    )
    assert text == "One [pause 500ms] two [pause 1.5s] three [pause 2s] four [pause 1s] five [pause] six seven"
    assert warning and "SSML" in warning and "\n" not in warning
    parts, gaps = split_pauses(text)  # our pause syntax reads every one of them
    assert [p.strip() for p in parts] == ["One", "two", "three", "four", "five", "six seven"]
    assert gaps == pytest.approx([0.0, 0.5, 1.5, 2.0, 1.0, 0.5, 0.0])


def test_break_time_wins_over_strength_and_strengths_are_ordered():
    assert convert_ssml('a <break strength="weak" time="300ms"/> b')[0] == "a [pause 300ms] b"
    values = [BREAK_STRENGTH_SECONDS[k] for k in ("none", "x-weak", "weak", "medium", "strong", "x-strong")]
    assert values == sorted(values) and values[0] == 0.0


def test_other_tags_dropped_words_kept():
    text, warning = convert_ssml(
        '<?xml version="1.0"?><speak version="1.1"><!-- a comment --><p><s>First sentence.</s><s>Second.</s></p>'
        '<prosody rate="slow" pitch="+2st">Slowly</prosody> <emphasis level="strong">now</emphasis> '
        '<sub alias="World Wide Web">WWW</sub> &amp; <say-as interpret-as="cardinal">12</say-as> '
        '<phoneme alphabet="ipa" ph="təˈmeɪtoʊ">tomato</phoneme> [laughter]</speak>'
    )
    assert text == "First sentence. Second. Slowly now World Wide Web & 12 tomato [laughter]"
    assert warning


# ---------------------------------------------------------------- Markdown


def test_markdown_inline_spoken_as_words():
    src = "Some *emphasis*, **strong**, _under_, ~~gone~~, a [link](http://x.y/z) and `code span`."
    assert markdown_to_text(src) == "Some emphasis, strong, under, gone, a link and code span."


def test_markdown_blocks():
    src = (
        "# Chapter 1\n\nA paragraph\nwith a soft break.\n\n- item one\n- item **two**!\n\n1. first\n2. second\n\n"
        "> quoted words\n\n![a red door](door.png)\n\n| name | age |\n|---|---|\n| Ann | 31 |\n\n"
        "```\nprint(1)\n```\n\n## 第二章\n"
    )
    assert markdown_to_text(src) == (
        "Chapter 1. A paragraph with a soft break. item one. item two! first. second. quoted words "
        "a red door name, age. Ann, 31. print(1) 第二章。"
    )


def test_markdown_keeps_control_syntax_and_plain_text():
    src = "Hello [pause 500ms] there [laughter], say [B EY1 S] and snake_case *now*."
    assert markdown_to_text(src) == "Hello [pause 500ms] there [laughter], say [B EY1 S] and snake_case now."
    assert markdown_to_text("Just plain words.") == "Just plain words."
    assert markdown_to_text("") == ""
    assert markdown_to_text("Tom &amp; Jerry <b>bold</b>") == "Tom & Jerry bold"
