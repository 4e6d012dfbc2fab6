"""Text the model chokes on, said as the user meant it: runs of a symbol, tags it does not know,
several tags in one piece, code blocks in Markdown (deliberate differences: docs/correctness.md).
The goldens of the reference on the tiny checkpoint show that only those parts change."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from omnivoice_cli.app.request import spoken_text
from omnivoice_cli.app.settings.layers import FLAG_SOURCE, resolve
from omnivoice_cli.engine.model import generation
from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.planning import Request, plan_request
from omnivoice_cli.engine.text.canvastext import nonverbal_tags
from omnivoice_cli.engine.text.duration import share_frames
from omnivoice_cli.engine.text.symbols import drop_symbol_runs
from omnivoice_cli.engine.text.tags import count_tags, cut_at_tags, drop_unknown_tags

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
GREEDY = GenerationConfig(position_temperature=0.0, class_temperature=0.0)


# ------------------------------------------------------------------------------ runs of symbols


@pytest.mark.parametrize(
    "text, said",
    [
        ("Name: __________ Date: ____", "Name: [pause] Date: [pause] "),
        ("Fill in the ______.", "Fill in the [pause] ."),
        ("A ---- B", "A B"),
        ("x ~~~~ y", "x y"),
        ("well---maybe", "well maybe"),
        ("Title\n=====\nBody text.", "Title.\n\nBody text."),  # a separator line ends the sentence
        ("Intro\n──────\nNext", "Intro.\n\nNext"),  # box drawing
        ("One.\n* * *\nTwo", "One.\n\nTwo"),  # a scene break, spaced
        ("Top\n╔════╗\n", "Top.\n\n"),
        ("a #### b ＿＿＿ c", "a b [pause] c"),
    ],
)
def test_runs_of_a_symbol_become_a_pause_or_nothing(text, said):
    assert drop_symbol_runs(text) == said


@pytest.mark.parametrize(
    "text",
    [
        "a well-known -- and yet...",  # '--' in a sentence, an ellipsis
        "Wait.... what?",  # dots are never a run
        "**bold** and __under__ and ~~gone~~",  # emphasis marks come in twos
        "C++ and a+b, x == y, #1",
        "no runs here.",
    ],
)
def test_shorter_runs_and_dots_are_left_alone(text):
    assert drop_symbol_runs(text) == text


# ----------------------------------------------------------------------------------------- tags


def test_the_model_knows_13_tags():
    assert len(nonverbal_tags()) == 13 and "[laughter]" in nonverbal_tags()


def test_an_unknown_tag_is_dropped_with_a_warning_naming_the_13():
    text, warning = drop_unknown_tags("Well [breath] I think [cough] so [breath].")
    assert text == "Well I think so."
    assert warning is not None and "[breath], [cough]" in warning and "dropped" in warning
    assert all(tag in warning for tag in nonverbal_tags())


def _joins(call) -> int:
    """How many times `call()` joins strings (str.join, counted by a profile hook: work, not time)."""
    import sys

    count = [0]

    def hook(frame, event, arg):
        if event == "c_call" and getattr(arg, "__qualname__", "") == "str.join":
            count[0] += 1

    sys.setprofile(hook)
    try:
        call()
    finally:
        sys.setprofile(None)
    return count[0]


def test_dropping_tags_builds_the_text_once_however_many_tags():
    """Each dropped tag once rebuilt the whole text so far to look at its last character: time in
    the square of the tags (`[um] ` x 100,000: 51 s). The text is joined as often for 3 tags as for 3,000."""
    few, many = "[um] " * 3, "[um] " * 3000
    assert drop_unknown_tags(many)[0] == ""  # all dropped
    assert _joins(lambda: drop_unknown_tags(many)) == _joins(lambda: drop_unknown_tags(few))


@pytest.mark.parametrize(
    "text",
    [
        "Ha [laughter] ok [pause 1s] then [B EY1 S] and [AH0].",  # known, a pause, pronunciations
        "See [the notes](https://x.y) and [text][ref].",  # Markdown links are not tags
        "Cite [1] and [Ref. 2].",
    ],
)
def test_known_tags_pauses_pronunciations_and_links_stay(text):
    assert drop_unknown_tags(text) == (text, None)


def test_a_known_tag_in_capitals_is_written_as_the_model_knows_it():
    assert drop_unknown_tags("So [Laughter] funny [Sigh]") == ("So [laughter] funny [sigh]", None)
    assert drop_unknown_tags("[SIGH]") == ("[SIGH]", None)  # all capitals: a pronunciation, left alone


@pytest.mark.parametrize(
    "text, pieces",
    [
        ("Ha [laughter] that was good. Oh [sigh] well.", ["Ha [laughter] that was good.", "Oh [sigh] well."]),
        ("Ha [laughter] and then [sigh] more", ["Ha [laughter] and then", "[sigh] more"]),
        ("[laughter][sigh]", ["[laughter]", "[sigh]"]),
        ("Only one [laughter] here. And more.", ["Only one [laughter] here. And more."]),
        ("No tags.", ["No tags."]),
    ],
)
def test_a_text_is_cut_so_each_piece_holds_one_tag(text, pieces):
    assert cut_at_tags(text) == pieces


def test_a_plan_has_at_most_one_tag_a_piece():
    text = "Ha [laughter] that was good. [sigh] Well, [surprise-oh] there [question-en] it is."
    plan = plan_request(Request(text=text))
    assert len(plan.pieces) == 4
    assert [count_tags(p.text) for p in plan.pieces] == [1, 1, 1, 1]
    assert " ".join(p.text for p in plan.pieces) == text
    assert [p.chunk for p in plan.pieces] == [0, 1, 2, 3]


@pytest.mark.parametrize("seconds", [1.0, 3.0, 7.5])
def test_a_fixed_duration_cut_at_its_tags_keeps_its_length(seconds):
    """Before: each cut was estimated on its own (short ones boosted toward 2 s), so a 3 s request
    with two tags planned 86 frames instead of 75 and overran its slot (a dub cue)."""
    text = "Well [laughter] that was funny, [sigh] but now we go on."
    plan = plan_request(Request(text=text, duration=seconds))
    assert len(plan.pieces) == 2 and sum(plan.frames) == int(seconds * 25)
    assert plan.frames[0] > plan.frames[1]  # shared by the cuts' weights: the longer one gets more


def test_frames_are_shared_by_weight_each_at_least_one():
    assert share_frames(75, ["a", "bb", "ccc"]) == [13, 25, 37]
    assert sum(share_frames(76, ["Hello [laughter] there", "[sigh] and then some more words."])) == 76
    assert share_frames(3, ["a long text here", "b"]) == [2, 1] and share_frames(10, ["", ""]) == [5, 5]


# ---------------------------------------------------------------------------------- dry runs


def _dry(invoke, *args, **kw):
    r = invoke("say", *args, "--dry-run", "--json", **kw)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_dry_run_shows_blanks_as_pauses_and_separators_gone(invoke, fake_engine):
    report, _ = _dry(invoke, "Name: ______ and the rest.\n----------\nNext part")
    assert "_" not in report["text"] and "--" not in report["text"]
    assert [p["text"] for p in report["pieces"]] == ["Name:", "and the rest. Next part"]
    assert report["pauses"] == [0.0, 0.5, 0.0]


def test_dry_run_shows_one_tag_a_piece_and_an_unknown_tag_dropped(invoke, fake_engine):
    report, err = _dry(invoke, "Ha [laughter] that was good. [cough] Oh [sigh] well.")
    assert "[cough]" not in report["text"]
    assert [p["text"] for p in report["pieces"]] == ["Ha [laughter] that was good.", "Oh [sigh] well."]
    assert "[cough]" in err and "[laughter]" in err  # the warning names the tag and the 13
    assert any("[cough]" in w for w in report["warnings"])


def test_dry_run_skips_fenced_code_and_hints_at_markdown(invoke, fake_engine, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("# Setup\n\nRun this:\n\n```sh\npip install x\n```\n\nThen go on\n", encoding="utf-8")
    report, err = _dry(invoke, "-f", notes, "--markdown")
    assert report["text"] == "Setup. Run this: Then go on"
    assert "looks like Markdown" not in err
    report, err = _dry(invoke, "-f", notes)
    assert "pip install" in report["text"]
    assert len([line for line in err.splitlines() if "looks like Markdown" in line]) == 1
    assert "--markdown" in err


# ------------------------------------------------- goldens: only the changed part changes


def _golden(case):
    return json.loads((GOLDEN / f"{case}.json").read_text()), load_file(GOLDEN / f"{case}.safetensors")


def _said(text: str) -> tuple[str, list[str]]:
    return spoken_text(text, resolve((FLAG_SOURCE, {})))


def _traced(engine, req, monkeypatch):
    """Engine.generate, with every job's final tokens in order of creation."""
    jobs: list = []
    real = generation.advance

    def advance(job, *args):
        if not any(j is job for j in jobs):
            jobs.append(job)
        return real(job, *args)

    monkeypatch.setattr(generation, "advance", advance)
    [result] = engine.generate([req])
    return result, jobs


