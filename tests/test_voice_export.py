"""`omnivoice voice export` and a voice file imported elsewhere (app/voices/voiceexport.py): the same audio
for the same seed on a fresh home; a tampered, truncated, oversized or path-escaping file refused
in one line with nothing written; the server's voice upload takes the same file."""

from __future__ import annotations

import httpx
import pytest
import soundfile as sf
from conftest import GOLDEN, TINY_CKPT, error_line, files_in
from server_util import running_server

from omnivoice_cli.app.voices.voiceexport import MAX_VOICE_BYTES, verify_voice_file

REF_TEXT = "This is the reference voice for the test"
GREEDY = ("--position-temperature", 0, "--class-temperature", 0, "--num-step", 4, "--seed", 9)


@pytest.fixture
def exported(invoke, loaded, tmp_path, monkeypatch):
    """alice, added in one home and exported to alice.safetensors: (the file, that home)."""
    first = tmp_path / "first"
    monkeypatch.setenv("OMNIVOICE_HOME", str(first))
    ref = ("--ref", GOLDEN / "ref_24k.wav", "--ref-text", REF_TEXT, "--lang", "en", "--model", TINY_CKPT)
    r = invoke("voice", "add", "alice", *ref)
    assert r.exit_code == 0, r.stderr
    out = tmp_path / "alice.safetensors"
    r = invoke("voice", "export", "alice", "-o", out)
    assert r.exit_code == 0, r.stderr
    return out, first


def _say(invoke, out):
    r = invoke("say", "Good evening to you all.", "--model", TINY_CKPT, "--voice", "alice", *GREEDY, "-o", out, "-q")
    assert r.exit_code == 0, r.stderr
    return sf.read(out)[0]


@pytest.mark.slow
def test_export_then_import_on_a_fresh_home_gives_the_same_audio(invoke, exported, tmp_path, monkeypatch):
    out, _ = exported
    before = _say(invoke, tmp_path / "before.wav")
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "fresh"))
    r = invoke("voice", "import", out)
    assert r.exit_code == 0, r.stderr
    assert (before == _say(invoke, tmp_path / "after.wav")).all()
    shown = invoke("voice", "show", "alice").stdout
    assert "lang:" in shown and " en\n" in shown and f"model:          {TINY_CKPT}" in shown
    r = invoke("voice", "export", "alice", "-o", out)
    assert r.exit_code == 2 and "already exists" in error_line(r)


def test_a_first_days_voice_messages(invoke, exported, tmp_path, monkeypatch):
    """export without -o writes NAME.safetensors here; import over a saved name names --name as the
    way out; a recording given to import points at `voice add`."""
    out, _ = exported
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    r = invoke("voice", "export", "alice")
    assert r.exit_code == 0, r.stderr
    assert files_in(here) == ["alice.safetensors"]
    verify_voice_file(here / "alice.safetensors", "alice.safetensors")  # whole, its checksum right
    r = invoke("voice", "import", out)
    assert "give --force to replace it, or --name NAME to import it under another name" in error_line(r, exit_code=2)
    r = invoke("voice", "import", "x.wav")
    assert error_line(r, exit_code=2) == (
        "Error: 'x.wav' is a recording, not a voice file: `omnivoice voice add NAME --ref x.wav` makes a voice of it"
    )


def _tampered(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])  # the last code's last byte


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _oversized(data: bytes) -> bytes:
    return data + b" " * (MAX_VOICE_BYTES + 1 - len(data))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_tampered, "its checksum does not match its contents"),
        (_truncated, "is not a voice file"),
        (_oversized, f"at most {MAX_VOICE_BYTES} for a voice file"),
    ],
)
def test_a_broken_file_is_refused_in_one_line_nothing_written(invoke, exported, tmp_path, monkeypatch, change, said):
    out, _ = exported
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(change(out.read_bytes()))
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("OMNIVOICE_HOME", str(fresh))
    r = invoke("voice", "import", bad)
    assert r.exit_code == 2
    assert said in error_line(r)
    assert not fresh.exists() or files_in(fresh) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", ["../evil", "../../evil", "sub/evil", "/tmp/evil"])
def test_a_name_that_escapes_the_store_is_refused(invoke, exported, tmp_path, monkeypatch, name):
    out, _ = exported
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("OMNIVOICE_HOME", str(fresh))
    r = invoke("voice", "import", out, "--name", name)
    assert r.exit_code == 2 and len(error_line(r).splitlines()) == 1
    assert not fresh.exists() or files_in(fresh) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alice.safetensors", "first"]  # nothing beside it
    assert not any((fresh / p).exists() for p in ("evil.safetensors", "voices/sub"))


@pytest.mark.slow
def test_the_server_upload_takes_the_exported_file(exported, tiny_engine, tmp_path, monkeypatch):
    out, _ = exported
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path / "server"))
    with running_server(tiny_engine) as (url, _, _):
        with httpx.Client(base_url=url, timeout=120) as client:
            bad = _tampered(out.read_bytes())
            r = client.post("/v1/audio/voices", data={"name": "bob"}, files={"file": ("bob.safetensors", bad)})
            assert r.status_code == 400 and "checksum does not match" in r.json()["error"]["message"]
            assert str(tmp_path) not in r.text
            files = {"file": ("alice.safetensors", out.read_bytes())}
            r = client.post("/v1/audio/voices", data={"name": "alice"}, files=files)
            assert r.status_code == 201, r.text
            assert r.json()["text"] == REF_TEXT + "."
            names = [v["name"] for v in client.get("/v1/audio/voices").json()["voices"]]
            assert "alice" in names and "bob" not in names
