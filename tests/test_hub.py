"""The hub cache: download (cached, offline, fetched with progress, stopped) and cached_models,
on a hub cache folder built by hand. huggingface_hub's network calls are replaced by fakes that
write into that folder as it would: no test reaches the network."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.hub import COMMIT, CONFIG, FILES, REPO, put

from omnivoice_cli.engine.checkpoint import hub
from omnivoice_cli.engine.errors import InvalidRequest, ModelUnavailable


def marker(tmp_path):
    return tmp_path / "home" / "licence-notice-shown"


# --------------------------------------------------------------------------- download


def test_download_fetches_every_file_with_progress_and_the_notice_first(fake_hub, cache, tmp_path):
    notices, progress = [], []
    path = hub.download_checkpoint(REPO, on_progress=lambda d, t: progress.append((d, t)), on_notice=notices.append)
    assert path == cache / "models--k2-fsa--OmniVoice" / "snapshots" / COMMIT
    assert sorted(fake_hub.downloads) == sorted(FILES)
    assert all((path / name).read_bytes() == content for name, content in FILES.items())
    total = sum(len(c) for c in FILES.values())
    assert progress[-1] == (total, total) and all(t == total for _, t in progress)
    assert [d for d, _ in progress] == sorted(d for d, _ in progress)  # never goes back
    assert len(progress) > len(FILES)  # within files too, not only between them
    assert (
        notices[0] == hub.LICENCE_NOTICE
        and notices[1] == f"downloading {REPO} (6 files, 0.0 MB) into the Hugging Face cache ..."
    )
    assert marker(tmp_path).exists()


def test_a_cached_complete_model_needs_no_network_and_no_notice(fake_hub, cache, tmp_path, monkeypatch):
    for name, content in FILES.items():
        snap = put(cache, REPO, name, content)
    fake_hub.dry_run_error = AssertionError("the network was asked")
    notices = []
    assert hub.download_checkpoint(REPO, on_notice=notices.append) == snap
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.download_checkpoint(REPO, on_notice=notices.append) == snap
    assert notices == [] and fake_hub.downloads == [] and not marker(tmp_path).exists()


def test_a_partly_cached_model_fetches_only_what_is_missing(fake_hub, cache):
    put(cache, REPO, "config.json", CONFIG)
    put(cache, REPO, "tokenizer.json", FILES["tokenizer.json"])
    progress = []
    hub.download_checkpoint(REPO, on_progress=lambda d, t: progress.append((d, t)))
    assert sorted(fake_hub.downloads) == sorted(set(FILES) - {"config.json", "tokenizer.json"})
    rest = sum(len(c) for n, c in FILES.items() if n not in ("config.json", "tokenizer.json"))
    assert progress[-1] == (rest, rest)


def test_the_licence_notice_counts_as_shown_only_after_a_download_succeeded(fake_hub, tmp_path):
    notices = []
    fake_hub.fail_at = "model.safetensors"
    with pytest.raises(ModelUnavailable) as e:
        hub.resolve_checkpoint(REPO, on_notice=notices.append)  # the path Engine.load takes
    assert str(e.value) == (
        f"{REPO}: the download stopped (ConnectionResetError: connection reset by peer); "
        "run it again to resume where it stopped"
    )
    assert notices[0] == hub.LICENCE_NOTICE and not marker(tmp_path).exists()
    fake_hub.fail_at = None
    notices.clear()
    root = hub.resolve_checkpoint(REPO, on_notice=notices.append)
    assert notices[0] == hub.LICENCE_NOTICE and marker(tmp_path).exists()  # shown again, now counted
    assert hub.missing_files(root) == []


def test_the_notice_is_not_shown_again_once_counted(fake_hub, cache, tmp_path):
    marker(tmp_path).parent.mkdir(parents=True)
    marker(tmp_path).touch()
    notices = []
    hub.download_checkpoint(REPO, on_notice=notices.append)
    assert len(notices) == 1 and notices[0].startswith("downloading")


def test_offline_with_nothing_cached_is_one_clear_line(fake_hub, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    notices = []
    with pytest.raises(ModelUnavailable) as e:
        hub.download_checkpoint(REPO, on_notice=notices.append)
    assert str(e.value) == (
        f"{REPO} (about 3.2 GB) is not in the Hugging Face cache and cannot be downloaded (offline: "
        "HF_HUB_OFFLINE is set). Connect once to fetch it, or give the model as the path of a local checkpoint folder."
    )
    assert e.value.problem == str(e.value).split(". Connect once")[0]  # what the CLI words its own advice after
    assert notices == [] and not marker(tmp_path).exists() and fake_hub.downloads == []


def test_offline_with_part_of_it_cached_names_what_is_missing(fake_hub, cache, monkeypatch):
    put(cache, REPO, "config.json", CONFIG)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable, match=r"only partly in the Hugging Face cache \(missing model\.safetensors, "):
        hub.download_checkpoint(REPO)


def test_an_unreachable_hub_and_an_unknown_repo_are_told_apart(fake_hub):
    from huggingface_hub.errors import DryRunError

    try:
        raise DryRunError("cannot be accessed") from ConnectionError("no route to host")
    except DryRunError as e:
        fake_hub.dry_run_error = e
    with pytest.raises(ModelUnavailable, match=r"cannot be downloaded \(ConnectionError\)\. Connect once"):
        hub.download_checkpoint(REPO)

    class Unauthorized(Exception):
        response = SimpleNamespace(status_code=401)

    try:
        raise DryRunError("cannot be accessed") from Unauthorized()
    except DryRunError as e:
        fake_hub.dry_run_error = e
    with pytest.raises(ModelUnavailable, match="owner/gone: no such model on the Hugging Face hub, or it is private"):
        hub.download_checkpoint("owner/gone")


@pytest.mark.parametrize("bad", ["OmniVoice", "a/b/c", "./k2-fsa/OmniVoice", "/abs/path"])
def test_a_malformed_repo_id_is_refused(bad):
    with pytest.raises(InvalidRequest, match="not a hub id of the form owner/name"):
        hub.download_checkpoint(bad)


# --------------------------------------------------------------------------- cached_models


def test_cached_models_lists_omnivoice_checkpoints_only(cache):
    for name, content in FILES.items():
        full = put(cache, REPO, name, content)
    partial = put(cache, "me/half", "config.json", CONFIG)
    put(cache, "me/bert", "config.json", json.dumps({"model_type": "bert"}).encode())
    put(cache, "me/data", "config.json", CONFIG, repo_type="datasets")
    models = hub.cached_models()
    assert [(m.repo_id, m.path, m.complete) for m in models] == [(REPO, full, True), ("me/half", partial, False)]
    assert models[0].size_bytes == sum(len(c) for c in FILES.values())
    assert models[1].size_bytes == len(CONFIG)


def test_cached_models_takes_the_newest_snapshot(cache):
    old = None
    for name, content in FILES.items():
        old = put(cache, REPO, name, content, commit="b" * 40)
    new = put(cache, REPO, "config.json", CONFIG + b" ", commit="c" * 40)
    for blob in old.parent.parent.glob("blobs/*"):
        os.utime(blob, (1e9, 1e9))
    os.utime(new.parent.parent / "blobs" / hashlib.sha256(CONFIG + b" ").hexdigest(), (2e9, 2e9))
    [m] = hub.cached_models()
    assert m.path == new and m.complete is False
    assert m.size_bytes == sum(len(c) for c in FILES.values()) + len(CONFIG) + 1


def test_cached_models_without_a_cache_is_empty(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "none"))
    assert hub.cached_models() == []


def test_the_cache_follows_hf_home_when_hf_hub_cache_is_unset(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hub.hub_cache_dir() == tmp_path / "hf" / "hub"
    put(tmp_path / "hf" / "hub", "me/half", "config.json", CONFIG)
    assert [m.repo_id for m in hub.cached_models()] == ["me/half"]


@pytest.mark.slow
def test_hub_imports_no_torch(tmp_path):
    code = (
        "import sys\n"
        "from omnivoice_cli.engine.checkpoint import hub\n"
        "hub.user_home(); hub.cached_models()\n"
        "print('torch' in sys.modules)\n"
    )
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_download_against_a_local_stand_in_for_the_hub():
    """The real huggingface_hub, talking HTTP to tests/local_hub.py on localhost."""
    script = Path(__file__).parent / "local_hub.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True)
    r = json.loads(out.stdout)
    total = 256 * 5000 + sum(len(c) for c in (b"{}", b'{"codec": 1}', b"# card")) + len(CONFIG)
    assert r["notices"] == [hub.LICENCE_NOTICE, f"downloading {REPO} (6 files, 1.3 MB) into the Hugging Face cache ..."]
    assert r["progress"][-1] == [total, total] and r["files_equal"] and r["marker"]
    assert r["cached_offline"] and r["cached_online"] and r["requests_when_cached"] == 0
    assert r["models"] == [[REPO, total, True]]
    assert r["gone"].startswith("owner/gone: no such model on the Hugging Face hub")
    assert r["down"].startswith(
        f"{REPO} (about 3.2 GB) is not in the Hugging Face cache and cannot be downloaded (ConnectError)."
    )
