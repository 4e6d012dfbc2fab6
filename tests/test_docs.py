"""The README is a front page and every link in it and in docs/ resolves (files and #anchors)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "speed-log.md"]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*?|_(?=\w)", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # no headings inside code blocks
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [m.group(1) for m in LINK.finditer(text)]


def test_slug_follows_github():
    assert slug("Dialogue: many voices in one file") == "dialogue-many-voices-in-one-file"
    assert slug("`omnivoice serve`") == "omnivoice-serve"
    assert slug("Batch mode and Ray") == "batch-mode-and-ray"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_resolves(page):
    bad = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked offline
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not bad, f"{page.name}: " + "; ".join(bad)


def test_readme_is_a_front_page_that_links_every_doc():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    linked = {Path(t.partition("#")[0]).name for t in links(ROOT / "README.md")}
    for page in (ROOT / "docs").glob("*.md"):
        assert page.name in linked, f"README.md does not link docs/{page.name}"
    # the set-up commands: torch, the full suite and the quick loop (docs/testing.md)
    for command in ("pip install torch==2.13.0", "python -m pytest -q", 'python -m pytest -q -m "not slow"'):
        assert command in readme


def test_the_readme_runs_the_quick_loop_first_and_says_how_long_each_takes():
    """The README's test commands: the quick loop before the full suite, each line with its time,
    the times docs/testing.md measured."""
    block = (ROOT / "README.md").read_text().split("Run the tests", 1)[1].split("```")[1]
    lines = [ln for ln in block.splitlines() if "pytest" in ln]
    assert len(lines) == 2 and '-m "not slow"' in lines[0] and '-m "not slow"' not in lines[1]
    assert re.search(r"# about 1 minute$", lines[0]) and re.search(r"# about 10 minutes$", lines[1])
    testing = (ROOT / "docs" / "testing.md").read_text()
    assert "about 1 minute" in testing and "about 10 minutes" in testing and "2,548 tests" in testing


def test_the_readmes_voice_to_clone_is_long_enough_to_clone():
    """The README records me.wav to clone it: its text is 5-8 s of speech by the model's own
    estimate (under 3 s, every later step warns that the reference is short)."""
    from omnivoice_cli.engine.text.duration import estimate_duration

    readme = (ROOT / "README.md").read_text()
    recorded = re.search(r"^printf '(.*?)\\n' > me\.txt$", readme, re.M)
    assert recorded and "-f me.txt" in readme and "-o me.wav" in readme
    seconds = estimate_duration(recorded.group(1), "Nice to meet you.", 25) / 25  # 25 frames a second
    assert 5 <= seconds <= 8, seconds


def test_extras_are_spelled_one_way_everywhere():
    """An extra is installed as `pip install 'omnivoice-cli[NAME]'` in the README, the docs and the
    tool's own hints (it works from any folder once the tool is installed), NAME one of pyproject's."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    texts = {p.name: p.read_text() for p in PAGES}
    texts |= {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "omnivoice_cli").rglob("*.py")}
    for name, text in texts.items():
        assert not re.search(r"pip install[^\n`]*[\"' ]\.\[", text), name  # never `pip install -e ".[serve]"`
        for extra in re.findall(r"omnivoice-cli\[(\w+)\]", text):
            assert extra in extras, (name, extra)
    assert "pip install 'omnivoice-cli[serve]'" in texts["README.md"]


def test_the_readme_names_no_placeholder_to_type():
    readme = (ROOT / "README.md").read_text()
    assert "git clone URL" not in readme


def test_batch_docs_list_every_format():
    from omnivoice_cli.app.settings.schema import FORMATS

    row = re.search(r"^\| `--format FMT` \| (.*?) \|", (ROOT / "docs" / "batch.md").read_text(), re.M)
    assert row and all(f in row.group(1) for f in FORMATS if f != "pcm"), row and row.group(1)


def test_the_readme_says_which_torch_is_which():
    """pip's default torch on Linux is the CUDA build: the README says so, and gives the CPU wheel
    index for a CPU-only machine (never calling the plain command "the CPU build")."""
    setup = (ROOT / "README.md").read_text().split("## Set up", 1)[1].split("## ", 1)[0]
    flat = " ".join(setup.split())
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in flat
    assert "CUDA build" in flat and "CPU-only" in flat
    assert "the CPU build of torch" not in flat


# ---------------------------------------------------------------- commands a shell would mangle

SHELL_FENCES = {"", "bash", "sh", "shell", "console", "zsh"}  # an unlabelled block is a shell's
COMMAND_SPAN = re.compile(r"`((?:omnivoice|curl|echo|printf|python) [^`]*)`")  # a command in prose


def shell_lines(page: Path) -> list[tuple[int, str]]:
    """(line number, text) of every shell command line of a page: the lines of shell code blocks,
    and commands quoted inline in prose."""
    out, fence = [], None
    for n, line in enumerate(page.read_text().splitlines(), 1):
        m = re.match(r"\s*```(\w*)", line)
        if m:
            fence = m.group(1) if fence is None else None
            continue
        if fence is None:
            out += [(n, span) for span in COMMAND_SPAN.findall(line)]
        elif fence in SHELL_FENCES:
            out.append((n, line))
    return out


def expanded_positionals(line: str) -> list[str]:
    """Where a POSIX shell would expand `$` + digit in `line` (a positional parameter: "It costs
    $3.50" reaches the command as "It costs .50"): inside double quotes or bare, not inside single
    quotes nor escaped; a `#` comment after a space ends the command."""
    found, quote, i = [], None, 0
    while i < len(line):
        ch = line[i]
        if quote != "'" and ch == "\\":
            i += 2
            continue
        if quote is None and ch == "#" and (i == 0 or line[i - 1].isspace()):
            break
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote == ch else ch
        elif ch == "$" and quote != "'" and line[i + 1 : i + 2].isdigit():
            found.append(line[max(0, i - 12) : i + 6])
        i += 1
    return found


def test_expanded_positionals_follows_the_shell():
    assert len(expanded_positionals('omnivoice say "It costs $3.50."')) == 1
    assert expanded_positionals("omnivoice say 'It costs $3.50.'") == []
    assert expanded_positionals('omnivoice say "It costs \\$3.50."') == []
    assert len(expanded_positionals('omnivoice say "it\'s $5"')) == 1  # ' inside " is a letter
    assert len(expanded_positionals("echo $1 and $2")) == 2
    assert expanded_positionals('omnivoice say "Hi" -o a.wav   # costs "$3"') == []
    assert expanded_positionals('omnivoice say "$HOME"') == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_command_a_shell_mangles(page):
    """Every command in the docs reaches the tool as written: no `$` + digit a shell expands
    (quote such text with single quotes)."""
    bad = [f"line {n}: {hit!r}" for n, line in shell_lines(page) for hit in expanded_positionals(line)]
    assert not bad, f"{page.name}: " + "; ".join(bad)


def test_the_speed_page_is_a_users_page_and_the_log_lies_beside_the_benchmarks():
    """docs/speed.md says what to expect and which settings (short); the measurements, with their
    commands and machines, are the log's (benchmarks/speed-log.md), which the page links."""
    page = (ROOT / "docs" / "speed.md").read_text(encoding="utf-8")
    assert len(page.splitlines()) < 150
    assert "../benchmarks/speed-log.md" in links(ROOT / "docs" / "speed.md")
    assert (ROOT / "benchmarks" / "speed-log.md").is_file()
