"""Listening back: a speech recogniser (the `asr` extra), for transcripts and checks of speech.

    rec = load_recogniser("mobiuslabsgmbh/faster-whisper-large-v3-turbo")   # or a local folder
    heard = rec.transcribe(wav, 24000, lang="en")     # -> Transcript(text, words with times)
    rec.close()                                       # its memory back before the TTS body loads

The recogniser is faster-whisper (CTranslate2: int8 on CPU, word timestamps, its own hub
download), chosen over openai-whisper because checking every piece must cost far less than
generating it; it brings no `transformers`. This module is the application layer's: the engine
never imports it, nor do `--help` and the core path (faster_whisper is imported in
`load_recogniser` only).

`RECOGNISER` is the seam the rest of the application loads a recogniser through
(`recogniser(spec)`): tests put a stub with scripted transcripts there.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Literal, Protocol, overload

from ...engine.checkpoint import hub
from ...engine.errors import InvalidRequest, MissingExtra, ModelUnavailable, OmniVoiceError
from ...engine.text.languages import resolve_language

if TYPE_CHECKING:  # numpy only for the types: this module loads on the core path
    import numpy as np
    from numpy.typing import ArrayLike

# whisper-large-v3-turbo (the reference implementation's recogniser), as CTranslate2 converts it:
# faster-whisper's own "large-v3-turbo" / "turbo" alias. 99 languages; 4 decoder layers instead
# of large-v3's 32, so about 8x faster at nearly its accuracy; about 1.6 GB on disk (float16).
DEFAULT_ASR_MODEL = "mobiuslabsgmbh/faster-whisper-large-v3-turbo"
SAMPLE_RATE = 16000  # what Whisper hears
MODEL_FILES = ("model.bin", "config.json")  # a CTranslate2 Whisper folder has at least these
HUB_FILES = ["config.json", "preprocessor_config.json", "model.bin", "tokenizer.json", "vocabulary.*"]

# The options of every transcription (faster-whisper's `transcribe`): greedy at temperature 0
# with no fallback (the same audio gives the same words), word timestamps, no voice-activity
# filter (the audio is speech we made), each call on its own (no previous text as a prompt).
TRANSCRIBE_OPTIONS: dict[str, bool | float | int] = {
    "beam_size": 1,
    "temperature": 0.0,
    "word_timestamps": True,
    "vad_filter": False,
    "condition_on_previous_text": False,
    "without_timestamps": False,
}


class RecogniserFailed(OmniVoiceError):
    """The speech recogniser could not be loaded or failed on some audio (exit code 1): one line
    that names the model folder and the library's reason. Whatever faster-whisper, CTranslate2 or
    tokenizers raise (a broken tokenizer.json raises a bare Exception) becomes this, here."""


def _reason(e: BaseException) -> str:
    """A library's error in one line of at most 200 characters, its type named."""
    text = " ".join(str(e).split())[:200]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


@dataclass(frozen=True)
class Word:
    """One recognised word and its time in the audio (seconds)."""

    text: str
    start: float
    end: float


@dataclass(frozen=True)
class Transcript:
    text: str
    words: tuple[Word, ...] = ()
    language: str | None = None


class Recogniser(Protocol):
    def transcribe(
        self,
        audio: ArrayLike,
        sample_rate: int,
        lang: str | None = None,
        max_tokens: int | None = None,
        words: bool = True,
    ) -> Transcript: ...

    def close(self) -> None: ...


def to_16k(audio: ArrayLike, sample_rate: int) -> np.ndarray:
    """Mono float32 at 16 kHz, as Whisper hears it (the engine's resampler)."""
    import numpy as np

    from ...engine.sound.resample import resample

    wav = np.asarray(audio, dtype=np.float32).reshape(1, -1)
    if sample_rate != SAMPLE_RATE:
        wav = resample(wav, sample_rate, SAMPLE_RATE)
    return np.ascontiguousarray(wav[0], dtype=np.float32)


def whisper_language(lang: str | None) -> str | None:
    """A language as Whisper names it ("en" for "en-US", "English"), or None (it detects one)."""
    if not lang:
        return None
    code, _ = resolve_language(lang)
    base = str(code or lang).replace("_", "-").split("-")[0].lower()
    return {"zh": "zh", "yue": "yue", "jv": "jw"}.get(base, base)


