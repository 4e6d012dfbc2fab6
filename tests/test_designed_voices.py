"""A designed voice rendered once and cloned after that (app/voices/design.py, designcache.py): `voice
add --instruct`, its `voice_prompt` named by `say`, a JSON line, HTTP and Wyoming; the built-in
names kept per checkpoint (across a restart, a damaged entry rendered again, one render for
concurrent first uses); a `--cast` member's later lines cloned from its first line's voice."""

from __future__ import annotations

import dataclasses
import json
import threading

import httpx
import pytest
from conftest import TINY_CKPT
from server_util import running_server

from omnivoice_cli.app.voices import designcache
from omnivoice_cli.app.voices.design import Design, default_sample, render, render_line, voice_prompt
from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.planning import Request
from omnivoice_cli.engine.sound.voice import VoicePrompt
from omnivoice_cli.engine.sound.voicefile import prompt_checksum

pytestmark = pytest.mark.slow  # the tiny model end to end

MODEL = ("--model", str(TINY_CKPT))
FAST = ("--num-step", "4")
STEPS_4 = GenerationConfig(num_step=4)  # FAST's


def _json(r) -> dict:
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _add(invoke, name="v", seed="3"):
    return _json(
        invoke("voice", "add", name, "--instruct", "female, low pitch", "--seed", seed, *MODEL, "--force", "--json")
    )


def test_voice_add_instruct_is_the_same_prompt_twice_and_say_clones_it(invoke, loaded, home, tmp_path):
    first, second = _add(invoke), _add(invoke)
    assert first["voice_prompt"] == second["voice_prompt"] and len(first["voice_prompt"]) == 64
    assert _add(invoke, "w", seed="4")["voice_prompt"] != first["voice_prompt"]  # another seed: another voice
    shown = _json(invoke("voice", "show", "v", "--json"))
    assert shown["voice_prompt"] == first["voice_prompt"]
    assert (shown["instruct"], shown["seed"], shown["source"]) == ("female, low pitch", "3", "designed")
    assert shown["sample"] == default_sample(None) == shown["text"]
    for text in ("First words.", "Something else entirely."):
        r = _json(invoke("say", text, "--voice", "v", *MODEL, *FAST, "-o", tmp_path / "a.wav", "--json"))
        assert r["voice_prompt"] == first["voice_prompt"]
    # export and import carry the design and the prompt
    out = tmp_path / "v.safetensors"
    assert invoke("voice", "export", "v", "-o", out).exit_code == 0
    assert invoke("voice", "import", out, "--name", "v2").exit_code == 0
    again = _json(invoke("voice", "show", "v2", "--json"))
    assert again["voice_prompt"] == first["voice_prompt"] and again["instruct"] == "female, low pitch"
    assert again["seed"] == "3"


def test_voice_add_refuses_ref_and_instruct_together_and_a_sample_alone(invoke, home, tmp_path):
    r = invoke("voice", "add", "x", "--instruct", "female", "--ref", tmp_path / "a.wav")
    assert r.exit_code == 2 and "not both" in r.stderr
    r = invoke("voice", "add", "x", "--sample", "Hello there.")
    assert r.exit_code == 2 and "--instruct" in r.stderr


def test_a_json_line_naming_the_voice_clones_it(invoke, loaded, home, tmp_path):
    prompt = _add(invoke)["voice_prompt"]
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({"text": "A line of a batch.", "voice": "v"}) + "\n")
    r = invoke("batch", lines, "-o", tmp_path / "out", *MODEL, *FAST)
    assert r.exit_code == 0, r.stderr
    [rec] = [json.loads(x) for x in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()]
    assert rec["voice_prompt"] == prompt


