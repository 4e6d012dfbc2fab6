"""`say --cache` on the tiny checkpoint: the same request twice, the second written from the phrase
cache with no model loaded, byte-identical to the first and to a render with the cache off; a
damaged entry rendered again; the refusals; `omnivoice cache list` / `clear` show and clear it."""

import json

import pytest
from conftest import TINY_CKPT

from omnivoice_cli.media.phrasestore import PhraseStore

pytestmark = pytest.mark.slow  # the tiny model, end to end

SAY = ("say", "One moment, please.", "--model", TINY_CKPT, "--num-step", "4", "--json", "-q")


@pytest.fixture
def phrases(tmp_path, monkeypatch):
    folder = tmp_path / "phrases"
    monkeypatch.setenv("OMNIVOICE_PHRASE_CACHE", str(folder))
    return folder


def say_cached(invoke, out, *extra):
    r = invoke(*SAY, "-o", out, *extra)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_the_same_request_twice_is_a_hit_equal_to_the_miss_and_to_a_render_without_the_cache(
    invoke, loaded, phrases, tmp_path
):
    first = say_cached(invoke, tmp_path / "a.wav", "--cache")
    assert first["cache"] == "miss" and first["settings"]["seed"] == first["seed"] and loaded.loads == 1
    second = say_cached(invoke, tmp_path / "b.wav", "--cache")
    assert second["cache"] == "hit" and loaded.loads == 1  # no model loaded for a hit
    assert second["seed"] == first["seed"]  # no --seed: derived from the text and voice, the same
    assert second["audio_seconds"] == first["audio_seconds"]
    assert (tmp_path / "b.wav").read_bytes() == (tmp_path / "a.wav").read_bytes()
    plain = say_cached(invoke, tmp_path / "c.wav", "--seed", first["seed"])  # the cache off
    assert "cache" not in plain
    assert (tmp_path / "c.wav").read_bytes() == (tmp_path / "a.wav").read_bytes()
    other = say_cached(invoke, tmp_path / "d.wav", "--cache", "--instruct", "male")  # another voice: another seed
    assert other["cache"] == "miss" and other["seed"] != first["seed"]


def test_a_flipped_byte_in_an_entry_is_found_and_the_file_rendered_again(invoke, loaded, phrases, tmp_path):
    say_cached(invoke, tmp_path / "a.wav", "--cache")
    [entry] = PhraseStore(phrases, 1 << 30).entries()
    raw = bytearray(entry.path.read_bytes())
    raw[-50] ^= 0x10
    entry.path.write_bytes(bytes(raw))
    again = say_cached(invoke, tmp_path / "b.wav", "--cache")
    assert again["cache"] == "miss" and loaded.loads == 2
    assert (tmp_path / "b.wav").read_bytes() == (tmp_path / "a.wav").read_bytes()
    assert say_cached(invoke, tmp_path / "c.wav", "--cache")["cache"] == "hit"


@pytest.mark.parametrize(
    "extra, words",
    [
        (("-o", "-"), "give -o FILE"),
        (("--play",), "leave out --play"),
        (("-o", "x.wav", "--stream"), "leave out --stream"),
        (("-o", "x.wav", "--subtitles", "x.srt"), "leave out --subtitles"),
    ],
)
def test_cache_keeps_only_a_plain_render_to_a_file(invoke, loaded, phrases, tmp_path, monkeypatch, extra, words):
    monkeypatch.chdir(tmp_path)
    r = invoke("say", "Hello.", "--model", TINY_CKPT, "--cache", *extra)
    assert r.exit_code == 2 and words in r.stderr and "--cache" in r.stderr
    assert loaded.loads == 0 and not phrases.exists()


def test_cache_list_and_clear_show_and_clear_the_phrase_cache(invoke, loaded, phrases, tmp_path, monkeypatch):
    monkeypatch.setenv("OMNIVOICE_WEIGHT_CACHE", str(tmp_path / "weights"))
    say_cached(invoke, tmp_path / "a.wav", "--cache")
    (phrases / "notes.txt").write_text("not the cache's")
    listed = invoke("cache", "list")
    assert listed.exit_code == 0 and f"phrase cache: {phrases} (1 entry," in listed.stderr
    cleared = invoke("cache", "clear")
    assert cleared.exit_code == 0 and "phrase cache" in cleared.stderr and "deleted 1 file" in cleared.stderr
    assert [p.name for p in phrases.iterdir()] == ["notes.txt"]
    assert say_cached(invoke, tmp_path / "b.wav", "--cache")["cache"] == "miss"


def test_a_designed_voices_first_render_is_kept_under_its_rendered_prompt(invoke, loaded, phrases, home, tmp_path):
    """`--voice alloy`: the first request renders the design (kept per checkpoint) and its file is
    keyed by the rendered prompt, so the second request, which clones that prompt, is a hit."""
    first = say_cached(invoke, tmp_path / "a.wav", "--cache", "--voice", "alloy")
    assert first["cache"] == "miss" and first["voice_prompt"]
    assert len(PhraseStore(phrases, 1 << 30).entries()) == 1  # kept, though unkeyed before the render
    second = say_cached(invoke, tmp_path / "b.wav", "--cache", "--voice", "alloy")
    assert second["cache"] == "hit" and loaded.loads == 1
    assert (tmp_path / "b.wav").read_bytes() == (tmp_path / "a.wav").read_bytes()
