"""The settings of the AI mark every written file and stream carries (media/marks.py, app/marking.py):
`mark` (on unless `--no-mark`, or `mark = false` in a preset or the server's settings), and the
optional C2PA manifest's certificate chain and key (`c2pa_cert`, `c2pa_key`: media/provenance.py).
Run-wide: a flag or a preset, never a batch line or a request (a client does not take the mark off)."""

from __future__ import annotations

from . import setting as panels
from .setting import FLAG, PRESET, Setting

_RUN = frozenset({FLAG, PRESET})

MARK_SETTINGS = (
    Setting(
        "mark",
        bool,
        True,
        "Mark every file and stream written as AI-made in its metadata (docs/marking.md).",
        "Output",
        "true or false",
        where=_RUN,
        run_wide=True,
        advanced=panels.OUTPUT_DETAILS,
    ),
    Setting(
        "c2pa_cert",
        str,
        None,
        "Sign a C2PA manifest into WAV, MP3 and M4A files with this PEM certificate chain (the c2pa extra).",
        "Output",
        "a PEM file of the signing certificate and its chain",
        lambda v: bool(v.strip()),
        metavar="FILE",
        where=_RUN,
        run_wide=True,
        advanced=panels.OUTPUT_DETAILS,
    ),
    Setting(
        "c2pa_key",
        str,
        None,
        "The private key (PEM) of --c2pa-cert.",
        "Output",
        "a PEM file of the private key",
        lambda v: bool(v.strip()),
        metavar="FILE",
        where=_RUN,
        run_wide=True,
        advanced=panels.OUTPUT_DETAILS,
    ),
)
