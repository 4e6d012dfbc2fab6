"""Loudness (issue 27, check 3): the BS.1770 meter against pyloudnorm, the true peak against an
independent 4x resampling, normalising a quiet and a loud source, the limiter, and `--loudness`
in say / play / batch / dub / dialogue / the server, off by default (then the audio is untouched)."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys

import numpy as np
import pytest
import scipy.signal as ss
import soundfile as sf
from conftest import fake_audio
from helpers.audio import SR, tone
from helpers.loudness import ODD_CHUNKS, at, bursts, lufs, quiet_source

from omnivoice_cli.engine.errors import MissingExtra, install_hint
from omnivoice_cli.media import leveller as LV
from omnivoice_cli.media import loudness as L
from omnivoice_cli.media.output import encode


def resampled_peak(x) -> float:
    """dBTP by scipy's own 4x polyphase resampling: another interpolator than the meter's."""
    return 20 * math.log10(np.abs(ss.resample_poly(np.asarray(x, dtype=np.float64), 4, 1)).max())


def loud_source() -> np.ndarray:
    """Clipping level: peaks at 0 dBFS (clipped), -8 LUFS."""
    x = bursts(30, seed=2)
    return np.clip(x * 10 ** ((-6.2 - lufs(x)) / 20), -1.0, 1.0)


def fed(meter: L.LoudnessMeter, x, sizes=ODD_CHUNKS) -> None:
    """`x` into the meter in chunks of the sizes given, in turn."""
    i, j = 0, 0
    while i < len(x):
        meter.add(x[i : i + sizes[j % len(sizes)]])
        i, j = i + sizes[j % len(sizes)], j + 1


# --- the meter ------------------------------------------------------------------------------------

SIGNALS = {
    "bursts": lambda r: 0.5 * bursts(20, rate=r),
    "tone 1 kHz": lambda r: tone(5, 1000, 0.5, r),
    "tone 100 Hz": lambda r: tone(7.05, 100, 0.2, r, 0.3),
    "very quiet": lambda r: 0.002 * bursts(20, seed=3, rate=r),
    "loud": lambda r: np.clip(4.0 * bursts(20, seed=4, rate=r), -1, 1),
    "bursts then silence": lambda r: np.concatenate([0.3 * bursts(8, seed=5, rate=r), np.zeros(5 * r)]),
}


@pytest.mark.parametrize("rate", [24000, 11025])
@pytest.mark.parametrize("name", list(SIGNALS))
def test_the_meter_fed_in_odd_chunks_equals_pyloudnorm(name, rate):
    """The K-weighting state carried across chunks and the 100 ms hops give pyloudnorm's figure
    (11025 Hz: hops of 1102.5 samples, edges rounded)."""
    x = SIGNALS[name](rate)
    meter = L.LoudnessMeter(rate)
    fed(meter, x)
    assert meter.samples == len(x)
    assert abs(meter.integrated() - lufs(x, rate)) < 0.05, (meter.integrated(), lufs(x, rate))
    assert abs(L.measure(x, rate).lufs - lufs(x, rate)) < 0.05


def test_a_last_part_block_is_not_a_block():
    """7.77 s: the blocks are the whole ones (up to 7.7 s), as BS.1770 counts them; pyloudnorm
    rounds the count up and adds a block that runs past the end (divided as if whole), a few
    hundredths of a LU off here. The meter equals pyloudnorm over the whole blocks."""
    x = 0.5 * bursts(7.77, seed=7)
    meter = L.LoudnessMeter(SR)
    fed(meter, x)
    assert abs(meter.integrated() - lufs(x[: int(7.7 * SR)])) < 0.005
    assert 0.005 < abs(meter.integrated() - lufs(x)) < 0.1


@pytest.mark.slow
def test_the_meter_keeps_one_number_per_hop_whatever_the_chunks():
    """Fed in 10 ms chunks (a stream), the meter holds 8 bytes per 100 ms hop, not an array per
    chunk (which came to some 90 MB an hour of audio); asked for its figure midway, it goes on.
    The first 30 s warm numpy's and scipy's own caches; the next 60 s are traced."""
    import tracemalloc

    x = 0.3 * bursts(90, seed=8)
    meter = L.LoudnessMeter(SR)

    def feed(start, stop):
        for i in range(start, stop, 240):
            meter.add(x[i : i + 240])

    feed(0, 30 * SR)
    midway = meter.integrated()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        feed(30 * SR, len(x))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(meter.hops) == 899 and grown < 32 * 1024, grown  # 600 more hops: 4.8 kB
    assert abs(midway - lufs(x[: 30 * SR])) < 0.05
    assert abs(meter.integrated() - lufs(x)) < 0.05


def test_the_very_quiet_source_is_far_under_the_loud_one():
    """Not a constant: the levels measured span the 50 dB between them."""
    quiet, loud = L.measure(SIGNALS["very quiet"](SR), SR), L.measure(SIGNALS["loud"](SR), SR)
    assert quiet.lufs < -55 and loud.lufs > -12


def test_true_peak_finds_the_peak_between_samples():
    """A tone at a quarter of the rate, 45 degrees off: every sample is at 0.707 (-3 dB), its true
    peak is 0 dBTP (faded in and out: an abrupt start rings over it). Speech-like audio: within
    0.05 dB of scipy's 4x resampling."""
    fade = 0.5 - 0.5 * np.cos(np.pi * np.arange(1200) / 1200)
    x = tone(1.0, SR / 4, 1.0, phase=math.pi / 4)
    x[:1200], x[-1200:] = x[:1200] * fade, x[-1200:] * fade[::-1]
    assert abs(20 * math.log10(np.abs(x).max()) + 3.01) < 0.01
    assert abs(L.measure(x, SR).dbtp) < 0.05
    y = 0.5 * bursts(10, seed=6)
    meter = L.LoudnessMeter(SR)
    fed(meter, y)
    assert abs(meter.true_peak() - resampled_peak(y)) < 0.05


