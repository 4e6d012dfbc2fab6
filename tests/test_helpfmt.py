"""`--help` at 80 columns (ui/helpfmt.py): no help cut with an ellipsis, every line within the width,
no word of an option's help cut, `say`'s examples whole, and `wrap_example`'s shell continuation
lines; the everyday options in `--help`, the Advanced panel and the details only in `--help-all`
(the hidden options still work); every output format named in the help and the docs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer.main

from omnivoice_cli.app.settings.schema import SCHEMA
from omnivoice_cli.app.settings.setting import EXPERT_PANELS, SAMPLING
from omnivoice_cli.media.formats import AUDIO_FORMATS
from omnivoice_cli.ui.helpfmt import HELP_ALL, asks_help_all, wrap_example

ROOT = Path(__file__).resolve().parent.parent


def _command_paths(cmd, path=()):
    yield list(path)
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _command_paths(sub, (*path, name))


def _command(path):
    from omnivoice_cli.cli import app

    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.get_command(None, name)
    return cmd


def _help(runner, *args) -> str:
    from omnivoice_cli.cli import app

    r = runner.invoke(app, list(args), env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0, (args, r.stderr)
    return r.stdout


def _advanced_flags(cmd) -> set[str]:
    return {
        o
        for p in cmd.params
        if getattr(p, "rich_help_panel", None) in EXPERT_PANELS
        for o in (*p.opts, *p.secondary_opts)
    }


@pytest.mark.parametrize("flag", ["--help", HELP_ALL])
def test_no_help_is_cut_at_80_columns(runner, flag):
    from omnivoice_cli.cli import app

    paths = list(_command_paths(typer.main.get_command(app)))
    assert ["say"] in paths and ["voice", "add"] in paths and len(paths) >= 15
    for path in paths:
        out = _help(runner, *path, flag)
        assert "…" not in out, (path, [ln for ln in out.splitlines() if "…" in ln])
        assert max(len(ln) for ln in out.splitlines()) <= 80, path
        # lines are broken at spaces: every word of every shown option's help is there whole
        shown = set(out.replace("│", " ").split())
        cmd = _command(path)
        for param in cmd.params:
            if getattr(param, "hidden", False) or (flag == "--help" and param.rich_help_panel in EXPERT_PANELS):
                continue
            cut = [w for w in (param.help or "").split() if w not in shown]
            assert not cut, (path, flag, param.name, cut)
        for name, sub in getattr(cmd, "commands", {}).items():  # a group's summaries
            if not sub.hidden:
                summary = sub.get_short_help_str(limit=200).split()
                assert all(w in shown for w in summary), (path, name)


def test_say_help_shows_the_everyday_options_and_says_how_to_see_the_rest(runner):
    out = _help(runner, "say", "--help")
    advanced = _advanced_flags(_command(["say"]))
    assert {"--t-shift", "--layer-penalty-factor", "--position-temperature", "--class-temperature"} <= advanced
    assert {"--step-cache-prompt-every", "--step-cache-uncond-every", "--guidance-scale"} <= advanced
    assert len(out.splitlines()) < 80
    words = set(re.findall(r"^│ (?:-[a-z], )?(--[a-z][a-z0-9-]*)", out, re.M))  # the options' rows
    assert not words & advanced, words & advanced
    assert {"--output", "--voice", "--instruct", "--lang", "--speed", "--model"} <= words
    assert not any(f"─ {p} " in out for p in EXPERT_PANELS) and "Exit codes" not in out  # --help-all's
    assert out.rstrip().splitlines()[-1].strip().startswith(f"omnivoice say {HELP_ALL} shows the details and the")


@pytest.mark.parametrize("path", [["say"], ["batch"], ["book"], ["dub"]])
def test_help_all_shows_every_option_and_the_details(runner, path):
    out = _help(runner, *path, HELP_ALL)
    cmd = _command(path)
    flags = {o for p in cmd.params if not p.hidden for o in (*p.opts, *p.secondary_opts) if o.startswith("--")}
    assert flags - {"--help"} <= set(re.findall(r"--[a-z][a-z0-9-]*", out)), flags - set(out.split())
    assert f"─ {SAMPLING} " in out and "Exit codes" in out
    assert HELP_ALL not in out  # nothing left to show
    short = _help(runner, *path, "--help")
    assert len(short.splitlines()) < len(out.splitlines())


def test_the_advanced_settings_are_the_schemas():
    say = _advanced_flags(_command(["say"]))
    for s in SCHEMA.values():
        if s.flag in {o for p in _command(["say"]).params for o in p.opts}:
            assert (s.flag in say) == bool(s.advanced), s.name


def test_help_all_is_read_before_a_double_dash_and_before_a_groups_command():
    assert asks_help_all(["Hi", "--help-all"], leading=False)
    assert not asks_help_all(["--", "--help-all"], leading=False)  # speaks the words "--help-all"
    assert asks_help_all(["--help-all"], leading=True)
    assert not asks_help_all(["say", "--help-all"], leading=True)  # say's own


def test_a_hidden_option_still_takes_effect(invoke):
    r = invoke("say", "Hi", "--t-shift", "0.5", "--step-cache-uncond-every", "5", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    settings = json.loads(r.stdout)["settings"]
    assert settings["t_shift"] == {"value": 0.5, "from": "flag"}
    assert settings["step_cache_uncond_every"] == {"value": 5, "from": "flag"}
    r = invoke("say", "Hi", "--t-shift", "abc", "--dry-run")
    assert r.exit_code == 2 and "--t-shift" in r.stderr


def test_every_output_format_is_named_in_the_help_and_the_docs(runner):
    extensions = [f.extension for f in AUDIO_FORMATS.values()]
    assert {".aac", ".m4a", ".ulaw", ".alaw"} <= set(extensions)
    for flag in ("--help", HELP_ALL):
        shown = {w.strip("();,") for w in _help(runner, "say", flag).replace("│", " ").split()}
        assert set(extensions) <= shown, (flag, set(extensions) - shown)
    table = (ROOT / "docs" / "say.md").read_text()
    for f in AUDIO_FORMATS.values():
        row = re.search(rf"^\| {f.name} \| (.*?) \|", table, re.M)
        assert row and all(f"`{ext}`" in row.group(1) for ext in f.extensions), f.name
    readme = (ROOT / "README.md").read_text()
    assert " ".join(extensions) in " ".join(readme.split())


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


def test_a_command_shows_the_format_every_day(runner):
    def rows(*args):
        return set(re.findall(r"^│ (?:-[a-z], )?(--[a-z][a-z0-9-]*)", _help(runner, *args), re.M))

    assert not SCHEMA["format"].advanced
    assert "--format" in rows("book", "--help") and "--format" in rows("batch", "--help")  # a folder of files
    assert "--format" in rows("say", "--help")  # -o - names no format


def _panel_rows(out: str) -> dict[str, list[str]]:
    """{panel title: the flags of its rows} of a rendered help."""
    panels: dict[str, list[str]] = {}
    title = ""
    for line in out.splitlines():
        head = re.match(r"^╭─ (.+?) ─", line)
        if head:
            title = head.group(1)
            panels[title] = []
        row = re.match(r"^│ (?:-[a-z], )?(--[a-z][a-z0-9-]*)", line)
        if row and title:
            panels[title].append(row.group(1))
    return panels


def test_say_help_shows_the_flags_the_readme_uses_every_day(runner):
    """The README's everyday flags are in plain --help, beside their own: --ref-text by --ref,
    --format by -o; the sampler's internals are not."""
    panels = _panel_rows(_help(runner, "say", "--help"))
    shown = {flag for rows in panels.values() for flag in rows}
    assert {"--ref-text", "--format", "--json", "--markdown", "--loudness"} <= shown
    assert "--ref-text" in panels["Voice"] and "--ref" in panels["Voice"]
    assert "--format" in panels["Output"] and "--output" in panels["Output"]
    assert not shown & {"--t-shift", "--guidance-scale", "--step-cache-uncond-every", "--threads"}


def test_help_all_splits_the_expert_options_by_purpose(runner):
    """--help-all puts the expert options in panels by purpose: the sampler's internals apart from
    the step cache, the recogniser and the machine; none holds everything."""
    panels = _panel_rows(_help(runner, "say", HELP_ALL))
    assert {"--t-shift", "--guidance-scale", "--class-temperature"} <= set(panels[SAMPLING])
    assert "--step-cache-uncond-every" not in panels[SAMPLING] and "--verify" not in panels[SAMPLING]
    assert "--json" not in panels[SAMPLING]
    experts = [title for title in panels if title in EXPERT_PANELS]
    assert len(experts) >= 4
    assert max(len(panels[t]) for t in experts) <= 8, {t: len(panels[t]) for t in experts}
