"""What can be written here: libsndfile's formats (as the installed library has them) and AAC
(PyAV, the `aac` extra, else an `ffmpeg` on PATH); `check_available` says what to install."""

from __future__ import annotations

from .formats import AUDIO_FORMATS, AudioFormat, EncoderMissing, FormatUnavailable


def sndfile_writes(f: AudioFormat) -> bool:
    import soundfile as sf

    return f.sf_format in sf.available_formats() and f.subtype in sf.available_subtypes(f.sf_format)


def writable_formats() -> list[str]:
    """Names of the table's formats that can be written here (libsndfile's, AAC with an encoder)."""
    aac = aac_encoder() is not None
    return [
        f.name
        for f in AUDIO_FORMATS.values()
        if (aac if f.encoder == "aac" else f.encoder == "g711" or sndfile_writes(f))
    ]


AAC_INSTALL = "pip install 'omnivoice-cli[aac]' (PyAV), or put ffmpeg on PATH"


def check_available(fmt: AudioFormat) -> None:
    """FormatUnavailable when the installed libsndfile cannot write `fmt`, naming what it can;
    EncoderMissing when `fmt` is AAC and there is no AAC encoder, naming what to install."""
    import soundfile as sf

    if fmt.encoder == "aac":
        if aac_encoder() is None:
            raise EncoderMissing(f"format {fmt.name} (AAC) needs an AAC encoder and none is installed: {AAC_INSTALL}")
        return
    if fmt.encoder == "g711" or sndfile_writes(fmt):
        return
    raise FormatUnavailable(
        f"the installed libsndfile ({sf.__libsndfile_version__}) cannot write {fmt.name} "
        f"({fmt.sf_format}/{fmt.subtype}); it writes {', '.join(writable_formats())} "
        "(a newer soundfile wheel brings a libsndfile with mp3 and opus: pip install -U soundfile)"
    )


def _pyav_has_aac() -> bool:
    try:
        import av
        from av.codec import Codec

        Codec("aac", "w")
        return av is not None
    except Exception:  # not installed, or built without the encoder
        return False


def aac_encoder() -> str | None:
    """What encodes AAC here: "pyav", "ffmpeg" (an ffmpeg command on PATH), or None."""
    import shutil

    if _pyav_has_aac():
        return "pyav"
    return "ffmpeg" if shutil.which("ffmpeg") else None
