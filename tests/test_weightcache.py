"""The weight cache (engine/fast/weightcache.py): a second int8 load reads the codes instead of making
them and gives the same body; a damaged file is rebuilt; another torch or CPU class misses; the
folder is bounded; `omnivoice cache list` / `clear`."""

from __future__ import annotations

import json
import os
import struct
import zlib

import pytest
import torch
from conftest import TINY_CKPT

from omnivoice_cli.engine.checkpoint.tensorfile import SafetensorsFile
from omnivoice_cli.engine.fast import cpu, int8pack, weightcache
from omnivoice_cli.engine.hardware import Hardware
from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.model.generation import pack
from omnivoice_cli.engine.pipeline import Engine
from omnivoice_cli.engine.planning import Request

pytestmark = pytest.mark.slow  # each test loads the tiny body two or three times


@pytest.fixture
def folder(tmp_path, monkeypatch):
    where = tmp_path / "weights"
    monkeypatch.setenv(weightcache.ENV, str(where))
    return where


def _load(notes=None):
    return Engine.load(
        str(TINY_CKPT), Hardware(device="cpu", quantize="int8"), on_notice=[].append if notes is None else notes.append
    )


def _logits(engine) -> torch.Tensor:
    job = engine.prepare(Request(text="Hello there, how are you?", lang="en"))
    batch, [(c, _)] = pack([job], "cpu")
    with torch.inference_mode():
        return engine.model.heads(engine.model(batch)[c : c + job.canvas.target_len])


def _tokens(engine) -> torch.Tensor:
    return engine.generate(
        [Request(text="Good morning to you.", lang="en", seed=5, generation=GenerationConfig(num_step=4))]
    )[0].tokens


@pytest.fixture(scope="module")
def fresh():
    """The body converted without a cache (conftest turns it off): its logits and tokens."""
    engine = _load()
    return _logits(engine), _tokens(engine)


def _no_coding(monkeypatch):
    """Coding a weight now fails the test: what is loaded must come from the cache."""

    def refuse(*args, **kwargs):
        raise AssertionError("coded a weight: the cache was not read")

    monkeypatch.setattr(int8pack, "int8_codes", refuse)


def _files(folder):
    return sorted(folder.glob("*.safetensors"))


def test_a_second_load_reads_the_cache_and_is_the_same_body(folder, fresh, monkeypatch):
    first = _load()
    [file] = _files(folder)
    assert torch.equal(_logits(first), fresh[0])
    _no_coding(monkeypatch)
    notes: list[str] = []
    second = _load(notes)
    assert notes == []
    assert torch.equal(_logits(second), fresh[0]) and torch.equal(_tokens(second), fresh[1])
    assert _files(folder) == [file]


@pytest.mark.parametrize("damage", ["truncate", "flip", "scale", "header"])
def test_a_damaged_file_is_rebuilt_and_the_body_is_the_same(folder, fresh, damage):
    _load()
    [file] = _files(folder)
    good = file.read_bytes()
    raw = bytearray(good)
    if damage == "truncate":
        raw = raw[: len(raw) - 100]
    elif damage == "flip":
        raw[-5] ^= 0x40  # a row sum of the last layer (the file ends with its down_proj.sums)
    elif damage == "scale":  # a scale made negative, its CRC made to match: still refused
        raw = bytearray(_with_bad_scale(file, good))
    else:
        raw[8:20] = b"not a header"
    file.write_bytes(bytes(raw))
    notes: list[str] = []
    engine = _load(notes)
    assert len(notes) == 1 and "weight cache" in notes[0] and "rebuilding" in notes[0], notes
    assert torch.equal(_logits(engine), fresh[0]) and torch.equal(_tokens(engine), fresh[1])
    assert file.read_bytes() == good  # rebuilt, byte for byte


def _with_bad_scale(file, good: bytes) -> bytes:
    f = SafetensorsFile(file)
    _, _, begin, _ = f.entries["0.qkv.scales"]
    raw = bytearray(good)
    raw[f.data_start + begin : f.data_start + begin + 4] = struct.pack("<f", -1.0)
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header["__metadata__"]["crc32"] = f"{zlib.crc32(bytes(raw[f.data_start :])):08x}"
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", n) + text + b" " * (n - len(text)) + bytes(raw[f.data_start :])


def test_another_torch_or_cpu_class_misses(folder, fresh, monkeypatch):
    _load()
    assert len(_files(folder)) == 1
    monkeypatch.setattr(torch, "__version__", "0.0.1-other")
    engine = _load()
    assert len(_files(folder)) == 2  # a file of its own
    monkeypatch.setattr(cpu, "cpu_class", lambda: "some-other-class")
    _load()
    keys = {(e.cpu, e.torch) for e in weightcache.entries(folder)}
    assert len(_files(folder)) == 3 and ("some-other-class", "0.0.1-other") in keys
    assert torch.equal(_logits(engine), fresh[0])


def test_the_folder_is_bounded_least_recently_used_first(folder, monkeypatch):
    _load()
    [file] = _files(folder)
    size = file.stat().st_size
    old = [folder / f"int8-{i:032x}.safetensors" for i in range(3)]  # the cache's names, and its header
    for i, path in enumerate(old):
        path.write_bytes(file.read_bytes())
        os.utime(path, (1000 + i, 1000 + i))
    weightcache.evict(folder, cap=3 * size, keep=file)
    assert _files(folder) == sorted([file, *old[1:]])  # the oldest went