def test_short_and_silent_signals():
    """Under one 400 ms block: measured as one block (a steady tone reads as it does long);
    silence and nothing: -inf, and normalising leaves silence as it is, saying so."""
    short, long = L.measure(tone(0.25, 1000, 0.3), SR), L.measure(tone(3.0, 1000, 0.3), SR)
    assert abs(short.lufs - long.lufs) < 0.3
    assert L.measure(np.zeros(SR), SR).lufs == -math.inf and L.measure(np.zeros(0), SR).lufs == -math.inf
    out, report = LV.normalize(np.zeros(SR, dtype=np.float32), SR, -18.0)
    assert not out.any() and report.gain_db == 0.0 and "silent" in report.warning()


# --- normalising (check 3) ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("target", [-18.0, -16.0, -23.0])
@pytest.mark.parametrize("source", ["quiet", "loud"])
def test_a_quiet_and_a_loud_source_reach_the_target_under_minus_1_dbtp(source, target):
    x = quiet_source() if source == "quiet" else loud_source()
    if source == "quiet":
        assert abs(lufs(x) + 40) < 0.05  # (blocks under -70 LUFS drop out when scaled down)
    else:
        assert np.abs(x).max() == 1.0 and abs(lufs(x) + 8) < 0.5
    out, report = LV.normalize(x.astype(np.float32), SR, target)
    assert out.dtype == np.float32 and len(out) == len(x)
    assert abs(lufs(out) - target) <= 0.5, (lufs(out), report)
    assert L.measure(out, SR).dbtp <= -1.0 and resampled_peak(out) <= -1.0
    assert abs(report.lufs - lufs(out)) < 0.05 and not report.missed and report.warning() is None
    if source == "quiet" and target != -23.0:  # brought up 22+ dB, its peaks would pass 0 dBTP
        assert report.limited > 0 and L.measure(x, SR).dbtp + (target + 40) > 0
    if source == "loud":  # brought down: under the ceiling, only scaled, exactly
        assert report.limited == 0
        assert np.array_equal(out, x.astype(np.float32) * np.float32(10 ** (report.gain_db / 20)))


