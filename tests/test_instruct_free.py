"""Voice-design items from free text (the server's `instructions`), the synonyms --instruct takes,
and the reply header that says what was used (check 4 of issue 23: the official openai client)."""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest

from omnivoice_cli.app.voices.instruct import header_text, merge, read_free, shown
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.text.instructs import resolve_instruct
from omnivoice_cli.engine.text.phrases import find_instruct_phrases
from omnivoice_cli.engine.text.vocabulary import contains_chinese, instruct_synonyms, instruct_vocabulary

# (instructions, the items used (None: none), words every note together must hold)
FREE = [
    ("Speak in a cheerful and positive tone.", None, ["no voice-design words found"]),
    ("a deep British male voice", "male, low pitch, british accent", []),
    ("A woman with a soft voice", "female", []),
    ("an elderly gentleman", "male, elderly", []),
    ("Old man, whispering", "male, elderly, whisper", []),
    ("a kid talking excitedly", "child", []),
    ("A young girl", "female, child", []),  # the longest phrase wins: not 'young adult' + 'girl'
    ("a 10 year old boy", "male, child", []),  # 'year old' is passed over
    ("teenage girl", "female, teenager", ["ignored 'girl' (child): one age only, kept 'teenager' from 'teenage'"]),
    ("Middle-aged woman with a Russian accent", "female, middle-aged, russian accent", []),
    ("middle aged man", "male, middle-aged", []),
    ("Very deep, slow voice", "very low pitch", []),
    ("high-pitched lady", "female, high pitch", []),
    ("A LOW-PITCHED FEMALE VOICE", "female, low pitch", []),
    ("Whisper it softly.", "whisper", []),
    ("Don't whisper, speak up", None, ["ignored 'whisper' (negated)"]),
    ("not too deep, a woman", "female", ["ignored 'deep' (negated)"]),
    ("a man, not a woman", "male", ["ignored 'woman' (negated)"]),
    ("A woman. No wait: a man.", "female", ["ignored 'man' (male): one gender only, kept 'female' from 'woman'"]),
    ("American accent, or maybe British", "american accent", ["ignored 'British' (british accent): one accent"]),
    ("Australian narrator", "australian accent", []),
    ("speak Chinese", None, []),  # a language, not an accent: 'chinese' alone names nothing
    ("with a slight Indian accent", "indian accent", []),
    ("female, lowpitch", "female", ["ignored 'lowpitch' (did you mean 'low pitch'?)"]),
    ("robot voice", None, ["no voice-design words found"]),
    ("Female, Low Pitch, British Accent", "female, low pitch, british accent", []),  # the strict form reads too
    ("女声，低沉", "female, low pitch", []),
    ("一个老人用四川话说", "elderly, 四川话", []),
    ("男，耳语", "male, whisper", []),
    ("不要耳语，女声", "female", ["ignored '耳语' (negated)"]),
    ("一个不错的女声", "female", []),  # '不错' (good) is no negation
    ("小女孩的声音，四川口音", "female, child, 四川话", []),
    ("四川话, british accent", "四川话", ["ignored 'british accent': one accent or dialect only"]),
    ("", None, []),
]


@pytest.mark.parametrize("text,items,notes", FREE, ids=[t or "empty" for t, _, _ in FREE])
def test_free_text_phrasings(text, items, notes):
    found = read_free(text)
    assert found.instruct == items
    said = "; ".join(found.notes)
    for words in notes:
        assert words in said, said
    if items is not None:  # what is used is a valid instruct, for English and for Chinese speech
        assert resolve_instruct(found.instruct, False) and resolve_instruct(found.instruct, True)
    if not notes:
        assert "ignored" not in said


def test_at_least_twenty_phrasings():
    assert len(FREE) >= 20 and sum(items is not None for _, items, _ in FREE) >= 20


def test_every_item_and_synonym_is_found_in_a_sentence_and_accepted_strictly():
    for phrase, items in [*instruct_synonyms().items(), *((x, (x,)) for c in instruct_vocabulary() for x in c.items)]:
        found = find_instruct_phrases(f"Please use a {phrase} voice." if phrase.isascii() else f"请用{phrase}的声音")
        assert [p.items for p in found] == [items], phrase
        assert resolve_instruct(phrase, False) == resolve_instruct(", ".join(items), False), phrase


def test_everyday_words_are_voice_design_items():
    for word, item in [
        ("woman", "female"),
        ("man", "male"),
        ("deep", "low pitch"),
        ("old", "elderly"),
        ("kid", "child"),
        ("British", "british accent"),
        ("whispering", "whisper"),
    ]:
        assert resolve_instruct(word, False) == item
        assert read_free(f"a {word} voice").instruct == item


def test_instruct_takes_synonyms_and_stays_strict():
    assert resolve_instruct("woman, deep, British", False) == "female, low pitch, british accent"
    assert resolve_instruct("Low-Pitched, middle aged", False) == "low pitch, middle-aged"
    assert resolve_instruct("woman, deep", True) == "女，低音调"  # Chinese speech: the Chinese items
    assert resolve_instruct("女声，低沉", False) == "female, low pitch"
    with pytest.raises(InvalidRequest, match=r"'deeep' \(did you mean 'deep', read as 'low pitch'\?\)"):
        resolve_instruct("deeep", False)
    with pytest.raises(InvalidRequest, match=r"'grandmaa' \(did you mean 'grandma', read as 'female, elderly'\?\)"):
        resolve_instruct("grandmaa, low pitch", False)
    with pytest.raises(
        InvalidRequest, match=r"\(did you mean 'low pitch, british accent, male'\? give items separated"
    ):
        resolve_instruct("a deep British male voice", False)
    with pytest.raises(InvalidRequest, match=r"'child' \(from 'girl'\) vs 'elderly'"):
        resolve_instruct("girl, elderly", False)
    with pytest.raises(InvalidRequest, match="unsupported instruct item"):
        resolve_instruct("cheerful", False)