def test_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(weightcache.ENV, "off")
    monkeypatch.setenv("OMNIVOICE_HOME", str(tmp_path))
    _load()
    assert weightcache.cache_dir() is None and list(tmp_path.rglob("*.safetensors")) == []


def test_the_commands_list_and_clear_it(folder, invoke):
    _load()
    listed = invoke("cache", "list")
    assert listed.exit_code == 0 and str(TINY_CKPT / "model.safetensors") in listed.stdout
    assert "1 file" in listed.stderr and str(folder) in listed.stderr
    cleared = invoke("cache", "clear")
    assert cleared.exit_code == 0 and "deleted 1 file" in cleared.stderr
    assert _files(folder) == [] and weightcache.entries(folder) == []
    again = invoke("cache", "list")
    assert again.exit_code == 0 and again.stdout == "" and "0 files" in again.stderr


# -- the cache's folder under hostile input: only its own entries, only regular files ----------


def _not_the_caches(folder):
    """Files in the cache's folder that are not its own: a checkpoint, a saved voice, a file named as
    an entry whose header is not one. -> another folder beside it (for what links point to)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file({"w": torch.zeros(4)}, str(folder / "model.safetensors"))
    save_file({"codes": torch.zeros(2)}, str(folder / "my-voice.safetensors"), metadata={"name": "me"})
    save_file({"w": torch.zeros(2)}, str(folder / f"int8-{'a' * 32}.safetensors"), metadata={"mine": "yes"})
    elsewhere = folder.parent / "elsewhere"
    elsewhere.mkdir()
    return elsewhere


def test_clear_and_list_touch_only_the_caches_own_entries(folder, invoke):
    _load()
    [entry] = _files(folder)
    elsewhere = _not_the_caches(folder)
    target = elsewhere / "real-entry.safetensors"
    whole = entry.read_bytes()
    target.write_bytes(whole)  # a whole cache file, but reached by links
    links = sorted([f"int8-{'b' * 32}.safetensors", f".int8-{'c' * 32}.safetensors.1.tmp"])
    for name in links:
        (folder / name).symlink_to(target)
    others = {p.name: p.read_bytes() for p in folder.iterdir() if p != entry and not p.is_symlink()}
    listed = invoke("cache", "list")
    assert listed.exit_code == 0 and "1 file," in listed.stderr, listed.stderr
    assert len(listed.stdout.splitlines()) == 1
    cleared = invoke("cache", "clear")
    assert cleared.exit_code == 0 and "deleted 1 file " in cleared.stderr, cleared.stderr
    assert not entry.exists() and target.read_bytes() == whole
    assert {p.name: p.read_bytes() for p in folder.iterdir() if not p.is_symlink()} == others
    assert sorted(p.name for p in folder.iterdir() if p.is_symlink()) == links


def test_eviction_spares_files_that_are_not_the_caches(folder):
    _load()
    [entry] = _files(folder)
    _not_the_caches(folder)
    for p in folder.iterdir():
        if p != entry and p.is_file():
            os.utime(p, (1000, 1000))  # older than the entry: the first to go, were they the cache's
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p != entry}
    weightcache.evict(folder, cap=1, keep=entry)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p != entry} == before
    assert [e.path for e in weightcache.entries(folder)] == [entry]


def test_a_fifo_in_place_of_an_entry_is_never_opened(folder, fresh, invoke):
    """A FIFO where the entry would be: the load goes on without the cache (one notice) and `cache
    list` skips it, neither opening it. A thread blocked opening its other end tells whether anyone
    did (and lets such a reader through at once, so that the unfixed code fails rather than hangs)."""
    import threading

    _load()
    [entry] = _files(folder)
    entry.unlink()
    os.mkfifo(entry)
    opened = threading.Event()

    def feed():
        os.close(os.open(entry, os.O_WRONLY))  # returns once a reader has opened the FIFO
        opened.set()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    notes: list[str] = []
    engine = _load(notes)
    listed = invoke("cache", "list")
    cleared = invoke("cache", "clear")
    reader_came = opened.is_set()
    if not reader_came and entry.exists():  # let the feeder go
        os.close(os.open(entry, os.O_RDONLY | os.O_NONBLOCK))
    feeder.join(60)
    assert not reader_came, "the FIFO was opened: a run would hang on it"
    assert len(notes) == 1 and entry.name in notes[0] and "not a regular file" in notes[0], notes
    assert torch.equal(_logits(engine), fresh[0])
    assert listed.exit_code == 0 and "0 files" in listed.stderr and listed.stdout == ""
    assert cleared.exit_code == 0 and "deleted 0 files" in cleared.stderr
    assert entry.exists() and not entry.is_file()  # not the cache's to delete


LIMITED_LOAD = """
import json, resource, sys
from omnivoice_cli.engine.hardware import Hardware
from omnivoice_cli.engine.pipeline import Engine
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
notes = []
Engine.load(sys.argv[1], Hardware(device="cpu", quantize="int8"), on_notice=notes.append)
print(json.dumps(notes))
"""


def test_a_failed_write_says_so_once_and_leaves_nothing(folder):
    """A write that fails (a file-size limit of 8 KiB, as a full disk does): one notice, the load
    goes on, and no temporary file is left in the folder."""
    import subprocess
    import sys

    env = {**os.environ, weightcache.ENV: str(folder)}
    done = subprocess.run(
        [sys.executable, "-c", LIMITED_LOAD, str(TINY_CKPT)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    notes = json.loads(done.stdout.splitlines()[-1])
    assert len(notes) == 1 and "weight cache: cannot write" in notes[0] and "loading without it" in notes[0], notes
    assert sorted(os.listdir(folder)) == []
