"""`omnivoice mcp`: speech as tools of the Model Context Protocol, for agents (Claude Desktop, IDEs,
any MCP client), on the official `mcp` SDK (2.x: MCPServer; needs the `mcp` extra).

    tools = Tools(speaker, root=Path("~/speech"))
    server = build_server(tools)             # the four tools below
    server.run("stdio")                      # or: server.run("streamable-http", host=..., port=...)

Tools (arguments as JSON; `settings` is an object of request settings, e.g. {"num_step": 16,
"seed": 7, "speed": 1.1, "preset": "fast"}, checked by the settings schema as a server request's
fields are: a bad value is a tool error in the CLI's words, "field 'num_step' must be an integer
in 1..64, got 100", never an exception to the client):
- speak(text, voice?, instruct?, lang?, settings?): plays on this machine through the player
  `say` uses (player.py; OMNIVOICE_PLAYER first), as the pieces are ready; returns the seconds
  and the seed once it has played. One speak plays at a time.
- synthesize(text, path, format?, voice?, instruct?, lang?, settings?): writes one audio file
  under the root (atomically: a temporary file renamed) and returns its path, length and seed;
- list_voices(): the saved voices, OpenAI's names and auto (what `voice` may name);
- describe_voice_options(): the voice-design vocabulary of `instruct`, the languages, the
  request settings and presets, the formats; a fine-tuned checkpoint's own items, languages, voices.

An argument a tool does not take (`"evil": 1`) is a tool error that names it, as the HTTP API
refuses an unknown field: never dropped unseen.

A path is relative to the root (created if missing; missing folders under it too). It may not
go up (`..`), be absolute outside the root, or reach outside it through a symbolic link: such a
path is refused before anything is generated, and nothing is ever written outside the root. A
voice is a name, never a file (speaker.py). The model loads once, on the first call that speaks,
and stays loaded; every call shares its engine loop (concurrent calls share forwards).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, Mapping, TypeVar

from pydantic import Field

from ..app.deliver import Outputs, Take, WriteFailed, deliver
from ..app.door.speaker import USAGE_ERRORS, Speaker
from ..app.settings.values import did_you_mean, shown_value, type_name
from ..engine.errors import InvalidRequest, OmniVoiceError, one_line
from ..media.formats import AUDIO_FORMATS, format_named, writable_formats
from ..media.leveller import LoudnessReport
from ..media.output import check_output
from ..media.player import open_player
from ..media.players import Player
from .schema import languages_part, presets_part, settings_part, voice_design_part

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.context import Context
    from mcp.types import CallToolResult, InputRequiredResult

T = TypeVar("T")
Reply = dict[str, object]  # a tool's result (JSON)

NAME = "omnivoice"
INSTRUCTIONS = (
    "Text to speech with the OmniVoice model. `speak` plays speech on the user's machine; `synthesize` "
    "writes an audio file under the server's root folder. Voices: `list_voices`; voice design "
    "(instruct) and languages: `describe_voice_options`."
)


def _said(loud: LoudnessReport | None) -> list[str]:
    """A loudness target missed, in the tool's warnings."""
    warning = loud.warning() if loud is not None else None
    return [warning] if warning else []