def test_a_target_the_peaks_do_not_allow_is_missed_and_said():
    """Noise bursts to -9 LUFS under -1 dBTP would need a loudness maximiser, not a limiter: the
    output stays under the ceiling, the report says what it reached (from -38 LUFS: 29 dB, under
    the gain ceiling)."""
    out, report = LV.normalize(at(bursts(30, seed=1), -38.0).astype(np.float32), SR, -9.0)
    assert L.measure(out, SR).dbtp <= -1.0 and report.missed
    assert report.lufs < -10 and f"reaches {report.lufs:.1f} LUFS, not the -9 asked for" in report.warning()


def hiss(level: float = -62.0, seconds: float = 10.0) -> np.ndarray:
    """Faint white noise (a muted take, a room with nobody speaking) at `level` LUFS."""
    return at(np.random.default_rng(9).standard_normal(int(seconds * SR)) * 0.01, level)


def test_hiss_is_not_raised_past_the_gain_ceiling_and_the_warning_names_its_level():
    """Hiss at -62 LUFS asked to -18 would get +44 dB; it gets +30 (MAX_GAIN_DB) and one line that
    names the -62 measured. The streaming gain of a book (gain_for) has the same ceiling."""
    x = hiss().astype(np.float32)
    assert abs(lufs(x) + 62) < 0.1
    out, report = LV.normalize(x, SR, -18.0)
    assert LV.MAX_GAIN_DB == 30.0 and abs(report.gain_db - 30.0) < 1e-9 and report.capped
    assert abs(lufs(out) - (-62 + 30)) < 0.1 and np.allclose(out, x * np.float32(10**1.5), rtol=1e-5)
    warning = report.warning()
    assert warning.startswith("the audio measures -62.0 LUFS, near silence: raised by at most +30 dB, to -32.0 LUFS")
    assert abs(20 * math.log10(LV.gain_for(L.measure(x, SR).lufs, -18.0)) - 30.0) < 1e-9
    # 29 dB under the target: raised in full, no warning
    out, report = LV.normalize(hiss(-47.0).astype(np.float32), SR, -18.0)
    assert not report.capped and report.warning() is None and abs(lufs(out) + 18) < 0.1


def test_the_limiter_makes_no_clicks():
    """A quiet tone with sudden loud bursts: the gain the limiter applies moves by at most 1/L of
    full scale from one sample to the next (L: 5 ms), also at the bursts' edges (an instant limiter
    jumps there), and is down to what the burst needs before it starts (the look-ahead)."""
    x = tone(3.0, 220, 0.2)
    for start in (0.5, 1.2, 2.0):
        i = int(start * SR)
        x[i : i + 2400] *= 5.0  # 0.2 -> 1.0 at once
    n = LV.Normaliser(1.0, SR)
    out = np.concatenate([n.process(x[:30000]), n.process(x[30000:]), n.flush()])
    assert len(out) == len(x)
    ok = np.abs(x) > 0.02
    gain = np.where(ok, out / np.where(ok, x, 1.0), np.nan)
    steps = np.abs(np.diff(gain))[ok[1:] & ok[:-1]]
    assert steps.max() <= 1.0 / n.span + 1e-6
    assert np.nanmin(gain) < 0.9  # it did limit
    assert resampled_peak(out) <= -1.0 and L.measure(out, SR).dbtp <= -1.0
    start = int(0.5 * SR)  # the first burst: the gain is already coming down in the 2 ms before it
    assert np.nanmax(gain[start - 48 : start]) < 0.99 and np.nanmin(gain[start - 2400 : start - 600]) > 1 - 1e-6


def test_the_streaming_normaliser_equals_the_whole():
    """Odd chunk sizes give the output of one call (the state carried), as many samples as went in."""
    x = at(bursts(12, seed=7), -30.0) * 1.0
    gain = 10 ** (12 / 20)
    whole = LV.Normaliser(gain, SR)
    one = np.concatenate([whole.process(x), whole.flush()])
    streamed = LV.Normaliser(gain, SR)
    parts, i, j = [], 0, 0
    while i < len(x):
        size = ODD_CHUNKS[j % len(ODD_CHUNKS)]
        parts.append(streamed.process(x[i : i + size]))
        i, j = i + size, j + 1
    parts.append(streamed.flush())
    assert len(one) == len(x) and sum(map(len, parts)) == len(x)
    assert np.allclose(np.concatenate(parts), one, atol=1e-6) and whole.limited > 0