def test_alloy_is_one_voice_on_every_request_and_kept_per_checkpoint(invoke, loaded, home, tmp_path):
    seen = {
        _json(invoke("say", text, "--voice", "alloy", *MODEL, *FAST, "-o", tmp_path / "a.wav", "--json"))[
            "voice_prompt"
        ]
        for text in ("Hello there.", "A different sentence to say.")
    }
    assert len(seen) == 1 and None not in seen
    [entry] = sorted((home / "designed").glob("voice-*.safetensors"))
    # a damaged entry is found when read, rendered again (the same voice), never a failure
    data = bytearray(entry.read_bytes())
    data[-3] ^= 0xFF
    entry.write_bytes(bytes(data))
    r = _json(invoke("say", "Once more.", "--voice", "alloy", *MODEL, *FAST, "-o", tmp_path / "a.wav", "--json"))
    assert r["voice_prompt"] in seen
    assert entry.read_bytes() != bytes(data)  # written anew


def test_concurrent_first_uses_render_once(home, engine):
    design = Design("male, low pitch", 5, "Hello there, friend.", "en")
    key = designcache.checkpoint_key(TINY_CKPT)
    gate, calls, got = threading.Event(), [], []

    def slow_render():
        calls.append(1)
        gate.wait(60)
        return render(engine, design)

    threads = [
        threading.Thread(target=lambda: got.append(designcache.kept(key, design, slow_render))) for _ in range(3)
    ]
    for t in threads:
        t.start()
    while not calls:
        threading.Event().wait(0.01)
    gate.set()
    for t in threads:
        t.join(120)
    assert len(calls) == 1 and len({voice_prompt(v) for v in got}) == 1 and len(got) == 3
    assert designcache.lookup(key, design) is not None


def _speech(url, text, voice):
    r = httpx.post(f"{url}/v1/audio/speech", json={"model": "omnivoice", "input": text, "voice": voice}, timeout=300)
    assert r.status_code == 200, r.text
    return r.headers["X-OmniVoice-Voice-Prompt"]


def test_http_alloy_names_one_prompt_also_after_a_restart_and_a_saved_voice_its_own(engine, invoke, home, loaded):
    prompt = _add(invoke)["voice_prompt"]
    with running_server(engine) as (url, _, _):
        first = {_speech(url, text, "alloy") for text in ("Good morning.", "The weather is fine today.")}
        assert _speech(url, "Hello.", "v") == prompt
    assert len(first) == 1 and "none" not in first
    with running_server(engine) as (url, _, _):  # a new app on the same checkpoint and cache
        assert _speech(url, "Something new.", "alloy") in first
        assert _speech(url, "Something new.", "auto") == "none"


def test_wyoming_names_the_saved_voice(engine, invoke, home, loaded):
    pytest.importorskip("wyoming")
    from helpers.wyoming import Running, run
    from wyoming.audio import AudioStop
    from wyoming.tts import Synthesize, SynthesizeVoice

    async def speak_wyoming(srv, text, voice):
        async with srv.client() as client:
            await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
            while not AudioStop.is_type((await client.read_event()).type):
                pass

    prompt = _add(invoke)["voice_prompt"]
    lines: list[str] = []
    srv = Running(engine)
    srv.server.options = dataclasses.replace(srv.server.options, quiet=False, log=lines.append)  # its log lines
    try:
        run(speak_wyoming(srv, "Hello from the satellite.", "v"))
    finally:
        srv.close()
    assert any(f"voice_prompt={prompt}" in line for line in lines), lines


def test_cast_later_lines_clone_the_first_lines_voice(invoke, loaded, home, engine, tmp_path):
    script = tmp_path / "script.txt"
    script.write_text("BOB: Good morning.\nANN: Hello Bob.\nBOB: How are you today?\nBOB: I am fine, thanks.\n")
    r = invoke(
        "say", "-f", script, "--cast", "BOB=instruct:male, low pitch", "--cast", "ANN=auto",
        "--seed", "7", *MODEL, *FAST, "-o", tmp_path / "d.wav", "--json",
    )  # fmt: skip
    lines = _json(r)["lines"]
    bob = [ln for ln in lines if ln["speaker"] == "BOB"]
    assert len({ln["voice_prompt"] for ln in bob}) == 1 and bob[0]["voice_prompt"] is not None
    # the voice is BOB's first line as spoken (its words, its seed, its settings), and every BOB line
    # clones it
    first = Request(text=bob[0]["text"], instruct="male, low pitch", seed=bob[0]["seed"], generation=STEPS_4)
    assert voice_prompt(render_line(engine, first)[0]) == bob[1]["voice_prompt"] == bob[2]["voice_prompt"]
    [ann] = [ln for ln in lines if ln["speaker"] == "ANN"]
    assert ann["voice_prompt"] is None  # the model's own voice: nothing cloned


