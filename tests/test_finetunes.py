"""Fine-tuned checkpoints (docs/finetunes.md): their own instruct items, languages and voices read
from the folder (engine/checkpoint/finetune.py), bounded and checked; spoken through `say`, a batch JSON line
and HTTP; the base checkpoint still refuses them. The three checkpoints are the tiny one with a
fine-tune's files added (tests/fixtures/finetunes, the `finetune` fixture)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from conftest import GOLDEN, TINY_CKPT, error_line
from server_util import running_server

from omnivoice_cli.engine.checkpoint.finetune import MAX_ENTRIES, MAX_FILE_BYTES, read_own
from omnivoice_cli.engine.errors import CheckpointError
from omnivoice_cli.engine.model.config import ModelConfig
from omnivoice_cli.engine.text.instructs import resolve_instruct
from omnivoice_cli.engine.text.languages import resolve_language

REF_TEXT = "This is the reference voice for the test"
GREEDY = ("--position-temperature", 0, "--class-temperature", 0, "--num-step", 4, "--seed", 5)


# --- what a checkpoint declares, read and checked -----------------------------------------------------


def test_info_shows_each_fine_tunes_own(invoke, finetune):
    kohai = invoke("info", "--model", finetune("kohai"))
    assert kohai.exit_code == 0, kohai.stderr
    assert "instruct items (its own, for --instruct): happy, sad, angry, surprised, neutral" in kohai.stdout
    lahgtna = invoke("info", "--model", finetune("lahgtna")).stdout
    assert "sa           Saudi lahgtna  (wins over the base model's Sanskrit)" in lahgtna
    voicetut = invoke("info", "--model", finetune("voicetut")).stdout
    assert "Karim" in voicetut and "arz" in voicetut
    base = invoke("info", "--model", TINY_CKPT)
    assert base.exit_code == 0 and "nothing beyond the base model" in base.stdout


def test_the_checkpoints_own_names_resolve_and_win_with_a_note(finetune):
    own = ModelConfig.from_checkpoint(finetune("lahgtna")).own
    assert resolve_language("Egyptian LAHGTNA", own) == ("eg", None)
    code, note = resolve_language("sa", own)
    assert code == "sa" and "this checkpoint's own 'Saudi lahgtna'" in note and "Sanskrit" in note
    assert resolve_language("de", own) == ("de", None)  # the base model's languages stay
    assert resolve_language("egyptian lahgtna")[0] is None  # the base model: not a language
    items = ModelConfig.from_checkpoint(finetune("kohai")).own
    assert resolve_instruct("Happy, female", own=items) == "happy, female"


BAD = {
    "an audio path out of the folder": ("references.json", {"A": {"audio": "../x.wav", "text": "hi"}}),
    "an absolute audio path": ("references.json", {"A": {"audio": "/etc/passwd.wav", "text": "hi"}}),
    "a missing recording": ("references.json", {"A": {"audio": "reference_speakers/none.wav", "text": "hi"}}),
    "a marker token": ("instructs.json", ["happy<|lang_end|>"]),
    "a comma in an item": ("instructs.json", ["happy, sad"]),
    "too many entries": ("instructs.json", [f"item{i}" for i in range(MAX_ENTRIES + 1)]),
    "a language name of the wrong type": ("languages.json", {"sa": 3}),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_broken_declaration_is_refused_in_one_line(invoke, ckpt_copy, case):
    name, data = BAD[case]
    (ckpt_copy / name).write_text(json.dumps(data))
    r = invoke("info", "--model", ckpt_copy)
    assert r.exit_code == 1
    assert str(ckpt_copy / name) in error_line(r)


def test_a_recording_linked_out_of_the_folder_or_an_oversized_file_is_refused(ckpt_copy, tmp_path):
    outside = tmp_path / "outside.wav"
    outside.write_bytes((GOLDEN / "ref_24k.wav").read_bytes())
    (ckpt_copy / "reference_speakers").mkdir()
    os.symlink(outside, ckpt_copy / "reference_speakers" / "a.wav")
    (ckpt_copy / "references.json").write_text(json.dumps({"A": {"audio": "reference_speakers/a.wav", "text": "hi"}}))
    with pytest.raises(CheckpointError, match="leads outside the checkpoint folder"):
        read_own(ckpt_copy)
    (ckpt_copy / "references.json").write_text(" " * (MAX_FILE_BYTES + 1))
    with pytest.raises(CheckpointError, match="at most"):
        read_own(ckpt_copy)


# --- the base checkpoint refuses them as it always did -----------------------------------------------


def test_the_base_checkpoint_refuses_them_with_todays_message(invoke, home):
    r = invoke("say", "Hello.", "--model", TINY_CKPT, "--instruct", "happy", "--dry-run")
    assert r.exit_code == 2
    assert error_line(r).startswith("Error: --instruct: unsupported instruct item in 'happy': 'happy'")
    assert "This checkpoint's own" not in r.stderr
    r = invoke("say", "Hello.", "--model", TINY_CKPT, "--voice", "Karim", "--dry-run")
    assert r.exit_code == 2 and "unknown voice 'Karim'" in error_line(r)
    r = invoke("say", "Hello.", "--model", TINY_CKPT, "--lang", "egyptian lahgtna", "--dry-run")
    assert r.exit_code == 2 and "unknown language 'egyptian lahgtna'" in error_line(r)


def test_dry_runs_take_the_fine_tunes_names(invoke, finetune, home):
    r = invoke("say", "Hello.", "--model", finetune("lahgtna"), "--lang", "Egyptian lahgtna", "--dry-run")
    assert r.exit_code == 0 and "lang: eg\n" in r.stdout
    r = invoke("say", "Hello.", "--model", finetune("lahgtna"), "--lang", "sa", "--dry-run")
    assert "lang: sa\n" in r.stdout and "this checkpoint's own 'Saudi lahgtna' (sa)" in r.stderr
    r = invoke("say", "Hello.", "--model", finetune("kohai"), "--instruct", "sad, male", "--dry-run")
    assert r.exit_code == 0, r.stderr
    r = invoke("say", "Hello.", "--model", finetune("kohai"), "--instruct", "sadd", "--dry-run")
    assert r.exit_code == 2 and "This checkpoint's own items: happy, sad" in error_line(r)


def test_instruct_text_is_verbatim_with_a_warning(invoke, home):
    r = invoke("say", "Hello.", "--instruct-text", "Karim", "--dry-run")
    assert r.exit_code == 0
    warnings = [ln for ln in r.stderr.splitlines() if "verbatim" in ln]
    assert warnings == [
        "Warning: instruct text 'Karim' is given to the model verbatim: the base OmniVoice model does not know "
        "it (only a fine-tune trained on it does)"
    ]
    r = invoke("say", "Hello.", "--instruct-text", "a<|lang_end|>", "--dry-run")
    assert r.exit_code == 2 and "--instruct-text" in error_line(r)
    r = invoke("say", "Hello.", "--instruct-text", "Karim", "--instruct", "male", "--dry-run")
    assert r.exit_code == 2 and "not both" in error_line(r)


# --- spoken: say, a JSON line, HTTP ------------------------------------------------------------------


@pytest.fixture
def as_loaded(monkeypatch, tiny_engine):
    """Engine.load of a fine-tune folder: the module's tiny engine (the same weights) with that
    folder's config, so no test loads the weights again."""
    from omnivoice_cli.engine import pipeline

    def engine_for(model):
        engine = copy.copy(tiny_engine)
        engine.cfg = ModelConfig.from_checkpoint(Path(model))
        return engine

    class Loaded:
        @classmethod
        def load(cls, model=None, **options):
            return engine_for(model)

    monkeypatch.setattr(pipeline, "Engine", Loaded)
    return engine_for


