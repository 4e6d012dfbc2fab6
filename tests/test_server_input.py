"""Bad and clumsy speech requests: each one a 400 (or 413) in OpenAI's envelope, with the CLI's words.

Most are checked on `parse_speech` alone (no model); a few go over HTTP to see the envelope."""

import json

import pytest

from omnivoice_cli.app.settings.layers import FLAG_SOURCE, check_layer
from omnivoice_cli.app.settings.setting import FLAG, SettingsError
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.server.config import ServeOptions, load_voice_map
from omnivoice_cli.server.errors import ApiError
from omnivoice_cli.server.speech import known_fields, parse_speech

pytestmark = pytest.mark.usefixtures("home", "config_home")  # every test: an empty OMNIVOICE_HOME and config


@pytest.fixture
def config_home(tmp_path, monkeypatch):
    """An empty XDG_CONFIG_HOME too (where user presets are looked for without OMNIVOICE_HOME)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config"


OPTIONS = ServeOptions(voice_map=load_voice_map(), max_input_chars=100, model="tiny")


def parse(body, options=OPTIONS):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return parse_speech(raw, options)


def refusal(body, options=OPTIONS) -> ApiError:
    with pytest.raises(ApiError) as e:
        parse(body, options)
    assert "\n" not in e.value.message
    return e.value


BAD = [
    # (body, param, words of the message)
    (b"{not json", None, "the body is not valid JSON: Expecting property name enclosed in double quotes"),
    (b"\xff\xfe{}", None, "the body is not UTF-8 text (bad byte at offset 0)"),
    (b"[1, 2]", None, "the body must be a JSON object of fields, got a list"),
    (b"[" * 100000 + b"]" * 100000, None, "nested too deeply"),
    (b'{"input": "Hi", "seed": ' + b"9" * 5000 + b"}", None, "the body is not valid JSON: Exceeds the limit"),
    ({}, "input", "field 'input' is missing: give the text to speak"),
    ({"input": None}, "input", "field 'input' is missing"),
    ({"input": ""}, "input", "field 'input': text is empty: give some text to speak"),
    ({"input": " \n\t "}, "input", "field 'input': text is empty"),
    ({"input": 42}, "input", "field 'input' must be the text to speak (a string), got 42 (an integer)"),
    ({"input": "x" * 101}, "input", "field 'input' is 101 characters long: at most 100 are allowed"),
    ({"input": "Hi", "num_steps": 8}, "num_steps", "field 'num_steps' is not a known field (did you mean 'num_step'?)"),
    ({"input": "Hi", "voise": "alloy"}, "voise", "(did you mean 'voice'?)"),
    ({"input": "Hi", "format": "wav"}, "format", "(did you mean 'response_format'?)"),
    ({"input": "Hi", "ref": "/etc/passwd"}, "ref", "a request cannot name a file"),
    ({"input": "Hi", "device": "cuda"}, "device", "it is set when the server starts"),
    ({"input": "Hi", "num_step": 0}, "num_step", "field 'num_step' must be an integer in 1..64, got 0"),
    ({"input": "Hi", "num_step": "8"}, "num_step", "field 'num_step' must be an integer in 1..64, got '8' (a string)"),
    ({"input": "Hi", "guidance_scale": -1}, "guidance_scale", "field 'guidance_scale' must be a number >= 0, got -1"),
    ({"input": "Hi", "t_shift": 1e308}, "t_shift", "field 't_shift' must be at most 100, got 1e+308"),
    ({"input": "Hi", "speed": 0}, "speed", "field 'speed' must be a number > 0 (1.0 is normal), got 0"),
    ({"input": "Hi", "speed": 1e-9}, "speed", "field 'speed' must be at least 0.1"),
    ({"input": "Hi", "duration": 31}, "duration", "field 'duration' must be seconds in (0, 30], got 31"),
    ({"input": "Hi", "seed": -1}, "seed", "field 'seed' must be an integer in 0..9223372036854775807, got -1"),
    ({"input": "Hi", "seed": True}, "seed", "got True (a boolean)"),
    ({"input": "Hi", "denoise": "yes"}, "denoise", "field 'denoise' must be true or false, got 'yes'"),
    (
        {"input": "Hi", "response_format": "m4a"},
        "response_format",
        "must be mp3, opus, aac, flac, wav, pcm, ogg, mulaw or alaw, got 'm4a'",
    ),
    ({"input": "Hi", "response_format": 3}, "response_format", "got 3 (an integer)"),
    ({"input": "Hi", "stream_format": "ws"}, "stream_format", "field 'stream_format' must be audio or sse, got 'ws'"),
    (
        {"input": "Hi", "stream_format": "sse", "response_format": "flac"},
        "stream_format",
        "needs a format that streams",
    ),
    ({"input": "Hi", "stream_format": "sse", "stream": False}, "stream", "leave one out"),
    ({"input": "Hi", "stream": "no"}, "stream", "field 'stream' must be true or false, got 'no'"),
    (
        {"input": "Hi", "voice": "alloyy"},
        "voice",
        "unknown voice 'alloyy' (did you mean 'alloy'?); known voices: alloy, ash",
    ),
    ({"input": "Hi", "voice": "/home/me/v.safetensors"}, "voice", "a request cannot name a file"),
    ({"input": "Hi", "voice": "../x"}, "voice", "a request cannot name a file"),
    ({"input": "Hi", "voice": 7}, "voice", "field 'voice' must be a voice's name, got 7 (an integer)"),
    (
        {"input": "Hi", "instruct": "female, lowpitch"},
        "instruct",
        "field 'instruct': unsupported instruct item in 'female, lowpitch': 'lowpitch' (did you mean 'low pitch'?)",
    ),
    (
        {"input": "Hi", "voice": "alloy", "instruct": "robot voice"},
        "instruct",
        "field 'instruct': unsupported instruct item",
    ),
    (
        {"input": "Hi", "instructions": "male " * 1000},
        "instructions",
        "field 'instructions' is 5000 characters long: at most 4096",
    ),
    ({"input": "Hi", "instructions": 5}, "instructions", "field 'instructions' must be voice-design items"),
    (
        {"input": "Hi", "instructions": "male", "instruct": "female"},
        "instructions",
        "give either 'instructions' or 'instruct'",
    ),
    ({"input": "Hi", "lang": 5}, "lang", "field 'lang' must be a language code or name, got 5"),
    (
        {"input": "Hi", "model": "tts-2"},
        "model",
        "field 'model' must be omnivoice, tts-1, tts-1-hd, gpt-4o-mini-tts or a preset",
    ),
    ({"input": "Hi", "preset": "../fast.toml"}, "preset", "(a request cannot name a file)"),
    ({"input": "Hi", "preset": "fsat"}, "preset", "got 'fsat' (did you mean 'fast'?)"),
    ({"input": "Hi", "model": "fast", "preset": "quality"}, "preset", "name different presets"),
    ({"input": "[pause 1s]"}, "input", "text has nothing to speak besides pause tags"),
    ({"input": "[pause 1s] \u200b [pause]"}, "input", "text has nothing to speak besides pause tags"),
    ({"input": "Hi [pause 99s]"}, "input", "pause tag '[pause 99s]' is too long"),
    # not valid Unicode (JSON's \ud800 escapes): 400 naming the field, never a 500 from the tokenizer
    (
        b'{"input": "\\ud800"}',
        "input",
        "field 'input': text is not valid Unicode: character 1 is U+D800, a lone surrogate",
    ),
    (b'{"input": "ok \\udc80 ok"}', "input", "character 4 is U+DC80, a lone surrogate"),
    (b'{"input": "\\ude00\\ud83d"}', "input", "U+DE00, a lone surrogate"),  # a pair the wrong way round
    (b'{"input": "Hi", "voice": "\\ud800"}', "voice", "field 'voice': its value is not valid Unicode"),
    (
        b'{"input": "Hi", "instructions": "male\\udfff"}',
        "instructions",
        "field 'instructions': its value is not valid Unicode",
    ),
    (b'{"input": "Hi", "lang": ["\\ud800"]}', "lang", "field 'lang': its value is not valid Unicode"),
    (b'{"input": "Hi", "\\ud800": 1}', None, "a field's name is not valid Unicode"),
    # nothing to speak: invisible, format and control characters are as empty as whitespace
    (
        {"input": "\u200b"},
        "input",
        "field 'input': text is empty: it has only invisible or control characters (U+200B ZERO WIDTH SPACE)",
    ),
    ({"input": "\ufeff"}, "input", "text is empty: it has only invisible or control characters (U+FEFF"),
    ({"input": "\u2060\u200d"}, "input", "(U+2060 WORD JOINER, U+200D ZERO WIDTH JOINER)"),
    ({"input": "\x01\x02"}, "input", "text is empty: it has only invisible or control characters (U+0001, U+0002)"),
    ({"input": " \u200b\n\u200e\u0301 "}, "input", "field 'input': text is empty"),
    (
        {"input": "A [pause 1s] B", "duration": 2},
        "duration",
        "field 'duration': a fixed duration cannot be combined with [pause] tags",
    ),
]


@pytest.mark.parametrize("body, param, words", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_request(body, param, words):
    e = refusal(body)
    assert e.status == 400 and e.param == param and words in e.message, e.message


def test_the_message_reads_as_on_the_command_line():
    """The same words as `--num-step 100` and a batch line, after "field 'num_step'"."""
    e = refusal({"input": "Hi", "num_step": 100})
    with pytest.raises(SettingsError) as flag:
        check_layer({"num_step": 100}, FLAG_SOURCE, FLAG)
    assert e.message == "field 'num_step' " + str(flag.value).removeprefix("--num-step ")


def test_every_known_field_is_listed_once():
    fields = known_fields()
    assert len(fields) == len(set(fields))
    assert {
        "model",
        "input",
        "voice",
        "instructions",
        "response_format",
        "speed",
        "stream_format",
        "seed",
        "num_step",
        "preset",
        "stream",
    } <= set(fields)
    assert not {"ref", "ref_text", "device", "format", "model_path"} & set(fields)


def test_a_good_request_maps_onto_the_schema():
    s = parse(
        {
            "model": "tts-1",
            "input": "Hello\nthere.",
            "voice": "Alloy",
            "response_format": "pcm",
            "speed": 1.25,
            "seed": 5,
            "num_step": 8,
            "lang": "en",
        }
    )
    req = s.request
    assert (req.text, req.seed, req.speed, req.lang, req.generation.num_step) == ("Hello there.", 5, 1.25, "en", 8)
    assert req.instruct == "female, young adult, moderate pitch" and req.ref is None
    assert (s.format.name, s.response_format, s.stream, s.sse, s.voice, s.chars) == (
        "raw",
        "pcm",
        True,
        False,
        "Alloy",
        12,
    )


def test_instructions_replace_the_voices_items_of_their_category_and_auto_has_none():
    assert (
        parse({"input": "Hi", "voice": "alloy", "instructions": "male"}).request.instruct
        == "male, young adult, moderate pitch"
    )
    assert (
        parse({"input": "Hi", "voice": "alloy", "instruct": "whisper"}).request.instruct
        == "female, young adult, moderate pitch, whisper"
    )
    assert (
        parse({"input": "Hi", "voice": "alloy", "instructions": "Be cheerful!"}).request.instruct
        == "female, young adult, moderate pitch"
    )
    assert parse({"input": "Hi", "voice": "auto"}).request.instruct is None
    assert parse({"input": "Hi"}).request.instruct is None


def test_defaults_seed_and_formats():
    a, b = parse({"input": "Hi"}), parse({"input": "Hi"})
    assert a.format.name == "mp3" and a.stream and not a.sse
    assert a.request.seed != b.request.seed or a.request.seed == b.request.seed == 0  # random when not given
    assert parse({"input": "Hi", "response_format": "flac"}).stream is False  # flac does not stream
    assert parse({"input": "Hi", "response_format": "wav", "stream": False}).stream is False
    assert parse({"input": "Hi", "response_format": "wav"}).stream is False  # whole: a WAV with its real sizes
    assert parse({"input": "Hi", "response_format": "wav", "stream": True}).stream is True  # asked: streamed
    assert parse({"input": "Hi", "response_format": "wav", "stream_format": "sse"}).stream is True
    assert parse({"input": "Hi", "response_format": "pcm"}).stream is True


def test_presets_by_model_or_field_and_the_servers_layers():
    assert parse({"input": "Hi", "model": "fast"}).request.generation.num_step == 16
    assert parse({"input": "Hi", "preset": "quality", "num_step": 3}).request.generation.num_step == 3
    served = ServeOptions(voice_map={}, layers=((FLAG_SOURCE, {"num_step": 7}),))
    assert parse({"input": "Hi"}, served).request.generation.num_step == 7
    assert parse({"input": "Hi", "model": "balanced"}, served).request.generation.num_step == 32  # request preset wins


def test_a_saved_voice_by_name_and_a_saved_voice_shadows_an_openai_name(home):
    import torch

    from omnivoice_cli.app.voices import voices
    from omnivoice_cli.engine.sound.voice import VoicePrompt

    codes = torch.zeros(8, 30, dtype=torch.long)
    voices.save("alloy", VoicePrompt(codes, "A saved alloy.", 0.1))
    voices.save("Carol", VoicePrompt(codes + 1, "Carol speaks.", 0.1))
    s = parse({"input": "Hi", "voice": "alloy"})
    assert s.request.ref is not None and s.request.ref.text == "A saved alloy." and s.request.instruct is None
    assert parse({"input": "Hi", "voice": "carol"}).request.ref.text == "Carol speaks."  # case-insensitive
    e = refusal({"input": "Hi", "voice": "dave"})
    assert "known voices: Carol, alloy, ash" in e.message and str(home) not in e.message


def test_a_broken_saved_voice_does_not_show_the_server_path(home):
    (home / "voices").mkdir(parents=True)
    (home / "voices" / "broken.safetensors").write_bytes(b"not a voice")
    e = refusal({"input": "Hi", "voice": "broken"})
    assert e.param == "voice" and str(home) not in e.message and "<voices>" in e.message


def test_voice_map_file_overrides_and_is_checked(tmp_path):
    good = tmp_path / "map.json"
    good.write_text(json.dumps({"alloy": "male, low pitch", "Robo": "child"}))
    table = load_voice_map(good)
    assert table["alloy"] == "male, low pitch" and table["robo"] == "child" and table["onyx"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"x": "robot voice"}))
    with pytest.raises(InvalidRequest, match="voice 'x': unsupported instruct item"):
        load_voice_map(bad)
    with pytest.raises(InvalidRequest, match="does not exist"):
        load_voice_map(tmp_path / "none.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(InvalidRequest, match="must be a JSON object"):
        load_voice_map(tmp_path / "list.json")


# --- over HTTP: a real uvicorn on 127.0.0.1 ------------------------------------------------------

HOSTILE_BODIES = [
    # (raw body, param, words): text that is not valid Unicode, text with nothing to speak
    (b'{"input": "\\ud800"}', "input", "field 'input': text is not valid Unicode: character 1 is U+D800"),
    (b'{"input": "Hello \\udc80", "response_format": "wav"}', "input", "character 7 is U+DC80, a lone surrogate"),
    (b'{"input": "Hi", "voice": "\\ud800", "stream": false}', "voice", "field 'voice': its value is not valid Unicode"),
    (b'{"input": "Hi", "\\udfff": true}', None, "a field's name is not valid Unicode"),
    (b'{"input": "\\u200b"}', "input", "field 'input': text is empty: it has only invisible or control characters"),
    (b'{"input": "\\ufeff", "stream_format": "sse", "response_format": "wav"}', "input", "(U+FEFF"),
    (b'{"input": "\\u2060\\u200d"}', "input", "text is empty"),
    (b'{"input": "\\u0001\\u0002", "response_format": "pcm"}', "input", "(U+0001, U+0002)"),
    (b'{"input": " \\n\\t "}', "input", "field 'input': text is empty: give some text to speak"),
    (b'{"input": "[pause 1s]\\u200b"}', "input", "text has nothing to speak besides pause tags"),
    (b'{"input": "**\\u200b**", "markdown": true}', "input", "text is empty"),  # blank once Markdown is read
]


@pytest.mark.slow
def test_bad_unicode_and_nothing_to_speak_are_400_on_input_over_http(engine):
    """Each reply is a 400 in OpenAI's envelope naming the field, never a 500 (a lone surrogate
    used to reach the tokenizer: 'TextInputSequence must be str'); the server then still speaks."""
    pytest.importorskip("uvicorn")
    import httpx
    from server_util import running_server, wav_samples

    with running_server(engine) as (url, _, state):
        c = httpx.Client(base_url=url, timeout=120)
        for body, param, words in HOSTILE_BODIES:
            r = c.post("/v1/audio/speech", content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 400, (body, r.status_code, r.text)
            error = r.json()["error"]
            assert error["param"] == param and words in error["message"], (body, error)
            assert error["type"] == "invalid_request_error" and "\n" not in error["message"]
        assert state.service.stats()["forwards"] == 0  # refused before the engine
        ok = c.post("/v1/audio/speech", json={"input": "Hello there.", "response_format": "wav", "stream": False})
        assert ok.status_code == 200 and len(wav_samples(ok.content)) > 0


@pytest.mark.slow
def test_the_engine_service_refuses_such_text_itself(engine):
    """The engine's own check (validate_request), for any caller of Service.submit."""
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.engine.service import Service

    service = Service(engine, max_queue=4)  # not started: submit checks before it queues
    for text, words in [("\ud800", "not valid Unicode"), ("\u200b\ufeff", "text is empty"), ("\x01", "text is empty")]:
        with pytest.raises(InvalidRequest, match=words) as e:
            service.submit(Request(text=text), lambda event: None)
        assert e.value.setting == "text"
    assert service.open == 0


def test_only_punctuation_or_emoji_is_spoken_with_a_warning():
    s = parse({"input": "?! 😀"})
    assert any("has no letters or digits, only punctuation or symbols" in w for w in s.built.warnings)
    assert not any("no letters" in w for w in parse({"input": "Hi 😀"}).built.warnings)


def test_an_unknown_language_is_a_400_in_the_words_of_the_cli():
    e = refusal({"input": "Hi", "lang": "englsh"})
    assert e.param == "lang" and e.status == 400
    assert e.message == (
        "field 'lang': unknown language 'englsh': did you mean 'English' (en)? "
        "(`omnivoice languages` lists them; none speaks any language)"
    )
    assert parse({"input": "Hi", "lang": "none"}).built.request.lang == "none"
