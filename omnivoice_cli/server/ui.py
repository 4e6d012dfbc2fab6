"""The page of `omnivoice serve` (GET /) and its two files (GET /ui/app.js, /ui/app.css).

Three static files in the package (static/): no build step, nothing fetched from elsewhere. The
page needs no key (it holds nothing secret); everything it does goes through the public API
with the key the person gives it (kept in the browser's session storage only).

Caching: the page names its files with ?v=<package version>-<hash of the file>, so a cached
file is never stale; such a versioned file is served as immutable for a year, the page itself
and an unversioned file are revalidated (no-cache, with an ETag). Every reply here carries a
strict Content-Security-Policy: scripts, styles and connections from this origin only, no
inline script or style, audio from this origin or blob: URLs (the page's own takes).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response

from .errors import ApiError
from .schema import package_version

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; media-src 'self' blob:; "
    "img-src 'self' data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
ASSETS = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
PAGE = "index.html"
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    version: str  # what ?v= must be for the file to be cached for good

    @property
    def etag(self) -> str:
        return f'"{self.version}"'


def _read(name: str) -> bytes:
    return resources.files("omnivoice_cli").joinpath("static").joinpath(name).read_bytes()


def _version(body: bytes) -> str:
    return f"{package_version()}-{hashlib.sha256(body).hexdigest()[:12]}"


@lru_cache(maxsize=None)
def assets() -> dict[str, Asset]:
    """The page and its files, read once; the page with its files' versioned names filled in."""
    out = {}
    for name, kind in ASSETS.items():
        body = _read(name)
        out[name] = Asset(body, kind, _version(body))
    page = _read(PAGE).decode("utf-8")
    for name, asset in out.items():
        page = page.replace(f'/ui/{name}"', f'/ui/{name}?v={asset.version}"')
    body = page.encode("utf-8")
    out[PAGE] = Asset(body, "text/html; charset=utf-8", _version(body))
    return out


def _reply(request: Request, asset: Asset, cache: str) -> Response:
    headers = {**SECURITY_HEADERS, "Cache-Control": cache, "ETag": asset.etag}
    if asset.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


async def page(request: Request) -> Response:
    return _reply(request, assets()[PAGE], REVALIDATE)


async def asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in ASSETS:
        raise ApiError(
            404, f"no such file: {request.url.path} (the page's files are {', '.join(ASSETS)})", code="not_found"
        )
    found = assets()[name]
    return _reply(request, found, IMMUTABLE if request.query_params.get("v") == found.version else REVALIDATE)
