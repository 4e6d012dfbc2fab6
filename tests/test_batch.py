"""`omnivoice batch`: input parsing, per-line settings, names, seeds, manifest, resume, bad input.

Fast tests run against FakeEngine (conftest.py). Tests marked slow run the real engine on the tiny
checkpoint: each batch line equals `omnivoice say` on that text alone, byte for byte (greedy and
sampled, mixed steps / guidance / t_shift in one run), and a batch killed midway (SIGINT, SIGKILL)
resumes to a complete folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import ROOT, TINY_CKPT, error_line, files_in
from helpers.cli import errors_of, write_jsonl

import omnivoice_cli.media.output as omnivoice_output
from omnivoice_cli.app.batch.manifest import MANIFEST
from omnivoice_cli.app.settings.schema import DEFAULT_MODEL
from omnivoice_cli.app.settings.setting import flag_name

MAIN = [sys.executable, "-c", "from omnivoice_cli.cli import main; main()"]  # the `omnivoice` script
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ENV.pop("OMNIVOICE_MODEL", None)


def manifest(out: Path) -> list[dict]:
    return [json.loads(ln) for ln in (out / MANIFEST).read_text().splitlines()]


def by_line(out: Path) -> dict[int, dict]:
    recs = manifest(out)
    lines = [r["line"] for r in recs]
    assert len(lines) == len(set(lines)), lines  # one record per line
    return {r["line"]: r for r in recs}


# ------------------------------------------------------------------------------------ .txt input


def test_txt_one_file_per_line(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("First line.\n\n# a comment\n   \nSecond line.\n  # indented comment\nThird line.")
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--seed", "10")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert files_in(out) == ["0001.wav", "0005.wav", "0007.wav", MANIFEST]
    assert [q.text for q in fake_engine.requests] == ["First line.", "Second line.", "Third line."]
    assert len(fake_engine.loads) == 1  # one model for the whole batch
    recs = by_line(out)
    assert sorted(recs) == [1, 5, 7]
    for n, rec in recs.items():
        assert rec["status"] == "done" and rec["error"] is None
        assert rec["output"] == f"{n:04d}.wav"
        assert rec["seed"] == 10 + n - 1  # --seed S: line i (0-based in the file) uses S + i
        assert rec["audio_seconds"] == 1.0 and rec["seconds"] >= 0
        assert rec["settings"]["num_step"] == 32 and rec["settings"]["seed"] == rec["seed"]
    info = sf.info(str(out / "0005.wav"))
    assert (info.samplerate, info.channels, info.subtype) == (24000, 1, "PCM_16")
    summary = r.stderr.strip().splitlines()[-1]
    assert (
        "3 lines: 3 done, 0 failed, 0 skipped" in summary
        and "3.00 s of audio" in summary
        and "s per second of audio" in summary
    )


def test_name_width_grows_with_the_file(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("# header\n" * 10000 + "Hello.\n")
    r = invoke("batch", src, "-o", tmp_path / "out", "--quiet")
    assert r.exit_code == 0, r.stderr
    assert files_in(tmp_path / "out") == ["10001.wav", MANIFEST]


def test_random_seeds_are_recorded_and_repeat_with_say(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("One.\nTwo.\n")
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--quiet")
    assert r.exit_code == 0, r.stderr
    recs = by_line(out)
    assert all(0 <= rec["seed"] < 2**31 for rec in recs.values())
    assert [q.seed for q in fake_engine.requests] == [recs[1]["seed"], recs[2]["seed"]]
    r = invoke("say", "Two.", "--seed", recs[2]["seed"], "-o", tmp_path / "two.wav", "--quiet")
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "two.wav").read_bytes() == (out / "0002.wav").read_bytes()


# ------------------------------------------------------------------------------------ .jsonl input


def test_jsonl_fields_map_to_requests(invoke, fake_engine, tmp_path, home):
    from omnivoice_cli.engine.model.config import GenerationConfig

    src = write_jsonl(
        tmp_path / "jobs.jsonl",
        [
            {"text": "Plain."},
            {
                "text": "All of them.",
                "id": "full",
                "lang": "en",
                "instruct": "female, low pitch",
                "speed": 1.25,
                "seed": 7,
                "num_step": 8,
                "guidance_scale": 0,
                "t_shift": 0.5,
                "layer_penalty_factor": 4,
                "position_temperature": 0,
                "class_temperature": 0.5,
                "denoise": False,
            },
            {"text": "Fixed length.", "duration": 2.5, "output": "chapter1/intro"},
            {"text": "Own file.", "output": "named.ogg", "lang": None},
            {"text": "Numbered id.", "id": 42},
        ],
    )
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--format", "flac", "--seed", "100")
    assert r.exit_code == 0, r.stderr
    assert files_in(out) == ["0001.flac", "42.flac", "chapter1/intro.flac", "full.flac", MANIFEST, "named.ogg"]
    assert sf.info(str(out / "named.ogg")).format == "OGG"
    assert sf.info(str(out / "full.flac")).format == "FLAC"
    [full] = fake_engine.rendered  # it designs its voice: generated once, as the voice's render
    plain, fixed, own, numbered = fake_engine.requests
    assert plain.generation == GenerationConfig() and plain.seed == 100
    assert (full.lang, full.instruct, full.speed, full.seed) == ("en", "female, low pitch", 1.25, 7)
    assert full.generation == GenerationConfig(
        num_step=8,
        guidance_scale=0.0,
        t_shift=0.5,
        layer_penalty_factor=4.0,
        position_temperature=0.0,
        class_temperature=0.5,
        denoise=False,
    )
    assert fixed.duration == 2.5 and fixed.seed == 102
    assert own.lang is None
    recs = by_line(out)
    assert recs[2]["id"] == "full" and recs[2]["output"] == "full.flac" and recs[2]["seed"] == 7
    assert recs[3]["output"] == "chapter1/intro.flac" and recs[3]["audio_seconds"] == 2.5
    assert recs[5]["id"] == "42" and recs[5]["settings"]["format"] == "flac"


def test_precedence_end_to_end(invoke, fake_engine, tmp_path, home):
    """defaults < preset < flags < line fields, through the real command."""
    preset = tmp_path / "p.toml"
    preset.write_text("num_step = 12\nguidance_scale = 1.0\nt_shift = 0.3\nlang = 'de'\n")
    src = write_jsonl(
        tmp_path / "jobs.jsonl",
        [{"text": "a"}, {"text": "b", "guidance_scale": 3.0, "lang": "fr"}, {"text": "c", "preset": "fast"}],
    )
    r = invoke("batch", src, "-o", tmp_path / "out", "--preset", preset, "--guidance-scale", "1.5", "-q")
    assert r.exit_code == 0, r.stderr
    a, b, c = fake_engine.requests
    assert (a.generation.num_step, a.generation.guidance_scale, a.generation.t_shift, a.lang) == (12, 1.5, 0.3, "de")
    assert (b.generation.num_step, b.generation.guidance_scale, b.lang) == (12, 3.0, "fr")
    # a line's preset replaces --preset for that line; flags still beat it
    assert (c.generation.num_step, c.generation.guidance_scale, c.generation.t_shift, c.lang) == (16, 1.5, 0.1, None)


def test_preset_sets_device_dtype_and_format(invoke, fake_engine, tmp_path, home):
    preset = tmp_path / "gpu.toml"
    preset.write_text('device = "cpu"\ndtype = "bfloat16"\nformat = "flac"\n')
    src = write_jsonl(tmp_path / "jobs.jsonl", [{"text": "a"}, {"text": "b", "preset": "fast"}])
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--preset", preset, "-q")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads == [{"model": DEFAULT_MODEL, "device": "cpu", "dtype": "bfloat16"}]
    # line 2's preset (fast) does not set format: the default applies to it
    assert files_in(out) == ["0001.flac", "0002.wav", MANIFEST]
    assert by_line(out)[2]["settings"]["device"] == "cpu"  # per run


def test_line_preset_leaves_the_hardware_to_the_run(invoke, fake_engine, tmp_path, home):
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "gpu.toml").write_text('device = "cuda"\nquantize = "int8"\nnum_step = 4\n')
    src = write_jsonl(tmp_path / "jobs.jsonl", [{"text": "a"}, {"text": "b", "preset": "gpu"}])
    r = invoke("batch", src, "-o", tmp_path / "out", "--device", "cpu", "-q")
    assert r.exit_code == 0, r.stderr
    assert files_in(tmp_path / "out") == ["0001.wav", "0002.wav", MANIFEST]
    assert fake_engine.loads == [{"model": DEFAULT_MODEL, "device": "cpu", "dtype": "auto"}]
    assert [q.generation.num_step for q in fake_engine.requests] == [32, 4]  # the line's preset, on the run's CPU


# ------------------------------------------------------------------------------------ resume


def test_rerun_skips_existing_files_and_keeps_their_records(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("One.\nTwo.\nThree.\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "0002.wav").write_bytes(b"not really audio")  # made elsewhere: kept, not redone
    r = invoke("batch", src, "-o", out, "--seed", "1", "-q")
    assert r.exit_code == 0, r.stderr
    assert [q.text for q in fake_engine.requests] == ["One.", "Three."]
    first = by_line(out)
    assert first[2]["status"] == "skipped" and first[2]["seed"] is None and first[2]["audio_seconds"] is None
    stamp = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.glob("*.wav")}

    r = invoke("batch", src, "-o", out, "--seed", "1")
    assert r.exit_code == 0, r.stderr
    assert len(fake_engine.requests) == 2  # nothing redone
    assert fake_engine.loads and len(fake_engine.loads) == 1  # no model needed the second time
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.glob("*.wav")} == stamp
    assert by_line(out) == first  # done records kept as they were
    assert "3 lines: 0 done, 0 failed, 3 skipped" in r.stderr

    r = invoke("batch", src, "-o", out, "--seed", "1", "--overwrite", "-q")
    assert r.exit_code == 0, r.stderr
    assert [q.text for q in fake_engine.requests[2:]] == ["One.", "Two.", "Three."]
    assert all(rec["status"] == "done" for rec in by_line(out).values())
    assert (out / "0002.wav").read_bytes() != b"not really audio"


def test_rerun_speaks_again_the_lines_whose_text_or_settings_changed(invoke, fake_engine, tmp_path, home):
    """Running the same command again keeps what is done; a line whose text changed since its
    file was made (its manifest record says), or a changed setting, is spoken again and replaced."""
    src = tmp_path / "lines.txt"
    src.write_text("One.\nTwo.\nThree.\n")
    out = tmp_path / "out"
    assert invoke("batch", src, "-o", out, "-q").exit_code == 0
    src.write_text("One.\nTwo, edited.\nThree.\n")
    r = invoke("batch", src, "-o", out)
    assert r.exit_code == 0, r.stderr
    assert [q.text for q in fake_engine.requests[3:]] == ["Two, edited."]
    assert "3 lines: 1 done, 0 failed, 2 skipped" in r.stderr
    assert by_line(out)[2]["text"] == "Two, edited." and by_line(out)[2]["status"] == "done"
    r = invoke("batch", src, "-o", out, "--speed", "1.2", "-q")
    assert r.exit_code == 0, r.stderr
    assert [q.text for q in fake_engine.requests[4:]] == ["One.", "Two, edited.", "Three."]


@pytest.mark.slow
def test_rerun_retries_failed_lines(invoke, fake_engine, tmp_path, home):
    src = write_jsonl(tmp_path / "jobs.jsonl", [{"text": "a"}, {"text": "b", "num_step": 0}])
    out = tmp_path / "out"
    assert invoke("batch", src, "-o", out, "-q").exit_code == 1
    assert by_line(out)[2]["status"] == "failed"
    write_jsonl(src, [{"text": "a"}, {"text": "b", "num_step": 4}])
    r = invoke("batch", src, "-o", out, "-q")
    assert r.exit_code == 0, r.stderr
    assert [q.text for q in fake_engine.requests] == ["a", "b"]
    recs = by_line(out)
    assert recs[1]["status"] == recs[2]["status"] == "done"


def test_stale_temporary_files_are_removed(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("One.\nTwo.\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".0001.wav.x1y2z3.part").write_bytes(b"RIFF")  # a run killed while writing
    (out / ".manifest.jsonl.abc.part").write_text("{")
    (out / ".keep.me").write_text("not ours")
    r = invoke("batch", src, "-o", out, "-q")
    assert r.exit_code == 0, r.stderr
    assert files_in(out) == [".keep.me", "0001.wav", "0002.wav", MANIFEST]


def test_torn_manifest_from_a_kill(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("One.\nTwo.\n")
    out = tmp_path / "out"
    assert invoke("batch", src, "-o", out, "-q").exit_code == 0
    (out / "0002.wav").unlink()
    with open(out / MANIFEST, "a") as f:
        f.write('{"line": 2, "status": "do')  # killed mid-record
    r = invoke("batch", src, "-o", out, "-q")
    assert r.exit_code == 0, r.stderr
    recs = by_line(out)
    assert [recs[n]["status"] for n in (1, 2)] == ["done", "done"]


def test_interrupt_rewrites_the_manifest_and_keeps_finished_files(invoke, fake_engine, tmp_path, home, monkeypatch):
    """Ctrl-C inside the engine: finished files stay, unfinished lines are 'pending', exit 130."""
    calls = {"n": 0}
    orig = fake_engine.generate

    def generate(self, requests, on_step=None, on_result=None, on_error=None, **kw):
        def on_result_then_stop(i, result):
            on_result(i, result)
            calls["n"] += 1
            if calls["n"] == 2:
                raise KeyboardInterrupt

        return orig(self, requests, on_step, on_result_then_stop, on_error)

    monkeypatch.setattr(fake_engine, "generate", generate)
    src = tmp_path / "lines.txt"
    src.write_text("One.\nTwo.\nThree.\nFour.\n")
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--seed", "3")
    assert r.exit_code == 130, r.stderr
    assert "stopped by Ctrl-C" in r.stderr and "run the same command again" in r.stderr
    assert files_in(out) == ["0001.wav", "0002.wav", MANIFEST]
    recs = by_line(out)
    assert [recs[n]["status"] for n in (1, 2, 3, 4)] == ["done", "done", "pending", "pending"]
    monkeypatch.setattr(fake_engine, "generate", orig)
    r = invoke("batch", src, "-o", out, "--seed", "3", "-q")
    assert r.exit_code == 0, r.stderr
    assert [recs["status"] for recs in by_line(out).values()] == ["done"] * 4


# ------------------------------------------------------------------------------------ bad input

BAD_LINES = [
    # (JSON line as written, message fragment)
    ('{"text": "hi",}', "line 2: not valid JSON: Expecting property name enclosed in double quotes (column 15)"),
    ("just words", "line 2: not valid JSON"),
    ('["text", "hi"]', 'line 2: expected a JSON object such as {"text": "Hello"}, got a list'),
    ('{"id": "x"}', "line 2: field 'text' is missing"),
    ('{"text": null}', "line 2: field 'text' is missing"),
    ('{"text": "  "}', "line 2: field 'text' is empty"),
    ('{"text": 5}', "line 2: field 'text' must be a string, got 5 (an integer)"),
    (
        '{"text": "hi", "num_steps": 8}',
        "line 2: unknown field 'num_steps' (did you mean 'num_step'?); known fields: text, id",
    ),
    ('{"text": "hi", "a": 1, "b": 2}', "line 2: unknown fields 'a', 'b'"),
    ('{"text": "hi", "text": "again"}', "line 2: field 'text' appears twice"),
    ('{"text": "hi", "num_step": "8"}', "line 2: field 'num_step' must be an integer in 1..64, got '8' (a string)"),
    ('{"text": "hi", "num_step": 8.0}', "line 2: field 'num_step' must be an integer in 1..64, got 8.0 (a number)"),
    ('{"text": "hi", "num_step": 0}', "line 2: field 'num_step' must be an integer in 1..64, got 0"),
    ('{"text": "hi", "num_step": 65}', "line 2: field 'num_step' must be an integer in 1..64, got 65"),
    ('{"text": "hi", "guidance_scale": -1}', "line 2: field 'guidance_scale' must be a number >= 0, got -1.0"),
    ('{"text": "hi", "t_shift": 0}', "line 2: field 't_shift' must be a number > 0, got 0.0"),
    (
        '{"text": "hi", "speed": true}',
        "line 2: field 'speed' must be a number > 0 (1.0 is normal), got True (a boolean)",
    ),
    ('{"text": "hi", "duration": 31}', "line 2: field 'duration' must be seconds in (0, 30], got 31.0"),
    ('{"text": "hi", "seed": -3}', "line 2: field 'seed' must be an integer in 0..9223372036854775807, got -3"),
    ('{"text": "hi", "denoise": "yes"}', "line 2: field 'denoise' must be true or false, got 'yes' (a string)"),
    ('{"text": "hi", "lang": 7}', "line 2: field 'lang' must be a language code or name, got 7 (an integer)"),
    ('{"text": "hi", "id": true}', "line 2: field 'id' must be a string or an integer, got True (a boolean)"),
    ('{"text": "hi", "id": "a/b"}', "line 2: field 'id' 'a/b' cannot name a file"),
    (
        '{"text": "hi", "output": "../x.wav"}',
        "line 2: field 'output' '../x.wav' must be a file name inside the output folder",
    ),
    ('{"text": "hi", "output": "/tmp/x.wav"}', "line 2: field 'output' '/tmp/x.wav' must be a file name inside"),
    (
        '{"text": "hi", "output": "x.mp4"}',
        "line 2: field 'output' 'x.mp4' must end in .wav, .flac, .ogg, .opus, .mp3, .raw, .pcm, .aac, .m4a, .ulaw, .mulaw or .alaw",
    ),
    (
        '{"text": "hi", "instruct": "female, lowpitch"}',
        "line 2: field 'instruct': unsupported instruct item in 'female, lowpitch': 'lowpitch' (did you mean 'low pitch'?)",
    ),
    (
        '{"text": "hi", "preset": "fastest"}',
        "line 2: field 'preset': unknown preset 'fastest' (did you mean 'fast'?); known presets: balanced, fast, quality",
    ),
    ('{"text": "hi", "preset": 3}', "line 2: field 'preset' must be a string, got 3"),
    ('{"text": "hi", "ref": "nope.wav", "ref_text": "Hello."}', "line 2: field 'ref': audio file 'nope.wav' ("),
    ('{"text": "hi", "ref": 5}', "line 2: field 'ref' must be a string, got 5"),
    ('{"text": "hi", "ref_text": "Hello."}', "line 2: field 'ref_text' needs 'ref', the recording it transcribes"),
    ('{"text": "hi", "ref": "a.wav", "voice": "v.safetensors"}', "line 2: give either 'ref' or 'voice', not both"),
    ('{"text": "hi", "voice": "alice"}', "line 2: field 'voice': unknown voice 'alice'; known voices: none yet"),
    ('{"text": "hi", "voice": "./nope.safetensors"}', "line 2: field 'voice': voice file './nope.safetensors' ("),
    ('{"text": "hi", "ref": "jobs.jsonl"}', "line 2: field 'ref': cannot read reference audio"),
    ('{"text": "hi", "chunk_duration": 0}', "line 2: field 'chunk_duration' must be seconds > 0, got 0.0"),
    ('{"text": "hi", "chunk_threshold": 31}', "line 2: field 'chunk_threshold' must be seconds in (0, 30], got 31.0"),
]


@pytest.mark.parametrize("bad,message", BAD_LINES, ids=[b for b, _ in BAD_LINES])
def test_bad_line_fails_alone(invoke, fake_engine, tmp_path, home, bad, message):
    src = write_jsonl(tmp_path / "jobs.jsonl", [{"text": "first"}, bad, {"text": "third"}])
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out)
    assert r.exit_code == 1, r.stderr
    assert message in error_line(r)
    assert [q.text for q in fake_engine.requests] == ["first", "third"]  # the others still run
    assert files_in(out) == ["0001.wav", "0003.wav", MANIFEST]
    recs = by_line(out)
    assert [recs[n]["status"] for n in (1, 2, 3)] == ["done", "failed", "done"]
    assert message in "Error: " + recs[2]["error"]
    assert "3 lines: 2 done, 1 failed, 0 skipped" in r.stderr


def test_voice_fields(invoke, fake_engine, tmp_path, home):
    """ref is encoded after the model loads (a bad recording fails its line); voice needs a voice."""
    (tmp_path / "me.wav").write_bytes(b"RIFF")  # only checked to exist before the model
    (tmp_path / "bad.safetensors").write_bytes(b"not a voice")
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "alice.toml").write_text('voice = "alice"\n')
    src = write_jsonl(
        tmp_path / "jobs.jsonl",
        [
            {"text": "a", "ref": "me.wav", "ref_text": "Me speaking."},  # relative to the input's folder
            {"text": "b", "voice": "bad.safetensors"},
            {"text": "c", "preset": "alice"},
            {"text": "d"},
        ],
    )
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out)
    assert r.exit_code == 1
    errs = errors_of(r)
    assert any(e.startswith("Error: line 1: field 'ref': cannot read reference audio") for e in errs), errs
    assert any(e.startswith("Error: line 2: field 'voice': ") and "is not a voice file" in e for e in errs), errs
    assert any(
        e.startswith("Error: line 3: preset file '") and "alice.toml': key 'voice': unknown voice 'alice'; known" in e
        for e in errs
    ), errs
    assert [q.text for q in fake_engine.requests] == ["d"]
    recs = by_line(out)
    assert recs[1]["ref"] == "me.wav" and recs[1]["ref_text"] == "Me speaking." and recs[1]["status"] == "failed"


def test_long_texts_and_line_breaks(invoke, fake_engine, tmp_path, home):
    """A line far over 30 s is not refused (the engine chunks it); line breaks in JSON text are spaces."""
    long = "A sentence that goes on and on, and then on some more. " * 80
    src = write_jsonl(
        tmp_path / "jobs.jsonl",
        [{"text": long, "chunk_duration": 10, "chunk_threshold": 20}, {"text": "Two\nlines.\r\n"}],
    )
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "-q")
    assert r.exit_code == 0, r.stderr
    a, b = fake_engine.requests
    assert a.text == long.strip() and b.text == "Two lines."
    assert (a.generation.audio_chunk_duration, a.generation.audio_chunk_threshold) == (10.0, 20.0)
    assert by_line(out)[1]["settings"]["chunk_duration"] == 10.0


def test_every_line_checked_before_the_model(invoke, fake_engine, tmp_path, home):
    """Invalid lines fail (and are recorded) before the model loads; a batch of only bad lines loads nothing."""
    src = write_jsonl(tmp_path / "jobs.jsonl", ["{oops", {"text": "x", "num_step": 0}])
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out)
    assert r.exit_code == 1
    assert len(errors_of(r)) == 2
    assert fake_engine.loads == []
    assert [rec["status"] for rec in manifest(out)] == ["failed", "failed"]


def test_two_lines_writing_one_file(invoke, fake_engine, tmp_path, home):
    src = write_jsonl(
        tmp_path / "jobs.jsonl",
        [{"text": "a", "id": "same"}, {"text": "b"}, {"text": "c", "output": "Same.wav"}, {"text": "d", "id": "0002"}],
    )
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out)
    assert r.exit_code == 1
    errs = errors_of(r)
    assert "Error: line 1: output 'same.wav' is also written by line 3: give each line its own id or output" in errs
    assert "Error: line 3: output 'Same.wav' is also written by line 1" in " ".join(errs)
    assert "Error: line 2: output '0002.wav' is also written by line 4" in " ".join(errs)
    assert len(errs) == 4
    assert fake_engine.requests == []
    assert files_in(out) == [MANIFEST]


def test_missing_input_file(invoke, fake_engine, tmp_path, home):
    r = invoke("batch", tmp_path / "nope.txt", "-o", tmp_path / "out")
    assert r.exit_code == 2
    assert error_line(r) == f"Error: input file '{tmp_path / 'nope.txt'}' does not exist"
    assert files_in(tmp_path) == []


@pytest.mark.parametrize(
    "content,message",
    [("", "is empty: nothing to speak"), ("\n  \n# only a comment\n", "has only blank lines and # comments")],
)
@pytest.mark.parametrize("ext", ["txt", "jsonl"])
def test_empty_input_file(invoke, fake_engine, tmp_path, home, content, message, ext):
    src = tmp_path / f"lines.{ext}"
    src.write_text(content)
    r = invoke("batch", src, "-o", tmp_path / "out")
    assert r.exit_code == 2
    assert message in error_line(r)
    assert not (tmp_path / "out").exists()


def test_input_of_unknown_kind(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.csv"
    src.write_text("a,b\n")
    r = invoke("batch", src, "-o", tmp_path / "out")
    assert r.exit_code == 2
    assert "has extension '.csv': use a .txt file (one text per line) or a .jsonl file" in error_line(r)


def test_input_not_utf8(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_bytes(b"ok\n\xff\xfe bad\n")
    r = invoke("batch", src, "-o", tmp_path / "out")
    assert r.exit_code == 2
    assert "is not UTF-8 text" in error_line(r)


def test_output_folder_that_cannot_be_created(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("Hello.\n")
    blocker = tmp_path / "file"
    blocker.write_text("I am a file")
    r = invoke("batch", src, "-o", blocker / "out")
    assert r.exit_code == 1
    assert f"cannot create the output folder '{blocker / 'out'}'" in error_line(r)
    r = invoke("batch", src, "-o", blocker)
    assert r.exit_code == 2
    assert f"output folder '{blocker}' is a file" in error_line(r)
    assert fake_engine.loads == []
    assert files_in(tmp_path) == ["file", "lines.txt"]


def test_output_folder_is_created(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("Hello.\n")
    out = tmp_path / "a" / "b" / "out"
    assert invoke("batch", src, "-o", out, "-q").exit_code == 0
    assert files_in(out) == ["0001.wav", MANIFEST]


def test_unknown_preset_lists_the_known_ones(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("Hello.\n")
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "mine.toml").write_text("num_step = 4\n")
    r = invoke("batch", src, "-o", tmp_path / "out", "--preset", "qualty")
    assert r.exit_code == 2
    assert error_line(r).startswith(
        "Error: unknown preset 'qualty' (did you mean 'quality'?); known presets: balanced, fast, mine, quality"
    )
    assert not (tmp_path / "out").exists()


def test_preset_toml_syntax_error(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("Hello.\n")
    bad = tmp_path / "bad.toml"
    bad.write_text("num_step = 8\nguidance_scale = = 2\n")
    r = invoke("batch", src, "-o", tmp_path / "out", "--preset", bad)
    assert r.exit_code == 2
    line = error_line(r)
    assert f"preset file '{bad}': TOML syntax error" in line and "line 2" in line


def test_line_preset_with_syntax_error_fails_that_line(invoke, fake_engine, tmp_path, home):
    bad = tmp_path / "bad.toml"
    bad.write_text("num_step = [\n")
    src = write_jsonl(tmp_path / "jobs.jsonl", [{"text": "a", "preset": str(bad)}, {"text": "b"}])
    r = invoke("batch", src, "-o", tmp_path / "out")
    assert r.exit_code == 1
    assert f"line 1: field 'preset': preset file '{bad}': TOML syntax error" in error_line(r)
    assert [q.text for q in fake_engine.requests] == ["b"]


BAD_FLAGS = [
    (["--num-step", "0"], "--num-step must be an integer in 1..64, got 0"),
    (["--num-step", "x"], "--num-step must be an integer in 1..64, got 'x'"),
    (["--speed", "-1"], "--speed must be a number > 0 (1.0 is normal), got -1.0"),
    (["--seed", "-1"], "--seed must be an integer in 0..9223372036854775807, got -1"),
    (["--format", "mp4"], "--format must be wav, flac, ogg, opus, mp3, raw, aac, m4a, mulaw, alaw, pcm, got 'mp4'"),
    (["--device", "tpu"], "--device must be auto, cpu, cuda, cuda:N or mps, got 'tpu'"),
    (["--instruct", "robot voice"], "unsupported instruct item"),
]


@pytest.mark.parametrize("args,message", BAD_FLAGS, ids=[m for _, m in BAD_FLAGS])
def test_bad_flags_fail_before_anything(invoke, fake_engine, tmp_path, home, args, message):
    src = tmp_path / "lines.txt"
    src.write_text("Hello.\n")
    r = invoke("batch", src, "-o", tmp_path / "out", *args)
    assert r.exit_code == 2, r.stderr
    assert message in error_line(r)
    assert fake_engine.loads == [] and not (tmp_path / "out").exists()


def test_output_option_is_required(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("Hello.\n")
    r = invoke("batch", src)
    assert r.exit_code == 2
    assert "Missing option '-o'" in r.stderr


def test_write_failure_fails_the_line_only(invoke, fake_engine, tmp_path, home, monkeypatch):
    real_write = omnivoice_output._write_blocks
    calls = {"n": 0}

    def flaky(file, data, samplerate, *args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        return real_write(file, data, samplerate, *args)

    monkeypatch.setattr(omnivoice_output, "_write_blocks", flaky)
    src = tmp_path / "lines.txt"
    src.write_text("One.\nTwo.\nThree.\n")
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out)
    assert r.exit_code == 1
    assert f"line 2: cannot write {out / '0002.wav'}: No space left on device" in error_line(r)
    assert files_in(out) == ["0001.wav", "0003.wav", MANIFEST]


def test_engine_failure_fails_the_group(invoke, fake_engine, tmp_path, home, monkeypatch):
    from omnivoice_cli.engine.errors import OmniVoiceError

    def broken(self, requests, on_step=None, on_result=None, on_error=None, **kw):
        raise OmniVoiceError("out of memory somewhere")

    monkeypatch.setattr(fake_engine, "generate", broken)
    src = tmp_path / "lines.txt"
    src.write_text("One.\nTwo.\n")
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out)
    assert r.exit_code == 1
    assert errors_of(r) == [
        "Error: line 1: generation failed: out of memory somewhere",
        "Error: line 2: generation failed: out of memory somewhere",
    ]
    assert [rec["status"] for rec in manifest(out)] == ["failed", "failed"]


def test_model_load_failure_leaves_a_complete_manifest(invoke, fake_engine, tmp_path, home):
    from omnivoice_cli.engine.errors import CheckpointError

    fake_engine.load_error = CheckpointError("checkpoint folder x is missing tokenizer.json")
    src = tmp_path / "lines.txt"
    src.write_text("One.\nTwo.\n")
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out)
    assert r.exit_code == 1
    assert error_line(r) == "Error: checkpoint folder x is missing tokenizer.json"
    assert [rec["status"] for rec in manifest(out)] == ["pending", "pending"]


def test_warnings_are_shown_once(invoke, fake_engine, tmp_path, home):
    src = write_jsonl(tmp_path / "jobs.jsonl", [{"text": "?!"}, {"text": "?!"}])  # no words: a warning
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "-q")
    assert r.exit_code == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("Warning: ")]
    assert len(warnings) == 1 and warnings[0].startswith("Warning: line 1: ") and "no letters" in warnings[0]
    assert all("no letters" in rec["warnings"][0] for rec in manifest(out))


def test_progress_gets_steps_and_lines(invoke, fake_engine, tmp_path, home, monkeypatch):
    from omnivoice_cli.ui import progress

    seen = {"steps": [], "lines": []}
    monkeypatch.setattr(progress.BatchProgress, "step", lambda self, d, t: seen["steps"].append((d, t)))
    orig_line = progress.BatchProgress.line
    monkeypatch.setattr(progress.BatchProgress, "line", lambda self, s: (seen["lines"].append(s), orig_line(self, s)))
    src = write_jsonl(tmp_path / "jobs.jsonl", [{"text": "a", "num_step": 3}, "{bad", {"text": "c", "num_step": 2}])
    out = tmp_path / "out"
    (out).mkdir()
    (out / "0003.wav").write_bytes(b"x")
    r = invoke("batch", src, "-o", out)
    assert r.exit_code == 1
    assert seen["steps"] == [(1, 3), (2, 3), (3, 3)]
    assert sorted(seen["lines"]) == ["done", "failed", "skipped"]


def test_an_executor_needs_only_the_public_seam(tmp_path, home):
    """batch.Executor: an executor that ends each line with save_result or fail_line (as
    cluster.RayExecutor does) gets the files, the manifest and the counts of a local run; the run
    needs nothing of the face (a bare session.Session: messages to a list, no bars)."""
    from omnivoice_cli.app.batch.batch import BatchRun
    from omnivoice_cli.app.session import Session
    from omnivoice_cli.engine.planning import Result

    class Halves:  # line 1 spoken, line 2 failed, by no engine
        def speak(self, run, pending, signals):
            for line in pending:
                if line.number == 1:
                    audio, seed = np.full(2400, 0.1, dtype=np.float32), line.settings["seed"]  # not silence
                    result = Result(audio=audio, sample_rate=24000, tokens=None, target_len=2, seed=seed)
                    run.save_result(line, result, time.perf_counter())
                else:
                    run.fail_line(line, "no engine here")

    src = tmp_path / "lines.txt"
    src.write_text("One.\nTwo.\n")
    said: list[str] = []
    run = BatchRun(
        src, tmp_path / "out", preset=None, flags={"seed": 7}, session=Session(echo=said.append), executor=Halves()
    )
    report = run.run()
    assert (report.done, report.failed, report.pending) == (1, 1, 0)
    recs = by_line(tmp_path / "out")
    assert recs[1]["status"] == "done" and recs[1]["seed"] == 7 and recs[1]["audio_seconds"] == 0.1
    assert recs[2]["status"] == "failed" and recs[2]["error"] == "line 2: no engine here"
    assert files_in(tmp_path / "out") == ["0001.wav", MANIFEST]
    assert said == ["Error: line 2: no engine here"]


@pytest.mark.slow
def test_batch_and_presets_help_do_not_import_torch():
    code = (
        "import sys\n"
        "import typer.main\n"
        "import omnivoice_cli.cli as cli\n"
        "cmd = typer.main.get_command(cli.app)\n"
        "for args in (['batch', '--help'], ['presets', '--help'], ['presets'], ['presets', 'show', 'fast'], ['batch']):\n"
        "    try:\n"
        "        cmd.main(args, prog_name='omnivoice', standalone_mode=False)\n"
        "    except (SystemExit, Exception):\n"
        "        pass\n"
        "heavy = [m for m in ('torch', 'numpy', 'soundfile', 'safetensors') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "omnivoice batch" in out.stdout and "--overwrite" in out.stdout and "num_step = 16" in out.stdout
    assert "HEAVY []" in out.stdout, out.stdout


# ------------------------------------------------------------------------------------ real engine (slow)

slow = pytest.mark.slow

# texts of the golden fixtures (tests/fixtures/golden/*.json)
FIXTURE_TEXTS = [
    "Hello world, this is a small test of the speech oracle.",
    "The weather today is sunny with a light breeze from the west.",
    "That is hilarious [laughter] I can't believe it actually worked.",
    "今天天气很好，我们一起去公园散步吧。",
]


def say_bytes(invoke, tmp_path, name, text, args) -> bytes:
    path = tmp_path / "say" / name
    path.parent.mkdir(exist_ok=True)
    r = invoke("say", text, "--model", TINY_CKPT, "-o", path, "--quiet", *[str(a) for a in args])
    assert r.exit_code == 0, r.stderr
    return path.read_bytes()


def setting_args(settings: dict) -> list:
    args = []
    for key in ("lang", "instruct", "num_step", "guidance_scale", "t_shift", "position_temperature", "seed"):
        if settings.get(key) is not None:
            args += [flag_name(key), settings[key]]
    return args


@slow
def test_batch_equals_say_greedy(invoke, loaded, tmp_path, home):
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(FIXTURE_TEXTS) + "\n")
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--model", TINY_CKPT, "--position-temperature", "0", "-q")
    assert r.exit_code == 0, r.stderr
    assert loaded.loads == 1
    for n, text in enumerate(FIXTURE_TEXTS, start=1):
        solo = say_bytes(invoke, tmp_path, f"{n}.wav", text, ["--position-temperature", 0])
        assert (out / f"{n:04d}.wav").read_bytes() == solo, n


@slow
def test_batch_equals_say_sampled_with_seeds(invoke, loaded, tiny_engine, tmp_path, home):
    rows = [
        {"text": FIXTURE_TEXTS[0]},
        {"text": FIXTURE_TEXTS[1], "instruct": "female, low pitch", "seed": 12345},
        {"text": FIXTURE_TEXTS[2], "lang": "en", "class_temperature": 0.7},
        {"text": FIXTURE_TEXTS[3], "lang": "zh"},
    ]
    src = write_jsonl(tmp_path / "jobs.jsonl", rows)
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--model", TINY_CKPT, "--seed", "77", "--num-step", "16", "-q")
    assert r.exit_code == 0, r.stderr
    recs = by_line(out)
    assert [recs[n]["seed"] for n in (1, 2, 3, 4)] == [77, 12345, 79, 80]
    # line 2 designs a voice: spoken once as itself (its words, its seed, its settings), which is
    # the voice a later line would clone (app/voices/design.py's render_line): `say` of it, no voice
    assert recs[2]["voice_prompt"] is not None and recs[1]["voice_prompt"] is None
    for n in (1, 2, 3, 4):
        rec = recs[n]
        args = setting_args(rec["settings"]) + ["--class-temperature", rec["settings"]["class_temperature"]]
        solo = say_bytes(invoke, tmp_path, f"{n}.wav", rec["text"], args)
        assert (out / rec["output"]).read_bytes() == solo, n


@slow
def test_mixed_steps_guidance_and_shift_in_one_run(invoke, loaded, tmp_path, home):
    text = FIXTURE_TEXTS[0]
    rows = [
        {"text": text, "num_step": 8, "guidance_scale": 2, "t_shift": 0.1, "seed": 1},
        {"text": text, "num_step": 16, "guidance_scale": 0, "t_shift": 0.5, "seed": 2},
        {"text": FIXTURE_TEXTS[1], "num_step": 32, "guidance_scale": 2, "t_shift": 1.0, "seed": 3},
        {"text": FIXTURE_TEXTS[2], "num_step": 8, "guidance_scale": 0, "t_shift": 0.3, "seed": 4},
        {
            "text": FIXTURE_TEXTS[3],
            "num_step": 16,
            "guidance_scale": 2,
            "t_shift": 0.1,
            "seed": 5,
            "position_temperature": 0,
        },
        {"text": text, "num_step": 32, "guidance_scale": 0, "t_shift": 0.2, "seed": 6},
    ]
    src = write_jsonl(tmp_path / "jobs.jsonl", rows)
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--model", TINY_CKPT, "-q")
    assert r.exit_code == 0, r.stderr
    recs = by_line(out)
    for n, row in enumerate(rows, start=1):
        args = setting_args({k: v for k, v in row.items() if k != "text"})
        solo = say_bytes(invoke, tmp_path, f"{n}.wav", row["text"], args)
        assert (out / recs[n]["output"]).read_bytes() == solo, n


def _kill_midway(tmp_path: Path, sig: int):
    """Start a batch in a subprocess, send `sig` once the manifest has a record.

    Returns (src, out, the command's arguments, its exit code, its stderr).
    """
    rows = [{"text": f"Quick line number {i}.", "id": f"q{i}", "num_step": 2, "seed": i} for i in range(2)]
    rows += [
        {"text": f"A slower line, number {i}, with a few more words.", "id": f"s{i}", "num_step": 48, "seed": i}
        for i in range(2, 6)
    ]
    src = write_jsonl(tmp_path / "jobs.jsonl", rows)
    out = tmp_path / "out"
    args = ["batch", str(src), "-o", str(out), "--model", str(TINY_CKPT), "--device", "cpu"]
    env = {**ENV, "OMNIVOICE_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(MAIN + args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            if (out / MANIFEST).exists() and (out / MANIFEST).read_text().count("\n") >= 1:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        else:
            pytest.fail("no manifest record in time")
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return src, out, args, proc.returncode, stderr.decode()


@slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_killed_batch_resumes(invoke, loaded, tmp_path, home, sig):
    src, out, args, code, stderr = _kill_midway(tmp_path, sig)
    if sig == signal.SIGINT:
        assert code == 130, stderr
        assert "stopped by Ctrl-C" in stderr and "Traceback" not in stderr
        recs = by_line(out)  # rewritten: one record per line already
        assert sorted(recs) == list(range(1, 7))
    else:
        assert code == -signal.SIGKILL
        (out / ".s5.wav.k1ll3d.part").write_bytes(b"RIFF partial")  # as if killed while writing
    finished = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.glob("*.wav")}
    assert "q0.wav" in finished and len(finished) < 6, sorted(finished)  # killed midway
    for data in finished.values():
        audio, sr = sf.read(__import__("io").BytesIO(data[1]))  # complete, readable files
        assert sr == 24000 and len(audio) > 0

    r = invoke(*args[:-2], "-q")  # the same command again (the in-process engine; no --device)
    assert r.exit_code == 0, r.stderr
    assert files_in(out) == sorted([f"q{i}.wav" for i in range(2)] + [f"s{i}.wav" for i in range(2, 6)] + [MANIFEST])
    for name, stamp in finished.items():
        p = out / name
        assert (p.stat().st_mtime_ns, p.read_bytes()) == stamp, name  # untouched
    recs = by_line(out)
    assert sorted(recs) == list(range(1, 7))
    assert all(rec["status"] == "done" and rec["seed"] == n - 1 for n, rec in recs.items())
    assert [rec["line"] for rec in manifest(out)] == list(range(1, 7))  # rewritten, in input order


@slow
def test_real_batch_subprocess_summary(tmp_path):
    """The installed entry point end to end: summary line, exit code, flac by --format."""
    src = tmp_path / "lines.txt"
    src.write_text("Hello there.\nGood night.\n")
    out = tmp_path / "out"
    env = {**ENV, "OMNIVOICE_HOME": str(tmp_path / "home")}
    cmd = MAIN + ["batch", str(src), "-o", str(out), "--model", str(TINY_CKPT), "--num-step", "4", "--format", "flac"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "2 lines: 2 done, 0 failed, 0 skipped" in proc.stderr and "s per second of audio" in proc.stderr
    assert files_in(out) == ["0001.flac", "0002.flac", MANIFEST]
    audio, sr = sf.read(str(out / "0001.flac"))
    assert sr == 24000 and np.isfinite(audio).all()


@slow
def test_batch_clones_a_voice_like_the_engine(invoke, loaded, tiny_engine, tmp_path, home):
    """ref + ref_text, and a saved voice file, give exactly the engine's own result for that voice."""
    import shutil

    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.planning import Request
    from omnivoice_cli.media.output import encode

    voice_mod = pytest.importorskip("omnivoice_cli.engine.sound.voice")
    if not hasattr(tiny_engine, "voice_from_audio") or not hasattr(voice_mod, "save_voice"):
        pytest.skip("voice cloning is not in the engine")
    from conftest import GOLDEN

    meta = json.loads((GOLDEN / "clone.json").read_text())["generate_kwargs"]
    shutil.copy(GOLDEN / meta["ref_audio"], tmp_path / "ref.wav")
    prompt = tiny_engine.voice_from_audio(str(tmp_path / "ref.wav"), meta["ref_text"])
    voice_mod.save_voice(tmp_path / "me.safetensors", prompt)
    (tmp_path / "presets").mkdir()
    voice_mod.save_voice(tmp_path / "presets" / "me.safetensors", prompt)
    (tmp_path / "presets" / "me.toml").write_text('voice = "me.safetensors"\n')  # relative to the preset
    text = FIXTURE_TEXTS[0]
    src = write_jsonl(
        tmp_path / "jobs.jsonl",
        [
            {"text": text, "ref": "ref.wav", "ref_text": meta["ref_text"], "seed": 3},
            {"text": text, "voice": "me.safetensors", "seed": 3},
            {"text": FIXTURE_TEXTS[1], "seed": 4},
            {"text": text, "preset": str(tmp_path / "presets" / "me.toml"), "seed": 3},
        ],
    )
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--model", TINY_CKPT, "--num-step", "8", "-q", "--no-mark")  # bare samples
    assert r.exit_code == 0, r.stderr
    [alone] = tiny_engine.generate([Request(text=text, seed=3, ref=prompt, generation=GenerationConfig(num_step=8))])
    expected = encode(alone.audio, alone.sample_rate)
    assert (out / "0001.wav").read_bytes() == expected
    assert (out / "0002.wav").read_bytes() == expected
    assert (out / "0003.wav").read_bytes() != expected
    assert (out / "0004.wav").read_bytes() == expected


def test_every_format_of_the_table_in_a_batch(invoke, fake_engine, tmp_path, home):
    src = write_jsonl(
        tmp_path / "jobs.jsonl", [{"text": "a", "output": "a.mp3"}, {"text": "b", "output": "b.raw"}, {"text": "c"}]
    )
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--format", "opus", "--seed", "1", "-q")
    assert r.exit_code == 0, r.stderr
    assert files_in(out) == ["0003.opus", "a.mp3", "b.raw", MANIFEST]
    audio, sr = sf.read(str(out / "0003.opus"))
    assert sr == 24000 and len(audio) > 0


# ------------------------------------------------------------------------------- --json (issue 23)


def test_json_summary_like_say(invoke, fake_engine, tmp_path, home):
    """batch --json: one JSON object on stdout (no summary line), with the counts, the times,
    the run's settings (speed as used: 1.0 when none is given) and the warnings and errors."""
    src = write_jsonl(tmp_path / "jobs.jsonl", [{"text": "?!"}, "{bad", {"text": "c"}])
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--json", "--seed", 5)
    assert r.exit_code == 1  # a line failed: still the summary
    report = json.loads(r.stdout)
    assert (report["lines"], report["done"], report["failed"], report["skipped"], report["pending"]) == (3, 2, 1, 0, 0)
    assert report["manifest"] == str(out / MANIFEST) and report["audio_seconds"] == 2.0
    assert report["load_seconds"] is not None and report["voice_seconds"] is None and report["rtf"] is not None
    assert report["seed"] == 5 and report["settings"]["speed"] == 1.0 and report["settings"]["seed"] == 5
    assert len(report["warnings"]) == 1 and report["warnings"][0].startswith("line 1: ")
    assert report["errors"] == [rec["error"] for rec in manifest(out) if rec["status"] == "failed"]
    assert " lines: " not in r.stderr  # the JSON replaces the summary line
    r = invoke("batch", src, "-o", out, "--json", "--speed", "1.25")  # a changed setting: spoken again
    assert json.loads(r.stdout)["settings"]["speed"] == 1.25 and json.loads(r.stdout)["skipped"] == 0
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "slow.toml").write_text("speed = 0.8\n")
    r = invoke("batch", src, "-o", out, "--json", "--preset", "slow", "--overwrite")
    assert json.loads(r.stdout)["settings"]["speed"] == 0.8
