"""Errors as OpenAI's API gives them: {"error": {"message", "type", "param", "code"}}, one line."""

from __future__ import annotations

import hmac
import json
import re
from pathlib import Path

from ..app.settings.setting import SettingsError
from ..app.settings.values import did_you_mean, shown_value
from ..engine.errors import InvalidRequest, OmniVoiceError, one_line
from ..engine.tickets import RequestCancelled, ServiceStopped

INVALID = "invalid_request_error"


class ApiError(Exception):
    """An HTTP error reply: status, a one-line message and OpenAI's error fields."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str = INVALID,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.param, self.code, self.type = status, param, code, type
        self.headers = dict(headers or {})

    @property
    def message(self) -> str:
        return one_line(self) if str(self).strip() else "error"  # never the class name

    def body(self) -> bytes:
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        try:
            return json.dumps({"error": error}, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate echoed from the request: JSON's \\u escapes
            return json.dumps({"error": error}).encode("ascii")


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def unknown_field(
    key: object,
    known: tuple[str, ...] | list[str],
    *,
    hint: str | None = None,
    listed: str | None = None,
    error: type[ApiError] = ApiError,
) -> ApiError:
    """400 unknown_field: `key` is none of the body's `known` fields. `hint`: what follows its name
    (default: the closest known one); `listed`: the known fields as the message lists them."""
    hint = did_you_mean(str(key), known) if hint is None else hint
    listed = ", ".join(known) if listed is None else listed
    message = f"field {shown_value(key)} is not a known field{hint}; known: {listed}"
    return error(400, message, param=str(key)[:80], code="unknown_field")


def busy(message: str, retry_after: int, code: str = "server_busy") -> ApiError:
    """503 with Retry-After (the queue is full, the model loads, the server stops)."""
    return ApiError(503, message, code=code, type="server_error", headers={"Retry-After": str(int(retry_after))})


def request_field(setting: str | None) -> str | None:
    """The body's field of an engine error's setting: the text to speak is 'input'."""
    return "input" if setting == "text" else setting


def from_engine(e: BaseException, param: str | None = None) -> ApiError:
    """An engine error as a reply: InvalidRequest -> 400 naming its setting; other failures -> 500."""
    if isinstance(e, (InvalidRequest, SettingsError)):
        return bad_request(str(e), param or request_field(getattr(e, "setting", None)))
    if isinstance(e, ApiError):
        return e
    if isinstance(e, (RequestCancelled, ServiceStopped)):  # the server stops under the request
        return busy(str(e), 5, "shutting_down")
    if isinstance(e, OmniVoiceError):
        return ApiError(500, scrub_paths(str(e)), type="server_error", code="engine_error")
    return ApiError(
        500, scrub_paths(f"internal error: {type(e).__name__}: {e}"), type="server_error", code="internal_error"
    )


def scrub(message: str, *paths: tuple[object, str]) -> str:
    """A message with the server's own folders left out (a reply never shows server paths)."""
    for path, shown in paths:
        message = message.replace(str(path), shown)
    return message


# an absolute path in a server's own failure (a request names no files: any such path is the
# server's): a slash (or ~/) that starts a word, then path characters
_ABSOLUTE = re.compile(r"(?<![\w.:/~-])(?:~/|/)[^\s'\"()\[\]{},;:]+")


def scrub_asr(message: str, spec: str | None) -> str:
    """`message` with the server's --asr-model (as given, and the folder it names) shown as <asr-model>."""
    if not spec:
        return message
    folder = Path(spec).expanduser()
    names = sorted({spec, str(folder), str(folder.absolute())}, key=len, reverse=True)  # the longest first
    return scrub(message, *((name, "<asr-model>") for name in names))


def scrub_paths(message: str) -> str:
    """A 5xx message with every absolute path shown as <path> (the server's folders are its own)."""
    return _ABSOLUTE.sub("<path>", message)


def check_key(header: bytes, key: str) -> ApiError | None:
    """None when `Authorization: Bearer KEY` holds the key (compared in constant time), else 401."""
    challenge = {"WWW-Authenticate": "Bearer"}
    if not header:
        return ApiError(
            401,
            "missing API key: send the header 'Authorization: Bearer KEY'",
            code="missing_api_key",
            headers=challenge,
        )
    scheme, _, given = header.partition(b" ")
    if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), key.encode("utf-8")):
        return ApiError(401, "wrong API key", code="invalid_api_key", headers=challenge)
    return None
