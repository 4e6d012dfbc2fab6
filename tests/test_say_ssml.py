"""`say` given SSML (commands/sayssml.py, app/ssml/spoken.py): each tag's pieces in --dry-run
--json, the refusals in one line, and a real render of a document of several parts; and the
same document through POST /v1/audio/speech (the same samples)."""

import json

import numpy as np
import pytest
from conftest import TINY_CKPT, error_line

MODEL = ["--model", str(TINY_CKPT), "--seed", "7"]
DOC = (
    '<speak>Hello there. <break time="500ms"/>'
    '<prosody rate="slow">Slowly now.</prosody><break time="1s"/>'
    '<lang xml:lang="de">Guten Tag.</lang>'
    '<voice name="alloy">The end.</voice></speak>'
)


def ssml_dry(invoke, *args):
    r = invoke("say", *MODEL, "--dry-run", "--json", *args)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_breaks_sub_say_as_and_sentences_in_one_request(invoke):
    pytest.importorskip("kaldifst")
    report = ssml_dry(
        invoke,
        '<speak><p>One <break time="1.5s"/> two</p><s>The <sub alias="World Wide Web">WWW</sub></s>'
        '<break strength="weak"/><say-as interpret-as="ordinal">2</say-as> and '
        '<say-as interpret-as="telephone">555-0123</say-as></speak>',
    )
    assert report["ssml"] is True and report["parts"] == 1
    texts = [p["text"] for p in report["pieces"]]
    assert texts == ["One", "two. The World Wide Web.", "second and five five five, zero one two three"]
    assert [p["pause"] for p in report["pieces"]] == [0.0, 1.5, 0.5]
    assert {(p["voice"], p["lang"], p["speed"]) for p in report["pieces"]} == {("auto", None, 1.0)}


def test_voice_lang_and_rate_switch_between_pieces(invoke):
    report = ssml_dry(invoke, DOC, "--speed", "1.2")
    assert report["parts"] == 4 and report["seed"] == 7
    rows = [(p["text"], p["voice"], p["lang"], p["speed"], p["pause"]) for p in report["pieces"]]
    assert rows[:3] == [
        ("Hello there.", "auto", None, 1.2, 0.0),
        ("Slowly now.", "auto", None, 0.9, 0.5),  # slow: 0.75 of --speed
        ("Guten Tag.", "auto", "de", 1.2, 1.0),
    ]
    text, voice, lang, speed, pause = rows[3]
    assert text == "The end." and voice.startswith("instruct:") and lang is None  # alloy: its voice-design items


def test_voice_names_a_cast_member(invoke):
    cast = ["--cast", "NARRATOR=instruct:male, low pitch"]
    report = ssml_dry(invoke, '<speak>Hi. <voice name="narrator">Once upon a time.</voice></speak>', *cast)
    assert [p["voice"] for p in report["pieces"]] == ["auto", "instruct:male, low pitch"]


def test_emphasis_and_phoneme_are_read_with_a_warning(invoke):
    report = ssml_dry(invoke, '<speak><emphasis>Very</emphasis> <phoneme ph="x">good</phoneme>.</speak>')
    assert report["pieces"][0]["text"] == "Very good."
    assert sum("<emphasis>" in w for w in report["warnings"]) == 1
    assert sum("<phoneme>" in w for w in report["warnings"]) == 1


def test_ssml_flag_reads_text_without_speak(invoke):
    report = ssml_dry(invoke, "--ssml", 'Wait <break time="2s"/> now')
    assert [p["pause"] for p in report["pieces"]] == [0.0, 2.0]
    plain = ssml_dry(invoke, "Plain &amp; simple")  # without <speak> or --ssml: not SSML
    assert "ssml" not in plain and plain["text"] == "Plain &amp; simple"


def test_malformed_ssml_is_one_line_exit_2(invoke):
    r = invoke("say", *MODEL, "--dry-run", "<speak>\n<p>Hi</speak>")
    error_line(r, "SSML at line 2, column 8: mismatched tag", exit_code=2)
    laughs = '<!DOCTYPE speak [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><speak>&b;</speak>'
    r = invoke("say", *MODEL, "--dry-run", laughs)
    error_line(r, "a DOCTYPE is not allowed", exit_code=2)
    r = invoke("say", *MODEL, DOC, "--stream", "-o", "-")
    error_line(r, "--stream sends one request piece by piece: this SSML changes", exit_code=2)
    r = invoke("say", *MODEL, "--dry-run", '<speak><lang xml:lang="klingon">Qapla</lang></speak>')
    error_line(r, "SSML line 1: lang: unknown language 'klingon'", exit_code=2)


def test_batch_lines_read_ssml_of_one_part(invoke, tmp_path):
    src = tmp_path / "jobs.jsonl"
    lines = [
        {"text": '<speak><prosody rate="fast">One <break time="1s"/> two.</prosody></speak>'},
        {"text": '<speak>A. <voice name="alloy">B.</voice></speak>'},  # two parts: one request a line
    ]
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    r = invoke("batch", src, "-o", tmp_path / "out", *MODEL, "--dry-run", "--json")
    assert r.exit_code == 1  # line 2 is refused
    (row,) = [json.loads(x) for x in r.stdout.splitlines()]
    assert row["pauses"] == [0.0, 1.0, 0.0] and row["settings"]["speed"]["value"] == 1.25
    assert "SSML at line 1: the voice, language or rate changes, and this command speaks one request" in r.stderr