def test_merge_replaces_only_the_given_categories():
    alloy = "female, young adult, moderate pitch"
    assert merge(alloy, "male, whisper") == "male, young adult, moderate pitch, whisper"
    assert merge(alloy, None) == alloy and merge(None, "male") == "male" and merge(None, None) is None
    assert merge(alloy + ", british accent", "四川话") == "female, young adult, moderate pitch, 四川话"
    assert merge(alloy, "男，低沉") == "male, young adult, low pitch"
    with pytest.raises(InvalidRequest, match="unsupported instruct item"):
        merge(alloy, "robot")


def test_the_header_value():
    assert shown(None) == "none" and shown("male, low pitch") == "male, low pitch"
    assert shown("男，老年") == "male, elderly"  # English names where there are any
    assert unquote(shown("female, 四川话")) == "female, 四川话" and shown("female, 四川话").isascii()
    long = header_text("ignored 'x'; " * 100)
    assert len(long) <= 500 and long.endswith("...") and long.isascii()


# --- the server: parse_speech, then a real uvicorn and the official openai client -------------------


def _parse(body):
    from omnivoice_cli.server.config import ServeOptions, load_voice_map
    from omnivoice_cli.server.speech import parse_speech

    return parse_speech(
        json.dumps({"input": "Hello there.", **body}).encode(), ServeOptions(voice_map=load_voice_map())
    )


def test_instructions_are_read_leniently(monkeypatch, tmp_path):
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path))
    s = _parse({"instructions": "Speak in a cheerful and positive tone."})
    assert s.request.instruct is None and s.headers()["X-OmniVoice-Instruct"] == "none"
    assert "no voice-design words found" in s.headers()["X-OmniVoice-Instruct-Notes"]
    s = _parse({"instructions": "a deep British male voice, not whispering"})
    assert s.request.instruct == "male, low pitch, british accent"
    assert s.headers() == {
        "X-OmniVoice-Instruct": "male, low pitch, british accent",
        "X-OmniVoice-Voice-Prompt": "none",  # a fresh design: no voice prompt cloned
        "X-OmniVoice-Instruct-Notes": "ignored 'whispering' (negated)",
    }
    s = _parse({"voice": "onyx", "instructions": "Speak in a calm whisper"})  # the voice's items stay
    assert s.headers()["X-OmniVoice-Instruct"] == "male, middle-aged, very low pitch, whisper"
    assert "X-OmniVoice-Instruct-Notes" not in s.headers()
    s = _parse({"voice": "onyx", "instructions": "Be nice"})
    assert s.request.instruct == "male, middle-aged, very low pitch"
    s = _parse({"input": "今天天气很好。", "instructions": "女声，四川话"})
    assert resolve_instruct(s.request.instruct, contains_chinese("今天天气很好。")) == "女，四川话"
    assert unquote(s.headers()["X-OmniVoice-Instruct"]) == "female, 四川话"


@pytest.mark.slow
def test_the_openai_client_with_free_instructions(engine, tmp_path, monkeypatch):
    """Check 4: `instructions` in prose gives 200, and the reply header names the items used."""
    pytest.importorskip("uvicorn")
    openai = pytest.importorskip("openai")
    from server_util import running_server

    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path))
    with running_server(engine, layers=()) as (url, _, _):
        api = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        said = {}
        for instructions in ("Speak in a cheerful and positive tone.", "a deep British male voice"):
            r = api.audio.speech.with_raw_response.create(
                model="gpt-4o-mini-tts",
                voice="coral",
                input="Hello there.",
                instructions=instructions,
                response_format="wav",
                extra_body={"num_step": 2, "seed": 1},
            )
            assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
            assert r.content[:4] == b"RIFF" and len(r.content) > 1000
            said[instructions] = r.headers["x-omnivoice-instruct"]
        r = api.audio.speech.with_raw_response.create(
            model="tts-1",
            voice="alloy",
            input="Hi.",
            response_format="wav",
            instructions="robot",
            extra_body={"num_step": 2},
        )
        assert r.status_code == 200 and r.headers["x-omnivoice-instruct"] == "female, young adult, moderate pitch"
        assert "no voice-design words found" in r.headers["x-omnivoice-instruct-notes"]
    assert said == {
        "Speak in a cheerful and positive tone.": "female, young adult, high pitch",  # coral's own items
        "a deep British male voice": "male, young adult, low pitch, british accent",  # over coral's
    }


# --- the CLI: --instruct stays strict, takes the synonyms and suggests them --------------------------


def test_say_instruct_takes_synonyms_and_suggests_them(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hi.", "--instruct", "Woman, deep", "-o", tmp_path / "a.wav", "-q")
    assert r.exit_code == 0, r.stderr
    assert resolve_instruct(fake_engine.requests[-1].instruct, False) == "female, low pitch"
    r = invoke("say", "Hi.", "--instruct", "a deep British male voice", "-o", tmp_path / "b.wav")
    assert r.exit_code == 2 and len(fake_engine.loads) == 1  # refused before the model loads
    assert "--instruct: unsupported instruct item in 'a deep British male voice'" in r.stderr
    assert "(did you mean 'low pitch, british accent, male'? give items separated by commas)" in r.stderr
    r = invoke("say", "Hi.", "--instruct", "wisper", "-o", tmp_path / "c.wav")
    assert r.exit_code == 2 and "'wisper' (did you mean 'whisper'?)" in r.stderr
