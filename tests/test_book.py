"""`omnivoice book`: an EPUB into an .m4b or a folder of chapters, resumable, on the batch run.

The runs speak with the tiny random-weight checkpoint (tests/fixtures/tiny/ckpt), loaded once for
the module, at 2 steps: the audio is noise-like, but the chapters, their files, the marks, tags,
cover, loudness and what a rerun keeps are all real. The dry run and the usage errors load no
model (FakeEngine records any load).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import ROOT, TINY_CKPT, files_in
from helpers.cli import errors_of
from helpers.memory import PEAK_RSS
from helpers.ray import ENV, MAIN, RUN, FakeRay

pytest.importorskip("ebooklib")
pytest.importorskip("av")

from omnivoice_cli.app.batch.manifest import MANIFEST, done_records, is_recorded  # noqa: E402
from omnivoice_cli.app.book.bookplan import (  # noqa: E402
    PART_CHARS,
    ChapterPlan,
    PartLine,
    book_output,
    chapter_stem,
    parse_chapters,
    split_parts,
)
from omnivoice_cli.app.book.booktrack import BookState, Tracker  # noqa: E402
from omnivoice_cli.engine.errors import InvalidRequest  # noqa: E402
from tests import epub_util  # noqa: E402
from tests.epub_util import make_epub, tiny_png  # noqa: E402

TITLES = [t for t, _ in epub_util.CHAPTERS]
FILES = ["01-The-Storm", "02-The-Lamp", "03-The-Morning"]
FAST = ["--model", str(TINY_CKPT), "--num-step", "2"]
slow = pytest.mark.slow


@pytest.fixture
def epub(tmp_path):
    return make_epub(tmp_path / "book.epub")


def book(invoke, *args):
    return invoke("book", *[str(a) for a in args])


def report(result) -> dict:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def stamps(folder: Path, names) -> dict[str, tuple[int, bytes]]:
    return {n: ((folder / n).stat().st_mtime_ns, (folder / n).read_bytes()) for n in names}


def recorded_parts(work: Path) -> list[str]:
    """The parts in `work` that its manifest records as written (what a resumed book keeps)."""
    records = done_records(work / MANIFEST)
    return sorted(p.name for p in work.glob("*.flac") if is_recorded(work, p.name, records.get(p.name.casefold())))


def loudness(path: Path) -> float:
    import pyloudnorm

    audio, sr = sf.read(str(path), dtype="float64")
    return pyloudnorm.Meter(sr).integrated_loudness(audio)


# ------------------------------------------------------------------------------------ check 1


@pytest.mark.slow
def test_the_summary_says_where_the_parts_are_kept_and_their_size(invoke, fake_engine, epub, tmp_path, home):
    out = tmp_path / "dir"
    r = book(invoke, epub, "-o", out, "--format", "wav")
    assert r.exit_code == 0, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"its parts are kept in {out / '.parts'} (") and " KB) for the next run" in last
    assert report(book(invoke, epub, "-o", out, "--format", "wav", "--json"))["parts_folder"] == str(out / ".parts")


def test_an_m4b_has_the_three_chapters_tags_and_cover(invoke, loaded, epub, tmp_path, home):
    from omnivoice_cli.media.m4b import read_m4b

    out = tmp_path / "x.m4b"
    r = book(invoke, epub, "-o", out, *FAST, "--json")
    data = report(r)
    assert (data["chapters"], data["parts"], data["done"], data["failed"]) == (3, 3, 3, 0)
    m4b = read_m4b(out)
    assert [c[0] for c in m4b["chapters"]] == TITLES
    starts, ends = [c[1] for c in m4b["chapters"]], [c[2] for c in m4b["chapters"]]
    assert starts[0] == 0 and starts[1:] == ends[:-1]  # they tile the file ...
    assert abs(ends[-1] - m4b["duration"]) < 0.05  # ... to its end
    assert all(e - s > 1 for s, e in zip(starts, ends))
    assert m4b["tags"]["title"] == epub_util.TITLE and m4b["tags"]["author"] == epub_util.AUTHOR
    assert m4b["tags"]["language"] == "eng" and m4b["cover"] == tiny_png()
    listed = json.loads((tmp_path / "x.chapters.json").read_text())
    assert [c["title"] for c in listed["chapters"]] == TITLES
    assert [c["start"] for c in listed["chapters"]] == pytest.approx(starts, abs=0.002)
    level = data["loudness"]["x.m4b"]  # the audio encoded (before AAC)
    assert level["lufs"] == pytest.approx(-18.0, abs=0.5) and level["dbtp"] <= -1.0 and level["warning"] is None
    assert not [p for p in tmp_path.rglob("*.part")]  # no temporary left


@pytest.mark.slow
def test_a_folder_gets_the_three_chapter_files_in_order_at_the_loudness(invoke, loaded, epub, tmp_path, home):
    out = tmp_path / "dir"
    r = book(invoke, epub, "-o", f"{out}/", *FAST, "--format", "flac", "-q")
    assert r.exit_code == 0, r.stderr
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert names == [f"{s}.flac" for s in FILES] + ["chapters.json"]
    listed = json.loads((out / "chapters.json").read_text())
    assert [c["file"] for c in listed["chapters"]] == [f"{s}.flac" for s in FILES]
    for c, stem in zip(listed["chapters"], FILES):
        info = sf.info(str(out / f"{stem}.flac"))
        assert info.samplerate == 24000 and info.channels == 1
        assert c["end"] - c["start"] == pytest.approx(info.frames / 24000, abs=0.002)
        assert loudness(out / f"{stem}.flac") == pytest.approx(-18.0, abs=0.5)  # each file its own gain
    assert [c["start"] for c in listed["chapters"][1:]] == [c["end"] for c in listed["chapters"][:-1]]


@slow
def test_titles_are_spoken_first_unless_no_titles(invoke, loaded, epub, tmp_path, home):
    out = tmp_path / "dir"
    assert book(invoke, epub, "-o", out, *FAST, "--subtitles", "vtt", "-q").exit_code == 0
    cues = (out / "02-The-Lamp.vtt").read_text()
    first = cues.split("\n\n")[1]
    assert "The Lamp" in first and "00:00:00" in first  # the title, then the chapter
    data = report(book(invoke, epub, "-o", out, *FAST, "--no-titles", "--json", "--subtitles", "vtt"))
    assert data["done"] == 3 and data["skipped"] == 0  # another text: every part spoken again
    assert "The Lamp" not in (out / "02-The-Lamp.vtt").read_text().split("\n\n")[1]


@slow
def test_m4b_subtitles_are_on_the_books_timeline(invoke, loaded, epub, tmp_path, home):
    from omnivoice_cli.media.cues import read_cues

    out = tmp_path / "x.m4b"
    assert book(invoke, epub, "-o", out, *FAST, "--subtitles", "srt", "-q").exit_code == 0
    chapters = json.loads((tmp_path / "x.chapters.json").read_text())["chapters"]
    for c, stem in zip(chapters, FILES):
        cues = read_cues(tmp_path / f"x.{stem}.srt")
        assert cues[0].text == c["title"]
        assert c["start"] * 1000 <= cues[0].start_ms and cues[-1].end_ms == round(c["end"] * 1000)


# ------------------------------------------------------------------------------------ check 2: resume


def stop_after_first_part(monkeypatch, engine):
    """Ctrl-C as the first part's file and record are written (the others not finished)."""
    orig = type(engine).generate

    def generate(self, requests, on_step=None, on_result=None, on_error=None, **kw):
        def then_stop(i, result):
            on_result(i, result)
            raise KeyboardInterrupt

        return orig(self, requests, on_step, then_stop, on_error, **kw)

    monkeypatch.setattr(type(engine), "generate", generate)
    return orig


