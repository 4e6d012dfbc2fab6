"""A C2PA signing chain made in the test (cryptography): a root CA and an end-entity certificate
with the key usages C2PA asks for (digitalSignature, emailProtection), EC P-256 (ES256):
test_provenance.py."""

from __future__ import annotations

import datetime
from pathlib import Path


def make_chain(folder: Path) -> tuple[Path, Path, bytes]:
    """(the chain's PEM file, the signer's key PEM file, the root's PEM), written in `folder`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.COMMON_NAME, cn),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "omnivoice tests"),
            ]
        )

    def usage(sign: bool, ca: bool) -> x509.KeyUsage:
        return x509.KeyUsage(sign, False, False, False, False, ca, ca, False, False)

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())

    def cert(subject: str, issuer: x509.Name, public, ca: bool) -> x509.CertificateBuilder:
        b = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(issuer)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .add_extension(usage(not ca, ca), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        )
        return b

    root = cert("test root", name("test root"), ca_key.public_key(), True).sign(ca_key, hashes.SHA256())
    leaf = (
        cert("omnivoice test signer", root.subject, key.public_key(), False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    chain, key_file = folder / "chain.pem", folder / "signer.key"
    chain.write_bytes(leaf.public_bytes(pem) + root.public_bytes(pem))
    key_file.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return chain, key_file, root.public_bytes(pem)
