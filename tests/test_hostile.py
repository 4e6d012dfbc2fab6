"""Hostile and clumsy input (issue 11), the quick part: every failure is one line, with the right
exit code, before the model loads where it can be, and nothing is lost or left partial.

The engine is FakeEngine (conftest.py) or none at all; checks that need the real tiny checkpoint,
a pipe, a signal or a memory limit are in test_hostile_engine.py.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import TINY_CKPT, error_line, files_in
from helpers.cli import write_jsonl

from omnivoice_cli.engine.errors import CheckpointError, InvalidRequest
from omnivoice_cli.engine.model.config import ModelConfig
from omnivoice_cli.engine.planning import Request, plan_request, validate_request

# ------------------------------------------------------------------------------ files out


def test_replacing_a_file_keeps_its_mode(invoke, fake_engine, tmp_path):
    out = tmp_path / "a.wav"
    out.write_bytes(b"old")
    out.chmod(0o600)
    r = invoke("say", "Hello", "-o", out, "--quiet")
    assert r.exit_code == 0, r.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    assert sf.info(str(out)).frames > 0  # replaced, not appended to
    out.chmod(0o640)
    assert invoke("say", "Hello", "-o", out, "--quiet").exit_code == 0
    assert out.stat().st_mode & 0o777 == 0o640


def test_a_new_file_gets_the_umask_mode(invoke, fake_engine, tmp_path):
    old = os.umask(0o027)
    try:
        r = invoke("say", "Hello", "-o", tmp_path / "new.wav", "--quiet")
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "new.wav").stat().st_mode & 0o777 == 0o640


def test_a_link_in_the_way_is_replaced_not_followed(invoke, fake_engine, tmp_path):
    """The output path holds a link: the link is replaced by the file; what it pointed at is untouched
    (and its mode is not copied)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    victim.chmod(0o604)
    link = tmp_path / "out.wav"
    link.symlink_to(victim)
    assert invoke("say", "Hello", "-o", link, "--quiet").exit_code == 0
    assert victim.read_text() == "precious" and not link.is_symlink()
    assert link.stat().st_mode & 0o777 != 0o604


def test_a_legal_255_byte_name_is_written(invoke, fake_engine, tmp_path):
    name = "a" * 251 + ".wav"  # 255 bytes: the temporary name must not be longer than the limit
    r = invoke("say", "Hello", "-o", tmp_path / name, "--quiet")
    assert r.exit_code == 0, r.stderr
    assert files_in(tmp_path) == [name]


def test_a_multibyte_255_byte_name_is_written(invoke, fake_engine, tmp_path):
    name = "é" * 125 + "a.wav"  # 256 - 1 bytes, the temporary name's cut must not split a character
    assert len(name.encode()) == 255
    r = invoke("say", "Hello", "-o", tmp_path / name, "--quiet")
    assert r.exit_code == 0, r.stderr
    assert files_in(tmp_path) == [name]


