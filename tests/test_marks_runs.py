"""The AI mark through every way out (app/deliver.py): every format `say`, `batch`, `book`, `dub` and the
server write reads back its mark (libsndfile, mutagen), streamed output too, and a dialogue's file
(`say --cast`, SSML of several parts); `--no-mark` (the server's `mark = false`) leaves none."""

from __future__ import annotations

import pytest
from helpers.marks import NO_CONTAINER, mark_of

from omnivoice_cli.media.formats import AUDIO_FORMATS, served_formats, writable_formats
from omnivoice_cli.media.marks import SOURCE_TYPE
from tests.epub_util import make_epub

pytest.importorskip("mutagen", reason="the marks are read back by mutagen (the test extra)")

WRITABLE = [n for n in AUDIO_FORMATS if n in writable_formats()]
MARKED = [n for n in WRITABLE if n not in NO_CONTAINER]
STREAMED = [n for n in MARKED if AUDIO_FORMATS[n].streams]


def ext(name: str) -> str:
    return AUDIO_FORMATS[name].extension


def is_ours(fields: dict[str, str] | None, model: str = "k2-fsa/OmniVoice") -> bool:
    return (
        fields is not None
        and fields["generator"].startswith("omnivoice ")
        and fields["model"] == "OmniVoice"
        and fields["checkpoint"] == model
        and fields["digitalSourceType"] == SOURCE_TYPE
        and len(fields["date"]) == 10
    )


@pytest.mark.parametrize("name", MARKED)
def test_say_marks_every_format_and_no_mark_leaves_none(invoke, fake_engine, tmp_path, name):
    marked, plain = tmp_path / f"a{ext(name)}", tmp_path / f"b{ext(name)}"
    assert invoke("say", "Hi.", "-o", marked, "--seed", 1, "-q").exit_code == 0
    assert invoke("say", "Hi.", "-o", plain, "--seed", 1, "-q", "--no-mark").exit_code == 0
    assert is_ours(mark_of(marked.read_bytes(), name))
    assert mark_of(plain.read_bytes(), name) is None


@pytest.mark.slow
@pytest.mark.parametrize("name", STREAMED)
def test_say_streams_the_mark_at_the_start_of_stdout(invoke, loaded, name):
    args = ("say", "Hi.", "-o", "-", "--format", name, "--stream", "--seed", 1, "--num-step", 2, "-q")
    r = invoke(*args)
    assert r.exit_code == 0, r.stderr
    assert is_ours(mark_of(r.stdout_bytes, name))
    r = invoke(*args, "--no-mark")
    assert r.exit_code == 0 and mark_of(r.stdout_bytes, name) is None


def test_a_local_checkpoint_is_named_by_its_paths_hash(invoke, fake_engine, tmp_path):
    out = tmp_path / "x.flac"
    assert invoke("say", "Hi.", "-o", out, "--model", tmp_path, "-q").exit_code == 0
    fields = mark_of(out.read_bytes(), "flac")
    assert fields is not None and fields["checkpoint"].startswith("sha256:") and str(tmp_path) not in str(fields)


def test_a_preset_can_take_the_mark_off(invoke, fake_engine, tmp_path):
    preset = tmp_path / "p.toml"
    preset.write_text("mark = false\n")
    out = tmp_path / "x.wav"
    assert invoke("say", "Hi.", "-o", out, "--preset", preset, "-q").exit_code == 0
    assert mark_of(out.read_bytes(), "wav") is None


SSML_PARTS = '<speak>Hello there. <voice name="alloy">And hello to you.</voice></speak>'  # spoken as a dialogue


@pytest.mark.parametrize(
    "text, more",
    [("A: Hello there.\nB: And hello to you.", ("--cast", "A=auto", "--cast", "B=auto")), (SSML_PARTS, ())],
    ids=["cast", "ssml-parts"],
)
def test_a_dialogues_file_is_marked_and_no_mark_leaves_none(invoke, fake_engine, tmp_path, text, more):
    marked, plain = tmp_path / "a.wav", tmp_path / "b.wav"
    r = invoke("say", text, *more, "-o", marked, "--seed", 1, "-q")
    assert r.exit_code == 0, r.stderr
    assert invoke("say", text, *more, "-o", plain, "--seed", 1, "-q", "--no-mark").exit_code == 0
    assert is_ours(mark_of(marked.read_bytes(), "wav"))
    assert mark_of(plain.read_bytes(), "wav") is None