def clicked(at_sample: int, seconds: float = 2.0) -> np.ndarray:
    """Quiet noise (about -40 dBFS RMS) with one 0.99 click: the gain to -18 LUFS puts the click
    some 20 dB over the ceiling, so only the limiter can hold it."""
    x = 0.01 * np.random.default_rng(11).standard_normal(int(seconds * SR))
    x[at_sample] = 0.99
    return x.astype(np.float32)


@pytest.mark.parametrize(
    "where", [0, 3, 60, 119, -1], ids=["sample 0", "sample 3", "2.5 ms", "the look-ahead's end", "the very end"]
)
def test_a_click_at_the_edges_is_held_under_the_ceiling(where):
    """A peak within the look-ahead of the start (before the fix the gain there began at 1, and
    a click at sample 0 came out at +18.9 dBTP) or at the very end: at most -1 dBTP by the
    module's meter and by scipy's 4x resampling; as many samples out as in."""
    x = clicked(where % (2 * SR))
    out, report = LV.normalize(x, SR, -18.0)
    assert len(out) == len(x)
    assert report.dbtp <= -1.0 and L.measure(out, SR).dbtp <= -1.0 and resampled_peak(out) <= -1.0
    assert report.limited > 0 and abs(report.lufs + 18.0) < 0.5  # limited, still at the target


@pytest.mark.parametrize("where", [3, 24000, 47999])
def test_a_click_right_after_a_chunk_boundary_is_held_streamed(where):
    """The streaming Normaliser given the chunk that ends right before the click, then the rest
    (the first chunk 3 samples long for the click at 3): at most the ceiling, lengths unchanged."""
    x = clicked(where)
    gain = LV.gain_for(L.measure(x, SR).lufs, -18.0)
    n = LV.Normaliser(gain, SR)
    out = np.concatenate([n.process(x[:where]), n.process(x[where : where + 1]), n.process(x[where + 1 :]), n.flush()])
    assert len(out) == len(x) and n.limited > 0
    assert L.measure(out, SR).dbtp <= -1.0 and resampled_peak(out) <= -1.0


def test_under_the_ceiling_the_normaliser_only_scales():
    x = (0.05 * bursts(5, seed=8)).astype(np.float32)
    n = LV.Normaliser(2.0, SR)
    out = np.concatenate([n.process(x[:777]), n.process(x[777:]), n.flush()])
    assert np.array_equal(out, (x.astype(np.float64) * 2.0).astype(np.float32)) and n.limited == 0


def test_targets_outside_the_bounds_are_refused():
    for bad in (-51, -4.9, float("nan")):
        with pytest.raises(ValueError, match=r"must be a number in \[-50, -5\]"):
            LV.normalize(np.zeros(SR, dtype=np.float32), SR, bad)


def test_without_pyloudnorm_a_missing_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyloudnorm", None)
    monkeypatch.setitem(sys.modules, "pyloudnorm.iirfilter", None)
    with pytest.raises(MissingExtra) as e:
        L.require()
    assert str(e.value) == (
        f"loudness normalisation (--loudness) needs pyloudnorm, which is not installed: {install_hint('loudness')}"
    )


# --- the commands (the fake engine: 1 s of seeded noise a request) --------------------------------


def read(path) -> np.ndarray:
    return sf.read(str(path), dtype="float64")[0]