def test_a_name_too_long_fails_before_the_model(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hello", "-o", tmp_path / ("a" * 252 + ".wav"))
    assert r.exit_code == 2
    assert "the file name is 256 bytes long" in error_line(r) and "at most 255" in r.stderr
    assert fake_engine.loads == [] and files_in(tmp_path) == []


def test_a_path_too_long_fails_before_the_model(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hello", "-o", tmp_path / ("d" * 300) / "x.wav")
    assert r.exit_code == 2
    error_line(r)
    assert fake_engine.loads == []


def test_temporary_prefix_fits_the_name_limit(tmp_path):
    from omnivoice_cli.media.atomic import TEMPORARY_SUFFIX, name_max, temporary_prefix

    limit = name_max(tmp_path)
    for name in ("a.wav", "a" * 251 + ".wav", "é" * 127 + ".w", "日本" * 40 + ".wav"):
        prefix = temporary_prefix(tmp_path / name)
        assert len(os.fsencode(prefix)) + 8 + len(TEMPORARY_SUFFIX) <= limit
        prefix.encode("utf-8")  # whole characters only
        assert name.startswith(prefix[1:-1])
    assert temporary_prefix(tmp_path / "a.wav") == ".a.wav."  # short names as before


def test_stale_temporaries_of_long_names_are_found(tmp_path):
    from omnivoice_cli.media.atomic import replace_atomically, temporary_files

    target = tmp_path / ("b" * 251 + ".wav")

    def killed(f):
        f.write(b"partial")
        (left,) = temporary_files(target)  # it is there while written ...
        os.link(left, tmp_path / "kept")  # ... keep it, as a killed run would
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        replace_atomically(target, killed)
    os.rename(tmp_path / "kept", tmp_path / ".kept")
    assert temporary_files(target) == []  # removed on the failure
    os.rename(tmp_path / ".kept", tmp_path / f"{temporary_name_of(target)}")
    assert len(temporary_files(target)) == 1


def temporary_name_of(target: Path) -> str:
    from omnivoice_cli.media.atomic import TEMPORARY_SUFFIX, temporary_prefix

    return temporary_prefix(target) + "x1y2z3w4" + TEMPORARY_SUFFIX


def test_output_stdout_closed_fails_before_the_model(invoke, fake_engine, monkeypatch):
    import sys

    monkeypatch.setattr(sys, "stdout", None)
    from omnivoice_cli.media.output import check_output

    with pytest.raises(InvalidRequest, match="stdout, which is closed"):
        check_output("-")


def test_wav_past_its_header_limit_is_refused_before_writing(tmp_path):
    """A WAV's sizes are 32-bit: more than about 24.8 h cannot be written (no partial, wrapped file)."""
    from omnivoice_cli.media.formats import MAX_SAMPLES
    from omnivoice_cli.media.output import check_output, write_audio

    huge = np.broadcast_to(np.zeros(1, np.float32), (MAX_SAMPLES["wav"] + 1,))  # no memory behind it
    target = check_output(str(tmp_path / "long.wav"))
    with pytest.raises(InvalidRequest, match=r"wav file holds at most 24\.9 h"):
        write_audio(huge, 24000, target)
    assert files_in(tmp_path) == []


# ------------------------------------------------------------------------------ numbers and text


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--t-shift", "1e308"),
        ("--layer-penalty-factor", "1e39"),
        ("--speed", "inf"),
        ("--speed", "1e-6"),
        ("--threads", "100000"),
        ("--guidance-scale", "nan"),
        ("--num-step", "99999999999999999999"),
    ],
)
def test_absurd_numbers_are_refused_by_name_before_the_model(invoke, fake_engine, tmp_path, flag, value):
    r = invoke("say", "Hello", flag, value, "-o", tmp_path / "x.wav")
    assert r.exit_code == 2
    assert error_line(r).startswith(f"Error: {flag}")
    assert fake_engine.loads == [] and files_in(tmp_path) == []


@pytest.mark.parametrize("source", ["-f", "--preset"])
def test_dev_zero_is_read_only_up_to_the_limit(invoke, fake_engine, tmp_path, source):
    args = ["-f", "/dev/zero"] if source == "-f" else ["Hello", "--preset", "/dev/zero"]
    r = invoke("say", *args, "-o", tmp_path / "x.wav")
    assert r.exit_code == 2
    assert "MiB" in error_line(r) or "KiB" in error_line(r)
    assert fake_engine.loads == []


def test_pause_tags_are_bounded_in_total(invoke, fake_engine, tmp_path):
    text = "Hi. [pause 60s] " * 1600  # 12 kB of text asking for 26.7 hours of silence
    r = invoke("say", text, "-o", tmp_path / "x.wav")
    assert r.exit_code == 2
    assert "pause tags add up to 96000 s: at most 3600 s" in error_line(r)
    assert fake_engine.loads == []
    validate_request(Request(text="Hi. [pause 60s] " * 60))  # an hour of pauses is fine


def test_a_text_over_the_request_length_is_refused(invoke, fake_engine, tmp_path):
    text = "Words without end, said over and over. " * 12000  # about 5 hours of speech
    r = invoke("say", text, "-o", tmp_path / "x.wav")
    assert r.exit_code == 2
    assert "at most 4 h of audio in one request" in error_line(r)
    assert fake_engine.loads == []


def test_many_instruct_items_are_refused_at_once():
    from omnivoice_cli.engine.text.instructs import resolve_instruct

    with pytest.raises(InvalidRequest, match="instruct has 5000 items: at most one per category") as e:
        resolve_instruct(", ".join(f"item{i}" for i in range(5000)))
    assert len(str(e.value)) < 300
    with pytest.raises(InvalidRequest) as e:
        resolve_instruct(", ".join(f"femal{i}" for i in range(10)))
    assert "and 5 more" in str(e.value) and "'femal9' (did you mean" not in str(e.value)


# ------------------------------------------------------------------------------ pieces


LIMIT = int(ModelConfig().max_target_seconds * ModelConfig().frame_rate)


