"""The voice endpoints: list the voices, save one from an upload, delete one.

    GET    /v1/audio/voices        -> {"voices": [{"id", "name", "type", ...}]}: saved, OpenAI names, auto
    POST   /v1/audio/voices        multipart: name, file (the recording), ref_text (its words) -> 201;
                                   or name, file (a voice file of `omnivoice voice export`) -> 201
    DELETE /v1/audio/voices/{id}   -> {"id", "object": "voice", "deleted": true}

An upload is read from memory (bounded by the server's upload limit), refused when it is not
audio or longer than MAX_UPLOAD_SECONDS, prepared as `voice add` prepares a recording, encoded by
the engine loop between two forwards, and saved in the same store as `omnivoice voice add`. A
voice file (`omnivoice voice export`: safetensors) is verified as `voice import` verifies it
(app/voices/voiceexport.py: bounded, its checksum) and saved as it is, without the engine.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..app.listening import listen
from ..app.settings.values import did_you_mean, join_lines
from ..app.voices import voiceexport, voices
from ..engine.errors import InvalidRequest, MissingExtra, ModelUnavailable, one_line
from ..engine.model.config import SAMPLE_RATE
from .errors import ApiError, bad_request, scrub, scrub_asr, scrub_paths, unknown_field

if TYPE_CHECKING:
    from ..engine.sound.voice import PreparedReference, VoicePrompt
    from .state import ServerState

MAX_UPLOAD_SECONDS = 60.0  # a reference is best at 3-10 s
UPLOAD_FIELDS = ("name", "file", "ref_text")
MAX_FIELD_BYTES = 64 * 1024
_SUFFIX_RE = re.compile(r"^\.[A-Za-z0-9]{1,5}$")


async def list_voices(request: Request) -> Response:
    """The voices a request may name, as the server's Speaker lists them (OpenAI's `id` added)."""
    state: ServerState = request.app.state.server
    listed = await anyio.to_thread.run_sync(state.speaker.voices)
    return JSONResponse({"voices": [{"id": v["name"], **v} for v in listed]})


async def _form_fields(request: Request) -> tuple[str, UploadFile, str | None]:
    """(name, upload, transcript) of a multipart body, or a 400 saying what is missing."""
    if not request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
        raise bad_request("send multipart/form-data with the fields name, file (the recording) and ref_text")
    try:
        form = await request.form(max_files=1, max_fields=len(UPLOAD_FIELDS), max_part_size=MAX_FIELD_BYTES)
    except MultiPartException as e:
        raise bad_request(f"the multipart body cannot be read: {e}") from None
    for key in form.keys():
        if key not in UPLOAD_FIELDS:
            raise unknown_field(key, UPLOAD_FIELDS)
    name, upload, text = form.get("name"), form.get("file"), form.get("ref_text")
    if not isinstance(name, str) or not name.strip():
        raise bad_request("field 'name' is missing: give the voice a name, e.g. alice", "name")
    if not isinstance(upload, UploadFile):
        raise bad_request("field 'file' is missing: attach the recording (3-10 s of speech) as a file", "file")
    if text is None:
        return name.strip(), upload, None  # the speech recogniser's words (listen.py, the asr extra)
    if not isinstance(text, str) or not join_lines(text):
        raise bad_request(
            "field 'ref_text' is empty: give the words spoken in the recording, or leave the "
            "field out to have them transcribed",
            "ref_text",
        )
    return name.strip(), upload, join_lines(text)


def heard_upload(prepared: PreparedReference, filename: str, asr_model: str | None, device: str = "auto") -> str:
    """The words of an uploaded recording without ref_text: the speech recogniser's (loaded, used, freed)."""
    try:
        return listen.transcribe_reference(
            prepared.wav, SAMPLE_RATE, None, asr_model, device, source=f"the uploaded file {filename!r}"
        )
    except (MissingExtra, ModelUnavailable) as e:  # no recogniser here: the client gives the words
        raise bad_request(
            f"field 'ref_text' is missing: give the words spoken in {filename!r} (this server has no "
            f"speech recogniser at hand: {e})",
            "ref_text",
        ) from None


def prepare_upload(data: bytes, filename: str, transcript: str | None) -> PreparedReference:
    """The uploaded recording, read and prepared (engine.voice.PreparedReference); InvalidRequest
    when it is not audio, too long, silent or too short."""
    import soundfile as sf

    from ..engine.sound import voice as vmod  # torch: loaded with the model, not with the server's modules

    shown = f"the uploaded file {filename!r}"
    suffix = os.path.splitext(filename)[1]
    fd, tmp = tempfile.mkstemp(prefix="omnivoice-upload-", suffix=suffix if _SUFFIX_RE.match(suffix) else ".audio")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            info = sf.info(tmp)
        except Exception as e:  # noqa: BLE001 - whatever libsndfile says: it is not audio it reads
            why = scrub(one_line(e), (tmp, repr(filename)))
            raise InvalidRequest(f"{shown} is not audio (libsndfile: {why}): send WAV, FLAC, OGG or MP3") from None
        if info.samplerate <= 0 or info.frames / info.samplerate > MAX_UPLOAD_SECONDS:
            seconds = info.frames / max(info.samplerate, 1)
            raise InvalidRequest(f"{shown} is {seconds:.0f} s long: at most {MAX_UPLOAD_SECONDS:g} s (3-10 s is best)")
        try:
            wav = vmod.load_reference(tmp)
            return vmod.prepare_reference(wav, transcript, source=shown)
        except InvalidRequest as e:
            raise InvalidRequest(scrub(str(e), (tmp, repr(filename)))) from None
    finally:
        os.unlink(tmp)


