"""Listings and warnings at 80 columns (ui/text.wrap_row): `voice list`, `presets`, `presets show`,
`info` and warnings cut at spaces into lines that fit, the text kept in its column and every word
whole; in a pipe or a file (no COLUMNS, no terminal) each row stays one line."""

from __future__ import annotations

import pytest

from omnivoice_cli.ui.text import wrap_row

LONG = (
    "a description long enough to need three lines at eighty columns, with words such as "
    "supercalifragilistic and a path /home/someone/long/folder/it.toml"
)


def fits(text: str, width: int = 80) -> None:
    lines = text.splitlines()
    assert lines and all(len(line) <= width for line in lines), [ln for ln in lines if len(ln) > width]


@pytest.mark.parametrize("head", ["name  ", "x" * 30 + "  ", "y" * 66 + " = 1  # "])
def test_wrap_row_cuts_at_spaces_and_keeps_every_word(head):
    out = wrap_row(head, LONG, 80)
    fits(out)
    assert out.startswith(head.rstrip()) and out.split() == (head + LONG).split()  # nothing cut, in order
    assert wrap_row(head, LONG, None) == head + LONG  # a pipe: one line


def test_voice_list_fits(invoke, home, monkeypatch):
    import torch

    from omnivoice_cli.app.voices.voices import voice_dir
    from omnivoice_cli.engine.sound.voice import VoicePrompt, save_voice

    name = "a-voice-with-a-rather-long-name-indeed"
    voice_dir().mkdir(parents=True)
    text = "Words of a transcript long enough to be shortened in the listing, at a space."
    save_voice(voice_dir() / f"{name}.safetensors", VoicePrompt(torch.zeros(8, 40, dtype=torch.int64), text, 0.1))
    r = invoke("voice", "list", env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.stderr
    fits(r.stdout)
    row = r.stdout.split(name, 1)[1].split("\nalloy")[0]
    assert "Words of a transcript long enough to be" in " ".join(row.split()) and " ..." in row
    assert "alloy built-in female, young adult, moderate pitch" in " ".join(r.stdout.split())  # built-in ones


def test_presets_and_presets_show_fit_and_stay_a_preset_file(invoke, home):
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]

    (home / "presets").mkdir(parents=True)
    (home / "presets" / "a-long-preset-name.toml").write_text(
        f'description = "{LONG}"\nnum_step = 8\n', encoding="utf-8"
    )
    r = invoke("presets", env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.stderr
    fits(r.stdout)
    row = r.stdout.split("a-long-preset-name", 1)[1]
    assert " ".join(row.split()).startswith("user " + LONG)  # the whole description, in its column
    assert invoke("presets", env={}).stdout.count("\n") == 4  # a pipe: one line a preset
    for name in ("fast", "a-long-preset-name"):
        shown = invoke("presets", "show", name, env={"COLUMNS": "80"}).stdout
        whole = invoke("presets", "show", name).stdout
        fits("\n".join(ln for ln in shown.splitlines() if not ln.startswith(("description = ", "# preset "))))
        assert tomllib.loads(shown) == tomllib.loads(whole)  # still a preset file, the same settings
        assert shown.split() == whole.split() or len(shown.splitlines()) > len(whole.splitlines())


def test_info_fits(invoke, monkeypatch):
    from omnivoice_cli.engine import loading

    rows = [("cpu", "Some CPU, 2 logical cores"), ("  measured", LONG), ("flags", " ".join(["avx512_vnni"] * 12))]
    monkeypatch.setattr(loading, "cpu_paths", lambda verbose=False: rows)
    r = invoke("info", env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.stderr
    fits(r.stdout)
    assert r.stdout.split() == " ".join(f"{label}: {value}" for label, value in rows).split()
    continued = [ln for ln in r.stdout.splitlines() if ln.startswith(" " * 12)]
    assert continued and all(ln[: len("  measured: ")].isspace() for ln in continued)  # in the value's column


def test_a_warning_fits_the_terminal_and_is_whole_in_a_pipe(monkeypatch, capsys):
    from omnivoice_cli.ui import messages

    messages.warn(LONG)
    assert capsys.readouterr().err == f"Warning: {LONG}\n"  # not a terminal: one line
    monkeypatch.setattr(messages, "columns", lambda stream, terminal_only=False: 80)
    messages.warn(LONG)
    err = capsys.readouterr().err
    fits(err)
    assert err.startswith("Warning: a description") and err.split() == f"Warning: {LONG}".split()
    assert all(line.startswith("  ") for line in err.splitlines()[1:])