@pytest.mark.parametrize(
    "text",
    [" ".join(["word"] * 4000), "你好" * 5000, "x" * 20000, ("[laughter] " + "and so on " * 50) * 40],
    ids=["words", "chinese", "one-word", "tags"],
)
def test_text_without_sentence_ends_is_cut_into_bounded_pieces(text):
    plan = plan_request(Request(text=text))
    assert len(plan.pieces) > 5
    assert max(plan.frames) <= LIMIT  # no generation over max_target_seconds
    assert "".join(p.text for p in plan.pieces).replace(" ", "") == text.replace(" ", "")  # nothing lost
    if " " in text:  # cut at words, and a tag is never cut
        words = set(text.split())
        assert all(set(p.text.split()) <= words for p in plan.pieces)


def test_frames_of_the_plan_are_what_the_engine_generates():
    """Plan.frames agree with the estimate the engine makes per piece (chunks against piece 0)."""
    from omnivoice_cli.engine.planning import piece_frames

    plan = plan_request(Request(text="One sentence here. " * 200, speed=0.7))
    assert plan.frames[0] == piece_frames(plan.pieces[0], None, None, 25.0)
    for piece, n in zip(plan.pieces[1:], plan.frames[1:]):
        # against piece 0, which already speaks at the request's speed (its rate): not sped up again
        assert n == piece_frames(piece, plan.pieces[0].text, plan.frames[0], 25.0, plan.pieces[0].speed) <= LIMIT


def test_punctuated_text_is_cut_as_before():
    """Chunks that fit are exactly `chunk_text`'s (the reference's cut): only over-long ones are cut again."""
    from omnivoice_cli.engine.text.chunking import chunk_len_for, chunk_text
    from omnivoice_cli.engine.text.duration import resolve_target_len

    text = "This is a sentence of a long text. And here is another one, with a comma. " * 40
    plan = plan_request(Request(text=text))
    target, _ = resolve_target_len(text, None, None, None, None, 25.0)
    expected = chunk_text(text, chunk_len_for(text, target))
    assert [p.text for p in plan.pieces] == expected
    assert [p.chunk for p in plan.pieces] == list(range(len(expected)))


@pytest.mark.parametrize("speed", [1e-6, 1e-3])
def test_an_absurd_speed_is_refused_by_the_engine(speed):
    with pytest.raises(InvalidRequest, match="one generation is at most 30 s|at most 4 h"):
        plan_request(Request(text="Hello there, how are you?", speed=speed))


def test_a_voice_whose_transcript_is_far_too_short_is_refused():
    """'hi.' said over 50 s makes each letter seconds long: refused, not 100 s of audio for 'hello'."""
    from types import SimpleNamespace

    voice = SimpleNamespace(codes=SimpleNamespace(shape=(8, 1250)), text="hi.")
    with pytest.raises(InvalidRequest, match="'hello' would take 100 s"):
        plan_request(Request(text="hello", ref=voice))


def test_too_many_parts_are_refused():
    with pytest.raises(InvalidRequest, match="parts between pause tags: at most 5000"):
        plan_request(Request(text="a [pause 1ms] " * 6000))


# ------------------------------------------------------------------------------ checkpoints


def _mutate(ckpt: Path, name: str, change) -> None:
    path = ckpt / name
    data = json.loads(path.read_text())
    path.write_text(json.dumps(change(data)))


def _llm(key, value):
    def change(c):
        c["llm_config"][key] = value
        return c

    return change


def _acoustic(key, value):
    def change(c):
        c["acoustic_model_config"][key] = value
        return c

    return change


