"""`--help` a person can read at 80 columns: options in panels, flag names never cut.

typer's own rich help gives every panel five columns (long flag, short flag, negative flag, type,
help), so at 80 columns the help column shrinks to a few characters and long flag names are cut.
Here each option is one cell ("-f, --text-file PATH", "--denoise / --no-denoise") that never wraps,
and the help text takes the rest of the width. A command's epilog is shown as its examples, a
long one broken into shell continuation lines (`wrap_example`), never cut with an ellipsis.
The expert knobs (the schema's `advanced` settings, a command's options in one of EXPERT_PANELS,
each panel a purpose: the sampler's internals, the step cache, listening back, ...) are shown only
by `--help-all`; `--help` ends with a line saying so. Rich is imported only when help
is printed.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

# The exceptions of the click typer runs on (cli.py and commands/ raise and catch its UsageError).
try:  # typer >= 0.2x vendors its own click
    from typer._click import exceptions as click_exceptions  # noqa: F401 - for cli.py, commands/
except ImportError:  # older typer runs on click
    from click import exceptions as click_exceptions  # type: ignore[no-redef]  # noqa: F401

from ..app.settings.setting import EXPERT_PANELS

# The panels in the order shown; "*" stands for any other (Server, Cluster, ...).
ORDER = ("Arguments", "Input", "Voice", "Generation", "Output", "Hardware", "*", *EXPERT_PANELS, "Options")
HELP_ALL = "--help-all"
MORE = "\f"  # in a command's help text: what follows (the details) is shown only by --help-all
MAX_WIDTH = 100


def _console():
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=False)
    if console.width > MAX_WIDTH:
        console = Console(highlight=False, soft_wrap=False, width=MAX_WIDTH)
    return console


def option_label(param: Any) -> str:
    """'-f, --text-file PATH', '--denoise / --no-denoise', 'TEXT...'."""
    if param.param_type_name == "argument":
        return param.metavar or param.name.upper()
    names = sorted(param.opts, key=lambda o: (o.startswith("--"), o))  # short ones first
    label = ", ".join(names)
    if param.secondary_opts:
        label += " / " + ", ".join(param.secondary_opts)
    if not param.is_flag and not getattr(param, "count", False):
        label += " " + (param.metavar or "VALUE")
    return label


def _panels(obj: Any, ctx: Any) -> dict[str, list[tuple[str, str]]]:
    panels: dict[str, list[tuple[str, str]]] = {}
    for param in obj.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        default = "Arguments" if param.param_type_name == "argument" else "Options"
        panel = getattr(param, "rich_help_panel", None) or default
        panels.setdefault(panel, []).append((option_label(param), getattr(param, "help", None) or ""))
    rank = {name: i for i, name in enumerate(ORDER)}
    return dict(sorted(panels.items(), key=lambda kv: rank.get(kv[0], rank["*"])))


def _table(rows: list[tuple[str, str]], left: int, gap: int):
    from rich.table import Table
    from rich.text import Text

    table = Table.grid(padding=(0, gap), expand=True)
    table.add_column(width=left, overflow="fold")  # the longest label (up to half the width): no wrap at 80
    table.add_column(ratio=1, overflow="fold")
    for name, text in rows:
        table.add_row(Text(name, style="bold cyan"), Text(text))
    return table


def _panel(title: str, body: Any):
    from rich.panel import Panel

    return Panel(body, title=title, title_align="left", border_style="dim")


def _print_text(console: Any, text: str) -> None:
    from rich.padding import Padding
    from rich.text import Text

    for para in [p.strip() for p in text.strip().split("\n\n") if p.strip()]:
        console.print(Padding(Text(" ".join(para.split())), (0, 1, 1, 1)))


def _shell_split(line: str) -> tuple[list[str], str | None]:
    """(the words of a shell line, quoted spaces kept inside a word; its trailing comment or None)."""
    words: list[str] = []
    word, quote = "", ""
    for i, c in enumerate(line):
        if quote:
            word += c
            quote = "" if c == quote else quote
        elif c in "'\"":
            word, quote = word + c, c
        elif c == "#" and not word and (i == 0 or line[i - 1].isspace()):
            return words, line[i:]
        elif c.isspace():
            if word:
                words.append(word)
            word = ""
        else:
            word += c
    return [*words, *([word] if word else [])], None


def wrap_example(line: str, width: int) -> list[str]:
    """A shell example that fits `width` columns: a long one is broken between words (never inside
    quotes, and an option stays with its value) with ` \\` continuations, its comment put on a
    line of its own before it. A word longer than the width stays whole (the panel folds it:
    nothing is ever cut)."""
    if len(line) <= width:
        return [line]
    indent = line[: len(line) - len(line.lstrip())]
    words, comment = _shell_split(line)
    out = [indent + comment] if comment else []
    lines: list[list[str]] = [[]]
    for word in words:
        first = len(lines) == 1
        room = width - len(indent) - (0 if first else 2) - 2  # the indent, and " \\" at the end
        if lines[-1] and len(" ".join([*lines[-1], word])) > room:
            last = lines[-1]
            moved = [last.pop()] if len(last) > 1 and last[-1].startswith("-") and len(last[-1]) > 1 else []
            lines.append([*moved, word])
        else:
            lines[-1].append(word)
    for i, part in enumerate(lines):
        text = (indent if i == 0 else indent + "  ") + " ".join(part)
        out.append(text + (" \\" if i < len(lines) - 1 else ""))
    return out


def _print_examples(console: Any, epilog: str | None) -> None:
    from rich.text import Text

    if not epilog:
        return
    width = console.width - 4  # inside the panel's borders and padding
    lines = [part for ln in epilog.strip("\n").splitlines() for part in wrap_example(ln.rstrip(), width)]
    console.print(_panel("Examples", Text("\n".join(lines), no_wrap=True, overflow="fold")))


def render_help(obj: Any, ctx: Any, commands: list[tuple[str, str]] | None = None, show_all: bool = False) -> None:
    """The help of a command or group: usage, text, option panels, examples. The expert panels
    only with `show_all` (--help-all); without it, a last line says how many options it leaves out."""
    from rich.padding import Padding
    from rich.text import Text

    console = _console()
    console.print(Padding(Text(obj.get_usage(ctx), style="bold"), (1, 1, 1, 1)))
    shown, _, details = (obj.help or "").partition(MORE)
    if shown.strip() or (show_all and details.strip()):
        _print_text(console, shown + ("\n\n" + details if show_all else ""))
    panels = _panels(obj, ctx)
    advanced = [] if show_all else [row for name in EXPERT_PANELS for row in panels.pop(name, [])]
    if commands:
        panels = {"Commands": commands, **panels}
    left = max((len(name) for rows in panels.values() for name, _ in rows), default=10)
    left = min(left, max(20, console.width // 2 - 4))
    longest = max((len(word) for rows in panels.values() for _, text in rows for word in text.split()), default=0)
    gap = 1 if console.width - 4 - left - 2 < longest else 2  # a long word (a hub id) kept whole by a narrower gap
    for title, rows in panels.items():
        console.print(_panel(title, _table(rows, left, gap)))
    _print_examples(console, obj.epilog)
    left_out = [
        *(["the details"] if details.strip() and not show_all else []),
        *([f"the {len(advanced)} advanced options"] if advanced else []),
    ]
    if left_out:
        _print_text(console, f"{ctx.command_path} {HELP_ALL} shows {' and '.join(left_out)}.")


def asks_help_all(args: list[str], leading: bool) -> bool:
    """Whether `args` ask for --help-all: anywhere before a `--` (a command), or among the options
    before the first word (a group: what follows is a command's)."""
    for arg in args:
        if arg == "--" or (leading and not arg.startswith("-")):
            return False
        if arg == HELP_ALL:
            return True
    return False


class _HelpAll:
    """--help-all beside click's --help: the help with the expert panels, then exit. Read from
    the arguments before they are parsed, so it needs no option of its own (nor a panel row)."""

    leading = False  # a group reads only the options before its command's name

    def listed_commands(self, ctx: Any) -> list[tuple[str, str]] | None:
        return None

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing and asks_help_all(args, self.leading):
            render_help(self, ctx, self.listed_commands(ctx), show_all=True)
            ctx.exit()
        return super().parse_args(ctx, args)  # type: ignore[misc]  # click's command, the other base


BARE = "omnivoice.bare"  # ctx.meta key: the command was given no arguments at all


class HelpCommand(_HelpAll, TyperCommand):
    """A typer command whose --help is `render_help`.

    A command whose callback has `reads_stdin` (a function: whether stdin is piped; `say`) given
    no arguments at a terminal shows one line and the first three of its examples (exit 2), not
    its whole help; piped text (`echo Hello | omnivoice say`) is what it speaks, and the command
    raises NoArgsIsHelpError itself when the pipe is empty (ctx.meta[BARE] says it had no
    arguments): the help, as before."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        piped = getattr(self.callback, "reads_stdin", None)
        if not args and self.no_args_is_help and piped is not None and not piped() and self.epilog:
            from .hints import bare_usage  # nothing to say at a terminal: one line and three examples

            typer.echo(bare_usage(ctx.command_path, self.epilog), err=True)
            ctx.exit(2)
        if args or not self.no_args_is_help or piped is None or not piped():
            return super().parse_args(ctx, args)
        ctx.meta[BARE] = True
        self.no_args_is_help = False
        try:
            return super().parse_args(ctx, args)
        finally:
            self.no_args_is_help = True

    def format_help(self, ctx: Any, formatter: Any) -> None:
        render_help(self, ctx)


class HelpGroup(_HelpAll, TyperGroup):
    """A typer group whose --help is `render_help`, with its commands in a panel."""

    leading = True

    def listed_commands(self, ctx: Any) -> list[tuple[str, str]] | None:
        commands = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                commands.append((name, cmd.get_short_help_str(limit=200)))
        return commands

    def format_help(self, ctx: Any, formatter: Any) -> None:
        render_help(self, ctx, self.listed_commands(ctx))
