"""The page of `omnivoice serve` over real HTTP (no browser: tests/test_page_browser.py drives one):
the page and its files need no key while the API does, they are cached by version and carry a
strict CSP, --no-ui takes them away; GET /v1/omnivoice/schema is the schema the CLI uses."""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")  # the serve extra (CI installs it with the test extra)

import httpx
from server_util import running_server

from omnivoice_cli.app.settings.schema import HTTP_SETTINGS, SCHEMA

STATIC = Path(__file__).resolve().parent.parent / "omnivoice_cli" / "static"
KEY = {"Authorization": "Bearer s3cret"}
# the hooks the issue names (design-<category> and setting-<key> are made from the schema)
HOOKS = (
    "text",
    "speak",
    "audio",
    "voice",
    "lang",
    "seed",
    "seed-pin",
    "download",
    "format",
    "upload",
    "voice-name",
    "save-voice",
    "error",
    "settings",
)

pytestmark = pytest.mark.usefixtures("home")  # every test: an empty OMNIVOICE_HOME (conftest)


@pytest.fixture(scope="module")
def keyed(engine):
    with running_server(engine, api_key="s3cret") as (url, _, _state):
        with httpx.Client(base_url=url, timeout=120) as client:
            yield client


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.script_text = [], ""
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_text += data.strip()


def _csp(response) -> dict[str, str]:
    policy = response.headers["content-security-policy"]
    return {p.split()[0]: " ".join(p.split()[1:]) for p in policy.split(";") if p.strip()}


# --- check 2: the page and its files -------------------------------------------------------------


@pytest.mark.slow
def test_the_page_and_its_files_need_no_key_but_the_api_does(keyed):
    page = keyed.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert keyed.get("/v1/omnivoice/schema").status_code == 401
    assert keyed.get("/v1/audio/voices").status_code == 401
    assert keyed.get("/v1/omnivoice/schema", headers=KEY).status_code == 200
    names = re.findall(r'/ui/(app\.(?:js|css))\?v=([\w.\-]+)"', page.text)
    assert sorted(n for n, _ in names) == ["app.css", "app.js"]
    for name, version in names:
        r = keyed.get(f"/ui/{name}?v={version}")  # no key
        assert r.status_code == 200 and r.content == (STATIC / name).read_bytes()
        assert r.headers["content-type"].split(";")[0] == {"js": "text/javascript", "css": "text/css"}[name[4:]]
    assert keyed.get("/ui/nothing.js").status_code == 404
    assert keyed.get("/ui/%2e%2e%2fsettings.py").status_code == 404  # only the three files, by name