CONFIGS = {
    "layers 1000000": ("config.json", _llm("num_hidden_layers", 1_000_000), "num_hidden_layers is 1000000"),
    "heads 0": ("config.json", _llm("num_attention_heads", 0), "num_attention_heads is 0"),
    "kv heads 0": ("config.json", _llm("num_key_value_heads", 0), "num_key_value_heads is 0"),
    "hidden -1": ("config.json", _llm("hidden_size", -1), "hidden_size is -1"),
    "layers 2.5": ("config.json", _llm("num_hidden_layers", 2.5), "num_hidden_layers is 2.5"),
    "layers true": ("config.json", _llm("num_hidden_layers", True), "num_hidden_layers is True"),
    "eps nan": ("config.json", _llm("rms_norm_eps", float("nan")), "rms_norm_eps is nan"),
    "layer types": ("config.json", _llm("layer_types", 7), "full attention"),
    "rope list": ("config.json", _llm("rope_parameters", [1]), "rope_parameters must be a JSON object"),
    "list": ("config.json", lambda c: [c], "is not a JSON object (got list)"),
    "number": ("config.json", lambda c: 3, "is not a JSON object (got int)"),
    "codebooks 1e9": ("config.json", lambda c: {**c, "num_audio_codebook": 10**9}, "num_audio_codebook is"),
    "codec ratio 0": (
        "audio_tokenizer/config.json",
        _acoustic("upsampling_ratios", [8, 5, 4, 2, 0]),
        "upsampling_ratios is 0",
    ),
    "codec ratios negative": (
        "audio_tokenizer/config.json",
        _acoustic("upsampling_ratios", [-8, -5, 4, 2, 3]),
        "upsampling_ratios is -8",
    ),
    "codec ratios not a list": ("audio_tokenizer/config.json", _acoustic("upsampling_ratios", 5), "list of 1 to 16"),
    "codec rate 0": ("audio_tokenizer/config.json", lambda c: {**c, "sample_rate": 0}, "sample_rate is 0"),
    "codec list": ("audio_tokenizer/config.json", lambda c: [], "is not a JSON object"),
    "codec acoustic list": (
        "audio_tokenizer/config.json",
        lambda c: {**c, "acoustic_model_config": [1]},
        "acoustic_model_config must be a JSON object",
    ),
    "codec bandwidths": ("audio_tokenizer/config.json", lambda c: {**c, "target_bandwidths": "x"}, "target_bandwidths"),
    "codec decoder 1e9": (
        "audio_tokenizer/config.json",
        _acoustic("decoder_hidden_size", 10**9),
        "decoder_hidden_size is 1000000000",
    ),
}


@pytest.mark.parametrize("case", list(CONFIGS))
def test_bad_config_numbers_are_one_checkpoint_error(ckpt_copy, case):
    name, change, message = CONFIGS[case]
    _mutate(ckpt_copy, name, change)
    with pytest.raises(CheckpointError) as e:
        ModelConfig.from_checkpoint(ckpt_copy)
    assert message in str(e.value) and str(ckpt_copy) in str(e.value)
    assert "\n" not in str(e.value)


def test_config_nested_too_deeply_or_too_large(ckpt_copy):
    (ckpt_copy / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CheckpointError, match="cannot read"):
        ModelConfig.from_checkpoint(ckpt_copy)
    with open(ckpt_copy / "config.json", "wb") as f:
        f.truncate(17 << 20)
    with pytest.raises(CheckpointError, match="over 16 MiB"):
        ModelConfig.from_checkpoint(ckpt_copy)


def test_the_real_config_is_unchanged(tiny_ckpt):
    cfg = ModelConfig.from_checkpoint(tiny_ckpt)
    assert (cfg.backbone.num_hidden_layers, cfg.backbone.hidden_size, cfg.codec.hop_length) == (2, 32, 960)
    assert (cfg.backbone.num_key_value_heads, cfg.backbone.head_dim, cfg.codec.num_quantizers) == (2, 16, 8)


def _safetensors(path: Path, header) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 64)
    return path


@pytest.mark.parametrize(
    "header, detail",
    [
        ([], "not a JSON object"),
        ({"a": 5}, "bad header entry"),
        ({"__metadata__": [1]}, "__metadata__"),
        ({"__metadata__": {"text": 5}}, "__metadata__"),
        ({"a": {"dtype": "F32", "shape": [-1, -4], "data_offsets": [0, 16]}}, "bad shape"),
        ({"a": {"dtype": "F32", "shape": [10**12, 10**12], "data_offsets": [0, 0]}}, "inconsistent offsets"),
    ],
)
def test_bad_safetensors_headers(tmp_path, header, detail):
    from omnivoice_cli.engine.checkpoint.tensorfile import SafetensorsFile, TensorFileError

    with pytest.raises(TensorFileError, match=detail):
        SafetensorsFile(_safetensors(tmp_path / "x.safetensors", header))


def test_a_checkpoint_error_is_one_line_at_the_cli(invoke, ckpt_copy, tmp_path):
    _mutate(ckpt_copy, "config.json", _llm("num_hidden_layers", 1_000_000))
    r = invoke("say", "Hello", "--model", ckpt_copy, "-o", tmp_path / "x.wav")
    assert r.exit_code == 1
    assert "num_hidden_layers is 1000000; the engine takes an integer in 1..512" in error_line(r)
    assert not (tmp_path / "x.wav").exists()


# ------------------------------------------------------------------------------ voices


def _voice_file(path: Path, meta: dict, frames: int = 50) -> Path:
    import torch
    from safetensors.torch import save_file

    save_file(
        {"codes": torch.zeros(8, frames, dtype=torch.int64)},
        str(path),
        metadata={"format": "omnivoice-voice", "version": "1", **meta},
    )
    return path