def _say(invoke, tmp_path, name, *args):
    out = tmp_path / f"{name}.wav"
    r = invoke("say", "Good evening to you all.", *args, *GREEDY, "-o", out, "-q")
    assert r.exit_code == 0, r.stderr
    return sf.read(out)[0]


@pytest.mark.slow
def test_say_speaks_each_fine_tunes_own(invoke, finetune, as_loaded, tmp_path, home):
    kohai, lahgtna, voicetut = finetune("kohai"), finetune("lahgtna"), finetune("voicetut")
    happy = _say(invoke, tmp_path, "happy", "--model", kohai, "--instruct", "happy")
    verbatim = _say(invoke, tmp_path, "verbatim", "--model", TINY_CKPT, "--instruct-text", "happy")
    assert np.array_equal(happy, verbatim)  # the item reached the model as it is
    named = _say(invoke, tmp_path, "eg_name", "--model", lahgtna, "--lang", "egyptian lahgtna")
    assert np.array_equal(named, _say(invoke, tmp_path, "eg", "--model", lahgtna, "--lang", "eg"))
    assert not np.array_equal(named, _say(invoke, tmp_path, "none", "--model", lahgtna))
    karim = _say(invoke, tmp_path, "karim", "--model", voicetut, "--voice", "karim")
    ref = ("--ref", GOLDEN / "ref_24k.wav", "--ref-text", REF_TEXT, "--lang", "arz")
    assert np.array_equal(karim, _say(invoke, tmp_path, "ref", "--model", TINY_CKPT, *ref))


