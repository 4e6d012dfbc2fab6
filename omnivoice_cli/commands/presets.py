"""`omnivoice presets [show NAME]`: the built-in and user presets (settings.py reads them).

The app layer is imported inside the functions that run it: `--help` reads only the texts here.
"""

from __future__ import annotations

import json
from typing import Any

import typer

from ..app.settings.schema import PRESET_KEYS, SCHEMA
from ..ui.helpfmt import HelpCommand, HelpGroup
from ..ui.messages import echo, warn
from ..ui.text import columns, wrap_row

app = typer.Typer(
    cls=HelpGroup,
    help="List the presets (built-in and user), or show one's resolved settings with `presets show NAME`.",
    no_args_is_help=False,
    add_completion=False,
)


@app.callback(invoke_without_command=True)
def presets(ctx: typer.Context) -> None:
    """List the built-in and user presets: name, source, description (user ones shadow built-in ones).

    User presets are TOML files in $OMNIVOICE_HOME/presets, else $XDG_CONFIG_HOME/omnivoice/presets
    (~/.config/omnivoice/presets).
    """
    if ctx.invoked_subcommand is not None:
        return
    from ..app.settings.presets import list_presets, user_preset_dir

    rows = list_presets()
    out = typer.get_text_stream("stdout")
    width = max([len(name) for name, *_ in rows] + [4])
    src_width = max([len(source) for _, _, source, *_ in rows] + [8])
    for name, path, source, found, error in rows:
        about = found.description if found is not None else f"(broken: {error})"
        out.write(wrap_row(f"{name:<{width}}  {source:<{src_width}}  ", about, columns(out)).rstrip() + "\n")
        if error:
            warn(error)
    echo(f"user presets: {user_preset_dir()}")


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


@app.command("show", cls=HelpCommand)
def presets_show(
    name: str = typer.Argument(..., metavar="NAME|FILE", help="A preset name or a .toml file."),
) -> None:
    """Print the settings a preset resolves to (defaults < preset), as a preset file."""
    from ..app.settings.layers import resolve
    from ..app.settings.presets import find_preset

    found = find_preset(name)
    resolved = resolve((found.origin, found.settings))
    out = typer.get_text_stream("stdout")
    out.write(f"# preset {found.name!r} ({found.source}): {found.path}\n")
    if found.description:
        out.write(f"description = {toml_value(found.description)}\n")
    for key in PRESET_KEYS:
        value = resolved[key]
        origin = "preset" if key in found.settings else "default"
        if value is None:
            out.write(f"# {key} is not set ({origin})\n")
        else:
            head = f"{key} = {toml_value(value)}  # "
            lead = " " * (len(head) - 2) + "# "  # a comment still: the output stays a preset file
            out.write(wrap_row(head, f"{origin}: {SCHEMA[key].help}", columns(out), lead) + "\n")