class WhisperRecogniser:
    """faster-whisper's WhisperModel (int8 on CPU, float16 on a GPU)."""

    def __init__(self, folder: Path, device: str = "auto") -> None:
        import ctranslate2
        from faster_whisper import WhisperModel

        kind, _, index = str(device or "auto").partition(":")
        if kind in ("auto", "mps"):  # CTranslate2 runs on CUDA or the CPU
            kind = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        compute = "int8" if kind == "cpu" else "default"
        self.folder = folder
        self.model = WhisperModel(
            str(folder),
            device=kind,
            device_index=int(index or 0),
            compute_type=compute,
            cpu_threads=min(os.cpu_count() or 1, 8),
        )

    def languages(self) -> list[str]:
        return list(self.model.supported_languages)

    def transcribe(
        self,
        audio: ArrayLike,
        sample_rate: int,
        lang: str | None = None,
        max_tokens: int | None = None,
        words: bool = True,
    ) -> Transcript:
        """The words heard; `words`: with their times (CTranslate2's alignment encodes the audio
        again: about twice the time, so --verify asks without)."""
        wav = to_16k(audio, sample_rate)
        language = whisper_language(lang)
        if language is not None and language not in self.model.supported_languages:
            language = None
        options = dict(TRANSCRIBE_OPTIONS, word_timestamps=words)
        if max_tokens is not None:
            options["max_new_tokens"] = max(1, min(int(max_tokens), 440))
        try:
            segments, info = self.model.transcribe(wav, language=language, **options)
            return transcript_of(list(segments), info.language)
        except (MemoryError, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - the recogniser's failures come in many classes: one line
            raise RecogniserFailed(f"the speech recogniser ({self.folder}) failed: {_reason(e)}") from None

    def close(self) -> None:
        self.model = None
        gc.collect()


def transcript_of(segments: list, language: str | None = None) -> Transcript:
    """faster-whisper's segments as one Transcript (text joined, words in order)."""
    text = "".join(s.text for s in segments).strip()
    words = tuple(Word(w.word.strip(), float(w.start), float(w.end)) for s in segments for w in (s.words or ()))
    return Transcript(" ".join(text.split()), words, language)


@overload
def resolve_asr_model(spec: str, flag: str = ..., download: Literal[True] = ...) -> Path: ...
@overload
def resolve_asr_model(spec: str, flag: str = ..., *, download: bool) -> Path | None: ...


def resolve_asr_model(spec: str, flag: str = "--asr-model", download: bool = True) -> Path | None:
    """A recogniser folder: a local one (it must be a CTranslate2 Whisper model), or a hub id
    (or one of faster-whisper's names, e.g. large-v3-turbo) fetched into the Hugging Face cache.
    ModelUnavailable (one line) when offline and not cached; with download=False, None where it
    would be downloaded now."""
    path = Path(spec).expanduser()
    if path.exists() or spec.startswith((".", "/", "~")):
        if not path.is_dir():
            raise InvalidRequest(f"{flag} {spec}: no such model folder (give a folder or a hub id)", "asr_model")
        missing = [f for f in MODEL_FILES if not (path / f).is_file()]
        if missing:
            raise InvalidRequest(
                f"{flag} {spec}: the folder is not a faster-whisper (CTranslate2) model: it lacks {', '.join(missing)}",
                "asr_model",
            )
        return path
    from faster_whisper.utils import _MODELS

    repo_id = _MODELS.get(spec, spec)
    if repo_id.count("/") != 1:
        names = ", ".join(sorted(_MODELS))
        raise InvalidRequest(
            f"{flag} {spec!r} is not a hub id (owner/name), a model folder nor one of {names}", "asr_model"
        )
    import huggingface_hub as hf

    cache = hub.hub_cache_dir()
    try:
        return Path(hf.snapshot_download(repo_id, cache_dir=cache, allow_patterns=HUB_FILES, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached (LocalEntryNotFoundError and its kin)
        pass
    reason = hub.offline_reason()
    if reason is not None:
        raise ModelUnavailable(
            f"speech recogniser {repo_id} is not in the Hugging Face cache and cannot be "
            f"downloaded (offline: {reason}); give {flag} a local model folder"
        )
    if not download:
        return None
    try:
        return Path(hf.snapshot_download(repo_id, cache_dir=cache, allow_patterns=HUB_FILES))
    except Exception as e:  # noqa: BLE001 - network and disk errors come in many classes
        if _unreachable(e):  # no network: the hub's long message says only that
            raise ModelUnavailable(
                f"speech recogniser {repo_id} is not in the Hugging Face cache and the Hugging Face hub "
                f"cannot be reached (no connection); connect once to fetch it, or give {flag} a local model folder"
            ) from None
        first = " ".join(str(e).split()).split(". ")[0][:120]  # one line: the error's first sentence
        raise ModelUnavailable(
            f"speech recogniser {repo_id} could not be downloaded ({type(e).__name__}: {first}); "
            f"give {flag} a local model folder"
        ) from None


def _unreachable(e: BaseException) -> bool:
    """The error of a download that found no network (huggingface_hub's LocalEntryNotFoundError,
    which it raises when the hub cannot be reached and nothing is cached; a connection error)."""
    names = {type(c).__name__ for c in (e, e.__cause__, e.__context__) if c is not None}
    return bool(names & {"LocalEntryNotFoundError", "ConnectionError", "ConnectTimeout", "ConnectError"}) or isinstance(
        e, (ConnectionError, TimeoutError)
    )


def load_recogniser(spec: str, device: str = "auto", what: str = "transcribing speech") -> Recogniser:
    """The real recogniser (faster-whisper); MissingExtra when the `asr` extra is not installed."""
    try:
        import faster_whisper  # noqa: F401
    except ImportError:
        raise MissingExtra(what, "faster-whisper", "asr") from None
    folder = resolve_asr_model(spec)
    try:
        return WhisperRecogniser(folder, device)
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - a broken model.bin, config or tokenizer.json: one line, exit 1
        raise RecogniserFailed(
            f"--asr-model {spec}: the speech recogniser cannot be loaded from {folder} ({_reason(e)}); "
            "give --asr-model a complete faster-whisper model folder"
        ) from None


# The seam every caller loads a recogniser through: (spec, device, what) -> Recogniser.
RECOGNISER: Callable[..., Recogniser] = load_recogniser


def check_recogniser(spec: str | None, what: str) -> None:
    """Before the TTS model loads (and anything is generated): the recogniser a run will need
    can be had. MissingExtra without the `asr` extra; InvalidRequest for a folder that is not a
    model; ModelUnavailable offline for a hub model not in the cache. A model that is online to
    download is fetched when it is loaded. (A stand-in at the RECOGNISER seam is not checked.)"""
    if RECOGNISER is not load_recogniser:
        return
    try:
        import faster_whisper  # noqa: F401
    except ImportError:
        raise MissingExtra(what, "faster-whisper", "asr") from None
    resolve_asr_model(spec or DEFAULT_ASR_MODEL, download=False)


def recogniser(spec: str | None, device: str = "auto", what: str = "transcribing speech") -> Recogniser:
    return RECOGNISER(spec or DEFAULT_ASR_MODEL, device, what)


def transcribe_reference(
    wav: ArrayLike,
    sample_rate: int,
    lang: str | None,
    spec: str | None,
    device: str = "auto",
    source: str = "the reference audio",
) -> str:
    """The words of a reference recording (prepared): a recogniser loaded, used and freed."""
    what = f"a reference without a transcript ({source}: no --ref-text, no .txt beside it)"
    try:
        rec = recogniser(spec, device, what)
    except ModelUnavailable as e:  # offline: the transcript itself is the simplest way out
        raise ModelUnavailable(
            f'{source} has no transcript, and {e}; or give --ref-text "the words spoken in it" '
            "(or a .txt of them beside the recording)"
        ) from None
    try:
        heard = rec.transcribe(wav, sample_rate, lang)
    finally:
        rec.close()
    if not heard.text.strip():
        raise InvalidRequest(
            f'the speech recogniser heard no words in {source}: give --ref-text "the words spoken in it"', "ref_text"
        )
    return heard.text


@dataclass
class RecogniserHolder:
    """One recogniser for a run, loaded on first use."""

    spec: str | None
    device: str = "auto"
    what: str = "transcribing speech"
    _rec: Recogniser | None = field(default=None, repr=False)

    def get(self) -> Recogniser:
        if self._rec is None:
            self._rec = recogniser(self.spec, self.device, self.what)
        return self._rec

    def close(self) -> None:
        if self._rec is not None:
            self._rec.close()
            self._rec = None