@pytest.mark.slow
def test_a_json_line_speaks_each_fine_tunes_own(invoke, finetune, as_loaded, tmp_path, home):
    lines = {
        "kohai": {"text": "Good evening.", "instruct": "angry"},
        "lahgtna": {"text": "Good evening.", "lang": "sa"},
        "voicetut": {"text": "Good evening.", "voice": "Nour"},
    }
    for name, line in lines.items():
        src, out = tmp_path / f"{name}.jsonl", tmp_path / f"out-{name}"
        src.write_text(json.dumps(line) + "\n")
        r = invoke("batch", src, "-o", out, "--model", finetune(name), "--num-step", 2, "-q")
        assert r.exit_code == 0, r.stderr
        assert len(sf.read(out / "0001.wav")[0]) > 0


@pytest.mark.slow
def test_http_speaks_each_fine_tunes_own_and_lists_its_voices(finetune, as_loaded, module_home):
    from omnivoice_cli.app.settings.layers import FLAG_SOURCE

    bodies = {
        "kohai": {"instruct": "surprised"},
        "lahgtna": {"lang": "Tunisian lahgtna"},
        "voicetut": {"voice": "Karim"},
    }
    for name, fields in bodies.items():
        folder = finetune(name)
        layers = ((FLAG_SOURCE, {"num_step": 2, "model": str(folder)}),)
        with running_server(as_loaded(folder), model=str(folder), layers=layers) as (url, _, _):
            with httpx.Client(base_url=url, timeout=120) as client:
                body = {"model": "omnivoice", "input": "Good evening.", "response_format": "wav", **fields}
                r = client.post("/v1/audio/speech", json=body)
                assert r.status_code == 200, r.text
                voices = client.get("/v1/audio/voices").json()["voices"]
                if name == "voicetut":
                    assert {"id": "Karim", "name": "Karim", "type": "checkpoint"}.items() <= voices[0].items()
                else:
                    assert all(v["type"] != "checkpoint" for v in voices)


def test_wyomings_list_offers_the_checkpoints_voices_and_languages(finetune, home):
    from wyoming.info import Info

    from omnivoice_cli.app.door.speaker import Speaker, SpeakerOptions
    from omnivoice_cli.server.wyoming.wyomingevents import info_event

    def program(name):
        speaker = Speaker(SpeakerOptions(model=str(finetune(name))), load=lambda: None)
        return Info.from_event(info_event(speaker, "0")).tts[0]

    voicetut = program("voicetut")
    assert [(v.name, v.description) for v in voicetut.voices[:2]] == [
        ("Karim", "the checkpoint's own voice (arz)"),
        ("Nour", "the checkpoint's own voice (arz)"),
    ]
    languages = program("lahgtna").voices[0].languages
    assert "eg" in languages and languages.count("sa") == 1
    assert "eg" not in voicetut.voices[0].languages


def test_a_preset_and_a_batch_take_the_fine_tunes_items(invoke, finetune, tmp_path, home):
    preset = tmp_path / "moods.toml"
    preset.write_text('instruct = "sad"\nlang = "tn"\n')
    r = invoke("say", "Hello.", "--model", finetune("kohai"), "--preset", preset, "--dry-run")
    assert r.exit_code == 0, r.stderr
    r = invoke("say", "Hello.", "--model", finetune("lahgtna"), "--preset", preset, "--dry-run")
    assert r.exit_code == 2 and "unsupported instruct item in 'sad'" in error_line(r)
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"text": "Hello."}\n')
    r = invoke("batch", lines, "-o", tmp_path / "out", "--model", TINY_CKPT, "--instruct", "sad", "--dry-run")
    assert r.exit_code == 2 and "unsupported instruct item in 'sad'" in error_line(r)
    r = invoke("batch", lines, "-o", tmp_path / "out", "--model", finetune("kohai"), "--instruct", "sad", "--dry-run")
    assert r.exit_code == 0, r.stderr


def test_mcps_tools_offer_the_checkpoints_own(finetune, tmp_path, home):
    pytest.importorskip("mcp.server.mcpserver")
    from omnivoice_cli.app.door.speaker import Speaker, SpeakerOptions
    from omnivoice_cli.server.mcp import Tools

    def tools(name):
        return Tools(Speaker(SpeakerOptions(model=str(finetune(name))), load=lambda: None), tmp_path)

    assert tools("kohai").describe_voice_options()["checkpoint"]["instruct_items"][:2] == ["happy", "sad"]
    lahgtna = tools("lahgtna").describe_voice_options()["checkpoint"]["languages"]
    assert {"code": "sa", "name": "Saudi lahgtna"} in lahgtna
    voices = tools("voicetut").list_voices()["voices"]
    assert [v["name"] for v in voices if v["type"] == "checkpoint"] == ["Karim", "Nour"]
