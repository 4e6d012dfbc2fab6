"""C2PA provenance: with `--c2pa-cert FILE --c2pa-key FILE` (the `c2pa` extra: c2pa-python, the
C2PA's own SDK), a whole WAV, MP3 or M4A file gets a signed C2PA manifest saying it was created by
a trained algorithmic model (IPTC's digitalSourceType trainedAlgorithmicMedia), with omnivoice as
the software agent and the mark's model and day; the container mark (media/marks.py) stays.

The manifest covers the whole file's bytes, so only whole files are signed: streams (a pipe, a
chunked reply), FLAC / Ogg / raw formats and a book's .m4b (written as it is spoken) carry the
container mark alone. No time-stamp authority is asked (nothing leaves the machine): the signature
is valid while the certificate is. The certificate must be an end-entity one (not a CA) with the
digitalSignature key usage, followed by its chain; ES256/ES384/ES512 (EC P-256/384/521 keys),
Ed25519 and PS256 (RSA) keys are used as they are.
"""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, BinaryIO, Iterable

from ..engine.errors import InvalidRequest, MissingExtra
from .marks import MODEL_FAMILY, SOURCE_TYPE, Mark, Provenance

if TYPE_CHECKING:
    from .formats import AudioFormat

SIGNED_MIMES = ("audio/wav", "audio/mpeg", "audio/mp4")  # what gets a manifest: WAV, MP3, M4A
ASSERTION = "org.omnivoice.mark"  # the mark's fields, as their own assertion


def _c2pa():
    try:
        import c2pa
    except ImportError:
        raise MissingExtra("signing a C2PA manifest (--c2pa-cert)", "c2pa-python", "c2pa") from None
    return c2pa


def _algorithm(key_pem: bytes) -> str:
    """The C2PA signing algorithm of a PEM private key, else InvalidRequest."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as e:
        raise InvalidRequest(f"--c2pa-key is not an unencrypted PEM private key: {e}") from None
    if isinstance(key, ec.EllipticCurvePrivateKey):
        algs = {"secp256r1": "es256", "secp384r1": "es384", "secp521r1": "es512"}
        if key.curve.name in algs:
            return algs[key.curve.name]
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "ed25519"
    if isinstance(key, rsa.RSAPrivateKey):
        return "ps256"
    raise InvalidRequest("--c2pa-key must be an EC (P-256, P-384, P-521), Ed25519 or RSA key")


def _signer(provenance: Provenance):
    c2pa = _c2pa()
    cert, key = provenance.read()
    info = c2pa.C2paSignerInfo(_algorithm(key), cert, key, None)
    try:
        return c2pa.Signer.from_info(info)
    except c2pa.C2paError as e:
        raise InvalidRequest(f"--c2pa-cert / --c2pa-key cannot sign: {e}") from None


def check_provenance(provenance: Provenance) -> None:
    """Before any work: the extra is installed, the files read, the key is one C2PA signs with,
    and a C2PA manifest signs with them (a one-second WAV signed and thrown away)."""
    import numpy as np
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.zeros(24000, np.float32), 24000, format="WAV", subtype="PCM_16")
    sign(buf.getvalue(), "audio/wav", Mark("check", "1970-01-01", provenance=provenance))


def manifest(mark: Mark) -> dict:
    """The manifest: created by a trained algorithmic model, omnivoice the software agent."""
    agent = {"name": "omnivoice", "version": mark.software.split(" ", 1)[1]}
    return {
        "claim_generator_info": [agent],
        "title": "AI-generated speech",
        "assertions": [
            {
                "label": "c2pa.actions",
                "data": {
                    "actions": [
                        {"action": "c2pa.created", "digitalSourceType": SOURCE_TYPE, "softwareAgent": agent},
                    ]
                },
            },
            {
                "label": ASSERTION,
                "data": {"model": MODEL_FAMILY, "checkpoint": mark.model, "date": mark.date, "text": mark.text()},
            },
        ],
    }


def sign(data: bytes, mime: str, mark: Mark) -> bytes:
    """`data` (a whole file of `mime`) with a C2PA manifest signed in by the mark's provenance."""
    assert mark.provenance is not None
    c2pa = _c2pa()
    signer = _signer(mark.provenance)
    out = io.BytesIO()
    try:
        with c2pa.Builder(json.dumps(manifest(mark))) as builder:
            builder.sign(signer, mime, io.BytesIO(data), out)
    except c2pa.C2paError as e:
        raise InvalidRequest(f"--c2pa-cert / --c2pa-key: the C2PA manifest could not be signed: {e}") from None
    finally:
        signer.close()
    return out.getvalue()


def write_whole(f: BinaryIO, fmt: AudioFormat, blocks: Iterable, sample_rate: int, mark: Mark | None) -> None:
    """A whole file of `fmt` into `f` by its encoder, with the mark; signed (C2PA) when the mark
    carries provenance and the format takes a manifest (encoded in memory first, then signed)."""
    if mark is None or mark.provenance is None or fmt.mime not in SIGNED_MIMES:
        fmt.encoder.write(f, blocks, sample_rate, mark)
        return
    buf = io.BytesIO()
    fmt.encoder.write(buf, blocks, sample_rate, mark)
    f.write(sign(buf.getvalue(), fmt.mime, mark))