@pytest.mark.slow
def test_a_stopped_book_resumes_keeping_the_finished_part(
    invoke, loaded, tiny_engine, epub, tmp_path, home, monkeypatch
):
    out = tmp_path / "x.m4b"
    work = tmp_path / "x.m4b.parts"
    orig = stop_after_first_part(monkeypatch, tiny_engine)
    r = book(invoke, epub, "-o", out, *FAST)
    assert r.exit_code == 130, r.stderr
    assert "stopped by Ctrl-C" in r.stderr and "run the same command again" in r.stderr
    assert not out.exists()  # no book from a part of it
    finished = sorted(p.name for p in work.glob("*.flac"))
    assert len(finished) == 1
    before = stamps(work, finished)
    monkeypatch.setattr(type(tiny_engine), "generate", orig)
    data = report(book(invoke, epub, "-o", out, *FAST, "--json"))
    assert (data["done"], data["skipped"]) == (2, 1)
    assert stamps(work, finished) == before  # byte for byte, not even rewritten
    from omnivoice_cli.media.m4b import read_m4b

    assert [c[0] for c in read_m4b(out)["chapters"]] == TITLES


@slow
def test_an_edited_chapter_is_the_only_one_spoken_again(invoke, loaded, tmp_path, home):
    epub = make_epub(tmp_path / "book.epub")
    out = tmp_path / "dir"
    assert book(invoke, epub, "-o", out, *FAST, "--format", "wav", "-q").exit_code == 0
    names = [f"{s}.wav" for s in FILES]
    before = stamps(out, names)
    parts_before = {p.name for p in (out / ".parts").glob("*.flac")}
    again = report(book(invoke, epub, "-o", out, *FAST, "--format", "wav", "--json"))
    assert (again["done"], again["skipped"], again["written"]) == (0, 3, [])
    assert stamps(out, names) == before  # an unchanged book: nothing written

    chapters = list(epub_util.CHAPTERS)
    chapters[1] = ("The Lamp", "<p>She climbed the stairs with a new lamp.</p>")
    make_epub(epub, chapters=chapters)
    data = report(book(invoke, epub, "-o", out, *FAST, "--format", "wav", "--json"))
    assert (data["done"], data["skipped"]) == (1, 2)
    assert data["written"] == [str(out / names[1])]
    after = stamps(out, names)
    assert after[names[0]] == before[names[0]] and after[names[2]] == before[names[2]]
    assert after[names[1]] != before[names[1]]
    parts_after = {p.name for p in (out / ".parts").glob("*.flac")}
    assert len(parts_after) == 3 and len(parts_after - parts_before) == 1  # the old part is gone


