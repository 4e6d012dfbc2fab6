"""media/provenance.py: `--c2pa-cert / --c2pa-key` sign a C2PA manifest into whole WAV, MP3 and M4A
files (created by a trained algorithmic model), read back and validated by c2pa-python itself
with a chain the test makes; the container mark stays; bad or half-given files are refused
before the model loads."""

from __future__ import annotations

import io
import json

import pytest
from helpers.audio import tone
from helpers.certs import make_chain
from helpers.marks import mark_of

from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.media.formats import AUDIO_FORMATS, writable_formats
from omnivoice_cli.media.marks import SOURCE_TYPE, Mark, Provenance
from omnivoice_cli.media.output import encode
from omnivoice_cli.media.provenance import ASSERTION, check_provenance

c2pa = pytest.importorskip("c2pa", reason="the c2pa extra (c2pa-python)")
pytest.importorskip("mutagen", reason="the container marks are read back by mutagen (the test extra)")

SR = 24000
SIGNED = [n for n in ("wav", "mp3", "m4a") if n in writable_formats()]


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return make_chain(tmp_path_factory.mktemp("c2pa"))


def trusting(root: bytes):
    """A c2pa Context whose trust anchors are the test's root (so the signer is Trusted)."""
    settings = c2pa.Settings.from_json(json.dumps({"trust": {"trust_anchors": root.decode()}}))
    return c2pa.Context(settings)


def manifest_of(data: bytes, mime: str, context=None):
    with c2pa.Reader(mime, io.BytesIO(data), context=context) as r:
        return r.get_validation_state(), r.get_active_manifest()


@pytest.mark.parametrize("name", SIGNED)
def test_a_signed_file_validates_says_a_trained_model_made_it_and_keeps_its_mark(chain, name):
    cert, key, root = chain
    fmt = AUDIO_FORMATS[name]
    mark = Mark("k2-fsa/OmniVoice", "2026-08-02", "9.9.9", Provenance(str(cert), str(key)))
    data = encode(tone(0.5), SR, fmt.sf_format, fmt.subtype, mark)
    state, manifest = manifest_of(data, fmt.mime)
    assert state == "Valid"  # the signature and every hash check; the root is not one the SDK trusts
    assert manifest_of(data, fmt.mime, trusting(root))[0] == "Trusted"
    actions = next(a for a in manifest["assertions"] if a["label"].startswith("c2pa.actions"))["data"]["actions"]
    assert actions[0]["action"] == "c2pa.created" and actions[0]["digitalSourceType"] == SOURCE_TYPE
    ours = next(a for a in manifest["assertions"] if a["label"] == ASSERTION)["data"]
    assert ours["checkpoint"] == "k2-fsa/OmniVoice" and ours["date"] == "2026-08-02"
    assert mark_of(data, name)["checkpoint"] == "k2-fsa/OmniVoice"  # the container's mark too
    cut = bytearray(data)
    cut[len(cut) // 2] ^= 0xFF  # a byte of the audio changed: the manifest no longer matches
    assert manifest_of(bytes(cut), fmt.mime)[0] == "Invalid"


def test_only_whole_wav_mp3_m4a_are_signed_flac_keeps_its_container_mark(chain):
    cert, key, _ = chain
    mark = Mark("m", "2026-08-02", provenance=Provenance(str(cert), str(key)))
    data = encode(tone(0.5), SR, "FLAC", "PCM_16", mark)
    assert mark_of(data, "flac")["checkpoint"] == "m"
    assert c2pa.Reader.try_create("audio/flac", io.BytesIO(data)) is None


def test_a_key_that_is_not_one_or_a_file_not_there_is_one_line(chain, tmp_path):
    cert, _, _ = chain
    bad = tmp_path / "bad.key"
    bad.write_text("not a key")
    with pytest.raises(InvalidRequest, match=r"--c2pa-key is not an unencrypted PEM private key"):
        check_provenance(Provenance(str(cert), str(bad)))
    with pytest.raises(InvalidRequest, match=r"--c2pa-cert '.*gone.pem': cannot read it"):
        check_provenance(Provenance(str(tmp_path / "gone.pem"), str(bad)))


def test_say_signs_its_file_and_refuses_half_the_pair_before_loading(invoke, fake_engine, chain, tmp_path):
    cert, key, _ = chain
    out = tmp_path / "x.wav"
    r = invoke("say", "Hi.", "-o", out, "--c2pa-cert", cert, "--c2pa-key", key, "-q")
    assert r.exit_code == 0, r.stderr
    assert manifest_of(out.read_bytes(), "audio/wav")[0] == "Valid"
    for args in (("--c2pa-cert", cert), ("--c2pa-key", key), ("--c2pa-cert", cert, "--c2pa-key", key, "--no-mark")):
        r = invoke("say", "Hi.", "-o", tmp_path / "y.wav", *args, "-q")
        assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "y.wav").exists() and len(fake_engine.loads) == 1


@pytest.mark.slow
def test_the_server_signs_its_whole_wav_replies(engine, module_home, chain):
    pytest.importorskip("uvicorn", reason="the serve extra")
    import httpx
    from server_util import running_server

    from omnivoice_cli.app.settings.layers import FLAG_SOURCE

    cert, key, _ = chain
    flags = {"num_step": 2, "c2pa_cert": str(cert), "c2pa_key": str(key)}
    with running_server(engine, layers=((FLAG_SOURCE, flags),)) as (url, _, _):
        with httpx.Client(base_url=url, timeout=120) as client:
            body = {"model": "omnivoice", "input": "Hi.", "response_format": "wav", "seed": 1}
            r = client.post("/v1/audio/speech", json=body)
    assert r.status_code == 200 and manifest_of(r.content, "audio/wav")[0] == "Valid"
