"""app/ssml/parse.py and sayas.py: SSML read into parts (pure functions), and the documents refused."""

import resource

import pytest
from helpers.ssml import ssml_refusal

from omnivoice_cli.app.ssml.parse import MAX_DEPTH, Part, is_ssml, parse_ssml
from omnivoice_cli.app.ssml.sayas import say_as


def parts(body: str, lang: str | None = "en") -> tuple[Part, ...]:
    return parse_ssml(f"<speak>{body}</speak>", lang).parts


def test_is_ssml_by_its_start():
    assert is_ssml("<speak>Hi.</speak>")
    assert is_ssml('  <?xml version="1.0"?>\n<!-- a note -->\n<speak version="1.1">Hi.</speak>')
    assert not is_ssml("Say <break/> here")  # loose tags: engine/text/markup.py reads them as before
    assert not is_ssml("<speaker>Hi.</speaker>")


def test_break_time_and_strength_are_pauses():
    (one,) = parts('One <break time="1.5s"/> two <break time="250ms"/> three <break strength="x-strong"/> four')
    assert one.text == "One [pause 1500ms] two [pause 250ms] three [pause 1250ms] four"
    (two,) = parts('<break time="1s"/>Lead <break/>')  # before the words, after them; medium: 0.75 s
    assert two.text == "[pause 1000ms] Lead [pause 750ms]"
    (three,) = parts('A <break strength="none"/>B')
    assert three.text == "A B"


def test_p_and_s_end_as_sentences():
    (one,) = parts("<p><s>First one</s><s>Second one</s></p><p>Next paragraph</p>")
    assert one.text == "First one. Second one. Next paragraph."


def test_sub_alias_is_said():
    (one,) = parts('The <sub alias="World Wide Web">WWW</sub> is big.')
    assert one.text == "The World Wide Web is big."


def test_say_as_through_the_normaliser():
    pytest.importorskip("kaldifst")
    (one,) = parts(
        '<say-as interpret-as="cardinal">42</say-as>, <say-as interpret-as="ordinal">3</say-as>, '
        '<say-as interpret-as="characters">abc</say-as>, <say-as interpret-as="date" format="mdy">12/25/2024</say-as>, '
        '<say-as interpret-as="time">10:30</say-as>, <say-as interpret-as="telephone">555-0123</say-as>'
    )
    assert one.text == (
        "forty two, third, a b c, the twenty fifth of december twenty twenty four, ten thirty, "
        "five five five, zero one two three"
    )
    assert say_as("ordinal", "3", None, "de") == "dritte"


def test_prosody_rate_lang_and_voice_start_parts():
    doc = parse_ssml(
        '<speak>Plain. <break time="2s"/><prosody rate="slow">Slow <prosody rate="200%">fast</prosody></prosody>'
        '<lang xml:lang="fr-FR">Bonjour.</lang>\n<voice name="alice">Hi. <break time="1s"/>There.</voice></speak>',
        "en",
    )
    assert [(p.text, p.voice, p.lang, p.rate, p.pause_before) for p in doc.parts] == [
        ("Plain.", None, None, None, 0.0),
        ("Slow", None, None, 0.75, 2.0),  # the break between two parts: silence between requests
        ("fast", None, None, 1.5, 0.0),  # relative to the rate around it
        ("Bonjour.", None, "fr-FR", None, 0.0),
        ("Hi. [pause 1000ms] There.", "alice", None, None, 0.0),
    ]
    assert doc.parts[-1].line == 2


def test_emphasis_and_phoneme_are_plain_text_with_one_warning_each():
    doc = parse_ssml(
        '<speak><emphasis level="strong">Big</emphasis> <emphasis>news</emphasis> '
        '<phoneme alphabet="ipa" ph="təˈmeɪtoʊ">tomato</phoneme> <phoneme ph="x">again</phoneme></speak>'
    )
    assert doc.parts[0].text == "Big news tomato again"
    assert len(doc.warnings) == 2
    assert "<emphasis>" in doc.warnings[0] and "<phoneme>" in doc.warnings[1]


def test_silent_elements_say_nothing():
    (one,) = parts('A<mark name="m1"/> <desc>not said</desc>B')
    assert one.text == "A B"


@pytest.mark.parametrize(
    "text, words",
    [
        ("<speak>Hi <break time='1s'></speak>", "at line 1, column 30: mismatched tag"),
        ("<speak>\n  <p>Hi\n</speak>", "at line 3, column 3: mismatched tag"),
        ("<speak>Tom &amp Jerry</speak>", "at line 1, column 16: not well-formed"),
        ("<speak>&nbsp;</speak>", "at line 1, column 8: undefined entity"),
        ("<voice>Hi</voice>", "at line 1, column 1: the root element must be <speak>"),
        ("<speak>A <break time='5 parsecs'/></speak>", "<break time='5 parsecs'>: give a time"),
        ("<speak>A <break time='90s'/></speak>", "too long: at most 60 s"),
        ("<speak><prosody rate='zoom'>A</prosody></speak>", "<prosody rate='zoom'>: use x-slow..x-fast"),
        ("<speak><prosody rate='5000%'>A</prosody></speak>", "a speed of 50: use 0.1..10"),
        ("<speak><break/></speak>", "no words to speak"),
    ],
)
def test_malformed_ssml_is_one_line_naming_line_and_column(text, words):
    message = ssml_refusal(text)
    assert message.startswith("SSML") and words in message, message


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_billion_laughs_is_refused_at_its_doctype_with_bounded_memory():
    lol = "".join(
        f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i else "lol"}">' for i in range(10)
    )  # 10^9 "lol"s, about 3 GB expanded
    before = peak_kib()
    message = ssml_refusal(f'<?xml version="1.0"?>\n<!DOCTYPE speak [{lol}]>\n<speak>&lol9;</speak>')
    assert "line 2, column 17: a DOCTYPE is not allowed" in message
    assert peak_kib() - before < 50_000  # nothing expanded: the peak grew by less than 50 MB


def test_ten_thousand_deep_nesting_is_refused_with_bounded_memory():
    depth = 10_000
    before = peak_kib()
    message = ssml_refusal("<speak>" + "<s>" * depth + "deep" + "</s>" * depth + "</speak>")
    assert f"nested more than {MAX_DEPTH} deep" in message and "line 1, column" in message
    assert peak_kib() - before < 50_000


def test_a_document_over_the_size_bound_is_refused_before_parsing():
    message = ssml_refusal("<speak>" + "a" * 300_000 + "</speak>")
    assert "characters long: at most 200000" in message


def test_a_streamed_document_is_one_part_once_closed():
    from omnivoice_cli.app.door.textparts import take_parts

    doc = '<speak>One. Two. <break time="1s"/> Three.</speak>'
    assert take_parts(doc[:20], 100) == ([], doc[:20])  # no sentence of it leaves before </speak>
    assert take_parts(doc + " After. And", 100) == ([doc, "After."], " And")
    assert take_parts("<speak>" + "word " * 30, 100) == (
        ["<speak>" + "word " * 30],
        "",
    )  # over the limit: the door refuses it
