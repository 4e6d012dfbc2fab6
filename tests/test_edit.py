"""`omnivoice edit` (app/edit/): the codes outside the changed stretches kept bit for bit, the
output as long as the take plus the change, the take's own codec reconstruction away from the
joins, the same bytes twice with greedy settings, the refusals (one line, exit 2, nothing
written), and --dry-run --json's canvas against the plan."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from conftest import TINY_CKPT, error_line

from omnivoice_cli.app.edit import editplan, editrun
from omnivoice_cli.app.listening import listen
from omnivoice_cli.app.settings.layers import FLAG_SOURCE, resolve

OLD = "See you on Monday morning at the station."
NEW = "See you on Tuesday morning at the station."
GREEDY = ("--class-temperature", "0", "--position-temperature", "0", "--num-step", "4", "--seed", "1")
RATE = 24000


def write_take(path, seconds=3.0, rate=RATE, level=0.05):
    """A voiced-looking tone (an amplitude-modulated 220 Hz) at `rate`."""
    t = np.arange(int(seconds * rate)) / rate
    wav = level * np.sin(2 * np.pi * 220 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    sf.write(str(path), wav.astype(np.float32), rate)
    return path


@pytest.fixture
def take(tmp_path):
    return write_take(tmp_path / "take.wav")


def edit_args(take, *more):
    return ("edit", take, "--ref-text", OLD, "--text", NEW, "--span", "1.1:1.6", "--model", TINY_CKPT, *more)


def test_changed_words_and_their_times():
    assert editplan.changed_words(OLD, NEW) == [(3, 4, 3, 4)]
    assert editplan.changed_words("a b c", "a x b c") == [(1, 1, 1, 2)]  # an insertion
    assert editplan.changed_words("Hello, World.", "hello world") == []  # case and edge punctuation
    times = [(0.0, 0.2), (0.3, 0.5), (0.9, 1.2)]
    assert editplan.stretch(times, 1, 2, 2.0) == (0.3, 0.5)
    assert editplan.stretch(times, 2, 2, 2.0) == (0.5, 0.9)  # the pause an insertion goes in
    assert editplan.stretch(times, 3, 3, 2.0) == (1.2, 2.0)
    assert editplan.parse_span("1.5:2") == (1.5, 2.0)


def test_the_plan_layout_covers_the_target(take):
    the_take = editplan.read_take(take)
    plan = editplan.plan_edit(
        the_take, "x See you on Tuesday morning at station.", ref_text=OLD, spans=[(0.0, 0.1), (1.1, 1.6), (2.4, 2.6)]
    )
    layout = plan.layout()
    assert layout[0][1] == 0 and layout[-1][2] == plan.target_frames
    assert all(a[2] == b[1] for a, b in zip(layout, layout[1:]))  # contiguous, in order
    masked = [e - s for k, s, e, _ in layout if k == "masked"]
    assert masked == [c.new_frames for c in plan.changes if c.new_frames]
    known = sum(e - s for k, s, e, _ in layout if k == "known")
    assert known == the_take.frames - sum(c.end - c.start for c in plan.changes)
    assert plan.changes[-1].new_frames == 0  # "the" deleted: its stretch cut


def settings_for(**values):
    return resolve((FLAG_SOURCE, {"model": str(TINY_CKPT), "num_step": 4, "seed": 1, **values}))


def test_a_canvas_with_known_codes_schedules_only_its_masked_positions():
    import torch

    from omnivoice_cli.engine.errors import InvalidRequest
    from omnivoice_cli.engine.model.canvas import build_canvas
    from omnivoice_cli.engine.model.config import GenerationConfig
    from omnivoice_cli.engine.model.generation import make_job
    from omnivoice_cli.engine.text.tokenizer import TextTokenizer

    tokenizer = TextTokenizer.from_file(TINY_CKPT / "tokenizer.json")
    known = torch.arange(8 * 30).reshape(8, 30) % 1024
    known[:, 10:16] = 1024
    canvas = build_canvas(tokenizer, "Hello there.", 30, target_codes=known)
    assert torch_equal(canvas.input_ids[:, canvas.target_start :], known)
    job = make_job(canvas, GenerationConfig(num_step=8), 0, 1024, "cpu")
    assert torch_equal(job.tokens, known) and sum(job.schedule) == 8 * 6
    plain = make_job(build_canvas(tokenizer, "Hello there.", 30), GenerationConfig(num_step=8), 0, 1024, "cpu")
    assert bool((plain.tokens == 1024).all()) and sum(plain.schedule) == 8 * 30  # every other request as before
    with pytest.raises(InvalidRequest, match="known target codes"):
        build_canvas(tokenizer, "Hello there.", 29, target_codes=known)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "spans"),
    [
        (NEW, [(1.1, 1.6)]),
        (
            "Well see you on Tuesday morning at station.",
            [(0.0, 0.04), (1.1, 1.6), (2.4, 2.6)],
        ),  # insert, replace, delete
    ],
)
def test_an_edit_keeps_every_code_outside_its_span(take, engine, text, spans):
    plan = editplan.plan_edit(editplan.read_take(take), text, ref_text=OLD, spans=spans)
    run = editrun.EditRun(plan, settings_for())
    own, codes = run.fill(engine)
    mask = engine.cfg.audio_mask_id
    change = sum(c.new_frames - (c.end - c.start) for c in plan.changes)
    assert codes.shape == (own.shape[0], own.shape[1] + change)
    assert not bool((codes == mask).any())
    for kind, s, e, t in plan.layout():
        if kind == "known":
            assert torch_equal(codes[:, s:e], own[:, t : t + e - s])
    # the audio: the take's own reconstruction away from the joins, bit for bit
    edited, recon = editrun.decode(engine, codes), editrun.decode(engine, own)
    out = editrun.join(plan, edited, recon)
    assert len(out) == plan.target_frames * editplan.HOP
    hop, fade = editplan.HOP, editrun.JOIN_FRAMES
    for kind, s, e, t in plan.layout():
        if kind == "known":
            a = s + (fade if s > 0 else 0)
            b = e - (fade if e < plan.target_frames else 0)
            np.testing.assert_array_equal(out[a * hop : b * hop], recon[(t + a - s) * hop : (t + b - s) * hop])
        else:
            np.testing.assert_array_equal(out[s * hop : e * hop], edited[s * hop : e * hop])


def torch_equal(a, b) -> bool:
    return a.shape == b.shape and bool((a == b).all())


@pytest.mark.slow
def test_edit_writes_the_take_rate_length_and_level_and_is_repeatable(invoke, loaded, tmp_path, take):
    out1, out2 = tmp_path / "a.wav", tmp_path / "b.wav"
    r = invoke(*edit_args(take, "-o", out1, "--json", *GREEDY))
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    change = report["changes"][0]["change_frames"]
    audio, rate = sf.read(out1, dtype="float32")
    assert rate == RATE and len(audio) == (75 + change) * editplan.HOP
    assert invoke(*edit_args(take, "-o", out2, *GREEDY)).exit_code == 0
    assert out1.read_bytes() == out2.read_bytes()  # greedy: the same bytes twice
    # away from the joins: the take's own codec reconstruction, at the take's level
    the_take = editplan.read_take(take)
    own = loaded_engine(loaded).voice_from_audio(the_take.prepared, None, preprocess=False).codes
    recon = editrun.decode(loaded_engine(loaded), own) * (the_take.prepared.rms / 0.1)
    start = 27 - editrun.JOIN_FRAMES  # the first change starts at frame 27 (1.08 s)
    np.testing.assert_allclose(audio[: start * editplan.HOP], recon[: start * editplan.HOP], atol=1.5 / 32768)
    tail = (75 - 40 - editrun.JOIN_FRAMES) * editplan.HOP  # after the span, moved by the change
    np.testing.assert_allclose(audio[-tail:], recon[-tail:], atol=1.5 / 32768)


def loaded_engine(loaded):
    return loaded.load(str(TINY_CKPT))


@pytest.mark.slow
def test_edit_keeps_a_44k_take_rate(invoke, loaded, tmp_path):
    take = write_take(tmp_path / "t44.wav", rate=44100)
    out = tmp_path / "o.flac"
    assert invoke(*edit_args(take, "-o", out, *GREEDY)).exit_code == 0, "edit"
    assert sf.info(str(out)).samplerate == 44100


def test_dry_run_json_is_the_plan(invoke, take):
    r = invoke(*edit_args(take, "--span", "2.3:2.5", "--dry-run", "--json"), "--text", NEW.replace(" at", " by"))
    assert r.exit_code == 0, r.stderr
    shown = json.loads(r.stdout)
    plan = editplan.plan_edit(
        editplan.read_take(take), NEW.replace(" at", " by"), ref_text=OLD, spans=[(1.1, 1.6), (2.3, 2.5)]
    )
    assert shown == json.loads(json.dumps(plan.record()))
    canvas = shown["canvas"]
    assert canvas["masked"] == plan.ranges("masked") and canvas["known"] == plan.ranges("known")
    assert canvas["target_frames"] == 75 + sum(c["change_frames"] for c in shown["changes"])
    assert [c["new_words"] for c in shown["changes"]] == ["Tuesday", "by"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--span", "2.5:3.5"), "runs past the end"),
        (("--span", "2:1"), "its end must come after its start"),
        (("--text", "   "), "--text is empty"),
        (("--text", OLD), "nothing to change"),
        (("--span", "0.2:0.4"), "but 2 --span were given"),
    ],
)
def test_edit_refusals(invoke, tmp_path, take, args, words):
    out = tmp_path / "out.wav"
    base = ["edit", take, "--ref-text", OLD, "--text", NEW, "--model", TINY_CKPT, "-o", out]
    if args[0] == "--text":
        base[base.index("--text") + 1] = args[1]
        args = ("--span", "1.1:1.6")
    elif "2:1" not in args and "2.5:3.5" not in args:
        args = ("--span", "1.1:1.6", *args)
    r = invoke(*base, *args)
    assert error_line(r, words, 2)
    assert not out.exists()


def test_edit_refuses_a_silent_take_and_a_big_change(invoke, tmp_path, take):
    silent = tmp_path / "silent.wav"
    sf.write(str(silent), np.zeros(RATE * 2, dtype=np.float32), RATE)
    out = tmp_path / "out.wav"
    r = invoke(*edit_args(silent, "-o", out))
    assert error_line(r, "holds no speech", 2) and not out.exists()
    r = invoke("edit", take, "--ref-text", OLD, "--text", "Goodbye.", "--span", "0:2.9", "-o", out)
    assert error_line(r, "more than half of it", 2) and "say TEXT --ref" in r.stderr and not out.exists()
    r = invoke("edit", take, "--ref-text", OLD, "--text", NEW, "-o", out)  # where? neither --span nor --words
    assert error_line(r, "give --span START:END", 2) and not out.exists()


class HeardOld:
    """A recogniser that hears OLD, its words evenly over the audio."""

    def transcribe(self, audio, sample_rate, lang=None, max_tokens=None, words=True):
        said = OLD.split()
        step = len(audio) / sample_rate / len(said)
        return listen.Transcript(OLD, tuple(listen.Word(w, i * step, (i + 0.8) * step) for i, w in enumerate(said)))

    def close(self):
        pass


def test_words_find_the_changed_stretch(invoke, take, monkeypatch):
    monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: HeardOld())
    r = invoke("edit", take, "--text", NEW, "--words", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    [change] = json.loads(r.stdout)["changes"]
    step = 3.0 / 8
    assert change["old_words"] == "Monday" and change["new_words"] == "Tuesday"
    assert change["start_seconds"] == pytest.approx(int(3 * step * 25) / 25)
    assert change["end_seconds"] == pytest.approx(-(-round(3.8 * step * 25, 6) // 1) / 25)
