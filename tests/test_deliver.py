"""The one delivery step (app/deliver.py): the output concerns (word timings, subtitles, loudness,
the output's rate, writing and encoding) are reached from one module, in one order, so `say` and
the server give the same words for the same request."""

from __future__ import annotations

import ast
import base64
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import TINY_CKPT

from omnivoice_cli.app import deliver as dl
from omnivoice_cli.app.listening import listen

PACKAGE = Path(__file__).resolve().parent.parent / "omnivoice_cli"

# The functions of each output concern, by the module that defines them.
CONCERNS = {
    "app.listening.words": {"word_timings", "span_words", "write_words", "write_word_subtitles"},
    "media.subtitles": {"write_subtitles", "write_result_subtitles"},
    "media.leveller": {"normalize", "level", "Leveller"},
    "media.rates": {"at_rate", "StreamResampler"},
    "media.output": {"write_audio", "encode", "StreamEncoder", "StreamWriter", "pcm16"},
    "media.m4b": {"write_m4b"},
}
NAMES = set().union(*CONCERNS.values())
DELIVERY = "app/deliver.py"
# Every front end goes through DELIVERY: say, batch, dub, the book, the server's replies, its
# dialogue and socket, Wyoming and MCP. None is exempt.
NOT_YET: set[str] = set()


def _concern_uses(path: Path) -> list[str]:
    """The concern functions a module imports (from their modules) or reaches as module attributes."""
    rel = path.relative_to(PACKAGE).as_posix()
    tree = ast.parse(path.read_text())
    modules: set[str] = set()  # names bound to a concern module (`from ..media import output`)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = _absolute(rel, node)
            for alias in node.names:
                full = f"{mod}.{alias.name}".lstrip(".")
                if any(mod.endswith(m) for m in CONCERNS) and alias.name in CONCERNS[_which(mod)]:
                    found.append(f"{rel}:{node.lineno} imports {alias.name}")
                elif any(full.endswith(m) for m in CONCERNS):
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Attribute) and node.attr in NAMES and isinstance(node.value, ast.Name):
            if node.value.id in modules:
                found.append(f"{rel}:{node.lineno} calls {node.value.id}.{node.attr}")
    return found


def _absolute(rel: str, node: ast.ImportFrom) -> str:
    """The module an import names, within the package (`from . import words` in app/x.py: app.words)."""
    if not node.level:
        return (node.module or "").removeprefix("omnivoice_cli.")
    package = rel.split("/")[:-1]  # app/deliver.py: ["app"]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _which(mod: str) -> str:
    return next(m for m in CONCERNS if mod.endswith(m))


def test_the_output_concerns_are_reached_from_the_delivery_module_only():
    """Check 1 of issue 35: subtitles, word timings, loudness, resampling, writing and encoding are
    done in one place. Outside the modules that define them, only app/deliver.py imports them."""
    uses = []
    for layer in ("app", "server", "commands"):
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            rel = path.relative_to(PACKAGE).as_posix()
            if rel in (DELIVERY, *NOT_YET) or rel.removesuffix(".py").replace("/", ".") in CONCERNS:
                continue
            uses += _concern_uses(path)
    assert uses == []
    seen = " ".join(_concern_uses(PACKAGE / DELIVERY))  # the scan sees them where they are
    for name in ("word_timings", "write_subtitles", "level", "Leveller", "at_rate", "write_audio", "encode"):
        assert f" {name}" in seen or f".{name}" in seen, name


class LoudnessHeard:
    """A stand-in recogniser whose times follow the level of what it hears: it hears the text,
    its words spread from a start that moves with the audio's RMS, so words timed after a gain
    differ from words timed before it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def transcribe(self, audio, sample_rate, lang=None, max_tokens=None, words=True):
        seconds = len(audio) / sample_rate
        rms = float(np.sqrt(np.mean(np.square(audio, dtype=np.float64)))) if len(audio) else 0.0
        start = min(rms * 4.0, 0.5) * seconds
        said = self.text.split()
        step = (seconds - start) / max(len(said), 1)
        heard = tuple(listen.Word(w, start + i * step, start + (i + 0.8) * step) for i, w in enumerate(said))
        return listen.Transcript(" ".join(said), heard)

    def close(self):
        pass


def test_say_and_the_server_give_the_same_words_for_the_same_request(engine, invoke, tmp_path, monkeypatch):
    """The same request (one sentence, greedy, a loudness target) through `say --words` and the
    server's `timestamps`: the same audio, and the same word rows, because both time the words
    on the model's own audio before the loudness gain (deliver's order)."""
    httpx = pytest.importorskip("httpx")
    from server_util import decode, running_server

    text, seed, target = "I can speak in the same voice.", 17, -30.0
    monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: LoudnessHeard(text))
    out, wj = tmp_path / "say.wav", tmp_path / "say.words.json"
    flags = ["--seed", seed, "--num-step", 4, "--position-temperature", 0, "--class-temperature", 0]
    r = invoke("say", text, "--model", TINY_CKPT, *flags, "--loudness", target, "-o", out, "--words", wj, "-q")
    assert r.exit_code == 0, r.stderr
    said_rows = json.loads(wj.read_text())["words"]
    body = {"model": "omnivoice", "input": text, "voice": "auto", "response_format": "wav", "seed": seed}
    body.update(num_step=4, position_temperature=0, class_temperature=0, loudness=target, timestamps=True)
    with running_server(engine) as (url, _, _state):
        reply = httpx.post(url + "/v1/audio/speech", json=body, timeout=300)
    assert reply.status_code == 200, reply.text
    served = reply.json()
    audio, rate = decode(base64.b64decode(served["audio"]))
    said_audio, said_rate = sf.read(out, dtype="float32")
    assert rate == said_rate and np.array_equal(audio, said_audio)  # the same request, the same audio
    assert served["words"] == said_rows and len(said_rows) == len(text.split())
    # the order matters: timed on the levelled audio (the server's order before), the rows differ
    after = dl.time_words(LoudnessHeard(text), dl.Take(said_audio, said_rate, text))
    assert [w.as_dict() for w in after] != said_rows


def test_deliver_writes_words_subtitles_then_audio_in_its_order(tmp_path):
    """deliver's order on a plain take: the words timed on the model's audio (before the gain),
    the loudness over the whole, the output's rate, then the files; a missed target said once."""
    from omnivoice_cli.media.output import check_output

    rate = 24000
    t = np.arange(rate, dtype=np.float32) / rate
    audio = (0.05 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    take = dl.Take(audio, rate, "Hello there friend.", pieces=[("Hello there friend.", 0, rate)])
    heard: list = []

    class Spy(LoudnessHeard):
        def transcribe(self, a, sr, *args, **kw):
            heard.append(float(np.abs(a).max()))
            return super().transcribe(a, sr, *args, **kw)

    outputs = dl.Outputs(
        target=check_output(str(tmp_path / "o.wav")),
        subtitles=tmp_path / "o.srt",
        words=tmp_path / "o.json",
        loudness=-16.0,
        sample_rate=16000,
    )
    done = dl.deliver(take, outputs, listener=Spy(take.text))
    assert heard == [pytest.approx(0.05, rel=1e-3)]  # timed before the gain
    assert done.loudness is not None and abs(done.loudness.lufs - -16.0) < 0.5
    info = sf.info(str(tmp_path / "o.wav"))
    assert (info.samplerate, info.frames) == (16000, done.out_samples) == (16000, 16000)
    assert [w["word"] for w in json.loads((tmp_path / "o.json").read_text())["words"]] == ["hello", "there", "friend"]
    assert "Hello there friend." in (tmp_path / "o.srt").read_text()