@slow
def test_a_changed_setting_speaks_again_and_loudness_only_reassembles(invoke, loaded, epub, tmp_path, home):
    out = tmp_path / "dir"
    assert book(invoke, epub, "-o", out, *FAST, "-q").exit_code == 0
    data = report(book(invoke, epub, "-o", out, *FAST, "--loudness", "-23", "--json"))
    assert (data["done"], data["skipped"], len(data["written"])) == (0, 3, 3)  # the parts kept, files redone
    assert loudness(out / f"{FILES[0]}.wav") == pytest.approx(-23.0, abs=0.5)
    data = report(book(invoke, epub, "-o", out, "--model", TINY_CKPT, "--num-step", "3", "--json"))
    assert (data["done"], data["skipped"]) == (3, 0)


@pytest.mark.slow
def test_chapters_picks_a_range(invoke, loaded, epub, tmp_path, home):
    from omnivoice_cli.media.m4b import read_m4b

    out = tmp_path / "x.m4b"
    assert book(invoke, epub, "-o", out, *FAST, "--chapters", "2-3", "-q").exit_code == 0
    assert [c[0] for c in read_m4b(out)["chapters"]] == TITLES[1:]


@pytest.mark.slow
def test_a_failed_part_fails_the_book_and_writes_none(invoke, loaded, tiny_engine, epub, tmp_path, home, monkeypatch):
    orig = type(tiny_engine).generate

    def generate(self, requests, on_step=None, on_result=None, on_error=None, **kw):
        def result_or_fail(i, result):
            if "Lamp" in requests[i].text:
                on_error(i, RuntimeError("out of luck"))
            else:
                on_result(i, result)

        return orig(self, requests, on_step, result_or_fail, on_error, **kw)

    monkeypatch.setattr(type(tiny_engine), "generate", generate)
    r = book(invoke, epub, "-o", tmp_path / "x.m4b", *FAST)
    assert r.exit_code == 1
    errors = errors_of(r)
    assert errors[0] == "Error: chapter 2 (part 1/1): generation failed: out of luck"
    assert "the book is not written: 3 parts: 2 spoken, 0 kept, 1 failed" in errors[-1]
    assert not (tmp_path / "x.m4b").exists()


@pytest.mark.slow
def test_verify_retakes_a_part_that_fails_twice_and_the_manifest_has_its_report(
    invoke, loaded, tmp_path, home, monkeypatch
):
    """--verify on a one-piece book (the recogniser: test_verify.py's Scripted stub at its seam,
    listen.RECOGNISER): heard wrong twice, then right, the part is taken three times (seed + 1000
    x attempt), the book completes, and the work folder's batch manifest keeps the verify report;
    a rerun keeps the part and asks the recogniser nothing."""
    from helpers.listening import TEXT, Scripted

    from omnivoice_cli.app.book.bookplan import part_seed
    from omnivoice_cli.app.listening import listen

    rec = Scripted(["garbled words", "hello hello hello", TEXT])
    monkeypatch.setattr(listen, "RECOGNISER", lambda spec, device, what: rec)
    src = tmp_path / "short.txt"
    src.write_text(TEXT + "\n", encoding="utf-8")
    out = tmp_path / "dir"
    args = ("-o", out, *FAST, "--no-titles", "--format", "wav", "--verify", "--json")
    data = report(book(invoke, src, *args))
    assert (data["done"], data["failed"], data["errors"]) == (1, 0, []) and len(rec.heard) == 3
    assert data["manifest"] == str(out / ".parts" / "manifest.jsonl")
    [record] = [json.loads(ln) for ln in Path(data["manifest"]).read_text().splitlines()]
    score = record["verify"]
    [row] = score["pieces"]
    assert (row["attempts"], row["kept"], row["ok"], row["transcript"]) == (3, 3, True, TEXT)
    assert row["seed"] == part_seed(TEXT, None) + 1000 * 2 and record["seed"] == part_seed(TEXT, None)
    assert (score["attempts"], score["retakes"], score["passed"]) == (3, 2, True)
    [chapter] = [p for p in out.iterdir() if p.suffix == ".wav"]
    assert sf.info(str(chapter)).frames > 0
    again = report(book(invoke, src, *args))
    assert (again["done"], again["skipped"]) == (0, 1) and len(rec.heard) == 3