@pytest.mark.slow
def test_a_separator_line_and_an_unknown_tag_change_nothing_else(engine, monkeypatch):
    """The reference's `nonverbal` case, with a separator line and an unknown tag added, gives
    the reference's tokens and audio exactly: the run and the tag are all that changed."""
    meta, g = _golden("nonverbal")
    text = meta["generate_kwargs"]["text"]
    head, tail = text.split(" [laughter] ")
    said, warnings = _said(f"{head} [laughter] [breath] {tail}\n\n──────────\n~~~~~~")
    assert said == text and len(warnings) == 1
    req = Request(text=said, lang="en", generation=GREEDY)
    result, jobs = _traced(engine, req, monkeypatch)
    assert len(jobs) == 1 and torch.equal(jobs[0].tokens, g["call0.item0.tokens"])
    np.testing.assert_allclose(result.audio, g["item0.audio"].numpy(), rtol=0, atol=1e-3)


@pytest.mark.slow
def test_a_blank_is_a_pause_and_a_second_tag_a_piece_of_its_own(engine, monkeypatch):
    """`nonverbal` + ' [sigh] ______': the reference's text is piece 0, token-identical to its
    golden; the second tag is a piece of its own after it, and the blank is the 0.5 s pause."""
    meta, g = _golden("nonverbal")
    text = meta["generate_kwargs"]["text"]
    said, _ = _said(f"{text} [sigh] ______")
    req = Request(text=said, lang="en", generation=GREEDY)
    plan = plan_request(req)
    assert [p.text for p in plan.pieces] == [text, "[sigh]"]
    assert plan.gaps == [0.0, 0.5]
    assert plan.frames[0] == meta["calls"][0]["target_lens"][0]
    result, jobs = _traced(engine, req, monkeypatch)
    assert len(jobs) == 2 and torch.equal(jobs[0].tokens, g["call0.item0.tokens"])
    decoded = engine._decode(jobs[0].tokens)  # piece 0's waveform, as the reference decoded it
    np.testing.assert_allclose(decoded, g["decode0.audio_values"][0, 0].numpy(), rtol=0, atol=1e-4)
    assert [p[0] for p in result.pieces] == [text, "[sigh]"]
    tail = result.audio[-int(0.5 * engine.sample_rate) :]
    assert np.all(tail == 0)  # the blank: the pause's silence ends the audio


def test_a_streamed_text_has_one_tag_a_piece():
    from omnivoice_cli.engine.stream.cut import cut_segments

    segments = cut_segments("Ha [laughter] and [sigh] more. [pause 1s] Done [sigh].", 4.0, 10.0)
    pieces = [s.text for s in segments if s.text is not None]
    assert [count_tags(p) for p in pieces] == [1, 1, 1]
    assert pieces[:2] == ["Ha [laughter] and", "[sigh] more."]
