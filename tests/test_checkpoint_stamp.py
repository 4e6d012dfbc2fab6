"""A checkpoint's stamp (engine/checkpoint/stamp.py): the weight cache, the designed voices and the
phrase cache key a checkpoint by the one stamp, so they agree on it and all miss when its weights
change; the stamp reads its files bounded, opens no link and no FIFO."""

from __future__ import annotations

import json
import os
import struct

import pytest

from omnivoice_cli.app.phrases.phrasekey import checkpoint_identity
from omnivoice_cli.app.voices.designcache import checkpoint_key
from omnivoice_cli.engine.checkpoint.stamp import checkpoint_stamp
from omnivoice_cli.engine.fast import weightcache

WEIGHTS = "model.safetensors"


def _keys(folder) -> tuple[str | None, str | None, str | None]:
    """The three caches' keys of the checkpoint in `folder`: designed voices, phrases, weights."""
    weights = weightcache.key_of(folder)
    return checkpoint_key(folder), checkpoint_identity(str(folder)), None if weights is None else weights["stamp"]


def _header(path) -> tuple[int, dict]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return n, json.loads(raw[8 : 8 + n])


def test_the_three_caches_agree_on_a_checkpoint_and_all_change_with_its_weights(ckpt_copy):
    stamp = checkpoint_stamp(ckpt_copy)
    assert stamp is not None
    before = _keys(ckpt_copy)
    assert before == (stamp.digest,) * 3
    assert weightcache.key_of(ckpt_copy)["checkpoint"] == str((ckpt_copy / WEIGHTS).resolve())
    # new weights in place: the same size and header, written now (the copy kept the fixture's time)
    path = ckpt_copy / WEIGHTS
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01
    path.write_bytes(bytes(raw))
    after = _keys(ckpt_copy)
    assert len(set(after)) == 1 and after[0] is not None and after[0] != before[0]


def test_a_new_header_of_the_same_size_and_time_is_another_checkpoint(ckpt_copy):
    path = ckpt_copy / WEIGHTS
    st = path.stat()
    before = _keys(ckpt_copy)
    _, header = _header(path)
    name = next(k for k in header if k != "__metadata__")
    renamed = name[:-1] + ("x" if name[-1] != "x" else "y")  # a tensor renamed, the header's length kept
    raw = path.read_bytes()
    assert raw.count(f'"{name}"'.encode()) == 1
    path.write_bytes(raw.replace(f'"{name}"'.encode(), f'"{renamed}"'.encode()))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    after = _keys(ckpt_copy)
    assert len(set(after)) == 1 and after[0] is not None and after[0] != before[0]


def test_a_linked_file_is_stamped_as_the_file_it_names(ckpt_copy, tmp_path):
    """A hub snapshot's files are links to its blobs: the stamp names the blob, and is the same."""
    before = checkpoint_stamp(ckpt_copy)
    blob = tmp_path / "blobs" / "0123abcd"
    blob.parent.mkdir()
    (ckpt_copy / WEIGHTS).rename(blob)
    (ckpt_copy / WEIGHTS).symlink_to(blob)
    after = checkpoint_stamp(ckpt_copy)
    assert after is not None and after.file(WEIGHTS).path == str(blob.resolve())
    assert after.file(WEIGHTS).header_sha256 == before.file(WEIGHTS).header_sha256
    assert after.file(WEIGHTS).size == before.file(WEIGHTS).size


@pytest.mark.parametrize("bad", ["missing", "fifo", "folder", "header too long", "short"])
def test_a_checkpoint_with_a_file_that_is_not_one_has_no_stamp(ckpt_copy, bad):
    """No stamp (so no cache keys it): a FIFO is not opened for long (the open does not block: a
    blocking one would wait here for a writer that never comes)."""
    path = ckpt_copy / "audio_tokenizer" / WEIGHTS
    path.unlink()
    if bad == "fifo":
        os.mkfifo(path)
    elif bad == "folder":
        path.mkdir()
    elif bad == "header too long":  # a length field naming more than the file holds
        path.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    elif bad == "short":
        path.write_bytes(b"\x01\x02")
    assert checkpoint_stamp(ckpt_copy) is None
    assert _keys(ckpt_copy) == (None, None, None)


def test_a_weight_cache_file_of_the_former_key_is_still_the_caches_own(tmp_path):
    """FORMAT 1 files (keyed by the body file's size, time and header) miss once, and are listed,
    evicted and cleared like any other of the cache's files, never left behind."""
    import numpy as np
    from safetensors.numpy import save_file

    folder = tmp_path / "weights"
    folder.mkdir()
    old = folder / f"int8-{'d' * 32}.safetensors"
    meta = {"format": "1", "checkpoint": "/ckpt/model.safetensors", "size": "5", "mtime_ns": "7"}
    meta |= {"header_sha256": "0" * 64, "cpu": "x86-avx512", "torch": "2.0", "crc32": "0" * 8}
    save_file({"0.qkv.codes": np.zeros((2, 2), dtype=np.int8)}, str(old), metadata=meta)
    [entry] = weightcache.entries(folder)
    assert entry.path == old and entry.checkpoint == "/ckpt/model.safetensors"
    assert weightcache.clear(folder) == (1, entry.size)
    assert not old.exists()