@pytest.mark.parametrize(
    "meta, message",
    [
        ({"rms": "0.1"}, "no transcript"),
        ({"rms": "abc", "text": "Hi."}, "level (rms) is 'abc'"),
        ({"rms": "nan", "text": "Hi."}, "level (rms) is 'nan'"),
        ({"rms": "-1", "text": "Hi."}, "not a number >= 0"),
        ({"rms": "0.1", "text": "   "}, "no transcript"),
    ],
)
def test_broken_voice_metadata_is_error_line(invoke, fake_engine, tmp_path, home, meta, message):
    path = _voice_file(tmp_path / "v.safetensors", meta)
    r = invoke("say", "Hello", "--voice", path, "-o", tmp_path / "x.wav")
    assert r.exit_code == 2
    assert message in error_line(r) and error_line(r).startswith("Error: --voice:")
    assert fake_engine.loads == []


def test_a_voice_too_long_is_refused_before_reading(tmp_path):
    from omnivoice_cli.app.voices.voices import load_voice_file

    path = _voice_file(tmp_path / "v.safetensors", {"rms": "0.1", "text": "Hi."}, frames=2000)
    with pytest.raises(InvalidRequest, match="holds 80.0 s of audio: at most 60 s"):
        load_voice_file(path)


def test_voice_list_survives_bad_files(invoke, home):
    folder = home / "voices"
    folder.mkdir(parents=True)
    (folder / "ok name.safetensors").write_bytes(b"junk")
    (folder / os.fsdecode(b"\xff\xfe.safetensors")).write_bytes(b"junk")
    (folder / "line\nbreak.safetensors").write_bytes(b"junk")
    _voice_file(folder / "notext.safetensors", {"rms": "0.1"})
    _voice_file(folder / "good.safetensors", {"rms": "0.1", "text": "Hello there."})
    r = invoke("voice", "list")
    assert r.exit_code == 0, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    lines = [ln for ln in r.stdout.splitlines() if "  built-in  " not in ln]  # the saved voices
    assert len(lines) == 5  # one line each, broken ones included
    assert any(ln.startswith("good ") and "Hello there." in ln for ln in lines)
    assert any(ln.startswith("\\xff\\xfe") and "not UTF-8" in ln for ln in lines)
    assert any(ln.startswith("line\\nbreak") for ln in lines)
    assert any(ln.startswith("notext") and "no transcript" in ln for ln in lines)


# ------------------------------------------------------------------------------ references


def _wav(path: Path, seconds: float, rate: int = 24000, silent: bool = False) -> Path:
    rng = np.random.default_rng(0)
    n = int(seconds * rate)
    audio = np.zeros(n, np.float32) if silent else (0.2 * rng.standard_normal(n)).astype(np.float32)
    sf.write(str(path), audio, rate, subtype="PCM_16")
    return path


def test_a_reference_with_an_odd_rate_is_refused_before_resampling(tmp_path):
    from omnivoice_cli.engine.sound.voice import load_reference

    with pytest.raises(InvalidRequest, match="unusual sample rate 44101 Hz"):
        load_reference(_wav(tmp_path / "odd.wav", 0.5, rate=44101))
    for rate in (8000, 11025, 16000, 22050, 32000, 44100, 48000, 88200, 96000):  # the usual ones still work
        assert len(load_reference(_wav(tmp_path / f"r{rate}.wav", 0.2, rate=rate))) > 0


def test_a_reference_longer_than_60_s_after_preparation_is_refused(tmp_path):
    from omnivoice_cli.engine.sound.voice import load_reference, prepare_reference

    wav = load_reference(_wav(tmp_path / "long.wav", 70))
    with pytest.raises(InvalidRequest, match="70.0 s long after silence removal: at most 60 s"):
        prepare_reference(wav, "Some words.", source="reference audio long.wav")


def test_a_long_reference_is_refused_by_its_header(tmp_path, monkeypatch):
    """Refused before a sample is read: the read itself is never called."""
    from omnivoice_cli.engine.sound import voice as vmod

    path = _wav(tmp_path / "long.wav", 301, silent=True)
    monkeypatch.setattr(sf.SoundFile, "read", lambda *a, **k: pytest.fail("read a file the header refuses"))
    with pytest.raises(InvalidRequest, match="is 301 s long: at most 300 s is read"):
        vmod.load_reference(path)


