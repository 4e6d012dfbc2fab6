"""`omnivoice download` and `omnivoice models` on a hub cache built by hand (no network)."""

from __future__ import annotations

import huggingface_hub.constants
from test_hub import FILES, REPO, cache, fake_hub, put  # noqa: F401 - fixtures


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