def test_a_cast_members_first_line_is_generated_once(invoke, loaded, home, engine, tmp_path, takes):
    """The line that designs BOB's voice is that voice's render: generated once, not again as a
    clone of itself (3 lines: 3 generations, where the render and the line were 4); its audio is
    the render's, and the voice it reports the render's."""
    script = tmp_path / "script.txt"
    script.write_text("BOB: Good morning.\nANN: Hello Bob.\nBOB: How are you today?\n")
    r = invoke(
        "say", "-f", script, "--cast", "BOB=instruct:male, low pitch", "--cast", "ANN=auto",
        "--seed", "7", *MODEL, *FAST, "-o", tmp_path / "d.wav", "--json",
    )  # fmt: skip
    lines = _json(r)["lines"]
    assert len(takes) == 3, [req.text for req, _ in takes]
    first = takes[0][1]  # the render: BOB's first line as itself
    assert voice_prompt(VoicePrompt(first.tokens, lines[0]["text"], None)) == lines[0]["voice_prompt"]
    assert lines[0]["voice_prompt"] == lines[2]["voice_prompt"] and lines[1]["voice_prompt"] is None
    seconds = lines[0]["end_seconds"] - lines[0]["start_seconds"]  # each rounded to 0.1 ms
    assert abs(seconds - len(first.audio) / engine.sample_rate) < 2e-4


def test_the_checksum_is_of_codes_and_words():
    import torch

    codes = torch.arange(16, dtype=torch.int64).reshape(2, 8)
    base = prompt_checksum(codes, "Hello.")
    assert base == prompt_checksum(codes.clone(), "Hello.")
    assert base != prompt_checksum(codes, "Hello!") and base != prompt_checksum(codes.reshape(4, 4), "Hello.")
    codes[1, 1] += 1
    assert base != prompt_checksum(codes, "Hello.")


def test_a_finetunes_own_items_design_a_cast_members_voice(invoke, home, finetune, tmp_path):
    """kohai's emotions are its own instruct items: a member designed by one is one voice for all
    its lines, another item another voice (the fine-tune loaded for real: not the tiny engine)."""
    script = tmp_path / "script.txt"
    script.write_text("BOB: Good morning.\nANN: Hello Bob.\nBOB: How are you today?\nANN: Fine, thanks.\n")
    r = invoke(
        "say", "-f", script, "--cast", "BOB=instruct:happy", "--cast", "ANN=instruct:sad",
        "--seed", "7", "--model", finetune("kohai"), *FAST, "-o", tmp_path / "d.wav", "--json",
    )  # fmt: skip
    lines = _json(r)["lines"]
    voices = {who: {ln["voice_prompt"] for ln in lines if ln["speaker"] == who} for who in ("BOB", "ANN")}
    assert all(len(v) == 1 and None not in v for v in voices.values()), voices
    assert voices["BOB"] != voices["ANN"]


def test_a_designing_lines_voice_keeps_the_speed_it_speaks_at(engine):
    """A line at speed 1.5 designs its voice: the voice's codes speak at 1.5 already (its rate, as
    piece 0's voice of a long text: pieces.first_voice), so a later line at 1.5 is estimated against
    it as it is (at speed 1), not sped up a second time."""
    from omnivoice_cli.engine.text.duration import resolve_target_len

    first, later = "The first line designs the voice.", "A later line of about the same length."
    voice, _ = render_line(engine, Request(text=first, instruct="male", seed=5, speed=1.5, generation=STEPS_4))
    clone = Request(text=later, instruct="male", seed=7, speed=1.5, generation=STEPS_4, ref=voice)
    assert voice.rate == 1.5
    as_it_is, _ = resolve_target_len(later, voice.text, voice.codes.shape[-1], None, None, engine.cfg.frame_rate)
    assert engine.plan(clone).frames == [as_it_is]