def test_a_reference_transcript_too_long_is_refused_early(invoke, fake_engine, tmp_path):
    ref = _wav(tmp_path / "me.wav", 3)
    r = invoke("say", "Hello", "--ref", ref, "--ref-text", "Many words here. " * 2000, "-o", tmp_path / "x.wav")
    assert r.exit_code == 2
    assert "--ref: the reference transcript is too long" in error_line(r)
    assert fake_engine.loads == []


def test_a_fifo_is_not_a_reference(tmp_path):
    from omnivoice_cli.engine.sound.voice import read_audio

    fifo = tmp_path / "pipe.wav"
    os.mkfifo(fifo)
    with pytest.raises(InvalidRequest, match="not a regular file"):
        read_audio(fifo)


# ------------------------------------------------------------------------------ batch


def manifest_records(out: Path) -> dict[int, dict]:
    return {r["line"]: r for r in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}


BAD_LINES = [
    ({"text": "Bad shift.", "t_shift": 1e308}, "field 't_shift' must be at most 100"),
    ({"text": "Bad output.", "output": "a\u0000b.wav"}, "NUL"),
    ({"text": "Long id.", "id": "x" * 300}, "cannot name a file"),
    ("[" * 100_000, "nested too deeply"),
    ('{"text": "Big number.", "seed": ' + "9" * 5000 + "}", "not valid JSON"),
    ({"text": "Tiny speed.", "speed": 1e-9}, "field 'speed' must be at least 0.1"),
    ({"text": "Too deep.", "output": "/".join(["d"] * 20) + "/x.wav"}, "folders deep"),
    ({"text": "Hi. [pause 60s] " * 100}, "pause tags add up"),
    ({"text": "Hello.", "instruct": ", ".join(["female"] * 50)}, "instruct has 50 items"),
]


def test_each_bad_line_fails_alone_before_the_model(invoke, fake_engine, tmp_path, home):
    rows = [{"text": "Good one.", "id": "g1"}]
    for row, _ in BAD_LINES:
        rows += [row, {"text": f"Good {len(rows) + 2}.", "id": f"g{len(rows) + 2}"}]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out, "--seed", "1")
    assert r.exit_code == 1
    assert "Traceback" not in r.stderr
    recs = manifest_records(out)
    assert len(recs) == len(rows)
    for k, (_, message) in enumerate(BAD_LINES):
        rec = recs[2 + 2 * k]
        assert rec["status"] == "failed" and message in rec["error"], rec["error"]
        assert "\n" not in rec["error"] and len(rec["error"]) < 600
    good = [n for n, rec in recs.items() if n % 2 == 1]
    assert [recs[n]["status"] for n in good] == ["done"] * len(good), [recs[n]["error"] for n in good]
    assert len(fake_engine.loads) == 1 and len(fake_engine.requests) == len(good)


def test_a_failure_inside_a_group_fails_only_its_line(invoke, fake_engine, tmp_path, home, monkeypatch):
    """The engine reports one request's failure (on_error): the others of the group are written."""
    real = fake_engine.generate

    def generate(self, requests, on_step=None, on_result=None, on_error=None, **kw):
        bad = [i for i, r in enumerate(requests) if "boom" in r.text]
        good = [r for i, r in enumerate(requests) if i not in bad]
        index = [i for i in range(len(requests)) if i not in bad]
        for i in bad:
            on_error(i, InvalidRequest("3.0 is not allowed here", "t_shift"))
        return real(self, good, on_step, lambda k, res: on_result(index[k], res))

    monkeypatch.setattr(fake_engine, "generate", generate)
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": "One."}, {"text": "boom", "t_shift": 3.0}, {"text": "Three."}])
    out = tmp_path / "out"
    r = invoke("batch", src, "-o", out)
    assert r.exit_code == 1
    assert error_line(r) == "Error: line 2: generation failed: line 2: field 't_shift': 3.0 is not allowed here"
    assert [rec["status"] for rec in manifest_records(out).values()] == ["done", "failed", "done"]
    assert files_in(out) == ["0001.wav", "0003.wav", "manifest.jsonl"]


def test_a_manifest_link_is_refused_before_the_model(invoke, fake_engine, tmp_path, home):
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": "One."}])
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.jsonl").symlink_to("/dev/zero")  # reading it would never end
    r = invoke("batch", src, "-o", out)
    assert r.exit_code == 1
    assert "is a symbolic link" in error_line(r)
    assert fake_engine.loads == [] and os.readlink(out / "manifest.jsonl") == "/dev/zero"