def test_batch_marks_every_lines_file(invoke, fake_engine, tmp_path):
    from helpers.cli import write_jsonl

    src = write_jsonl(tmp_path / "in.jsonl", [{"text": "Hi.", "output": f"{n}{ext(n)}"} for n in WRITABLE])
    for flag, out in (((), tmp_path / "on"), (("--no-mark",), tmp_path / "off")):
        r = invoke("batch", src, "-o", out, "-q", *flag)
        assert r.exit_code == 0, r.stderr
        for name in WRITABLE:
            fields = mark_of((out / f"{name}{ext(name)}").read_bytes(), name)
            assert is_ours(fields) if flag == () and name not in NO_CONTAINER else fields is None, (name, flag)


def test_book_marks_its_m4b_and_every_chapter_format(invoke, fake_engine, tmp_path, home):
    pytest.importorskip("av", reason="the book extra")
    pytest.importorskip("pyloudnorm", reason="the book extra")
    epub = make_epub(tmp_path / "book.epub")
    r = invoke("book", epub, "-o", tmp_path / "b.m4b", "-q")
    assert r.exit_code == 0, r.stderr
    assert is_ours(mark_of((tmp_path / "b.m4b").read_bytes(), "m4b"))
    for name in WRITABLE:
        folder = tmp_path / name
        r = invoke("book", epub, "-o", f"{folder}/", "--format", name, "-q")
        assert r.exit_code == 0, r.stderr
        files = sorted(folder.glob(f"*{ext(name)}"))
        assert files and all((mark_of(f.read_bytes(), name) is None) == (name in NO_CONTAINER) for f in files)
        assert all(is_ours(mark_of(f.read_bytes(), name)) for f in files if name not in NO_CONTAINER)
    r = invoke("book", epub, "-o", tmp_path / "b.m4b", "-q", "--no-mark")  # rewritten, without the mark
    assert r.exit_code == 0 and mark_of((tmp_path / "b.m4b").read_bytes(), "m4b") is None


def test_dub_marks_its_track_and_stems_in_every_format(invoke, fake_engine, tmp_path, home):
    src = tmp_path / "a.srt"
    src.write_text("1\n00:00:00,500 --> 00:00:01,500\nHi.\n")
    for name in MARKED:
        track = tmp_path / f"t{ext(name)}"
        r = invoke("dub", src, "-o", track, "--seed", 1, "-q")
        assert r.exit_code == 0, r.stderr
        assert is_ours(mark_of(track.read_bytes(), name)), name
    r = invoke("dub", src, "-o", tmp_path / "n.wav", "--seed", 1, "-q", "--no-mark")
    assert r.exit_code == 0 and mark_of((tmp_path / "n.wav").read_bytes(), "wav") is None


@pytest.mark.slow
def test_the_server_marks_every_served_format_whole_and_streamed(engine, module_home):
    pytest.importorskip("uvicorn", reason="the serve extra")
    import httpx
    from server_util import TINY_CKPT, running_server

    from omnivoice_cli.app.marking import model_label
    from omnivoice_cli.app.settings.layers import FLAG_SOURCE

    served = {k: f.name for k, f in served_formats().items() if f.name in writable_formats()}
    for mark in (True, False):
        with running_server(engine, layers=((FLAG_SOURCE, {"num_step": 2, "mark": mark}),)) as (url, _, _):
            with httpx.Client(base_url=url, timeout=120) as client:
                for response_format, name in served.items():
                    for stream in (False, True):
                        if stream and not AUDIO_FORMATS[name].streams:
                            continue
                        body = {"model": "omnivoice", "input": "Hi.", "response_format": response_format}
                        r = client.post("/v1/audio/speech", json={**body, "stream": stream, "seed": 1})
                        assert r.status_code == 200, r.text
                        fields = mark_of(r.content, name)
                        if mark and name not in NO_CONTAINER:
                            assert is_ours(fields, model_label(str(TINY_CKPT))), (name, stream)  # the model it runs
                        else:
                            assert fields is None, (name, stream)
