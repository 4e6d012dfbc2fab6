"""The AI mark of a run (media/marks.py): made once per run from its settings, then handed to
every output (app/deliver.py's `Outputs.mark`, `PieceWriter`, `PieceEncoder`, `deliver_blocks`).

    mark = run_mark(settings)     # None with --no-mark (`mark = false`)

The model is named as the settings name it when that is a hub id; a local checkpoint is named by
the sha256 of its resolved path (first 16 hex digits), so no folder name of the user's ends up in
a file that may be shared. The date is today's (UTC).
"""

from __future__ import annotations

import datetime
import hashlib
from pathlib import Path
from typing import Mapping

from ..engine.errors import InvalidRequest
from ..media.marks import Mark, Provenance
from ..media.provenance import check_provenance

MARK_KEYS = ("mark", "c2pa_cert", "c2pa_key")  # the settings of the mark: what it writes, never what the audio is


def model_label(model: str) -> str:
    """How a mark names the model: its hub id, or 'sha256:...' of a local checkpoint's path."""
    spec = str(model).strip()
    try:
        path = Path(spec).expanduser()
        local = path.exists()
    except (OSError, ValueError):
        local = False
    if not local:
        return spec
    digest = hashlib.sha256(str(path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()
    return f"sha256:{digest[:16]}"


def today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def _values(settings: Mapping[str, object] | object) -> Mapping[str, object]:
    return settings if isinstance(settings, Mapping) else getattr(settings, "values")


def provenance_of(settings: Mapping[str, object] | object) -> Provenance | None:
    """The C2PA signer's files the settings name (None: none), both or neither (InvalidRequest)."""
    values = _values(settings)
    cert, key = values.get("c2pa_cert"), values.get("c2pa_key")
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = ("--c2pa-cert", "--c2pa-key") if key is None else ("--c2pa-key", "--c2pa-cert")
        raise InvalidRequest(f"{given} signs a C2PA manifest with {missing}: give both, or neither")
    if values.get("mark") is False:
        raise InvalidRequest("--no-mark leaves the mark out, and --c2pa-cert signs one in: give one of them")
    return Provenance(str(Path(str(cert)).expanduser()), str(Path(str(key)).expanduser()))


def check_marking(settings: Mapping[str, object] | object) -> None:
    """Before any work: the C2PA files, when given, sign (media/provenance.check_provenance)."""
    provenance = provenance_of(settings)
    if provenance is not None:
        check_provenance(provenance)


def run_mark(settings: Mapping[str, object] | object) -> Mark | None:
    """The run's mark from its resolved settings ("mark", "model", "c2pa_cert", "c2pa_key"), or
    None when it is off."""
    values = _values(settings)
    if values.get("mark") is False:
        return None
    return Mark(model_label(str(values.get("model") or "")), today(), provenance=provenance_of(values))