def is_voice_file(data: bytes, filename: str) -> bool:
    """An upload that is a safetensors voice file (by its name or its header's start), not a recording."""
    return filename.lower().endswith(voices.VOICE_SUFFIX) or (len(data) > 9 and data[8:10] in (b"{", b'{"'))


def import_upload(data: bytes, filename: str) -> tuple[VoicePrompt, dict[str, object]]:
    """A voice file uploaded: verified (voiceexport.verify_voice_file) and read; InvalidRequest otherwise."""
    shown = f"the uploaded file {filename!r}"
    if len(data) > voiceexport.MAX_VOICE_BYTES:
        raise InvalidRequest(f"{shown} is {len(data)} bytes: at most {voiceexport.MAX_VOICE_BYTES} for a voice file")
    fd, tmp = tempfile.mkstemp(prefix="omnivoice-upload-", suffix=voices.VOICE_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            meta = voiceexport.verify_voice_file(Path(tmp), "upload")
            prompt = voices.load_voice_file(Path(tmp))
        except InvalidRequest as e:
            raise InvalidRequest(scrub(str(e), (tmp, repr(filename)))) from None
    finally:
        os.unlink(tmp)
    kept: dict[str, object] = {k: meta[k] for k in ("model", "lang") if meta.get(k)}
    return prompt, {**kept, "source": f"upload {filename}".strip(), "imported": "voice file"}


async def create_voice(request: Request) -> Response:
    state: ServerState = request.app.state.server
    service = state.require_service()
    name, upload, transcript = await _form_fields(request)
    heard = transcript is None
    try:
        voices.check_name(name)
    except InvalidRequest as e:
        raise bad_request(str(e), "name") from None
    assert state.voice_lock is not None  # made at startup
    async with state.voice_lock:
        if voices.exists(name) is not None or name.lower() == "auto":
            raise ApiError(
                409,
                f"voice {name!r} already exists: delete it first (DELETE /v1/audio/voices/{name}) or "
                "choose another name",
                param="name",
                code="voice_exists",
            )
        data = await upload.read()
        if is_voice_file(data, upload.filename or ""):
            try:
                prompt, meta = await anyio.to_thread.run_sync(import_upload, data, upload.filename or "upload")
            except InvalidRequest as e:
                raise bad_request(str(e), "file") from None
            await anyio.to_thread.run_sync(lambda: voices.save(name, prompt, force=False, **meta))
            body = {
                "id": name,
                "name": name,
                "type": "saved",
                "seconds": round(prompt.codes.shape[-1] / voices.FRAME_RATE, 2),
            }
            return JSONResponse({**body, "text": prompt.text, "text_source": "voice file", "warnings": []}, 201)
        try:
            prepared = await anyio.to_thread.run_sync(prepare_upload, data, upload.filename or "upload", transcript)
        except InvalidRequest as e:
            raise bad_request(str(e), "file") from None
        if transcript is None:
            asr_model = getattr(state.options, "asr_model", None)
            try:
                transcript = await anyio.to_thread.run_sync(
                    heard_upload, prepared, upload.filename or "upload", asr_model
                )
            except InvalidRequest as e:
                raise bad_request(str(e), "ref_text") from None
            except ModelUnavailable as e:
                raise ApiError(503, str(e), param="ref_text", code="asr_model_unavailable") from None
            except listen.RecogniserFailed as e:  # the server's --asr-model is broken: its folder not shown
                message = scrub_paths(scrub_asr(str(e), asr_model))
                raise ApiError(500, message, param="ref_text", type="server_error", code="no_recogniser") from None
        prompt = await asyncio.wrap_future(service.call(lambda engine: engine.voice_from_audio(prepared, transcript)))
        source = f"upload {upload.filename or ''}".strip()
        await anyio.to_thread.run_sync(lambda: voices.save(name, prompt, source=source, model=state.options.model))
    seconds = prompt.codes.shape[-1] / voices.FRAME_RATE
    body = {
        "id": name,
        "name": name,
        "type": "saved",
        "seconds": round(seconds, 2),
        "text": prompt.text,
        "text_source": "asr" if heard else "ref_text",
        "warnings": list(prepared.warnings),
    }
    return JSONResponse(body, status_code=201)


async def delete_voice(request: Request) -> Response:
    state: ServerState = request.app.state.server
    name = request.path_params["id"]
    assert state.voice_lock is not None  # made at startup
    async with state.voice_lock:
        index = voices.voice_index()
        if name in index:
            index[name].unlink(missing_ok=True)
            return JSONResponse({"id": name, "object": "voice", "deleted": True})
    if name.lower() in state.options.voice_map or name.lower() == "auto":
        raise bad_request(
            f"voice {name!r} is not a saved voice (it is one of the server's built-in names): only "
            "saved voices can be deleted",
            "voice",
        )
    known = ", ".join(index) or "none"
    raise ApiError(
        404,
        f"unknown voice {name!r}{did_you_mean(name, index)}; saved voices: {known}",
        param="voice",
        code="voice_not_found",
    )