def test_outputs_through_a_link_or_onto_a_folder_fail_alone(invoke, fake_engine, tmp_path, home):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "away").symlink_to(outside)
    (out / "taken.wav").mkdir()
    rows = [{"text": "One.", "output": "away/x.wav"}, {"text": "Two.", "output": "taken.wav"}, {"text": "Three."}]
    r = invoke("batch", write_jsonl(tmp_path / "in.jsonl", rows), "-o", out)
    assert r.exit_code == 1
    recs = manifest_records(out)
    assert "leads outside the output folder" in recs[1]["error"]
    assert "is a folder" in recs[2]["error"]
    assert recs[3]["status"] == "done"
    assert list(outside.iterdir()) == []


def test_a_batch_input_linked_to_dev_zero_is_bounded(invoke, fake_engine, tmp_path, home, monkeypatch):
    import omnivoice_cli.app.batch.batchinput as batchinput

    monkeypatch.setattr(batchinput, "MAX_INPUT_BYTES", 8 << 20)  # the same loop, a smaller bound
    src = tmp_path / "zero.jsonl"
    src.symlink_to("/dev/zero")
    r = invoke("batch", src, "-o", tmp_path / "out")
    assert r.exit_code == 2
    assert "is over 8 MiB" in error_line(r)
    assert fake_engine.loads == []


def test_too_many_lines_are_refused(invoke, fake_engine, tmp_path, home, monkeypatch):
    import omnivoice_cli.app.batch.batchinput as batchinput

    monkeypatch.setattr(batchinput, "MAX_LINES", 3)
    src = tmp_path / "in.txt"
    src.write_text("a\nb\n# comment\n\nc\nd\n")
    r = invoke("batch", src, "-o", tmp_path / "out")
    assert r.exit_code == 2
    assert "more than 3 lines to speak" in error_line(r)


# ------------------------------------------------------------------------------ text with nothing to speak

NOTHING_TO_SPEAK = ["\u200b", "\ufeff", "\u2060\u200d", "\x01\x02", " \u200b \n\u200e ", "e\u0301"[1:]]


@pytest.mark.parametrize("text", NOTHING_TO_SPEAK, ids=["zwsp", "bom", "joiners", "controls", "mixed", "mark"])
def test_invisible_or_control_text_is_as_empty_as_whitespace(invoke, fake_engine, tmp_path, text):
    """Refused like whitespace-only text (exit 2, before the model), not spoken as 0.8 s of noise."""
    r = invoke("say", text, "-o", tmp_path / "x.wav")
    assert r.exit_code == 2
    assert error_line(r).startswith("Error: text is empty: it has only invisible or control characters (U+")
    assert fake_engine.loads == [] and not (tmp_path / "x.wav").exists()
    (tmp_path / "t.txt").write_text(text + "\n")
    assert invoke("say", "-f", tmp_path / "t.txt", "-o", tmp_path / "x.wav").exit_code == 2


def test_only_punctuation_or_emoji_is_spoken_with_a_warning(invoke, fake_engine, tmp_path):
    r = invoke("say", "?! 😀👍🏽", "-o", tmp_path / "x.wav")
    assert r.exit_code == 0, r.stderr
    assert "Warning: text '?! 😀👍🏽' has no letters or digits, only punctuation or symbols" in r.stderr
    r = invoke("say", "Hi 😀 [pause 1s] !", "-o", tmp_path / "y.wav")  # a word somewhere: no warning
    assert r.exit_code == 0 and "no letters" not in r.stderr


def test_text_that_is_not_unicode_is_a_usage_error(invoke, fake_engine, tmp_path):
    r = invoke("say", "caf\udce9 au lait", "-o", tmp_path / "x.wav")  # what a Latin-1 byte in argv becomes
    assert r.exit_code == 2
    assert error_line(r) == (
        "Error: text is not valid Unicode: character 4 is U+DCE9, a lone surrogate (half of a "
        "UTF-16 pair, or a byte that is not UTF-8): give UTF-8 text"
    )
    assert fake_engine.loads == []


@pytest.mark.slow
def test_a_non_utf8_argument_is_one_line_in_a_real_process(tmp_path):
    """The bytes reach Python through surrogateescape (as from a Latin-1 terminal): exit 2, one
    line, no traceback (this was TypeError: TextInputSequence must be str from the tokenizer)."""
    import subprocess
    import sys

    env = {**os.environ, "OMNIVOICE_HOME": str(tmp_path / "home"), "PYTHONPATH": str(Path(__file__).parent.parent)}
    argv = [
        sys.executable,
        "-c",
        "from omnivoice_cli.cli import main; main()",
        "say",
        b"caf\xe9 au lait",
        "-o",
        str(tmp_path / "x.wav"),
        "--model",
        str(TINY_CKPT),
    ]
    proc = subprocess.run(argv, capture_output=True, env=env, timeout=120)
    stderr = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, stderr
    assert stderr.strip().splitlines() == [
        "Error: text is not valid Unicode: character 4 is U+DCE9, a lone surrogate "
        "(half of a UTF-16 pair, or a byte that is not UTF-8): give UTF-8 text"
    ]
    assert not (tmp_path / "x.wav").exists()


