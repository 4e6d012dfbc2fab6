"""`--help` at 80 columns (ui/helpfmt.py): no help cut with an ellipsis, every line within the width,
`say`'s examples whole, and `wrap_example`'s shell continuation lines."""

from __future__ import annotations

import pytest
import typer.main

from omnivoice_cli.ui.helpfmt import wrap_example


def _command_paths(cmd, path=()):
    yield list(path)
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _command_paths(sub, (*path, name))


def test_no_help_is_cut_at_80_columns(runner):
    from omnivoice_cli.cli import app

    paths = list(_command_paths(typer.main.get_command(app)))
    assert ["say"] in paths and ["voice", "add"] in paths and len(paths) >= 15
    for path in paths:
        r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert r.exit_code == 0, (path, r.stderr)
        assert "…" not in r.stdout, (path, [ln for ln in r.stdout.splitlines() if "…" in ln])
        assert max(len(ln) for ln in r.stdout.splitlines()) <= 80, path


def test_the_examples_of_say_are_whole_at_80_columns(runner):
    from omnivoice_cli.cli import app
    from omnivoice_cli.commands.say import EXAMPLES

    r = runner.invoke(app, ["say", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    shown = " ".join(r.stdout.split("Examples", 1)[1].replace("│", " ").replace("\\", " ").split())
    for example in EXAMPLES.strip().splitlines():
        assert " ".join(example.split()) in shown


@pytest.mark.parametrize(
    "line",
    [
        "omnivoice say -f chapter.txt --voice alice --stream -o - | ffplay -nodisp -i -",
        'omnivoice dub episode.srt --cast "NARRATOR=instruct:male, low pitch" --seed 7 --json',
        '  -d \'{"model":"omnivoice","input":"Hello there.","voice":"alloy"}\' -o hello.mp3',
        "omnivoice voice add alice --ref alice.flac   # alice.txt holds its transcript",
    ],
)
def test_wrap_example_keeps_the_command_whole(line):
    out = wrap_example(line, 72)
    assert len(out) > 1 and all(len(ln) <= 72 for ln in out)
    code = [ln for ln in out if not ln.lstrip().startswith("#")]
    assert all(ln.endswith(" \\") for ln in code[:-1]) and not code[-1].endswith("\\")
    words = " ".join(ln.removesuffix(" \\") for ln in code).split()
    assert words == line.split("#")[0].split() if "#" in line else words == line.split()
    for quoted in ('"NARRATOR=instruct:male, low pitch"', '"input":"Hello there."'):
        if quoted in line:
            assert any(quoted in ln for ln in out)  # never broken inside quotes
    assert not any(ln.rstrip(" \\").endswith((" -o", " --seed")) for ln in out)  # an option keeps its value
    if "#" in line:
        assert out[0] == "# alice.txt holds its transcript"
    assert wrap_example("omnivoice say Hi", 72) == ["omnivoice say Hi"]
