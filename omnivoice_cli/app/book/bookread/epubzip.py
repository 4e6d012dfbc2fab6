"""An EPUB's zip: checked before anything is read (`check_epub`: a zip naming its package file in
META-INF/container.xml; DRM, an encryption.xml that encrypts more than fonts, refused), and its
members read one at a time, bounded against zip bombs (`read_member`: at most MAX_MEMBER_BYTES,
MAX_PACKAGE_BYTES or MAX_META_INF_BYTES unpacked, `MemberTooBig` beyond)."""

from __future__ import annotations

import posixpath
import zipfile
import zlib
from pathlib import Path
from urllib.parse import unquote

from ....engine.errors import InvalidRequest
from .chapters import kib, squash

_FONT_OBFUSCATION = frozenset({"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"})
_FONT_SUFFIXES = (".otf", ".ttf", ".ttc", ".woff", ".woff2", ".eot")

# What each member of an EPUB may be, unpacked (a zip bomb, or a member parsed into a tree many
# times its size, is refused): checked from the zip's own sizes, and again while it is unpacked
# (a header that lies about the size is caught by reading at most the limit and one byte more).
MAX_MEMBER_BYTES = 16 * 1024 * 1024  # a content document (XHTML): 16 MiB is some 2.5 million words
MAX_PACKAGE_BYTES = 8 * 1024 * 1024  # the package (OPF), the navigation document, the NCX
MAX_META_INF_BYTES = 1024 * 1024  # META-INF/container.xml, META-INF/encryption.xml
# the cover: at most media.m4b.MAX_COVER_BYTES and MAX_COVER_PIXELS (a larger one is not used)


def check_epub(path: Path) -> None:
    """An EPUB is a zip with META-INF/container.xml naming its package (OPF) file. DRM: a
    META-INF/encryption.xml that encrypts anything but fonts (font obfuscation, IDPF or Adobe, is
    not DRM and is read) is refused."""
    if not zipfile.is_zipfile(path):
        raise InvalidRequest(f"{path}: not an EPUB (not a zip file)")
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            if "META-INF/container.xml" not in names:
                raise InvalidRequest(f"{path}: not an EPUB (a zip without META-INF/container.xml)")
            opf = _container_opf(read_member(zf, "META-INF/container.xml", MAX_META_INF_BYTES))
            if opf is None:
                raise InvalidRequest(f"{path}: not an EPUB (its META-INF/container.xml names no package (OPF) file)")
            if opf not in names:
                raise InvalidRequest(f"{path}: not an EPUB (its package file {opf} is missing)")
            encryption = "META-INF/encryption.xml"
            if encryption in names and _encrypts_content(read_member(zf, encryption, MAX_META_INF_BYTES)):
                raise InvalidRequest(
                    f"{path}: DRM-protected (META-INF/encryption.xml encrypts its content); only DRM-free EPUBs can be read"
                )
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as e:
        raise InvalidRequest(f"{path}: not an EPUB (a damaged zip file: {squash(str(e))})") from None


def _xml_elements(data: bytes):
    import xml.etree.ElementTree as ET

    try:
        return list(ET.fromstring(data).iter())
    except ET.ParseError:
        return None


def _container_opf(data: bytes) -> str | None:
    for el in _xml_elements(data) or ():
        if (
            el.tag.endswith("rootfile")
            and el.get("media-type") == "application/oebps-package+xml"
            and el.get("full-path")
        ):
            return posixpath.normpath(el.get("full-path"))
    return None


def _encrypts_content(data: bytes) -> bool:
    elements = _xml_elements(data)
    if elements is None:
        return True  # unreadable: assume the worst
    for el in elements:
        if el.tag.endswith("EncryptionMethod") and el.get("Algorithm") not in _FONT_OBFUSCATION:
            return True
        if el.tag.endswith("CipherReference") and not unquote(el.get("URI", "")).lower().endswith(_FONT_SUFFIXES):
            return True
    return False


class MemberTooBig(InvalidRequest):
    """A member over its limit (an InvalidRequest: the book is refused, the cover skipped)."""


def read_member(zf: zipfile.ZipFile, name: str, limit: int | None = None) -> bytes:
    """One file of the EPUB's zip, at most `limit` bytes unpacked (MAX_MEMBER_BYTES by default;
    KeyError when it has none of that name; MemberTooBig beyond the limit; InvalidRequest when it
    does not unpack)."""
    limit = MAX_MEMBER_BYTES if limit is None else limit
    info = zf.getinfo(name)
    too_big = MemberTooBig(
        f"{zf.filename}: {name} unpacks to over {kib(limit)}, more than a {_member_kind(name, limit)} may be"
    )
    if info.file_size > limit:
        raise too_big
    try:
        with zf.open(info) as f:
            data = f.read(limit + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError) as e:
        raise InvalidRequest(
            f"{zf.filename}: {name} does not unpack (a damaged EPUB: {squash(str(e))[:120]})"
        ) from None
    if len(data) > limit:
        raise too_big
    return data


def _member_kind(name: str, limit: int) -> str:
    if limit == MAX_META_INF_BYTES:
        return "META-INF file"
    if limit == MAX_PACKAGE_BYTES:
        return "package, navigation or NCX file"
    return "document of a book" if limit == MAX_MEMBER_BYTES else "cover"