def test_batch_skips_invisible_lines_and_fails_bad_json_text_alone(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "lines.txt"
    src.write_text("One.\n\u200b\n \ufeff\u2060 \nTwo.\n")
    r = invoke("batch", src, "-o", tmp_path / "out", "-q")
    assert r.exit_code == 0, r.stderr
    assert [q.text for q in fake_engine.requests] == ["One.", "Two."]  # blank like an empty line
    (tmp_path / "only.txt").write_text("\u200b\n\x01\n")
    r = invoke("batch", tmp_path / "only.txt", "-o", tmp_path / "out2")
    assert r.exit_code == 2 and "has only blank lines and # comments: nothing to speak" in error_line(r)
    rows = [{"text": "Good."}, {"text": "\u200b\u200d"}, {"text": "Bad \ud800."}, {"text": "!!"}]
    src = tmp_path / "lines.jsonl"
    src.write_text("".join(json.dumps(row) + "\n" for row in rows))  # json.dumps writes \ud800 as an escape
    r = invoke("batch", src, "-o", tmp_path / "out3", "--seed", "1")
    assert r.exit_code == 1 and "Traceback" not in r.stderr
    recs = {
        rec["line"]: rec for rec in map(json.loads, (tmp_path / "out3" / "manifest.jsonl").read_text().splitlines())
    }
    assert [recs[n]["status"] for n in (1, 2, 3, 4)] == ["done", "failed", "failed", "done"]
    assert "text is empty: it has only invisible or control characters" in recs[2]["error"]
    assert "text is not valid Unicode: character 5 is U+D800" in recs[3]["error"]
    assert "has no letters or digits" in r.stderr  # line 4 is spoken, with the warning


def test_a_dub_cue_of_invisible_characters_is_a_silent_cue(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "a.srt"
    src.write_text(
        "1\n00:00:00,000 --> 00:00:01,000\nHi.\n\n2\n00:00:01,000 --> 00:00:02,000\n\u200b\u2060\n\n"
        "3\n00:00:02,000 --> 00:00:03,000\nBye.\n"
    )
    r = invoke("dub", src, "-o", tmp_path / "t.wav", "--seed", 1, "-q")
    assert r.exit_code == 0, r.stderr
    assert [q.text for q in fake_engine.requests] == ["Hi.", "Bye."]
    assert sf.info(str(tmp_path / "t.wav")).duration == pytest.approx(3.0)


def test_validate_request_is_the_one_text_check():
    """What say, batch lines, dub cues and the server share (engine.textcheck.check_text)."""
    from omnivoice_cli.engine.text.pauses import split_pauses
    from omnivoice_cli.engine.text.textcheck import is_blank

    for text in ["\ud800", "ok\udfff", *NOTHING_TO_SPEAK, "", "  "]:
        with pytest.raises(InvalidRequest) as e:
            validate_request(Request(text=text))
        assert e.value.setting == "text"
    assert any("no letters" in w for w in validate_request(Request(text="…")))
    assert not validate_request(Request(text="Zwölf Äpfel 🍎."))
    assert not validate_request(Request(text="12"))  # digits are words
    assert not validate_request(Request(text="नमस्ते")) and not validate_request(Request(text="こんにちは"))
    assert is_blank("\u200b \u2060\ufeff\x00") and not is_blank("\u200bA") and not is_blank("😀")
    assert split_pauses("Hi. [pause 1s] \u200b") == (["Hi. "], [0.0, 1.0])  # an invisible part is no piece


def test_a_reference_transcript_that_is_not_unicode_is_a_usage_error(invoke, fake_engine, tmp_path, home):
    from conftest import GOLDEN

    bad = "caf\udce9 is what I said"
    r = invoke("say", "Hello.", "--ref", GOLDEN / "ref_24k.wav", "--ref-text", bad, "-o", tmp_path / "x.wav")
    assert r.exit_code == 2 and "--ref-text is not valid Unicode: character 4 is U+DCE9" in error_line(r)
    r = invoke("voice", "add", "me", "--ref", GOLDEN / "ref_24k.wav", "--ref-text", bad)
    assert r.exit_code == 2 and "--ref-text is not valid Unicode" in error_line(r)
    assert fake_engine.loads == []
