"""The phrase cache's store (media/phrasestore.py): entries verified when read, damaged ones
dropped, links and others' files never followed, replaced or deleted, LRU bound, and two writer
processes filling one folder at once losing nothing."""

import hashlib
import json
import multiprocessing
import os

import pytest

from omnivoice_cli.app.phrases.phrasecache import parse_size
from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.media.phrasestore import MAGIC, PhraseStore


def key(n) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


@pytest.fixture
def store(tmp_path):
    return PhraseStore(tmp_path / "phrases", 1 << 20)


def test_an_entry_reads_back_with_its_metadata(store):
    assert store.get(key(1)) is None
    assert store.put(key(1), b"RIFF audio", {"samples": 5})
    found = store.get(key(1))
    assert found is not None and found.data == b"RIFF audio" and found.meta == {"samples": 5}
    assert [e.path.name for e in store.entries()] == [f"{key(1)}.phrase"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "other_key"])
def test_a_damaged_entry_is_dropped_and_said_once(tmp_path, damage):
    heard = []
    store = PhraseStore(tmp_path, 1 << 20, heard.append)
    store.put(key(1), bytes(range(256)) * 4)
    path = store.path_of(key(1))
    raw = bytearray(path.read_bytes())
    if damage == "flip":
        raw[-10] ^= 0x40
    elif damage == "truncate":
        raw = raw[:-1]
    else:  # a whole entry of another key, renamed to this one's name
        store.put(key(2), bytes(range(256)) * 4)
        raw = bytearray(store.path_of(key(2)).read_bytes())
    path.write_bytes(bytes(raw))
    assert store.get(key(1)) is None
    assert not path.exists() and len(heard) == 1 and "damaged" in heard[0]


def test_a_link_or_a_foreign_file_at_an_entrys_name_is_never_used_replaced_or_deleted(tmp_path):
    folder = tmp_path / "phrases"
    store = PhraseStore(folder, 1 << 20)
    store.put(key(0), b"ours")
    target = tmp_path / "precious.wav"
    target.write_bytes(MAGIC + b"not an entry")
    os.symlink(target, store.path_of(key(1)))
    store.path_of(key(2)).write_bytes(b"someone else's file")
    (folder / "notes.txt").write_text("keep me")
    assert store.get(key(1)) is None and store.get(key(2)) is None
    assert not store.put(key(1), b"new") and not store.put(key(2), b"new")
    assert store.clear() == (1, store_size_of(key(0), b"ours"))
    assert os.path.islink(store.path_of(key(1))) and target.read_bytes() == MAGIC + b"not an entry"
    assert store.path_of(key(2)).read_bytes() == b"someone else's file"
    assert (folder / "notes.txt").read_text() == "keep me"


def store_size_of(k, data) -> int:
    """An entry's bytes on disk: the magic, the header's length and the header, the data."""
    header = json.dumps(
        {"key": k, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "meta": {}},
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    return len(MAGIC) + 8 + len(header) + len(data)


def test_the_least_recently_used_entries_go_past_the_bound(tmp_path):
    store = PhraseStore(tmp_path, 3500)  # three entries of 900 bytes and their headers, not four
    for n in range(3):
        store.put(key(n), bytes(900))
        os.utime(store.path_of(key(n)), (1000 + n, 1000 + n))  # an order that does not hang on the clock
    assert store.get(key(0)) is not None  # used now: the most recent
    store.put(key(3), bytes(900))
    names = {e.path.name for e in store.entries()}
    assert f"{key(1)}.phrase" not in names  # the least recently used went
    assert {f"{key(n)}.phrase" for n in (0, 2, 3)} <= names


def test_an_entry_over_the_bound_is_not_kept(tmp_path):
    assert not PhraseStore(tmp_path, 100).put(key(1), bytes(200))


def _writer(folder, first, count, shared, start):
    store = PhraseStore(folder, 1 << 30)
    start.wait()
    for n in range(first, first + count):
        store.put(key(n), str(n).encode() * 100, {"n": n})
        store.put(key(f"shared{n % shared}"), b"the same bytes" * 50)  # the same keys from both


def test_two_writer_processes_filling_one_cache_at_once_lose_nothing(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    writers = [ctx.Process(target=_writer, args=(tmp_path, i * 1000, 60, 7, start)) for i in range(2)]
    for w in writers:
        w.start()
    start.set()  # both begin together
    for w in writers:
        w.join()
    assert [w.exitcode for w in writers] == [0, 0]
    store = PhraseStore(tmp_path, 1 << 30)
    for n in [*range(60), *range(1000, 1060)]:
        found = store.get(key(n))
        assert found is not None and found.data == str(n).encode() * 100 and found.meta == {"n": n}
    for n in range(7):
        assert store.get(key(f"shared{n}")).data == b"the same bytes" * 50
    assert len(store.entries()) == 127
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary file left


@pytest.mark.parametrize("text, mb", [("256", 256), ("64MB", 64), ("2gb", 2048), (" 1 m ", 1)])
def test_a_size_in_mb(text, mb):
    assert parse_size(text) == mb << 20


@pytest.mark.parametrize("text", ["0", "-5", "big", "1.5GB", "2TB", "9999999999"])
def test_a_bad_size_is_one_line_naming_it(text):
    with pytest.raises(InvalidRequest, match=r"--phrase-cache must be a size in MB .*got"):
        parse_size(text)


def test_clear_leaves_a_writers_temporary_file_only_when_it_is_not_ours(tmp_path):
    store = PhraseStore(tmp_path, 1 << 20)
    store.put(key(1), b"x")
    leftover = tmp_path / f".{key(2)}.phrase.abcd1234.part"
    leftover.write_bytes(b"half")
    stranger = tmp_path / ".something.part"
    stranger.write_bytes(b"theirs")
    files, _ = store.clear()
    assert files == 2 and not leftover.exists() and stranger.exists()


def test_serve_refuses_a_bad_phrase_cache_size_before_loading(invoke):
    pytest.importorskip("uvicorn")  # serve's extra is checked first
    r = invoke("serve", "--phrase-cache", "lots")
    assert r.exit_code == 2 and "--phrase-cache must be a size in MB" in r.stderr and "'lots'" in r.stderr


def test_a_failed_write_in_a_folder_of_odd_characters_is_said_on_one_line(tmp_path):
    (tmp_path / "file").write_text("a file where the folder's parent should be")
    said = []
    store = PhraseStore(tmp_path / "file" / "odd\n\x1b[31m é ;$(x)", 1 << 20, notice=said.append)
    assert store.put(hashlib.sha256(b"k").hexdigest(), b"abc") is False
    (line,) = said
    assert line.isprintable() and "\\n" in line and "\\x1b" in line and "é" in line
