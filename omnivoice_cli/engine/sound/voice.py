"""Reference audio for voice cloning: load, prepare as the reference does, encode to codes.

What the reference (`OmniVoice.create_voice_clone_prompt`, omnivoice 0.2.1) does, in order:
  1. load: soundfile float32, channels averaged, resampled to 24 kHz (torchaudio defaults:
     resample.py reproduces them bit for bit);
  2. RMS of that waveform; if 0 < RMS < 0.1 the waveform is scaled to RMS 0.1 (the output is
     scaled back by RMS / 0.1 after decoding, so the caller keeps the RMS);
  3. with preprocess_prompt (default): when there is no transcript and the audio is longer than
     20 s, it is cut at a silence gap (`trim_long_audio`: last pause starting by 15 s, at least
     3 s kept); then silences are removed (pydub, -50 dBFS: inner pauses over 200 ms shortened,
     100 ms kept at the start and 200 ms at the end); empty audio after that is an error;
  4. longer than 20 s: a warning (slower, more memory, worse cloning);
     on top of the reference, warnings outside the 3-10 s that cloning works best with (see
     `length_warning`);
  5. cut (not padded) to a multiple of the hop (960), encoded to codes [8, T_ref];
  6. with preprocess_prompt, the transcript ends in '.' ('。' for CJK) unless it already ends in
     punctuation (`text.add_punctuation`).
On top of the reference, a recording still sounding in its last 100 ms (cut mid-word: short
generations come out distorted, k2-fsa/OmniVoice#265) is padded with 0.2 s of silence (with preprocess) before it
is cut to the hop, with a warning (`ends_sounding`). It also refuses references shorter than 0.5 s or longer than 60 s
after preparation, reports unreadable or missing files as InvalidRequest naming the file, and
bounds what a file may cost before reading it: by its header, at most 300 s and 2**25 samples
(all channels) are read, and a sample rate whose resampling kernel would be large (an odd rate
such as 44101 Hz) is refused. Voice files are checked (shape, size, metadata) before any tensor
of theirs is materialised.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..checkpoint.tensorfile import write_file
from ..errors import InvalidRequest
from ..model.config import SAMPLE_RATE
from ..text.canvastext import add_punctuation
from . import audio as audio_ops
from .resample import reduced_rates, resample
from .voicefile import (  # noqa: F401
    VOICE_FORMAT,
    VOICE_FORMAT_VERSION,
    open_voice_file,
    read_voice_metadata,
    voice_rms,
    voice_text,
)

HOP_LENGTH = 960  # codec samples per frame
RMS_TARGET = 0.1  # quieter references are scaled up to this RMS before encoding
MAX_SECONDS = 20.0  # longer references: trimmed (without transcript) and warned about
MIN_SECONDS = 0.5  # shorter prepared references are refused
BEST_SECONDS = (3.0, 10.0)  # cloning works best with this much: outside it, a warning says why
TRIM_MAX_SECONDS = 15.0  # trim_long_audio: cut at a pause starting no later than this ...
TRIM_MIN_SECONDS = 3.0  # ... keeping at least this much
MID_SIL_MS, LEAD_SIL_MS, TRAIL_SIL_MS = 200, 100, 200  # silence removal on the reference
MAX_PREPARED_SECONDS = 60.0  # longer prepared references are refused (ModelConfig.max_ref_seconds)
MAX_FILE_SECONDS = 300.0  # a recording longer than this (by its header) is refused unread
MAX_FILE_SAMPLES = 1 << 25  # frames x channels read from a recording at most (128 MiB as float32)
MAX_KERNEL = 1 << 24  # elements of the resampling kernel (odd rates make it huge)
MAX_PROMPT_BYTES = 64 << 20  # a reference `.pt` prompt file (a few kB in practice)
MAX_VOICE_FRAMES = int(MAX_PREPARED_SECONDS * SAMPLE_RATE / HOP_LENGTH)  # codes of a voice at most
MAX_CODEBOOKS = 64  # rows of a voice's codes at most (the model uses 8)
TAIL_SECONDS = 0.1  # a reference still sounding in its last 100 ms ends mid-word ...
TAIL_DBFS = -40.0  # ... when that stretch is louder than this (dB of full scale) ...
TAIL_PAD_SECONDS = 0.2  # ... and is padded with this much silence (k2-fsa/OmniVoice#265, #118)


@dataclass(frozen=True)
class PreparedReference:
    """The waveform to encode ([N] float32, N a multiple of the hop), the original RMS, and
    warnings for the user (the caller prints them)."""

    wav: np.ndarray
    rms: float
    warnings: tuple[str, ...] = ()
    source: str | None = None  # the file it was read from, when it came from one

    @property
    def seconds(self) -> float:
        return self.wav.shape[-1] / SAMPLE_RATE


@dataclass(frozen=True)
class VoicePrompt:
    """A reference voice, ready for the canvas."""

    codes: torch.Tensor  # [Q, T_ref] int64 codec codes of the reference audio
    text: str | None  # the transcript as the model sees it (punctuated); None when none was given
    rms: float | None  # RMS of the reference audio (sets the output level when < 0.1)
    warnings: tuple[str, ...] = ()  # for the user: a long reference, a trim
    # the speaking rate its codes already have (a voice made of generated codes: piece 0 of a text
    # without a voice, at its speed; pieces.speed_against); None: a recording, its own rate
    rate: float | None = None


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def read_audio(path: str | Path) -> tuple[np.ndarray, int]:
    """Any soundfile-readable file -> (float32 [channels, N], sample_rate). InvalidRequest names the
    file when it is missing, a folder, or not readable audio."""
    import soundfile as sf

    p = Path(path)
    if not p.exists():
        raise InvalidRequest(f"reference audio file not found: {p}")
    if p.is_dir():
        raise InvalidRequest(f"reference audio {p} is a folder, not an audio file")
    if not p.is_file():
        raise InvalidRequest(f"reference audio {p} is not a regular file")
    try:
        with sf.SoundFile(str(p)) as f:
            check_audio_header(p, f.frames, f.samplerate, f.channels)
            data = f.read(frames=int(MAX_FILE_SECONDS * f.samplerate) + 1, dtype="float32", always_2d=True)
            sr = f.samplerate
    except InvalidRequest:
        raise
    except (sf.SoundFileError, RuntimeError, OSError, ValueError, TypeError) as e:
        raise InvalidRequest(
            f"cannot read reference audio {p}: {e} (use a format libsndfile reads, e.g. WAV, FLAC, OGG, MP3)"
        ) from None
    check_audio_header(p, len(data), sr, data.shape[1])  # a header may under-count
    return data.T, int(sr)


def check_audio_header(source: object, frames: int, sample_rate: int, channels: int) -> None:
    """Refuse a recording by what its header says, before it is read: its length, its samples
    over all channels, its sample rate (positive, and cheap to resample to 24 kHz)."""
    source = source if str(source).startswith("reference audio") else f"reference audio {source}"
    if sample_rate <= 0 or channels <= 0:
        raise InvalidRequest(f"{source}: its header says {sample_rate} Hz, {channels} channels")
    if frames > MAX_FILE_SECONDS * sample_rate:
        raise InvalidRequest(
            f"{source} is {frames / sample_rate:.0f} s long: at most {MAX_FILE_SECONDS:g} s is read "
            "(3-10 s is best): trim it"
        )
    if frames * channels > MAX_FILE_SAMPLES:
        raise InvalidRequest(
            f"{source} holds {frames * channels} samples ({channels} channels at {sample_rate} Hz): "
            f"at most {MAX_FILE_SAMPLES}: convert it to mono at 24000 or 48000 Hz"
        )
    check_sample_rate(source, sample_rate)


def check_sample_rate(source: object, sample_rate: int, target: int = SAMPLE_RATE) -> None:
    """A rate whose resampling to `target` needs a kernel over MAX_KERNEL elements (rates with a
    small common divisor, e.g. 44101 Hz: 24000 kernels of 44101 taps) is refused."""
    import math

    if sample_rate == target:
        return
    orig, new = reduced_rates(int(sample_rate), target)
    half = math.ceil(6 * orig / (min(orig, new) * 0.99))
    if new * (2 * half + orig) > MAX_KERNEL:
        source = source if str(source).startswith("reference audio") else f"reference audio {source}"
        raise InvalidRequest(
            f"{source} has the unusual sample rate {sample_rate} Hz, too costly to resample: "
            "convert it to 48000, 44100, 24000 or 16000 Hz"
        )


def to_mono(data: np.ndarray) -> np.ndarray:
    """[N] or [C, N] -> [1, N] float32, channels averaged as the reference does (np.mean)."""
    data = np.asarray(data, dtype=np.float32)
    if data.ndim == 1:
        data = data[np.newaxis, :]
    if data.ndim != 2:
        raise InvalidRequest(f"reference audio must be [N] or [channels, N], got shape {list(data.shape)}")
    if data.shape[0] > 1:
        data = np.mean(data, axis=0, keepdims=True)
    return data


def load_reference(path: str | Path, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """A reference recording as mono float32 [N] at `sample_rate` (the reference's `load_audio`)."""
    data, sr = read_audio(path)
    return _mono_at_rate(data, sr, sample_rate, path)


def _mono_at_rate(data: np.ndarray, sr: int, sample_rate: int, source: object) -> np.ndarray:
    data = to_mono(data)
    check_audio_header(source, data.shape[-1], sr, 1)
    if data.shape[-1] and not np.isfinite(data).all():
        raise InvalidRequest(f"reference audio {source} contains NaN or infinite samples")
    if sr != sample_rate:
        if data.shape[-1] == 0:
            raise InvalidRequest(f"reference audio {source} is empty")
        data = resample(data, sr, sample_rate)
    return np.ascontiguousarray(data[0], dtype=np.float32)


# ---------------------------------------------------------------------------------------------
# Preparation
# ---------------------------------------------------------------------------------------------


def reference_rms(wav: np.ndarray) -> float:
    """sqrt(mean(x^2)) in float32, as the reference computes it on its [1, N] array."""
    wav = np.asarray(wav, dtype=np.float32).reshape(1, -1)
    if wav.size == 0:
        return 0.0
    return float(np.sqrt(np.mean(wav**2)))


def trim_long_audio(
    wav: np.ndarray,
    sample_rate: int = SAMPLE_RATE,
    max_duration: float = TRIM_MAX_SECONDS,
    min_duration: float = TRIM_MIN_SECONDS,
    trim_threshold: float = MAX_SECONDS,
) -> np.ndarray:
    """The reference's `trim_long_audio` on mono float32 [N]: audio longer than trim_threshold s is
    cut at the start of the last non-silent stretch (pydub, -40 dBFS, pauses >= 100 ms, 10 ms
    steps) that begins by max_duration s; if that keeps under min_duration s, it is cut at
    max_duration s instead. The cut audio goes through int16 (pydub), as in the reference."""
    wav = np.asarray(wav, dtype=np.float32).reshape(-1)
    if wav.shape[-1] / sample_rate <= trim_threshold:
        return wav
    samples = audio_ops.to_int16(wav)
    nonsilent = audio_ops.detect_nonsilent(samples, sample_rate, min_silence_len=100, silence_thresh=-40, seek_step=10)
    if not nonsilent:
        return wav
    max_ms = int(max_duration * 1000)
    min_ms = int(min_duration * 1000)
    best = 0
    for start, end in nonsilent:
        if best < start <= max_ms:
            best = start
        if end > max_ms:
            break
    if best < min_ms:
        best = min(max_ms, audio_ops.segment_ms(len(samples), sample_rate))
    return audio_ops.from_int16(audio_ops.slice_ms(samples, sample_rate, None, best))


def length_warning(source: object, given: float, prepared: float) -> str | None:
    """Why a reference outside BEST_SECONDS clones less well: under 3 s as given, too little of
    the voice to capture it; over 10 s once its silences are removed, a long canvas (the
    reference's codes, 25 frames a second, are in the model's input at every diffusion step) for
    little gain. None inside."""
    low, high = BEST_SECONDS
    if given < low:
        return (
            f"{source} is only {given:.1f} s long: under {low:g} s the voice is poorly captured and the "
            f"clone may not sound like it; {low:g}-{high:g} s of clear speech is best"
        )
    if prepared > high:
        return (
            f"{source} holds {prepared:.1f} s of sound once its silences are removed: over {high:g} s "
            "makes every diffusion step slower and needs more memory (all of it is part of the model's "
            f"input at each step) and clones no better; trim it to {low:g}-{high:g} s (without a "
            f"transcript, over {MAX_SECONDS:g} s is cut at a pause)"
        )
    return None


def ends_sounding(wav: np.ndarray, sample_rate: int = SAMPLE_RATE) -> bool:
    """The recording still sounds in its last TAIL_SECONDS (their RMS over TAIL_DBFS): it was cut
    while someone was speaking, which makes short generations come out distorted."""
    tail = np.asarray(wav, dtype=np.float32).reshape(-1)[-max(1, round(TAIL_SECONDS * sample_rate)) :]
    rms = float(np.sqrt(np.mean(tail.astype(np.float64) ** 2))) if tail.size else 0.0
    return rms > 0 and 20 * np.log10(rms) > TAIL_DBFS


def prepare_reference(
    wav24k: np.ndarray,
    ref_text: str | None,
    *,
    sample_rate: int = SAMPLE_RATE,
    hop_length: int = HOP_LENGTH,
    preprocess: bool = True,
    source: object = "reference audio",
) -> PreparedReference:
    """Mono float32 [N] at the codec rate -> the waveform the reference would encode, and its RMS.

    Raises InvalidRequest when the audio is empty or silent after silence removal, or shorter than
    MIN_SECONDS after preparation. Warnings (returned, not printed): the audio was trimmed, or is
    still longer than MAX_SECONDS, or else is outside BEST_SECONDS (`length_warning`).
    """
    wav = np.asarray(wav24k, dtype=np.float32).reshape(1, -1)
    if wav.shape[-1] == 0:
        raise InvalidRequest(f"{source} is empty")
    given = wav.shape[-1] / sample_rate
    warnings: list[str] = []
    rms = reference_rms(wav)
    if 0 < rms < RMS_TARGET:
        wav = wav * RMS_TARGET / rms  # float32 throughout, in the reference's order

    wav = wav[0]
    if preprocess:
        if ref_text is None:
            before = wav.shape[-1] / sample_rate
            wav = trim_long_audio(wav, sample_rate, trim_threshold=MAX_SECONDS)
            after = wav.shape[-1] / sample_rate
            if after < before:
                warnings.append(
                    f"{source} is {before:.1f}s long (>{MAX_SECONDS:.0f}s) and has no transcript: "
                    f"trimmed to {after:.1f}s (cut at a pause where there is one)."
                )
        wav = audio_ops.remove_silence(
            wav, sample_rate, mid_sil_ms=MID_SIL_MS, lead_sil_ms=LEAD_SIL_MS, trail_sil_ms=TRAIL_SIL_MS
        )
        if wav.shape[-1] == 0:
            raise InvalidRequest(f"{source} is silent: nothing is left after silence removal (-50 dBFS threshold)")

    seconds = wav.shape[-1] / sample_rate
    if seconds > MAX_PREPARED_SECONDS:
        raise InvalidRequest(
            f"{source} is {seconds:.1f} s long after silence removal: at most {MAX_PREPARED_SECONDS:g} s (3-10 s "
            "is best): trim it"
        )
    if seconds > MAX_SECONDS:
        warnings.append(
            f"{source} is {seconds:.1f}s long (>{MAX_SECONDS:.0f}s). This may cause slower generation, "
            "higher memory usage, and degraded voice cloning quality. We recommend trimming it to 3-10s."
        )
    elif not warnings:  # neither trimmed nor over 20 s: those warnings already say it
        warning = length_warning(source, given, seconds)
        if warning:
            warnings.append(warning)

    if preprocess and ends_sounding(wav, sample_rate):
        wav = np.concatenate([wav, np.zeros(round(TAIL_PAD_SECONDS * sample_rate), dtype=np.float32)])
        warnings.append(
            f"{source} ends while still sounding (its last {TAIL_SECONDS * 1000:g} ms are not silent): padded "
            f"with {TAIL_PAD_SECONDS:g} s of silence, as a reference cut mid-word distorts short outputs"
        )
    clip = wav.shape[-1] % hop_length
    if clip:
        wav = wav[:-clip]
    if wav.shape[-1] < MIN_SECONDS * sample_rate:
        raise InvalidRequest(
            f"{source} is too short: {wav.shape[-1] / sample_rate:.2f}s of audio after preparation "
            f"(at least {MIN_SECONDS}s is needed; 3-10s is recommended)"
        )
    return PreparedReference(np.ascontiguousarray(wav, dtype=np.float32), rms, tuple(warnings))


# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------


def encode_reference(
    encoder,
    ref_audio: "str | Path | tuple[np.ndarray, int] | PreparedReference",
    ref_text: str | None,
    *,
    preprocess: bool = True,
) -> VoicePrompt:
    """A file path, (waveform [N] / [C, N], sample_rate), or a reference already prepared by
    `prepare_reference` (read and prepared once, e.g. checked before the model was loaded)
    -> VoicePrompt with codes [Q, T_ref].

    `encoder` is a loaded `encoder.HiggsEncoder` (its rate and hop are used).
    """
    sr_codec, hop = encoder.sample_rate, encoder.hop_length
    if isinstance(ref_audio, PreparedReference):
        prepared = ref_audio
    else:
        if isinstance(ref_audio, (str, Path)):
            source = f"reference audio {ref_audio}"
            wav = load_reference(ref_audio, sr_codec)
        else:
            data, sr = ref_audio
            if torch.is_tensor(data):
                data = data.detach().cpu().numpy()
            source = "reference audio"
            wav = _mono_at_rate(data, int(sr), sr_codec, source)
        prepared = prepare_reference(
            wav, ref_text, sample_rate=sr_codec, hop_length=hop, preprocess=preprocess, source=source
        )
    codes = encoder.encode(torch.from_numpy(prepared.wav)[None, None])[0]
    text = add_punctuation(ref_text) if (preprocess and ref_text is not None) else ref_text
    return VoicePrompt(codes=codes, text=text, rms=prepared.rms, warnings=prepared.warnings)


# ---------------------------------------------------------------------------------------------
# Saved voices
# ---------------------------------------------------------------------------------------------

REFERENCE_PT_VERSION = 1  # the reference's VoiceClonePrompt.save format_version


def save_voice(path: str | Path, voice: VoicePrompt, **meta: str) -> None:
    """Write a voice as safetensors: the codes as a tensor, transcript and RMS in the metadata.

    Written to a temporary file and renamed, so a voice file is never partial."""

    if voice.text is None or not voice.text.strip():
        raise InvalidRequest("a saved voice needs its transcript")
    metadata = {
        "format": VOICE_FORMAT,
        "version": VOICE_FORMAT_VERSION,
        "text": voice.text,
        "rms": "" if voice.rms is None else repr(float(voice.rms)),
        **{k: str(v) for k, v in meta.items()},
    }
    write_file(Path(path), {"codes": voice.codes.detach().to("cpu", torch.int64).contiguous()}, metadata)


def check_codes_shape(path: object, shape: list[int] | tuple[int, ...]) -> None:
    """A voice's codes must be [codebooks, frames], 1..MAX_CODEBOOKS rows and 1..MAX_VOICE_FRAMES
    frames (checked before the codes are read or materialised)."""
    if len(shape) != 2 or not 0 < shape[0] <= MAX_CODEBOOKS or shape[1] <= 0:
        raise InvalidRequest(f"{path}: the voice's codes have shape {list(shape)}, expected [codebooks, frames]")
    if shape[1] > MAX_VOICE_FRAMES:
        raise InvalidRequest(
            f"{path}: the voice holds {shape[1] * HOP_LENGTH / SAMPLE_RATE:.1f} s of audio: at most "
            f"{MAX_PREPARED_SECONDS:g} s"
        )


def load_voice(path: str | Path) -> VoicePrompt:
    """Read a voice saved by `save_voice`."""
    file = open_voice_file(Path(path))
    meta = file.metadata
    check_codes_shape(path, file.shape("codes"))
    if file.dtype("codes") != torch.int64:
        raise InvalidRequest(f"{path}: the voice's codes are {file.dtype('codes')}, expected int64")
    text, rms = voice_text(path, meta.get("text"), "text"), voice_rms(path, meta.get("rms"), "rms")
    return VoicePrompt(codes=file.read("codes"), text=text, rms=rms)


def import_reference_prompt(path: str | Path) -> VoicePrompt:
    """Read a `.pt` prompt saved by the reference's `VoiceClonePrompt.save`.

    Loaded with `torch.load(weights_only=True)`: plain tensors and builtins only, never code."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_PROMPT_BYTES:
            raise InvalidRequest(f"{path} is over {MAX_PROMPT_BYTES >> 20} MiB: not a saved reference prompt")
        data = torch.load(str(path), map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise InvalidRequest(f"prompt file {path} does not exist") from None
    except InvalidRequest:
        raise
    except Exception as e:  # an unpickling error, a zip error, a non-weights object...
        raise InvalidRequest(f"{path} is not a saved reference prompt ({type(e).__name__})") from None
    if not isinstance(data, dict) or "format_version" not in data:
        raise InvalidRequest(f"{path} is not a saved reference prompt (no format_version)")
    if data["format_version"] != REFERENCE_PT_VERSION:
        raise InvalidRequest(
            f"{path} has prompt format version {data['format_version']!r}; supported: {REFERENCE_PT_VERSION}"
        )
    codes, text, rms = data.get("ref_audio_tokens"), data.get("ref_text"), data.get("ref_rms")
    if not torch.is_tensor(codes) or codes.ndim != 2 or codes.dtype.is_floating_point or codes.is_complex():
        raise InvalidRequest(f"{path}: ref_audio_tokens must be an integer tensor [codebooks, frames]")
    check_codes_shape(path, tuple(codes.shape))  # before any copy: a broadcast view can claim any size
    text = voice_text(path, text, "ref_text")
    if not isinstance(rms, (int, float)) or isinstance(rms, bool):
        raise InvalidRequest(f"{path}: ref_rms is missing")
    return VoicePrompt(codes=codes.to(torch.int64).contiguous().clone(), text=text, rms=voice_rms(path, rms, "ref_rms"))
