"""A Hugging Face hub cache laid out on disk (`put`) and the checkpoint it serves (FILES): the
`cache` and `fake_hub` fixtures of conftest.py, test_hub.py, test_models_cli.py."""

from __future__ import annotations

import hashlib
import json
import os

REPO = "k2-fsa/OmniVoice"


COMMIT = "a" * 40


CONFIG = json.dumps({"model_type": "omnivoice"}).encode()


FILES = {  # a checkpoint's files, small
    "config.json": CONFIG,
    "model.safetensors": b"m" * 3000,
    "tokenizer.json": b"{}",
    "audio_tokenizer/config.json": b'{"codec": 1}',  # contents differ: blobs are not shared
    "audio_tokenizer/model.safetensors": b"c" * 1000,
    "README.md": b"# card",
}


def put(cache, repo_id, filename, content, commit=COMMIT, repo_type="models", main=True):
    """One file in the hub cache layout: blobs/<sha>, snapshots/<commit>/<file> -> blob, refs/main."""
    repo = cache / f"{repo_type}--{repo_id.replace('/', '--')}"
    blob = repo / "blobs" / hashlib.sha256(content).hexdigest()
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(content)
    link = repo / "snapshots" / commit / filename
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(os.path.relpath(blob, link.parent))
    if main:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(commit)
    return repo / "snapshots" / commit
