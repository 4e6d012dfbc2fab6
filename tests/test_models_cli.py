"""`omnivoice download` and `omnivoice models` on a hub cache built by hand (no network), and where
the model comes from: --model, a preset, $OMNIVOICE_MODEL, the default (in --help, --dry-run and
the offline messages)."""

from __future__ import annotations

import json

import huggingface_hub.constants
import pytest
from conftest import TINY_CKPT, error_line
from helpers.hub import FILES, REPO, put

from omnivoice_cli.app.settings.schema import DEFAULT_MODEL


def test_download_shows_the_notice_and_progress_then_where(invoke, fake_hub, cache):  # noqa: F811
    r = invoke("download")
    assert r.exit_code == 0, r.stderr
    assert "CC-BY-NC" in r.stderr  # the licence notice before the download
    assert f"downloading {REPO}: " in r.stderr  # plain progress lines: stderr is not a terminal here
    assert r.stderr.strip().splitlines()[-1].startswith(f"{REPO}: ready in ")
    assert r.stdout == ""
    again = invoke("download", REPO)
    assert again.exit_code == 0 and "CC-BY-NC" not in again.stderr  # cached: nothing fetched, no notice


def test_download_offline_with_nothing_cached_is_one_line_and_exit_1(invoke, cache, monkeypatch):  # noqa: F811
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    r = invoke("download")
    assert r.exit_code == 1
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1 and "offline" in errors[0] and "Traceback" not in r.stderr


def test_download_refuses_a_malformed_id(invoke, cache):  # noqa: F811
    r = invoke("download", "not a repo id")
    assert r.exit_code == 2 and "Error: " in r.stderr


def test_models_lists_the_cached_checkpoints(invoke, cache):  # noqa: F811
    for name, content in FILES.items():
        put(cache, REPO, name, content)
    put(cache, "someone/partial", "config.json", FILES["config.json"])
    put(cache, "someone/other-model", "config.json", b'{"model_type": "llama"}')
    r = invoke("models")
    assert r.exit_code == 0, r.stderr
    rows = r.stdout.strip().splitlines()
    assert len(rows) == 2
    assert rows[0].startswith(REPO) and " complete " in rows[0]
    assert rows[1].startswith("someone/partial") and "incomplete" in rows[1]


def test_models_with_an_empty_cache_says_how_to_get_one(invoke, cache):  # noqa: F811
    r = invoke("models")
    assert r.exit_code == 0 and r.stdout == ""
    assert "omnivoice download" in r.stderr


# ------------------------------------------------------------------------------------ where the model comes from


def test_help_names_omnivoice_model(runner):
    from omnivoice_cli.cli import app

    for command in (["say"], ["batch"], ["dub"], ["serve"], ["voice", "add"], ["download"]):
        r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert r.exit_code == 0
        shown = " ".join(r.stdout.replace("│", " ").split())
        assert "Default: $OMNIVOICE_MODEL" in shown and "else k2-fsa/OmniVoice." in shown, command


def test_model_precedence_default_env_preset_flag(invoke, fake_engine, tmp_path):
    preset = tmp_path / "mine.toml"
    preset.write_text("model = 'preset/model'\n")
    for extra in ([], ["--preset", preset], ["--preset", preset, "--model", "flag/model"]):
        r = invoke("say", "Hi", "-o", tmp_path / "x.wav", *extra, env={"OMNIVOICE_MODEL": "env/model"})
        assert r.exit_code == 0, r.stderr
    r = invoke("say", "Hi", "-o", tmp_path / "x.wav")  # nothing set: the default
    assert [ld["model"] for ld in fake_engine.loads] == ["env/model", "preset/model", "flag/model", DEFAULT_MODEL]


def test_dry_run_says_the_model_came_from_the_environment(invoke, tmp_path):
    r = invoke("say", "Hi", "--dry-run", "--json", env={"OMNIVOICE_MODEL": "env/model"})
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["settings"]["model"]["value"] == "env/model", report["settings"]["model"]
    assert report["settings"]["model"]["from"] == "env OMNIVOICE_MODEL"


def _offline_error(tmp_path, monkeypatch):
    import huggingface_hub.constants

    from omnivoice_cli.engine.checkpoint import hub
    from omnivoice_cli.engine.errors import ModelUnavailable

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelUnavailable) as e:
        hub.download_checkpoint(DEFAULT_MODEL)
    return e.value


def test_the_offline_error_of_say_names_model_and_omnivoice_model(invoke, fake_engine, tmp_path, monkeypatch):
    fake_engine.load_error = _offline_error(tmp_path, monkeypatch)
    r = invoke("say", "Hi", "-o", tmp_path / "x.wav")
    assert r.exit_code == 1
    assert error_line(r) == (
        "Error: k2-fsa/OmniVoice (about 3.2 GB) is not in the Hugging Face cache and cannot be downloaded "
        "(offline: HF_HUB_OFFLINE is set). Connect once to fetch it (`omnivoice download`), or use a local "
        "checkpoint folder: --model DIR, or OMNIVOICE_MODEL=DIR."
    )


def test_download_offline_has_its_own_advice(invoke, tmp_path, monkeypatch):
    _offline_error(tmp_path, monkeypatch)  # the same offline setting
    r = invoke("download")
    assert r.exit_code == 1
    line = error_line(r)
    assert "(offline: HF_HUB_OFFLINE is set). Unset HF_HUB_OFFLINE and run `omnivoice download` again" in line
    assert "--model" not in line and "OMNIVOICE_MODEL" not in line


def test_download_defaults_to_omnivoice_model(invoke, tmp_path, monkeypatch):
    _offline_error(tmp_path, monkeypatch)
    r = invoke("download", env={"OMNIVOICE_MODEL": "me/finetune"})
    assert r.exit_code == 1 and error_line(r).startswith("Error: me/finetune is not in the Hugging Face cache")
    r = invoke("download", env={"OMNIVOICE_MODEL": str(TINY_CKPT)})  # a local folder: nothing to fetch
    assert r.exit_code == 0, r.stderr
    assert "a local checkpoint folder (OMNIVOICE_MODEL), nothing to download" in r.stderr