@pytest.fixture
def speech_body(home):
    """parse_speech of a body {input, ...}: the server's checks and build, no model."""
    from omnivoice_cli.server.config import ServeOptions, load_voice_map
    from omnivoice_cli.server.errors import ApiError
    from omnivoice_cli.server.speech import parse_speech

    options = ServeOptions(voice_map=load_voice_map(), model=str(TINY_CKPT))

    def parse(text: str, **fields):
        try:
            return parse_speech(json.dumps({"input": text, "seed": 3, **fields}).encode(), options)
        except ApiError as e:
            return e

    return parse


def test_each_tag_through_the_speech_request(speech_body):
    pytest.importorskip("kaldifst")
    one = speech_body(
        '<speak><s>Dial <say-as interpret-as="telephone">555-0123</say-as></s><break time="2s"/>'
        '<p>The <sub alias="Internet">net</sub> <emphasis>now</emphasis></p><break strength="weak"/>'
        '<say-as interpret-as="cardinal">12</say-as> <say-as interpret-as="ordinal">1</say-as> '
        '<say-as interpret-as="characters">ok</say-as> <say-as interpret-as="date" format="dmy">5/1/2024</say-as> '
        '<say-as interpret-as="time">9:15</say-as> <phoneme ph="x">yes</phoneme></speak>'
    )
    assert one.parts is None and one.stream  # one part: one request, streamed as any text
    assert one.built.request.text == (
        "Dial five five five, zero one two three. [pause 2000ms] The Internet now. [pause 500ms] "
        "twelve first o k the fifth of january twenty twenty four nine fifteen yes"
    )
    assert sum("<emphasis>" in w or "<phoneme>" in w for w in one.built.warnings) == 2
    several = speech_body(DOC, speed=1.2)
    assert several.parts is not None and not several.stream  # joined: sent whole
    assert [b.request.seed for b in several.parts.built] == [3, 4, 5, 6]
    assert [b.request.speed for b in several.parts.built] == [1.2, 0.9, 1.2, 1.2]
    assert [b.request.lang for b in several.parts.built][2] == "de"
    assert several.parts.built[3].request.instruct is not None  # alloy: its voice-design items
    assert several.parts.pauses == (0.0, 0.5, 1.0, 0.0)
    whole = speech_body(DOC, timestamps=True)
    assert whole.status == 400 and "field 'timestamps': SSML that changes the voice" in whole.message
    refused = speech_body("<speak>\n<p>Hi</speak>")
    assert refused.status == 400 and "SSML at line 2, column 8: mismatched tag" in refused.message


def test_a_door_of_one_request_speaks_one_part_and_refuses_several(home):
    from omnivoice_cli.app.door.speaker import Speaker, SpeakerOptions
    from omnivoice_cli.engine.errors import InvalidRequest

    speaker = Speaker(SpeakerOptions(model=str(TINY_CKPT)), load=lambda: None)  # Wyoming's, MCP's, the socket's
    built = speaker.build('<speak><lang xml:lang="fr">Bonjour <break time="1s"/> toi.</lang></speak>')
    assert (built.request.text, built.request.lang) == ("Bonjour [pause 1000ms] toi.", "fr")
    with pytest.raises(InvalidRequest, match="SSML at line 1: the voice, language or rate changes, and this door"):
        speaker.build(DOC)


def zero_runs(audio: np.ndarray) -> list[int]:
    """Lengths of the runs of exact zeros in `audio`."""
    zero = np.concatenate([[False], audio == 0, [False]])
    edges = np.flatnonzero(np.diff(zero.astype(np.int8)))
    return list(edges[1::2] - edges[::2])


@pytest.mark.slow
def test_a_document_of_parts_renders_and_the_server_sends_the_same(engine, invoke, tmp_path, monkeypatch):
    pytest.importorskip("uvicorn")
    import httpx
    from server_util import running_server

    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    r = invoke("say", *MODEL, "--num-step", "2", DOC, "-o", tmp_path / "doc.raw")
    assert r.exit_code == 0, r.stderr
    said = np.frombuffer((tmp_path / "doc.raw").read_bytes(), "<i2")
    assert max(zero_runs(said)) >= 24_000  # the 1 s break between two parts: silence joined in
    with running_server(engine, max_input_chars=100_000) as (url, _server, _state):
        c = httpx.Client(base_url=url, timeout=300)
        body = {"input": DOC, "seed": 7, "num_step": 2, "response_format": "pcm"}
        reply = c.post("/v1/audio/speech", json=body)
        assert reply.status_code == 200, reply.text
        assert reply.headers["x-omnivoice-seed"] == "7"
        np.testing.assert_array_equal(np.frombuffer(reply.content, "<i2"), said)
        one = c.post("/v1/audio/speech", json={**body, "input": '<speak>Hi <break time="1s"/> there.</speak>'})
        assert one.status_code == 200, one.text
        assert max(zero_runs(np.frombuffer(one.content, "<i2"))) >= 24_000
        for text, words in [
            ("<speak>\n<p>Hi</speak>", "SSML at line 2, column 8: mismatched tag"),
            ('<!DOCTYPE speak [<!ENTITY a "a">]><speak>&a;</speak>', "a DOCTYPE is not allowed"),
            ("<speak>" + "<s>" * 10_000 + "deep" + "</s>" * 10_000 + "</speak>", "nested more than 64 deep"),
            (
                '<speak><voice name="../x.safetensors">Hi</voice></speak>',
                "is a path: a request names a voice, not a file",
            ),
        ]:
            bad = c.post("/v1/audio/speech", json={**body, "input": text})
            assert bad.status_code == 400 and words in bad.json()["error"]["message"], bad.text
        sse = c.post("/v1/audio/speech", json={**body, "response_format": "mp3", "stream_format": "sse"})
        assert sse.status_code == 400 and "sent whole" in sse.json()["error"]["message"]