class Tools:
    """What the tools do, free of the protocol: InvalidRequest / SettingsError / OmniVoiceError
    / OSError for what goes wrong, in the CLI's words."""

    def __init__(self, speaker: Speaker, root: Path, open_player: Callable[[int], Player] | None = None) -> None:
        self.speaker = speaker
        self.root = Path(root).expanduser().resolve()
        self._open_player = open_player
        self._playing = threading.Lock()

    def speak(
        self, text: object, voice: object = None, instruct: object = None, lang: object = None, settings: object = None
    ) -> Reply:
        built = self.speaker.build(text, voice=voice, lang=lang, instruct=instruct, settings=settings)
        rate = self.speaker.sample_rate  # the model, loaded once
        opened = self._open_player or open_player
        target = built.settings["loudness"]  # measured over the whole: played once it is complete
        loud: LoudnessReport | None = None
        with self._playing:
            with opened(rate) as player:
                if target is None:
                    audio, summary = self.speaker.render(built.request, on_piece=lambda p: player.play(p.audio))
                else:
                    audio, summary = self.speaker.render(built.request)
                    done = deliver(Take(audio, rate, built.request.text), Outputs(loudness=target))
                    audio, loud = done.audio, done.loudness
                    player.play(audio)  # here, not by deliver: the player is this tool's, closed by its `with`
            played = getattr(player, "name", "player")
        return {
            "seconds": round(len(audio) / rate, 3),
            "seed": summary.seed,
            "player": played,
            "warnings": [*built.warnings, *summary.warnings, *_said(loud)],
        }

    def synthesize(
        self,
        text: object,
        path: object,
        format: object = None,
        voice: object = None,
        instruct: object = None,
        lang: object = None,
        settings: object = None,
    ) -> Reply:
        if format is not None and not isinstance(format, str):
            raise InvalidRequest(f"format must be a string, got {type_name(format)}")
        target_path = resolve_under(self.root, path, format)
        built = self.speaker.build(text, voice=voice, lang=lang, instruct=instruct, settings=settings)
        target_path.parent.mkdir(parents=True, exist_ok=True)
        target = check_output(str(target_path), format)
        audio, summary = self.speaker.render(built.request)
        outputs = Outputs(target=target, loudness=built.settings["loudness"], pipe_error=False, mark=self.speaker.mark)
        try:
            done = deliver(Take(audio, summary.sample_rate, built.request.text), outputs)
        except WriteFailed as e:
            raise e.error from None  # the system's error, said as the tool says any OSError
        audio, loud = done.audio, done.loudness
        return {
            "path": str(target_path),
            "seconds": round(len(audio) / summary.sample_rate, 3),
            "samples": int(len(audio)),
            "sample_rate": summary.sample_rate,
            "seed": summary.seed,
            "format": target.audio_format.name,
            "warnings": [*built.warnings, *summary.warnings, *_said(loud)],
        }

    def list_voices(self) -> Reply:
        return {"voices": self.speaker.voices()}

    def describe_voice_options(self) -> Reply:
        own = self.speaker.own()  # a fine-tuned checkpoint's own (docs/finetunes.md)
        return {
            "checkpoint": {
                "instruct_items": list(own.instructs),
                "languages": [{"code": code, "name": name} for code, name in own.languages],
                "voices": [v.name for v in own.voices],
            },
            "voice_design": voice_design_part(),
            "languages": languages_part(),
            "settings": settings_part(),
            "presets": presets_part(),
            "formats": writable_formats(),
        }


def resolve_under(root: Path, spec: object, format: str | None = None) -> Path:
    """The file `spec` names under `root` (a resolved folder), its extension that of `format`
    (default wav) when it has none. InvalidRequest when it leaves the root: '..', an absolute
    path elsewhere, a symbolic link (of a folder on the way, or of the file) that points out."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidRequest("path is empty: give a file name under the root, e.g. hello.wav")
    if "\x00" in spec:
        raise InvalidRequest("path holds a NUL character: give a file name under the root")
    shown = shown_value(spec)
    p = Path(spec)
    if ".." in p.parts:
        raise InvalidRequest(f"path {shown} goes up a folder ('..'): give a path inside the root ({root})")
    if p.is_absolute():
        try:
            p = p.relative_to(root)
        except ValueError:
            raise InvalidRequest(
                f"path {shown} is outside the root ({root}): give a path inside it, e.g. hello.wav"
            ) from None
    if str(p) in ("", "."):
        raise InvalidRequest(f"path {shown} is the root itself: give a file name, e.g. hello.wav")
    full = root / p
    if not full.suffix:
        full = full.with_name(full.name + format_named(format or "wav").extension)
    folder = full.parent.resolve()  # through every link on the way
    if not _inside(folder, root) or (full.is_symlink() and not _inside(full.resolve(), root)):
        raise InvalidRequest(
            f"path {shown} leads outside the root ({root}) through a symbolic link: nothing is written there"
        )
    return folder / full.name


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def guarded(call: Callable[[], T]) -> T:
    """A tool's result, or a ToolError (the client's `is_error` result) in the CLI's words."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return call()
    except (*USAGE_ERRORS, OmniVoiceError, OSError) as e:
        raise ToolError(_message(e)) from None