# ------------------------------------------------------------------------------------ dry run


def test_dry_run_loads_no_model_and_writes_nothing(invoke, fake_engine, epub, tmp_path, home):
    r = book(invoke, epub, "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert fake_engine.loads == [] and files_in(tmp_path) == ["book.epub"]
    assert r.stdout.startswith(f"{epub_util.TITLE}, by {epub_util.AUTHOR} (en): 3 chapters")
    assert "skipped: " in r.stdout and "Contents" in r.stdout and "Copyright" in r.stdout
    for title in TITLES:
        assert f". {title}: " in r.stdout


def test_dry_run_json(invoke, fake_engine, epub, tmp_path, home):
    data = report(book(invoke, epub, "--dry-run", "--json", "-o", tmp_path / "dir/", "--format", "mp3"))
    assert [c["title"] for c in data["chapters"]] == TITLES
    assert [c["file"] for c in data["chapters"]] == [f"{s}.mp3" for s in FILES]
    assert [c["words"] for c in data["chapters"]] == [16, 23, 18]
    assert data["words"] == 57 and all(c["seconds"] > 3 for c in data["chapters"])
    assert data["seconds"] == pytest.approx(sum(c["seconds"] for c in data["chapters"]), abs=0.05)
    assert (data["title"], data["author"], data["cover"], data["loudness"]) == (
        epub_util.TITLE,
        epub_util.AUTHOR,
        "image/png",
        -18.0,
    )
    assert any("Copyright" in s for s in data["skipped"]) and not any(c["done"] for c in data["chapters"])
    assert not (tmp_path / "dir").exists() and fake_engine.loads == []
    picked = report(book(invoke, epub, "--dry-run", "--json", "--chapters", "1,3"))
    assert [c["number"] for c in picked["chapters"]] == [1, 3]
    kept = report(book(invoke, epub, "--dry-run", "--json", "--keep-front-matter"))
    assert len(kept["chapters"]) > 3


def test_dry_run_estimate_follows_the_engine(invoke, fake_engine, epub, home):
    """The estimate is the engine's (plan_request) for each part, plus the chapter's silences."""
    from omnivoice_cli.app.book.bookplan import CHAPTER_LEAD, CHAPTER_TAIL

    short = report(book(invoke, epub, "--dry-run", "--json"))
    slower = report(book(invoke, epub, "--dry-run", "--json", "--speed", "0.5"))
    for a, b in zip(short["chapters"], slower["chapters"]):
        assert b["seconds"] - CHAPTER_LEAD - CHAPTER_TAIL > 1.5 * (a["seconds"] - CHAPTER_LEAD - CHAPTER_TAIL)


def lexicon(*more: str) -> str:
    """sea, then `more` entries (any case), then a case-sensitive "Dawn" (the book has "dawn" only)."""
    return "\n".join(['sea = "ocean"', *more, "", "[case-sensitive]", 'Dawn = "sunrise"', ""])


def test_dry_run_json_shows_what_the_lexicon_replaced_per_chapter(invoke, fake_engine, epub, tmp_path, home):
    """Check 4: the replacements of --lexicon, chapter by chapter (whole words, as in the text,
    with their times; the case-sensitive "Dawn" leaves "dawn" alone); the text dry run says them too."""
    words = tmp_path / "words.toml"
    words.write_text(lexicon('lamp = "lantern"'), encoding="utf-8")
    data = report(book(invoke, epub, "--dry-run", "--json", "--lexicon", words))
    assert [c["replaced"] for c in data["chapters"]] == [
        [{"words": "sea", "say": "ocean", "times": 1}],
        [{"words": "Lamp", "say": "lantern", "times": 1}, {"words": "lamp", "say": "lantern", "times": 1}],
        [],
    ]  # chapter 2: its spoken title "The Lamp", then "the oldest lamp"
    assert all(c["replaced"] == [] for c in report(book(invoke, epub, "--dry-run", "--json"))["chapters"])
    text = book(invoke, epub, "--dry-run", "--lexicon", words)
    assert text.exit_code == 0 and "lexicon: sea -> ocean" in text.stdout
    assert "lexicon: Lamp -> lantern, lamp -> lantern" in text.stdout and fake_engine.loads == []


@pytest.mark.slow
def test_an_edited_lexicon_speaks_again_only_the_chapters_it_changes(invoke, fake_engine, epub, tmp_path, home):
    """The part keys are over the text as spoken: adding "lamp" redoes chapter 2 alone (its file
    rewritten, the others byte for byte and not rewritten); an entry that matches nothing, or the
    same lexicon under another name, redoes nothing."""
    out, words = tmp_path / "dir", tmp_path / "words.toml"
    words.write_text(lexicon(), encoding="utf-8")
    first = report(book(invoke, epub, "-o", out, "--format", "wav", "--lexicon", words, "--json"))
    assert first["done"] == 3
    names = [f"{s}.wav" for s in FILES]
    before = stamps(out, names)
    words.write_text(lexicon('lamp = "lantern"'), encoding="utf-8")
    data = report(book(invoke, epub, "-o", out, "--format", "wav", "--lexicon", words, "--json"))
    assert (data["done"], data["skipped"], data["written"]) == (1, 2, [str(out / names[1])])
    after = stamps(out, names)
    assert after[names[0]] == before[names[0]] and after[names[2]] == before[names[2]]
    assert after[names[1]] != before[names[1]]
    spoken = [r.text for r in fake_engine.requests if "lantern" in r.text]
    assert spoken and not any("lamp" in t.lower() for t in spoken)  # chapter 2 as the lexicon says it
    moved = tmp_path / "other.toml"
    moved.write_text(lexicon('lamp = "lantern"', 'zebra = "horse"'), encoding="utf-8")
    data = report(book(invoke, epub, "-o", out, "--format", "wav", "--lexicon", moved, "--json"))
    assert (data["done"], data["skipped"], data["written"]) == (0, 3, [])
    assert stamps(out, names) == after


@slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="VmHWM: Linux")
def test_a_50_mb_book_dry_runs_through_the_command_in_bounded_memory(tmp_path):
    """Streamed reading, through the command: `omnivoice book BIG.txt --dry-run` on a generated 50 MB
    plain-text book (about 450 chapters of 110 kB), in a fresh process: every chapter listed, and
    the process's peak RSS under 300 MB (the book is read and planned a chapter at a
    time, each part's text dropped once estimated)."""
    import textwrap

    from omnivoice_cli.app.book.bookread.chapters import count_words

    paragraph = "The sea was calm that night and the keeper wrote in his log until the lamp burned low. "
    body = "\n".join(textwrap.wrap(paragraph * 12, 72)) + "\n\n"
    big = tmp_path / "big.txt"
    with open(big, "w", encoding="utf-8") as f:
        n = 0
        while f.tell() < 50 * 1024 * 1024:
            n += 1
            f.write(f"Chapter {n}\n\n" + body * 100)
    small = tmp_path / "small.txt"
    small.write_text("Chapter 1\n\n" + body, encoding="utf-8")

    def dry_run(path: Path) -> tuple[str, int]:
        """(stdout, peak RSS in MiB) of `omnivoice book PATH --dry-run` in a fresh process."""
        peak = tmp_path / "peak"
        env = {
            "PYTHONPATH": str(ROOT),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "OMNIVOICE_HOME": str(tmp_path),
        }
        cmd = [sys.executable, "-c", PEAK_RSS, str(peak), "book", str(path), "--dry-run"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout, int(peak.read_text())

    out, mib = dry_run(big)
    words = n * 100 * count_words(paragraph * 12)
    assert out.startswith(f"big.txt: {n} chapters, {words} words") and f" {n}. Chapter {n}: " in out
    _, baseline = dry_run(small)  # the command itself: Python, its imports, one chapter
    print(
        f"peak RSS of `book --dry-run`: {mib} MiB on {big.stat().st_size / 2**20:.0f} MiB, {baseline} MiB on 1 chapter"
    )
    assert mib < 300  # the bound
    assert mib - baseline < 40  # streamed: holding the 50 MB text (or its parts) would take more than that


# ------------------------------------------------------------------------------------ usage errors

USAGE = [
    (["-o", "x.m4b", "--chapters", "0-2"], "--chapters 0-2: this book has chapters 1..3"),
    (["-o", "x.m4b", "--chapters", "4"], "--chapters 4: this book has chapters 1..3"),
    (["-o", "x.m4b", "--chapters", "3-1"], "--chapters 3-1 (backwards): this book has chapters 1..3"),
    (["-o", "x.m4b", "--chapters", "two"], "--chapters 'two': 'two' is not a number or a range N-M"),
    (["-o", "x.wav"], "-o 'x.wav' has the extension '.wav': give a .m4b file"),
    (["-o", "x.m4b", "--format", "mp3"], "--format mp3 is for a folder output"),
    (["-o", "dir/", "--format", "xyz"], "--format must be wav, flac, ogg, opus, mp3"),
    (["-o", "dir/", "--subtitles", "txt"], "--subtitles must be srt or vtt"),
    ([], "-o is missing"),
    (["-o", "dir/", "--workers", "2"], "--workers needs --ray"),
    # the run's settings plan every part: refused once, before the model or a folder (not a failed part each)
    (["-o", "dir/", "--voice", "nosuch"], "--voice: unknown voice 'nosuch'"),
    (["-o", "x.m4b", "--ref", "missing.wav"], "--ref: audio file 'missing.wav' does not exist"),
]


@pytest.mark.parametrize(
    "args, words", USAGE, ids=[" ".join(a[2:] if a[:1] == ["-o"] else a) or "no -o" for a, _ in USAGE]
)
def test_usage_errors_are_one_line_exit_2(invoke, fake_engine, epub, tmp_path, home, monkeypatch, args, words):
    monkeypatch.chdir(tmp_path)
    r = book(invoke, epub, *args)
    assert r.exit_code == 2, r.stderr
    errors = errors_of(r)
    assert len(errors) == 1 and words in errors[0], r.stderr
    assert fake_engine.loads == [] and sorted(p.name for p in tmp_path.iterdir()) == ["book.epub"]


@pytest.mark.slow
def test_a_bad_book_is_one_line(invoke, fake_engine, tmp_path, home):
    bad = tmp_path / "bad.epub"
    bad.write_bytes(b"not a zip at all")
    r = book(invoke, bad, "-o", tmp_path / "x.m4b")
    assert r.exit_code == 2 and len(errors_of(r)) == 1 and "bad.epub" in errors_of(r)[0]
    r = book(invoke, tmp_path / "missing.epub", "--dry-run")
    assert r.exit_code == 2 and "missing.epub" in errors_of(r)[0]


def test_book_output_is_an_m4b_file_or_a_folder():
    assert book_output("book.m4b").m4b and book_output("BOOK.M4B").kind == "m4b"
    assert not book_output("out/").m4b and book_output("out").kind == "folder"
    m4b, folder = book_output("a/book.m4b"), book_output("a/out/")
    assert (m4b.folder, m4b.work) == (Path("a"), Path("a/book.m4b.parts"))
    assert (folder.folder, folder.work) == (Path("a/out"), Path("a/out/.parts"))
    with pytest.raises(InvalidRequest, match="give a .m4b file"):
        book_output("x.mp3")


@pytest.mark.parametrize(
    "spec, count, numbers",
    [("3", 5, [3]), ("3-5", 5, [3, 4, 5]), ("1,4, 2-3", 5, [1, 2, 3, 4]), ("4-", 5, [4, 5]), ("2,2", 3, [2])],
)
def test_parse_chapters(spec, count, numbers):
    assert parse_chapters(spec, count) == numbers


def test_parse_chapters_of_a_one_chapter_book_says_so():
    with pytest.raises(InvalidRequest, match="this book has one chapter, 1"):
        parse_chapters("2", 1)


# ------------------------------------------------------------------------------------ parts


def test_split_parts_title_first_paragraph_pauses_and_length():
    text = "\n\n".join(f"Paragraph {i} says [1] hello." for i in range(3))
    [part] = split_parts(text, "The [Old] Title")
    assert part.startswith("The (Old) Title [pause 1s] Paragraph 0")
    assert part.count("[pause 0.6s]") == 2 and "(1)" in part and "[1]" not in part
    long = "\n\n".join(("Word " * 300).strip() + "." for _ in range(40))  # 40 paragraphs of 1500 chars
    parts = split_parts(long, None, limit=PART_CHARS)
    assert len(parts) > 1 and all(len(p) <= PART_CHARS for p in parts)
    assert sum(p.count("Word") for p in parts) == 40 * 300  # nothing lost
    huge = ". ".join(["A sentence of several words"] * 1000) + "."  # one paragraph over the limit
    cut = split_parts(huge, None, limit=2000)
    assert len(cut) > 1 and all(len(p) <= 2000 for p in cut) and all(p.endswith(".") for p in cut)


def test_chapter_stem():
    assert chapter_stem(1, "Intro", 2) == "01-Intro"
    assert chapter_stem(12, "Chapter 12: The / End?", 3) == "012-Chapter-12-The-End"
    assert chapter_stem(3, "第三章 风暴", 2) == "03-第三章-风暴"
    assert chapter_stem(4, "???", 2) == "04"


def test_tracker_eta_from_the_measured_rate(tmp_path, monkeypatch):
    """The ETA is the time per estimated second spoken so far, times the estimated seconds left."""
    import omnivoice_cli.app.book.book as book_mod

    lines = [PartLine(i + 1, name=f"p{i}.flac", chapter=c, estimate=10.0) for i, c in enumerate([1, 2, 2])]
    plans = [ChapterPlan(1, "One", "", 1, "01-One", lines[:1]), ChapterPlan(2, "Two", "", 1, "02-Two", lines[1:])]

    class Bars:
        shows_steps = False
        states: list[BookState] = []

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def update(self, state):
            self.states.append(state)

        def step(self, done, total):
            return None

    now = [100.0]
    monkeypatch.setattr(book_mod.time, "perf_counter", lambda: now[0])
    bars = Bars()
    with Tracker(bars, plans, tmp_path) as tracker:
        assert tracker.state().eta is None and tracker.state().chapter == 1
        tracker.step(1, 2)
        now[0] = 120.0  # 20 s for the first 10 s of audio
        tracker.finished(lines[0], "done")
    state = bars.states[-1]
    total = sum(p.estimate for p in plans)
    assert (state.chapters_done, state.chapter, state.parts_done, state.parts) == (1, 2, 0, 2)
    assert state.audio_total == pytest.approx(total)
    assert state.eta == pytest.approx(2.0 * (total - plans[0].estimate))


def test_book_bars_print_a_line_per_part_off_a_terminal():
    from omnivoice_cli.ui.progress import BookBars

    lines = []
    state = BookState(1, 3, 2, "The Lamp", 1, 2, 75.0, 3600.0, 61.0)
    with BookBars(enabled=True, live=False, echo=lines.append) as bars:
        bars.update(state)
    assert lines == ["chapters 1/3, audio 1:15 of about 1:00:00, eta 1:01; chapter 2 (The Lamp): part 1/2"]


# ------------------------------------------------------------------------------------ a real kill


@slow
def test_a_killed_book_resumes(invoke, loaded, tmp_path, home):
    """SIGKILL in a subprocess once the first part is written; the same command then finishes,
    the finished part untouched."""
    long = "".join(f"<p>Sentence number {i} of the long chapter, with a few more words in it.</p>" for i in range(12))
    chapters = [("Short One", "<p>Hello there.</p>"), ("Short Two", "<p>Good night.</p>"), ("Long", long)]
    epub = make_epub(tmp_path / "book.epub", chapters=chapters, with_image=False, footnote=False)
    out, work = tmp_path / "x.m4b", tmp_path / "x.m4b.parts"
    args = ["book", str(epub), "-o", str(out), "--model", str(TINY_CKPT), "--num-step", "8", "-q"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMNIVOICE_HOME": str(tmp_path / "home")}
    env.pop("OMNIVOICE_MODEL", None)
    main = [sys.executable, "-c", "from omnivoice_cli.cli import main; main()"]
    proc = subprocess.Popen(main + args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and not recorded_parts(work):  # a part the manifest vouches for
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    finished = recorded_parts(work)  # a .flac the kill caught before its record is spoken again, by design
    assert 1 <= len(finished) < 3 and not out.exists()
    before = stamps(work, finished)
    r = invoke(*args[:-1], "--json")
    data = report(r)
    assert data["skipped"] == len(finished) and data["done"] == 3 - len(finished)
    assert stamps(work, finished) == before
    assert np.isfinite(data["duration"]) and out.exists()


@pytest.mark.slow
def test_ray_speaks_the_same_book(invoke, fake_engine, epub, tmp_path, home, monkeypatch):
    """--ray hands the parts to the batch run's cluster executor: the same parts and the same
    .m4b as in this process (helpers/ray.FakeRay: actors in this process; FakeEngine's audio)."""

    from omnivoice_cli.app.batch import cluster

    assert book(invoke, epub, "-o", tmp_path / "local.m4b", "-q").exit_code == 0
    fake = FakeRay()
    monkeypatch.setattr(cluster, "import_ray", lambda: fake)
    r = book(invoke, epub, "-o", tmp_path / "ray.m4b", "--ray", "local", "--workers", "2", "-q")
    assert r.exit_code == 0, r.stderr
    assert len(fake.actors) == 2 and fake.runs >= 1
    local, ray = tmp_path / "local.m4b.parts", tmp_path / "ray.m4b.parts"
    names = sorted(p.name for p in local.glob("*.flac"))
    assert len(names) == 3 and names == sorted(p.name for p in ray.glob("*.flac"))
    assert all((local / n).read_bytes() == (ray / n).read_bytes() for n in names)
    assert (tmp_path / "local.m4b").read_bytes() == (tmp_path / "ray.m4b").read_bytes()


@slow
def test_a_real_local_ray_cluster_gives_a_local_runs_parts_and_chapters(epub, tmp_path, ray_tmp):
    """`book --ray local --workers 2` on a real local Ray cluster (test_ray.py's setting: RAY_TMPDIR
    of the test's own, one torch thread in each process, the workers importing this checkout):
    its parts are byte for byte a local run's, and the .m4b has the same chapters (titles, starts,
    ends) and the same bytes."""
    pytest.importorskip("ray")
    from omnivoice_cli.media.m4b import read_m4b

    env = {**ENV, "OMNIVOICE_HOME": str(tmp_path / "home"), "RAY_TMPDIR": ray_tmp}

    def run(name: str, *more: str) -> subprocess.CompletedProcess:
        cmd = [*MAIN, "book", str(epub), "-o", str(tmp_path / name), *RUN, "--num-step", "2", *more]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400)

    local = run("local.m4b")
    assert local.returncode == 0, local.stderr
    ray = run("ray.m4b", "--ray", "local", "--workers", "2")
    assert ray.returncode == 0, ray.stderr
    assert "Ray: started a local cluster" in ray.stderr
    parts = {d: tmp_path / f"{d}.m4b.parts" for d in ("local", "ray")}
    names = sorted(p.name for p in parts["local"].glob("*.flac"))
    assert len(names) == 3 and names == sorted(p.name for p in parts["ray"].glob("*.flac"))
    assert all((parts["local"] / n).read_bytes() == (parts["ray"] / n).read_bytes() for n in names)
    chapters = read_m4b(tmp_path / "local.m4b")["chapters"]
    assert [c[0] for c in chapters] == TITLES and read_m4b(tmp_path / "ray.m4b")["chapters"] == chapters
    assert (tmp_path / "local.m4b").read_bytes() == (tmp_path / "ray.m4b").read_bytes()


@pytest.mark.slow
def test_ctrl_c_while_the_m4b_is_written_leaves_no_file(invoke, fake_engine, epub, tmp_path, home, monkeypatch):
    """A stop while the book is encoded: no .m4b and no temporary file; the next run writes it
    from the parts it kept."""
    import omnivoice_cli.app.book.bookassembly as assembly
    from omnivoice_cli.app.book.bookaudio import chapter_blocks

    blocks = {"n": 0}

    def interrupted(layout, signals):
        for block in chapter_blocks(layout, signals):
            blocks["n"] += 1
            if blocks["n"] == 3:
                os.kill(os.getpid(), signal.SIGINT)  # held by the run until the next block
            yield block

    monkeypatch.setattr(assembly, "chapter_blocks", interrupted)
    out = tmp_path / "x.m4b"
    r = book(invoke, epub, "-o", out, "--loudness", "-20")
    assert r.exit_code == 130, r.stderr
    assert not out.exists() and not [p for p in tmp_path.rglob("*.part")]
    assert len(list((tmp_path / "x.m4b.parts").glob("*.flac"))) == 3
    monkeypatch.setattr(assembly, "chapter_blocks", chapter_blocks)
    data = report(book(invoke, epub, "-o", out, "--json", "--loudness", "-20"))
    assert (data["done"], data["skipped"], data["written"]) == (0, 3, [str(out)])


@pytest.mark.slow
@pytest.mark.parametrize("source", ["quiet", "loud"])
def test_each_output_is_at_the_target_from_a_quiet_and_a_loud_source(
    invoke, fake_engine, epub, tmp_path, home, monkeypatch, source
):
    """Parts spoken very quietly, or with peaks at full scale: every chapter file measures
    within 0.5 LU of the target (pyloudnorm) with its true peak at most -1 dBTP."""
    from omnivoice_cli.media.loudness import measure

    orig = fake_engine.generate

    def generate(self, requests, on_step=None, on_result=None, on_error=None, **kw):
        def shaped(i, result):
            if source == "quiet":
                result.audio *= np.float32(0.02)  # quiet, but within the +30 dB gain ceiling
            else:
                result.audio *= np.float32(0.03)  # quiet speech with full-scale peaks: the limiter works
                result.audio[12000::24000] = np.float32(0.99)  # a full-scale click a second
            on_result(i, result)

        return orig(self, requests, on_step, shaped, on_error)

    monkeypatch.setattr(fake_engine, "generate", generate)
    out = tmp_path / "dir"
    data = report(book(invoke, epub, "-o", out, "--format", "wav", "--loudness", "-16", "--json"))
    for stem in FILES:
        path = out / f"{stem}.wav"
        assert loudness(path) == pytest.approx(-16.0, abs=0.5)
        audio, sr = sf.read(str(path), dtype="float32")
        assert measure(audio, sr).dbtp <= -1.0
        level = data["loudness"][path.name]
        assert (level["limited"] > 0) == (source == "loud") and level["warning"] is None


def test_book_help_gives_its_own_loudness_default():
    import inspect

    from omnivoice_cli.app.settings.schema import BOOK_LOUDNESS
    from omnivoice_cli.commands import book as book_cmd
    from omnivoice_cli.commands import say as say_cmd

    assert BOOK_LOUDNESS == -18.0
    ours = inspect.signature(book_cmd.book).parameters["loudness"].default.help
    theirs = inspect.signature(say_cmd.say).parameters["loudness"].default.help
    assert ours.endswith("Default: -18 (for book).") and theirs.endswith("Default: off.")
