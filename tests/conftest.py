"""Shared fixtures: a CliRunner with stdout and stderr apart, a fake engine, the tiny checkpoint."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
TINY_CKPT = ROOT / "tests" / "fixtures" / "tiny" / "ckpt"
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
AGENT_REPLY = (  # an agent's reply of 13 sentences of 2-4 s each (no two short enough to share a piece)
    "Sure, I can help you plan the trip to the coast this weekend. The weather forecast says Saturday "
    "will be sunny and warm. Sunday looks cloudier, with a chance of light rain in the afternoon. The "
    "drive takes about three hours if you leave before eight in the morning. There is a small cafe "
    "halfway there that serves excellent pastries. Once you arrive, the old harbour is a good place to "
    "start walking. Most of the seafood restaurants open for lunch at half past twelve. If you like "
    "museums, the maritime museum is open until five. Tickets are cheaper when you buy them online the "
    "day before. In the evening, the beach path is quiet and the sunset is lovely. For the night, the "
    "guest house near the lighthouse still has rooms. Remember to bring a warm jacket, since the wind "
    "gets cold after dark. Have a wonderful trip, and let me know if you need anything else."
)
# no weight cache (engine/fast/weightcache.py) unless a test asks for one: the user's is never written
os.environ.setdefault("OMNIVOICE_WEIGHT_CACHE", "off")
# the fused kernels (engine/fast/kernels.py) built once for the test runs, never in the user's folder
os.environ.setdefault("OMNIVOICE_KERNELS", os.path.join(tempfile.gettempdir(), f"omnivoice-test-kernels-{os.getuid()}"))


def make_runner() -> CliRunner:
    """stdout and stderr captured apart (click < 8.2 needs mix_stderr=False; 8.2+ always does)."""
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


@pytest.fixture
def runner() -> CliRunner:
    return make_runner()


@pytest.fixture
def invoke(runner, monkeypatch):
    """invoke(*args, input=None, env=None) -> click Result, running `omnivoice ARGS`."""
    from omnivoice_cli.cli import app

    monkeypatch.delenv("OMNIVOICE_MODEL", raising=False)

    def run(*args, input=None, env=None):
        return runner.invoke(app, [str(a) for a in args], input=input, env=env)

    return run


def fake_audio(seed: int, seconds: float = 1.0) -> np.ndarray:
    """What FakeEngine makes for a request of this seed and length: seeded noise at 24 kHz."""
    rng = np.random.default_rng(seed)
    return (0.3 * rng.standard_normal(int(seconds * FakeEngine.sample_rate))).astype(np.float32)


class FakeEngine:
    """Stands in for omnivoice_cli.engine.pipeline.Engine: no torch, no model.

    Audio is seeded noise (1 s, or --duration), so the same seed gives the same audio.
    Records every load and every request in class attributes (reset by the fixture).
    """

    sample_rate = 24000
    loads: list[dict] = []
    requests: list = []
    load_error: Exception | None = None  # raised by load when set
    result_warnings: list[str] = []

    def __init__(self, model, device, dtype):
        self.model, self.device, self.dtype = model, device, dtype

    encoded: list = []  # (path, transcript) of every voice_from_audio call
    rendered: list = []  # the requests of the designed voices rendered (design.render), apart from `requests`

    @classmethod
    def load(cls, model=None, hardware=None, *, on_notice=None, on_download=None):
        from omnivoice_cli.engine.hardware import Hardware

        hw, default = hardware or Hardware(), Hardware()
        # quantize / compile / threads / ... are recorded only where the record differs from its default
        asked = {f.name: getattr(hw, f.name) for f in dataclasses.fields(hw) if f.name not in ("device", "dtype")}
        asked = {k: v for k, v in asked.items() if v != getattr(default, k)}
        cls.loads.append({"model": model, "device": hw.device, "dtype": hw.dtype, **asked})
        if cls.load_error is not None:
            raise cls.load_error
        if on_notice is not None:
            on_notice("fake notice: weights are for testing only")
        return cls(model, hw.device, hw.dtype)

    encoder_loads = 0

    def load_encoder(self):
        type(self).encoder_loads += 1

    def voice_from_audio(self, ref_audio, ref_text, *, preprocess=True):
        """The real preparation of the recording (errors, warnings, RMS), fake codes: [8, frames]
        derived from the prepared waveform, so one recording always gives the same codes."""
        import torch

        from omnivoice_cli.engine.sound import voice as vmod
        from omnivoice_cli.engine.text.canvastext import add_punctuation

        if isinstance(ref_audio, vmod.PreparedReference):  # read and prepared before the model was loaded
            prepared = ref_audio
        else:
            wav = vmod.load_reference(ref_audio)
            prepared = vmod.prepare_reference(wav, ref_text, source=f"reference audio {ref_audio}")
        type(self).encoded.append((getattr(ref_audio, "source", ref_audio), ref_text))
        frames = len(prepared.wav) // vmod.HOP_LENGTH
        level = int(abs(float(prepared.wav.sum())) * 1000) % 1000
        codes = (torch.arange(8 * frames, dtype=torch.int64).reshape(8, frames) + level) % 1024
        return vmod.VoicePrompt(codes, add_punctuation(ref_text), prepared.rms, prepared.warnings)

    def plan(self, req):
        """The request's plan (no model needed: a designed voice's sample is checked by it)."""
        from omnivoice_cli.engine.planning import plan_request

        return plan_request(req)

    def generate(self, requests, on_step=None, on_result=None, on_error=None, **kw):
        import torch

        from omnivoice_cli.engine.planning import Plan, Result

        if requests and isinstance(requests[0], Plan):  # a designed voice rendered (design.render): kept apart
            type(self).rendered += [r.req for r in requests]
            requests = [r.req for r in requests]
            record = False
        else:
            record = True

        out = []
        for index, req in enumerate(requests):
            if record:
                type(self).requests.append(req)
            n = req.generation.num_step
            for i in range(1, n + 1):
                if on_step is not None:
                    on_step(i, n)
            seconds = req.duration if req.duration is not None else 1.0
            audio = fake_audio(req.seed, seconds)
            out.append(
                Result(
                    audio=audio,
                    sample_rate=self.sample_rate,
                    # fake codes of the seed: a designed voice rendered from them is its seed's
                    tokens=(torch.arange(8 * int(seconds * 25)).reshape(8, -1) + req.seed) % 1024,
                    target_len=int(seconds * 25),
                    seed=req.seed,
                    warnings=list(type(self).result_warnings),
                )
            )
            if on_result is not None:
                on_result(index, out[-1])
        return out


@pytest.fixture
def fake_engine(monkeypatch):
    """Replace the engine by FakeEngine for the test; returns the class (see its records)."""
    from omnivoice_cli.engine import pipeline

    FakeEngine.loads = []
    FakeEngine.requests = []
    FakeEngine.encoded = []
    FakeEngine.rendered = []
    FakeEngine.encoder_loads = 0
    FakeEngine.load_error = None
    FakeEngine.result_warnings = []
    monkeypatch.setattr(pipeline, "Engine", FakeEngine, raising=False)
    return FakeEngine


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """An empty OMNIVOICE_HOME for the test (saved voices, user presets); a module may define its own."""
    h = tmp_path / "home"
    monkeypatch.setenv("OMNIVOICE_HOME", str(h))
    return h


@pytest.fixture(scope="module")
def module_home(tmp_path_factory) -> Path:
    """An empty OMNIVOICE_HOME for the whole module (a server the module's tests share reads it)."""
    old = os.environ.get("OMNIVOICE_HOME")
    os.environ["OMNIVOICE_HOME"] = str(tmp_path_factory.mktemp("home"))
    yield Path(os.environ["OMNIVOICE_HOME"])
    if old is None:
        del os.environ["OMNIVOICE_HOME"]
    else:
        os.environ["OMNIVOICE_HOME"] = old


@pytest.fixture
def tiny_ckpt() -> Path:
    return TINY_CKPT


@pytest.fixture
def ckpt_copy(tmp_path) -> Path:
    """A writable copy of the tiny checkpoint, to break in a test."""
    dst = tmp_path / "ckpt"
    shutil.copytree(TINY_CKPT, dst)
    return dst


FINETUNES = ROOT / "tests" / "fixtures" / "finetunes"


def make_finetune(name: str, dst: Path) -> Path:
    """The tiny checkpoint copied to `dst` with the fine-tune `name`'s files
    (tests/fixtures/finetunes/README.md)."""
    import json

    shutil.copytree(TINY_CKPT, dst)
    for f in (FINETUNES / name).iterdir():
        if f.name == "config_fields.json":
            config = json.loads((dst / "config.json").read_text())
            config.update(json.loads(f.read_text()))
            (dst / "config.json").write_text(json.dumps(config))
        else:
            shutil.copy(f, dst / f.name)
    if (dst / "references.json").is_file():
        for row in json.loads((dst / "references.json").read_text()).values():
            (dst / row["audio"]).parent.mkdir(exist_ok=True)
            shutil.copy(GOLDEN / "ref_24k.wav", dst / row["audio"])
    return dst


@pytest.fixture
def finetune(tmp_path):
    """finetune("kohai" | "lahgtna" | "voicetut") -> a fine-tuned checkpoint folder made from the tiny one."""
    return lambda name: (tmp_path / name) if (tmp_path / name).is_dir() else make_finetune(name, tmp_path / name)


def error_line(result, words: str | None = None, exit_code: int | None = None) -> str:
    """The one-line error message of a command's result (click's or a subprocess's) or of its stderr
    text; asserts there is exactly one, no traceback and no boxed panel, and when given, that it
    holds `words` and the exit code is `exit_code`."""
    stderr = result if isinstance(result, str) else result.stderr
    assert "Traceback" not in stderr and "───" not in stderr, stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1, stderr
    assert words is None or words in errors[0], (words, errors[0])
    assert exit_code is None or result.exit_code == exit_code, (result.exit_code, stderr)
    return errors[0]


def files_in(folder: Path) -> list[str]:
    """Every file under `folder` (hidden temporary files included), relative, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def engine():
    """The tiny checkpoint loaded on the CPU, once per test module (a module may define its own)."""
    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.pipeline import Engine

    return Engine.load(str(TINY_CKPT), Hardware(device="cpu"))


@pytest.fixture(scope="module")
def ref_voice(engine):
    """The golden cloning case's reference voice, prepared by the module's engine."""
    import json

    meta = json.loads((GOLDEN / "clone.json").read_text())["generate_kwargs"]
    return engine.voice_from_audio(str(GOLDEN / meta["ref_audio"]), meta["ref_text"])


@pytest.fixture(autouse=True)
def _torch_threads_as_at_start():
    """Each test starts with torch's thread count as the process began and denormals kept: a command
    run in-process with --threads N sets torch's count for the rest of the process, and an engine
    loaded later without `threads` would run with that count (each engine keeps its own count in
    every thread it runs in: engine/loading.use_threads; tests/test_threads.py)."""
    yield
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)
        torch.set_flush_denormal(False)


@pytest.fixture(scope="module")
def tiny_engine(engine):
    """The tiny random-weight checkpoint loaded once per module (the module's `engine`), for the
    command tests that reuse it (`loaded`)."""
    return engine


@pytest.fixture
def loaded(monkeypatch, tiny_engine):
    """Every command run in the test reuses the module's tiny engine (in process) instead of
    loading it again, for --model and for the default model (a command given no --model);
    `loaded.loads` counts the loads asked for."""
    from omnivoice_cli.app.settings.schema import DEFAULT_MODEL
    from omnivoice_cli.engine import pipeline

    class Loaded:
        loads = 0

        @classmethod
        def load(cls, model=None, hardware=None, *, on_notice=None, on_download=None):
            assert model in (str(TINY_CKPT), DEFAULT_MODEL), model
            cls.loads += 1
            return tiny_engine

    monkeypatch.setattr(pipeline, "Engine", Loaded)
    return Loaded


@pytest.fixture
def ray_tmp(monkeypatch):
    """Ray's files (sessions, logs, the address file) in a short folder of the test's own, removed after."""
    import shutil
    import tempfile

    temp = tempfile.mkdtemp(prefix="ovr", dir="/tmp")  # short: Ray's socket paths are under it
    monkeypatch.setenv("RAY_TMPDIR", temp)
    monkeypatch.setenv("RAY_memory_monitor_refresh_ms", "0")  # as helpers/ray.ENV: Ray's memory monitor off
    yield temp
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def blocker(tmp_path_factory) -> Path:
    """A folder holding helpers/extras.BLOCKER as sitecustomize.py: first on a subprocess's PYTHONPATH,
    it hides the packages named in OMNIVOICE_TEST_BLOCK."""
    from helpers.extras import BLOCKER

    folder = tmp_path_factory.mktemp("blocker")
    (folder / "sitecustomize.py").write_text(BLOCKER)
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty Hugging Face hub cache (this name overrides pytest's own `cache`, which no test uses)
    and user home, online as far as the code can tell."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    (tmp_path / "hub").mkdir()
    return tmp_path / "hub"


@pytest.fixture
def fake_hub(cache, monkeypatch):
    """Fakes of the network side of huggingface_hub serving helpers/hub.FILES; records the calls."""
    from types import SimpleNamespace

    import huggingface_hub
    from helpers.hub import COMMIT, FILES, put

    real = huggingface_hub.snapshot_download
    calls = SimpleNamespace(downloads=[], fail_at=None, dry_run_error=None)

    def snapshot_download(repo_id, *, cache_dir=None, local_files_only=False, dry_run=False, **kw):
        assert str(cache_dir) == str(cache)  # the cache of the environment, read at call time
        if local_files_only:
            return real(repo_id, cache_dir=cache_dir, local_files_only=True)
        if dry_run:
            if calls.dry_run_error:
                raise calls.dry_run_error
            snap = cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / COMMIT
            return [
                SimpleNamespace(filename=n, file_size=len(c), commit_hash=COMMIT, will_download=not (snap / n).exists())
                for n, c in FILES.items()
            ]
        return str(put(cache, repo_id, "config.json", FILES["config.json"]))  # writes refs/main

    def hf_hub_download(repo_id, filename, *, revision=None, cache_dir=None, tqdm_class=None, **kw):
        assert revision == COMMIT and str(cache_dir) == str(cache)
        if calls.fail_at == filename:
            raise ConnectionResetError("connection reset by peer")
        content = FILES[filename]
        if tqdm_class is not None:  # as huggingface_hub drives a bar: created with the size, chunks
            with tqdm_class(total=len(content), initial=0, desc=filename, unit="B") as bar:
                bar.update(len(content) // 2)
                bar.update(len(content) - len(content) // 2)
        calls.downloads.append(filename)
        return str(put(cache, repo_id, filename, content, main=False) / filename)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    return calls


@pytest.fixture
def generated(tiny_engine, monkeypatch) -> list:
    """Every request tiny_engine generates, in order (a Plan's own request)."""
    seen: list = []
    real = tiny_engine.generate

    def counting(items, **kwargs):
        seen.extend(getattr(g, "req", g) for g in items)  # a Plan (design.render_line's) or a Request
        return real(items, **kwargs)

    monkeypatch.setattr(tiny_engine, "generate", counting)
    return seen


@pytest.fixture
def takes(tiny_engine, monkeypatch) -> list:
    """Every (request, result) tiny_engine generates, in order."""
    seen: list = []
    real = tiny_engine.generate

    def counting(items, **kwargs):
        results = real(items, **kwargs)
        seen.extend((getattr(g, "req", g), r) for g, r in zip(items, results))
        return results

    monkeypatch.setattr(tiny_engine, "generate", counting)
    return seen