def _message(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    return one_line(e)


Text = Annotated[str, Field(description="What to say. [pause 1s] and [laughter] style tags work.")]
Voice = Annotated[
    str | None,
    Field(
        description="A voice from list_voices: a saved voice, an OpenAI name "
        "(alloy, ...) or auto. Default: the server's."
    ),
]
Instruct = Annotated[
    str | None,
    Field(
        description='Voice-design items, e.g. "female, low pitch, british accent" (describe_voice_options lists them).'
    ),
]
Lang = Annotated[str | None, Field(description="Language code, tag or name, e.g. en, de-AT, Japanese.")]
Settings = Annotated[
    dict[str, object] | None,
    Field(
        description='Request settings, e.g. {"speed": 1.1, "seed": 7, '
        '"num_step": 16, "preset": "fast"} '
        "(describe_voice_options lists them)."
    ),
]
OutPath = Annotated[
    str,
    Field(
        description="File to write, relative to the server's root, e.g. intro.mp3 "
        "(its extension is the format; default .wav)."
    ),
]
Format = Annotated[str | None, Field(description=f"{', '.join(AUDIO_FORMATS)} or pcm (default: the path's extension).")]


def unknown_arguments(tool: str, arguments: Mapping[str, object] | None, known: list[str]) -> str | None:
    """The tool error for arguments a tool does not take (None when there are none), worded as
    the HTTP API words unknown fields: named, with a did-you-mean and what it takes."""
    unknown = [str(k) for k in (arguments or {}) if k not in known]
    if not unknown:
        return None
    names = ", ".join(shown_value(k) for k in unknown)
    hint = did_you_mean(unknown[0], known) if len(unknown) == 1 else ""
    takes = ", ".join(known) if known else "no arguments"
    return f"unknown argument{'s' if len(unknown) > 1 else ''} {names}{hint}: {tool} takes {takes}"


def build_server(tools: Tools, version: str = "0") -> MCPServer:
    """mcp's MCPServer with the four tools over `tools`; an argument a tool does not take is a
    tool error (pydantic would drop it unseen)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    class StrictServer(MCPServer):
        async def call_tool(
            self, name: str, arguments: dict[str, object], context: Context | None = None
        ) -> CallToolResult | InputRequiredResult:
            tool = self._tool_manager.get_tool(name)
            if tool is not None:
                refused = unknown_arguments(name, arguments, list((tool.parameters or {}).get("properties", {})))
                if refused is not None:
                    raise ToolError(refused)
            return await super().call_tool(name, arguments, context)

    server = StrictServer(name=NAME, instructions=INSTRUCTIONS, version=version, log_level="WARNING")

    @server.tool(description="Speak text aloud on the user's machine (waits until it has played).")
    def speak(
        text: Text, voice: Voice = None, instruct: Instruct = None, lang: Lang = None, settings: Settings = None
    ) -> Reply:
        return guarded(lambda: tools.speak(text, voice=voice, instruct=instruct, lang=lang, settings=settings))

    @server.tool(
        description="Write speech to an audio file under the server's root folder; returns its path, "
        "length (seconds, samples at 24 kHz) and seed."
    )
    def synthesize(
        text: Text,
        path: OutPath,
        format: Format = None,
        voice: Voice = None,
        instruct: Instruct = None,
        lang: Lang = None,
        settings: Settings = None,
    ) -> Reply:
        return guarded(
            lambda: tools.synthesize(
                text, path, format=format, voice=voice, instruct=instruct, lang=lang, settings=settings
            )
        )

    @server.tool(description="The voices speak and synthesize may name: saved voices, OpenAI names, auto.")
    def list_voices() -> Reply:
        return guarded(tools.list_voices)

    @server.tool(
        description="The voice-design items of instruct by category, the languages, the request "
        "settings and presets, and the audio formats."
    )
    def describe_voice_options() -> Reply:
        return guarded(tools.describe_voice_options)

    return server
