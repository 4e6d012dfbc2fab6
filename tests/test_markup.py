"""SSML-looking text and Markdown turned into the words to speak."""

from __future__ import annotations

import pytest

from omnivoice_cli.engine.text.markup import BREAK_STRENGTH_SECONDS, convert_ssml, looks_like_ssml, markdown_to_text
from omnivoice_cli.engine.text.pauses import split_pauses

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
        "Chapter 1. A paragraph with a soft break. item one. item two! first. second. quoted words. "
        "a red door. name, age. Ann, 31. 第二章。"  # the code block is skipped
    )


def test_markdown_keeps_control_syntax_and_plain_text():
    src = "Hello [pause 500ms] there [laughter], say [B EY1 S] and snake_case *now*."
    assert markdown_to_text(src) == "Hello [pause 500ms] there [laughter], say [B EY1 S] and snake_case now."
    assert markdown_to_text("Just plain words.") == "Just plain words."
    assert markdown_to_text("") == ""
    assert markdown_to_text("Tom &amp; Jerry <b>bold</b>") == "Tom & Jerry bold"


# ---------------------------------------------------------------- Markdown read on the raw text (say, batch, server)

NOTES = """# Meeting notes

We agreed on **three** things:

- Ship the *beta* on time
- Write the [release notes](https://example.com/notes)
  - nested point

## Next steps

1. Budget review
2. Hiring plan

> A quoted line
> that continues
"""
NOTES_SPOKEN = (
    "Meeting notes. We agreed on three things: Ship the beta on time. Write the release notes. nested point. "
    "Next steps. Budget review. Hiring plan. A quoted line that continues"
)
MARKUP = ("- ", "#", "**", "*", "](", "https://", "example.com", "1.", "2.", ">")


def assert_spoken_notes(text: str) -> None:
    assert text == NOTES_SPOKEN
    assert not [m for m in MARKUP if m in text]


def test_markdown_notes_each_item_and_heading_a_sentence():
    assert_spoken_notes(markdown_to_text(NOTES))
    assert markdown_to_text(NOTES.replace("\n", "\r\n")) == NOTES_SPOKEN
    # the flaw it fixes: with the line breaks already spaces, the whole text is one heading
    assert markdown_to_text(" ".join(NOTES.split())).startswith("Meeting notes We agreed")


def test_markdown_paragraphs_end_as_sentences_and_code_is_skipped():
    assert markdown_to_text("Meeting notes\n\nWe agreed\n\n    code  here\n") == "Meeting notes. We agreed"
    fenced = "Run this:\n\n```python\nprint('hi')\nx = 1\n```\n\nThen rest\n"
    assert markdown_to_text(fenced) == "Run this: Then rest"  # the code is not read, nor run into the next block
    assert markdown_to_text("One line") == "One line"  # the last paragraph as it is (as without --markdown)
    assert markdown_to_text("1. first\n1. second\n\n* star\n+ plus\n") == "first. second. star. plus."


def _dry(invoke, *args, **kw):
    import json

    r = invoke("say", *args, "--dry-run", "--json", **kw)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_say_markdown_file_pipe_and_argument(invoke, fake_engine, tmp_path):
    """The README's line: `say -f notes.md --markdown --preset fast -o notes.mp3`, read from the file,
    a pipe and the argument; no list marker, '#', '**', link or URL, '1.' is spoken."""
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES, encoding="utf-8")
    report = _dry(invoke, "-f", notes, "--markdown", "--preset", "fast", "-o", tmp_path / "notes.mp3")
    assert_spoken_notes(report["text"])
    assert " ".join(p["text"] for p in report["pieces"]) == NOTES_SPOKEN
    assert report["settings"]["markdown"] == {"value": True, "from": "flag"}
    assert_spoken_notes(_dry(invoke, "--markdown", "-o", tmp_path / "n.wav", input=NOTES)["text"])
    assert_spoken_notes(_dry(invoke, "-", "--markdown", input=NOTES)["text"])
    assert_spoken_notes(_dry(invoke, NOTES, "--markdown")["text"])
    plain = _dry(invoke, "-f", notes)["text"]  # without --markdown: line breaks are spaces, the text as it is
    assert plain == " ".join(NOTES.split())
    assert fake_engine.loads == []


def test_say_markdown_long_file_cut_between_items(invoke, fake_engine, tmp_path):
    """Chunks of a long Markdown file hold whole items: each piece ends a sentence, none starts with a marker."""
    src = "# Plan\n\n" + "".join(f"- Item number {i} is one more thing that we must remember\n" for i in range(40))
    notes = tmp_path / "long.md"
    notes.write_text(src, encoding="utf-8")
    pieces = [p["text"] for p in _dry(invoke, "-f", notes, "--markdown", "--chunk-duration", "8")["pieces"]]
    assert len(pieces) > 3
    assert all(p.endswith(".") and not p.startswith(("-", "#")) for p in pieces)
    assert " ".join(pieces).count("Item number") == 40


def test_batch_markdown_field_and_flag(invoke, fake_engine, tmp_path, home):
    import json

    src = tmp_path / "jobs.jsonl"
    src.write_text(
        json.dumps({"text": NOTES, "markdown": True, "id": "md"})
        + "\n"
        + json.dumps({"text": NOTES, "id": "plain"})
        + "\n",
        encoding="utf-8",
    )
    r = invoke("batch", src, "-o", tmp_path / "out", "-q")
    assert r.exit_code == 0, r.stderr
    md, plain = (q.text for q in fake_engine.requests)
    assert_spoken_notes(md)
    assert plain == " ".join(NOTES.split())  # no markdown: the line breaks are spaces
    fake_engine.requests.clear()
    r = invoke("batch", src, "-o", tmp_path / "out2", "-q", "--markdown")
    assert r.exit_code == 0, r.stderr
    assert [q.text for q in fake_engine.requests] == [NOTES_SPOKEN, NOTES_SPOKEN]
    rows = [json.loads(x) for x in (tmp_path / "out2" / "manifest.jsonl").read_text().splitlines()]
    assert all("\n" not in row["text"] for row in rows if row.get("text"))


def test_server_markdown_field(tmp_path, monkeypatch):
    import json

    from omnivoice_cli.server.config import ServeOptions, load_voice_map
    from omnivoice_cli.server.speech import parse_speech

    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    options = ServeOptions(voice_map=load_voice_map(), max_input_chars=4096, model="tiny")
    md = parse_speech(json.dumps({"input": NOTES, "markdown": True}).encode(), options)
    assert_spoken_notes(md.built.request.text)
    plain = parse_speech(json.dumps({"input": NOTES}).encode(), options)
    assert plain.built.request.text == " ".join(NOTES.split())
