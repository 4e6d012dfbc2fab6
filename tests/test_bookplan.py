"""app/book/bookplan.py: a chapter's parts as typed Text and Pause segments, written as the request's
text (pause tags) in one place, `part_text`; the parts' texts (and so their keys) those of split_parts."""

from __future__ import annotations

from omnivoice_cli.app.book.bookplan import (
    PARAGRAPH_PAUSE,
    TITLE_PAUSE,
    Pause,
    Text,
    part_key,
    part_text,
    plan_parts,
    split_parts,
)


def test_a_part_is_its_title_a_pause_and_its_paragraphs_with_pauses_between():
    [part] = plan_parts("One [1] here.\n\nTwo.\n\n\n\nThree.", "The [Old] Title")
    assert part == (
        Text("The (Old) Title"),
        Pause(TITLE_PAUSE),
        Text("One (1) here."),
        Pause(PARAGRAPH_PAUSE),
        Text("Two."),
        Pause(PARAGRAPH_PAUSE),
        Text("Three."),
    )
    assert part_text(part) == "The (Old) Title [pause 1s] One (1) here. [pause 0.6s] Two. [pause 0.6s] Three."
    assert plan_parts("", "Only a title") == [(Text("Only a title"),)] and plan_parts("  ", None) == []


def test_no_text_segment_holds_markup_and_part_text_is_split_parts():
    """The book's brackets never reach the request as brackets; pauses only as Pause segments."""
    text = "\n\n".join(f"Paragraph {i} [laughter] and [pause 3s]." for i in range(30))
    parts = plan_parts(text, "Title", limit=300)
    assert len(parts) > 3 and [part_text(p) for p in parts] == split_parts(text, "Title", limit=300)
    for part in parts:
        assert all("[" not in s.text and "]" not in s.text for s in part if isinstance(s, Text))
        assert all(s.seconds in (TITLE_PAUSE, PARAGRAPH_PAUSE) for s in part if isinstance(s, Pause))
    assert all(len(part_text(p)) <= 300 for p in parts[1:])  # (the title comes on top of the first)


def test_a_parts_key_is_over_its_rendered_text():
    """The key of a part (its work-folder file name) is over the request's text: the value the
    string parts had, so a work folder from before the parts were typed is resumed as it is."""
    [part] = plan_parts("The wind rose over the sea.", "One")
    assert part_text(part) == "One [pause 1s] The wind rose over the sea."
    assert part_key(part_text(part), {"seed": None})[:20] == "26166180fdd5decc1e88"  # as the string parts had it
