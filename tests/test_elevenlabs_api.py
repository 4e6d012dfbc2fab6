"""ElevenLabs' request read onto our door (server/elevenlabs/api.py) and the alignment's shapes
(alignment.py), without a model: every output_format they document that we give is a format and
rate our door takes; their errors' shape; the key; the characters' times."""

import json

import pytest

from omnivoice_cli.server.config import ServeOptions, load_voice_map
from omnivoice_cli.server.elevenlabs import alignment
from omnivoice_cli.server.elevenlabs.api import (
    OUTPUT_FORMATS,
    ElevenError,
    eleven,
    is_eleven,
    key_refusal,
    output_format,
    speech_body,
)
from omnivoice_cli.server.errors import ApiError, bad_request
from omnivoice_cli.server.speech import parse_speech

pytestmark = pytest.mark.usefixtures("home")

OPTIONS = ServeOptions(voice_map=load_voice_map(), max_input_chars=100, model="tiny")


def door(data, voice="alloy", **query):
    """Their body through our door's checks (no model): the checked speech body."""
    return parse_speech(json.dumps(speech_body(data, voice, query)).encode(), OPTIONS)


def test_every_output_format_we_list_is_one_our_door_takes():
    assert {"mp3_44100_128", "pcm_16000", "pcm_24000", "ulaw_8000", "alaw_8000", "opus_48000_64"} <= set(OUTPUT_FORMATS)
    assert "pcm_32000" not in OUTPUT_FORMATS  # a rate `sample_rate` does not take
    for name in OUTPUT_FORMATS:
        parsed = door({"text": "Hello."}, output_format=name)
        codec, rate = name.split("_")[:2]
        assert parsed.built.settings["sample_rate"] == int(rate), name
        assert parsed.response_format == {"ulaw": "mulaw"}.get(codec, codec), name


def test_an_unknown_output_format_is_their_400_listing_ours():
    with pytest.raises(ElevenError) as e:
        output_format("mp3_44100_999")
    assert e.value.status == 400
    detail = json.loads(e.value.body())["detail"]
    assert detail["status"] == "invalid_output_format" and detail["param"] == "output_format"
    assert "mp3_44100_128" in detail["message"]  # ours listed
    assert output_format(None) == ("mp3", 44100)  # their default


def test_their_fields_become_ours():
    parsed = door(
        {
            "text": "Hello there.",
            "model_id": "eleven_multilingual_v2",
            "language_code": "en",
            "seed": 7,
            "voice_settings": {"speed": 1.2, "stability": 0.3, "similarity_boost": 0.8},
            "previous_text": "Before.",
            "num_step": 3,
        },
        output_format="pcm_16000",
    )
    settings = parsed.built.settings
    assert (parsed.request.text, parsed.request.seed, parsed.voice) == ("Hello there.", 7, "alloy")
    assert (settings["speed"], settings["num_step"], settings["lang"]) == (1.2, 3, "en")


@pytest.mark.parametrize(
    ("data", "param", "said"),
    [
        ({"txt": "Hi."}, "txt", "did you mean 'text'"),
        ({}, "text", "field 'text' is missing"),
        ({"text": "Hi.", "voice_settings": {"sped": 2}}, "voice_settings", "did you mean 'speed'"),
        ({"text": "Hi.", "voice_settings": [1]}, "voice_settings", "must be an object"),
    ],
)
def test_their_body_refused_in_their_words(data, param, said):
    with pytest.raises(ElevenError) as e:
        speech_body(data, "alloy", {})
    assert e.value.param == param and said in e.value.message


def test_the_doors_refusals_name_their_fields():
    with pytest.raises(ApiError) as e:
        door({"text": "x" * 101})
    theirs = json.loads(eleven(e.value).body())["detail"]
    assert theirs["param"] == "text" and "field 'text'" in theirs["message"] and "'input'" not in theirs["message"]
    with pytest.raises(ApiError) as e:
        door({"text": "Hi."}, voice="nobody")
    assert json.loads(eleven(e.value).body())["detail"]["param"] == "voice_id"
    assert json.loads(eleven(bad_request("x")).body()) == {"detail": {"status": "invalid_request", "message": "x"}}


def test_the_key_is_theirs_on_their_routes():
    assert key_refusal({b"xi-api-key": b"k"}, "k") is None
    assert key_refusal({b"authorization": b"Bearer k"}, "k") is None
    for headers in ({b"xi-api-key": b"no"}, {}):
        refused = key_refusal(headers, "k")
        assert refused is not None and refused.status == 401
        assert json.loads(refused.body())["detail"]["status"] == "invalid_api_key"
    assert is_eleven("/v1/text-to-speech/alloy/stream", {}) and is_eleven("/v1/voices", {})
    assert is_eleven("/v1/models", {b"xi-api-key": b"k"}) and not is_eleven("/v1/models", {})
    assert not is_eleven("/v1/audio/speech", {b"xi-api-key": b"k"})


def test_the_alignment_of_spans_and_of_a_piece():
    spans = [("Hello there.", 0.0, 1.2), ("", 1.2, 1.5), ("Bye now.", 1.5, 2.3)]
    a = alignment.from_spans(spans)
    assert "".join(a["characters"]) == "Hello there. Bye now."
    starts, ends = a["character_start_times_seconds"], a["character_end_times_seconds"]
    assert starts == sorted(starts) and all(s <= e for s, e in zip(starts, ends))
    assert (starts[0], ends[11], starts[13], ends[-1]) == (0.0, 1.2, 1.5, 2.3)  # each text over its span
    ms = alignment.in_ms(alignment.of_piece("Hi you.", 0.5, 1.2), offset=2.0)
    assert "".join(ms["chars"]) == "Hi you. " and ms["charStartTimesMs"][0] == 2500
    assert sum(ms["charDurationsMs"]) == pytest.approx(700, abs=len(ms["chars"]))


def test_their_routes_are_one_label_in_the_metrics():
    pytest.importorskip("prometheus_client")
    from omnivoice_cli.server.metrics import endpoint_of

    for path in ("/v1/text-to-speech/alloy", "/v1/text-to-speech/x/stream-input", "/v1/voices", "/v1/voices/alloy"):
        assert endpoint_of(path) == "elevenlabs", path
    assert endpoint_of("/v1/models") == "models"