def test_say_without_loudness_writes_the_engines_audio_byte_for_byte(invoke, fake_engine, tmp_path):
    """Off (the default): nothing on the way, the file is the engine's audio encoded; on: one
    output at the target, its report in --json."""
    off, on = tmp_path / "off.wav", tmp_path / "on.wav"
    r = invoke("say", "Hello there.", "--seed", 5, "-o", off, "-q", "--no-mark")  # the mark: docs/marking.md
    assert r.exit_code == 0, r.stderr
    assert off.read_bytes() == encode(fake_audio(5), SR)
    r = invoke("say", "Hello there.", "--seed", 5, "-o", on, "--loudness", -23, "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert abs(lufs(read(on)) + 23) <= 0.5 and on.read_bytes() != off.read_bytes()
    assert report["settings"]["loudness"] == -23.0 and report["loudness"]["target_lufs"] == -23.0
    assert abs(report["loudness"]["lufs"] + 23) < 0.1 and report["loudness"]["dbtp"] <= -1.0


def test_say_stream_with_loudness_is_refused(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hello there.", "--stream", "-o", tmp_path / "x.wav", "--loudness", -18)
    assert r.exit_code == 2 and not (tmp_path / "x.wav").exists() and fake_engine.loads == []
    assert r.stderr.strip() == (
        "Error: --loudness measures the whole output, which --stream sends piece by piece before its end "
        "is known: leave out --stream (the audio is then written, or played, once it is complete)"
    )


def test_loudness_out_of_bounds_in_words(invoke, fake_engine, tmp_path):
    r = invoke("say", "Hello there.", "-o", tmp_path / "x.wav", "--loudness", -60)
    assert r.exit_code == 2
    assert "--loudness must be a number in [-50, -5] (LUFS, e.g. -18), got -60.0" in r.stderr


RECORDER = """import sys
with open(sys.argv[1], "ab") as f:
    f.write(sys.stdin.buffer.read())
"""


def test_say_plays_the_whole_output_at_the_target(invoke, fake_engine, tmp_path, monkeypatch):
    """Without -o (the player): measured whole, then played; the file of --play -o is the same audio."""
    from omnivoice_cli.media import player as playermod

    monkeypatch.setattr(playermod, "_sounddevice_problem", lambda: "not installed")
    script, played = tmp_path / "rec.py", tmp_path / "played.raw"
    script.write_text(RECORDER)
    monkeypatch.setenv("OMNIVOICE_PLAYER", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {played}")
    r = invoke("say", "Hello there.", "--seed", 4, "--loudness", -20, "-q")
    assert r.exit_code == 0, r.stderr
    audio = np.frombuffer(played.read_bytes(), dtype="<i2") / 32768.0
    assert len(audio) == SR and abs(lufs(audio) + 20) <= 0.5
    played.unlink()
    r = invoke("say", "Hello there.", "--seed", 4, "--loudness", -20, "--play", "-o", tmp_path / "p.wav", "-q")
    assert r.exit_code == 0, r.stderr
    assert np.array_equal(
        np.frombuffer(played.read_bytes(), dtype="<i2"), sf.read(tmp_path / "p.wav", dtype="int16")[0]
    )


def test_batch_loudness_per_line_output(invoke, fake_engine, tmp_path):
    """The flag for every line, a line's field over it; without either, the engine's audio as it is."""
    lines = tmp_path / "lines.jsonl"
    lines.write_text(
        '{"text": "One.", "seed": 1, "loudness": -20}\n{"text": "Two.", "seed": 2}\n{"text": "Three.", "seed": 3}\n'
    )
    r = invoke("batch", lines, "-o", tmp_path / "on", "--loudness", -30, "-q")
    assert r.exit_code == 0, r.stderr
    measured = [lufs(read(tmp_path / "on" / f"000{i}.wav")) for i in (1, 2, 3)]
    assert abs(measured[0] + 20) <= 0.5 and abs(measured[1] + 30) <= 0.5 and abs(measured[2] + 30) <= 0.5
    plain = tmp_path / "plain.txt"
    plain.write_text("One.\n")
    r = invoke("batch", plain, "-o", tmp_path / "off", "-q", "--no-mark")  # the mark: docs/marking.md
    assert r.exit_code == 0, r.stderr
    record = json.loads((tmp_path / "off" / "manifest.jsonl").read_text().splitlines()[0])
    assert (tmp_path / "off" / "0001.wav").read_bytes() == encode(fake_audio(record["seed"]), SR)


def test_dub_loudness_over_the_whole_track(invoke, fake_engine, tmp_path):
    cues = tmp_path / "cues.srt"
    cues.write_text("1\n00:00:00,000 --> 00:00:01,500\nHello.\n\n2\n00:00:03,000 --> 00:00:04,000\nAgain.\n")
    r = invoke("dub", cues, "-o", tmp_path / "dub.wav", "--loudness", -24, "-q")
    assert r.exit_code == 0, r.stderr
    track = read(tmp_path / "dub.wav")
    assert abs(lufs(track) + 24) <= 0.5 and L.measure(track, SR).dbtp <= -1.0
    assert not track[int(1.6 * SR) : int(2.9 * SR)].any()  # the silence between the cues stays silent


def test_dialogue_loudness_over_the_whole_dialogue(invoke, fake_engine, tmp_path):
    out = tmp_path / "d.wav"
    r = invoke(
        "say", "A: Hello.\nB: Hi there.", "--cast", "A=auto", "--cast", "B=auto", "--loudness", -21, "-o", out, "-q"
    )
    assert r.exit_code == 0, r.stderr
    assert abs(lufs(read(out)) + 21) <= 0.5


# --- the server (the tiny checkpoint) -------------------------------------------------------------


@pytest.fixture(scope="module")
def srv(engine, tmp_path_factory):
    import httpx
    from server_util import running_server

    with running_server(engine) as (url, server, state):
        with httpx.Client(base_url=url, timeout=120) as client:
            yield client


def post_speech(client, **body):
    return client.post("/v1/audio/speech", json={"model": "omnivoice", "input": "Good morning to you.", **body})


@pytest.mark.slow
def test_the_server_levels_the_whole_reply_and_refuses_a_stream(srv):
    """`loudness`: the reply is one whole file at the target (mp3, which streams by default, too),
    with its report in a header; the same request without it is the plain reply, scaled by one gain
    (under the ceiling: no limiting), so nothing else changed. stream: true / sse: a 400 in the CLI's words."""
    plain = post_speech(srv, response_format="wav", seed=3, stream=False)
    loud = post_speech(srv, response_format="wav", seed=3, loudness=-24)
    assert plain.status_code == loud.status_code == 200, loud.text
    assert "content-length" in loud.headers and loud.headers.get("transfer-encoding") != "chunked"
    a, b = sf.read(_io(plain.content), dtype="float64")[0], sf.read(_io(loud.content), dtype="float64")[0]
    assert abs(lufs(b) + 24) <= 0.5 and len(a) == len(b)
    report = json.loads(loud.headers["x-omnivoice-loudness"])
    assert report["target_lufs"] == -24.0 and report["limited"] == 0
    assert np.allclose(b, a * 10 ** (report["gain_db"] / 20), atol=2 / 32768)
    mp3 = post_speech(srv, seed=3, loudness=-24)
    assert mp3.status_code == 200 and "content-length" in mp3.headers
    for extra, how in (({"stream": True}, "stream: true"), ({"stream_format": "sse"}, "stream_format 'sse'")):
        r = post_speech(srv, seed=3, loudness=-24, **extra)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"] == (
            f"field 'loudness' measures the whole output, which {how} sends piece by piece before its end is "
            "known: leave out 'stream' and 'stream_format' (the reply is then one whole file)"
        )
    r = post_speech(srv, loudness=-2)
    assert r.status_code == 400 and "field 'loudness' must be a number in [-50, -5]" in r.json()["error"]["message"]


def _io(data: bytes):
    import io

    return io.BytesIO(data)


# --- a long track levelled where it lies (dub --loudness) -------------------------------------------


def clicked_bursts(seconds: float, seed: int) -> np.ndarray:
    """Speech at about -16 LUFS with near-full-scale clicks: -16 LUFS needs the limiter."""
    x = at(bursts(seconds, seed=seed), -16.5)
    x[:: 3 * SR] = 0.97
    return np.clip(x, -1.0, 1.0).astype(np.float32)


def test_levelling_in_place_equals_normalize_and_writes_over_the_array():
    """`level(..., in_place=True)` (dub's track) gives what `normalize` gives, written over the
    array itself: the same LUFS within 0.1 LU, the true peak under the ceiling, the same samples;
    audio it cannot write over (read-only, float64) is levelled into a copy, itself untouched."""
    x = clicked_bursts(40, seed=21)
    whole, whole_report = LV.normalize(x.copy(), SR, -16.0)
    track = x.copy()
    same, report = LV.level(track, SR, -16.0, in_place=True)
    assert same is track and report is not None and report.limited > 0
    assert abs(report.lufs - whole_report.lufs) <= 0.1 and abs(lufs(track) - whole_report.lufs) <= 0.1
    assert report.dbtp <= -1.0 and L.measure(track, SR).dbtp <= -1.0 and resampled_peak(track) <= -1.0
    assert np.allclose(track, whole, atol=1e-6) and not np.allclose(track, x, atol=1e-3)
    for other in (x.copy(), x.astype(np.float64)):
        other.flags.writeable = other.dtype == np.float64
        before = other.copy()
        out, _ = LV.level(other, SR, -16.0, in_place=True)
        assert out is not other and np.array_equal(other, before) and np.allclose(out, whole, atol=1e-6)


LEVEL_RSS = """
import json, sys
from pathlib import Path
import numpy as np
from omnivoice_cli.app.deliver import Outputs, Take, deliver
from omnivoice_cli.media.output import OutputTarget

def vm(key):  # this process's own RSS (VmHWM: its peak since the last reset)
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith(key + ":")) * 1024

sr, minutes, out = 24000, float(sys.argv[1]), Path(sys.argv[2])
track = np.zeros(int(minutes * 60 * sr), dtype=np.float32)
rng = np.random.default_rng(5)
for i in range(0, len(track), 1 << 20):  # 3 s of tone and noise, 1 s of silence; a click every 7 s
    t = np.arange(i, min(i + (1 << 20), len(track))) / sr
    x = 0.25 * np.sin(2 * np.pi * 180 * t) + 0.03 * rng.standard_normal(len(t))
    x[(t % 7.0) < 1 / sr] = 0.97
    track[i : i + len(t)] = x * ((t % 4.0) < 3.0)
outputs = Outputs(target=OutputTarget(out, "WAV", "PCM_16"), loudness=-16.0, level_in_place=True)
deliver(Take(track[: 60 * sr].copy(), sr), outputs)  # every library loaded, its buffers made once
open("/proc/self/clear_refs", "w").write("5")  # the peak from here on: the track's delivery's own
before = vm("VmRSS")
done = deliver(Take(track, sr), outputs)
print(json.dumps({"extra": vm("VmHWM") - before, "bytes": track.nbytes, "lufs": done.loudness.lufs,
                  "dbtp": done.loudness.dbtp, "limited": done.loudness.limited}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs: Linux")
def test_a_long_tracks_loudness_adds_a_few_blocks_of_memory_not_copies(tmp_path):
    """dub --loudness over a track near its 4 h limit held several whole copies of it (5.6 GB of
    RSS where the track alone needs 1.6 GB). Delivered as dub delivers it (a WAV file, the
    loudness over the whole track, levelled where it lies), a 4 and a 16 min track, each in a
    fresh process: what the delivery adds to the RSS does not grow with the track (the longer
    adds under a quarter of the 69 MB its extra 12 min hold: measured, 0.3 MB less; whole copies
    added 2.8x those 69 MB) and stays under 3/4 of the long track's size (measured: 39 MB of 92;
    before, 276); each on its target under the ceiling."""
    found = {}
    for minutes in (4, 16):
        wav = tmp_path / f"{minutes}.wav"
        run = subprocess.run(
            [sys.executable, "-c", LEVEL_RSS, str(minutes), str(wav)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=600,  # only a hang trips it
        )
        assert run.returncode == 0, run.stderr
        found[minutes] = r = json.loads(run.stdout.splitlines()[-1])
        assert abs(r["lufs"] + 16.0) <= 0.1 and r["dbtp"] <= -1.0 and r["limited"] > 0
        assert sf.info(str(wav)).frames == r["bytes"] // 4
    short, long = found[4], found[16]
    assert long["extra"] - short["extra"] < (long["bytes"] - short["bytes"]) / 4, found
    assert long["extra"] < long["bytes"] * 3 / 4, found