@pytest.mark.slow
def test_files_are_cached_by_version_and_revalidated_otherwise(keyed):
    page = keyed.get("/")
    assert page.headers["cache-control"] == "no-cache" and page.headers["etag"]
    assert keyed.get("/", headers={"If-None-Match": page.headers["etag"]}).status_code == 304
    version = re.search(r'/ui/app\.js\?v=([\w.\-]+)"', page.text).group(1)
    from omnivoice_cli.server.schema import package_version

    assert version.startswith(package_version() + "-")  # the package's version and the file's hash
    cached = keyed.get(f"/ui/app.js?v={version}")
    assert cached.headers["cache-control"] == "public, max-age=31536000, immutable"
    for other in ("/ui/app.js", "/ui/app.js?v=0.0.1-old"):  # an old or missing version: asked again
        assert keyed.get(other).headers["cache-control"] == "no-cache"
    again = keyed.get("/ui/app.js", headers={"If-None-Match": cached.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


@pytest.mark.slow
def test_a_strict_csp_and_no_inline_script_or_style(keyed):
    for path in ("/", "/ui/app.js", "/ui/app.css"):
        r = keyed.get(path)
        csp = _csp(r)
        assert csp["default-src"] == "'none'" and csp["script-src"] == "'self'" and csp["style-src"] == "'self'"
        assert csp["connect-src"] == "'self'" and csp["frame-ancestors"] == "'none'"
        assert "unsafe" not in r.headers["content-security-policy"] and r.headers["x-content-type-options"] == "nosniff"
    parser = _Tags()
    parser.feed(keyed.get("/").text)
    assert parser.script_text == "" and [t for t, _ in parser.tags].count("script") == 1
    assert "style" not in [t for t, _ in parser.tags]
    for tag, attrs in parser.tags:
        assert "style" not in attrs and not any(a.startswith("on") for a in attrs), (tag, attrs)
        if tag in ("script", "link") and ("src" in attrs or "href" in attrs):
            ref = attrs.get("src") or attrs["href"]
            assert ref.startswith("/ui/") or ref == "data:,", ref  # nothing from another site
    script = (STATIC / "app.js").read_text()
    assert not re.search(r"\beval\(|new Function|innerHTML|\.style\.|localStorage|https?://", script)


def test_every_test_hook_of_the_page_is_there():
    html = (STATIC / "index.html").read_text()
    hooks = set(re.findall(r'data-testid="([\w-]+)"', html))
    assert set(HOOKS) <= hooks, set(HOOKS) - hooks
    script = (STATIC / "app.js").read_text()
    assert "`design-${cat.id}`" in script and "`setting-${key}`" in script
    # every control has a label: an id with a <label for>, or a fieldset's legend
    labelled = set(re.findall(r'<label[^>]* for="([\w-]+)"', html))
    controls = re.findall(r'<(?:input|select|textarea)[^>]* id="([\w-]+)"', html)
    assert controls and set(controls) <= labelled, set(controls) - labelled


@pytest.mark.slow
def test_no_ui_gives_404(engine, invoke, monkeypatch):
    with running_server(engine, ui=False) as (url, _, _s):
        for path in ("/", "/ui/app.js"):
            r = httpx.get(url + path, timeout=120)
            assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        assert httpx.get(url + "/v1/omnivoice/schema", timeout=120).status_code == 200  # the API stays
    from omnivoice_cli.commands import serve as cmd

    seen = []
    monkeypatch.setattr(cmd, "_run", lambda state, quiet: seen.append(state.options))
    assert invoke("serve", "--no-ui").exit_code == 0 and seen[-1].ui is False
    assert invoke("serve").exit_code == 0 and seen[-1].ui is True


# --- check 3: the schema is the CLI's --------------------------------------------------------------


@pytest.mark.slow
def test_the_schema_settings_are_the_settings_schema(keyed):
    doc = keyed.get("/v1/omnivoice/schema", headers=KEY).json()
    assert doc["object"] == "omnivoice.schema"
    assert list(doc["settings"]) == list(HTTP_SETTINGS)
    kinds = {"integer": int, "number": float, "boolean": bool, "string": str}
    for key, entry in doc["settings"].items():
        s = SCHEMA[key]
        assert (kinds[entry["type"]], entry["default"], entry["allowed"], entry["help"]) == (
            s.kind,
            s.default,
            s.allowed,
            s.help,
        )
        assert (entry.get("low"), entry.get("high"), entry.get("choices", [])) == (s.low, s.high, list(s.choices))
    assert doc["server"] == {"num_step": 4}  # the test server's --num-step 4
    # the range it shows is the one a request is refused with
    r = keyed.post("/v1/audio/speech", headers=KEY, json={"input": "Hi.", "num_step": 100})
    assert r.status_code == 400 and doc["settings"]["num_step"]["allowed"] in r.json()["error"]["message"]
    assert doc["limits"]["max_input_chars"] == 4096 and doc["limits"]["upload_bytes"] == 20 * 1024 * 1024
    assert "wav" in doc["speech"]["response_formats"] and "pcm" in doc["speech"]["response_formats"]


@pytest.mark.slow
def test_the_schema_lists_what_the_cli_lists(keyed, invoke, home):
    (home / "presets").mkdir(parents=True)
    (home / "presets" / "mine.toml").write_text('description = "my own"\nnum_step = 9\ndevice = "cpu"\n')
    doc = keyed.get("/v1/omnivoice/schema", headers=KEY).json()
    languages = invoke("languages")
    assert languages.exit_code == 0
    assert [f"{x['code']}\t{x['name']}" for x in doc["languages"]] == languages.stdout.splitlines()
    assert len(doc["languages"]) > 600
    shown = []
    for cat in doc["voice_design"]:
        shown.append(f"{cat['name']}:")
        shown += [
            f"  {i['en']} ({i['zh']})" if i["en"] and i["zh"] else f"  {i['en'] or i['zh']}" for i in cat["items"]
        ]
    assert shown == invoke("instructs").stdout.splitlines()
    assert [c["id"] for c in doc["voice_design"]] == ["gender", "age", "pitch", "style", "accent", "dialect"]
    assert [c["only"] for c in doc["voice_design"]][-2:] == ["en", "zh"]
    listed = [line for line in invoke("presets").stdout.splitlines() if not line.startswith("user presets:")]
    rows = [re.split(r"\s{2,}", line.strip(), maxsplit=2) for line in listed]
    assert [(p["name"], p["source"], p["description"]) for p in doc["presets"]] == [tuple(r) for r in rows]
    mine = next(p for p in doc["presets"] if p["name"] == "mine")
    assert mine["settings"] == {"num_step": 9}  # what a request takes from it (not the run-wide device)
    assert str(home) not in str(doc)  # no server path in a reply
