"""The page of `omnivoice serve` in a real browser: Debian's chromium driven by Playwright, against a
real server (uvicorn on 127.0.0.1) on the tiny checkpoint. Every case checks the page against the
API it calls: what it sends, what it plays and what it downloads.

No browser: the tests fail when $CI is set (CI installs one: .ci/run), else they skip saying why.
Screenshots (1280 and 375 px wide) go to a temporary folder whose path is printed.
"""

import io
import os
import re
import shutil
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("uvicorn")  # the serve extra (CI installs it with the test extra)

import httpx
import soundfile as sf
from server_util import running_server, wav_samples

pytestmark = pytest.mark.slow
TIMEOUT_MS = 120_000
KEY = "s3cret"


def _chromium() -> str | None:
    found = os.environ.get("OMNIVOICE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return found if found and os.access(found, os.X_OK) else None


def _no_browser(why: str):
    if os.environ.get("CI"):
        pytest.fail(f"the browser tests need {why} (.ci/run installs chromium; the test extra has playwright)")
    pytest.skip(f"no browser to drive: {why} (apt-get install chromium; pip install playwright)")


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _no_browser("Playwright for Python")
    path = _chromium()
    if path is None:
        _no_browser("Debian's chromium (/usr/bin/chromium)")
    with sync_playwright() as p:
        fake_microphone = ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]  # a beep
        b = p.chromium.launch(executable_path=path, headless=True, args=fake_microphone)
        yield b
        b.close()


@pytest.fixture(scope="module")
def server(engine, module_home):
    with running_server(engine, piece_seconds=1.0) as (url, _, state):
        yield url, state


class Page:
    """A fresh tab (its own session storage) on the page, with what it sent and what went wrong."""

    def __init__(self, browser, url, width=1280, height=900, **options):
        self.url = url
        self.context = browser.new_context(
            viewport={"width": width, "height": height}, accept_downloads=True, **options
        )
        self.page = self.context.new_page()
        self.requests, self.problems = [], []
        self.page.on("request", lambda r: self.requests.append(r))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("console", self._console)

    def _console(self, message):
        # Chromium logs every 4xx as "Failed to load resource"; a CSP refusal or a script error is a defect
        if message.type == "error" and "Failed to load resource" not in message.text:
            self.problems.append(message.text)

    def open(self, ready=True):
        self.page.goto(self.url + "/")
        if ready:
            self.expect("body").to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
        return self

    def expect(self, selector):
        from playwright.sync_api import expect

        return expect(self.page.locator(selector))

    def hook(self, name):
        return self.page.get_by_test_id(name)

    def speeches(self):
        return [r for r in self.requests if r.method == "POST" and r.url.endswith("/v1/audio/speech")]

    def speak(self, keyboard=False):
        before = len(self.speeches())
        if keyboard:
            self.hook("text").press("Control+Enter")
        else:
            self.hook("speak").click()
        self.done()
        sent = self.speeches()[before:]
        assert len(sent) == 1
        return sent[0].post_data_json

    def done(self):
        from playwright.sync_api import expect

        expect(self.hook("status")).to_have_text(re.compile(r"^Done: "), timeout=TIMEOUT_MS)

    def download(self, fmt="wav") -> bytes:
        self.hook("format").select_option(fmt)
        with self.page.expect_download(timeout=TIMEOUT_MS) as info:
            self.hook("download").click()
        assert info.value.suggested_filename == f"omnivoice-{self.hook('seed').input_value()}.{fmt}"
        return Path(info.value.path()).read_bytes()

    def audio(self) -> dict:
        """The <audio> element's state once it has the take (and that it plays)."""
        return self.page.evaluate("""async () => {
            const a = document.querySelector('[data-testid=audio]');
            if (a.readyState < 4) await new Promise((ok) => a.addEventListener('canplaythrough', ok, {once: true}));
            await a.play();
            a.pause();
            return {duration: a.duration, error: a.error, src: a.src.slice(0, 5), ready: a.readyState};
        }""")

    def close(self):
        self.context.close()
        assert self.problems == []


@pytest.fixture
def tab(browser, server):
    page = Page(browser, server[0]).open()
    yield page
    page.close()


def _api(url, body, key=None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(url + "/v1/audio/speech", json=body, headers=headers, timeout=120)


def _same_take(url, sent, seed, key=None) -> bytes:
    """The API's whole WAV for what the page sent, with the seed it was given."""
    body = {**sent, "seed": int(seed), "response_format": "wav", "stream": False}
    r = _api(url, body, key)
    assert r.status_code == 200, r.text
    return r.content


# --- the cases of the issue ------------------------------------------------------------------------


def test_speak_with_the_auto_voice_plays_the_apis_audio(tab, server):
    url, _ = server
    tab.hook("text").fill("Good morning. The train leaves at seven.")
    tab.expect('[data-testid="count"]').to_have_text("40 / 4096 characters")
    sent = tab.speak()
    assert sent == {
        "model": "omnivoice",
        "input": "Good morning. The train leaves at seven.",
        "voice": "auto",
        "response_format": "wav",
        "stream": True,
    }
    seed = tab.hook("seed").input_value()
    assert seed.isdigit() and not tab.hook("seed-pin").is_checked()
    reply = _same_take(url, sent, seed)
    samples = wav_samples(reply)
    shown = tab.audio()
    assert shown["error"] is None and shown["src"] == "blob:" and shown["ready"] == 4
    assert shown["duration"] == pytest.approx(len(samples) / 24000, abs=1e-6)
    assert tab.download("wav") == reply  # the take's bytes are the API's file, header and all
    flac, rate = sf.read(io.BytesIO(tab.download("flac")), dtype="int16")  # asked again with the take's seed
    assert rate == 24000 and np.array_equal(flac, samples)


def test_the_first_piece_plays_while_the_rest_is_generated(tab, server):
    """The engine is held after the first piece: the page plays it before the reply is over."""
    _, state = server
    service, gate, held = state.service, threading.Event(), threading.Event()
    submit = service.submit

    def holding(request, on_event):
        def on(event):
            on_event(event)
            if event.kind == "piece" and not held.is_set():
                held.set()
                gate.wait(TIMEOUT_MS / 1000)  # the engine loop's thread: nothing more is generated

        return submit(request, on)

    service.submit = holding
    try:
        tab.hook("text").fill("The first sentence is here. Then a second one follows. And a third one ends it.")
        tab.hook("speak").click()
        tab.expect('[data-testid="status"]').to_have_text(re.compile("^Playing while generating"), timeout=TIMEOUT_MS)
        assert held.is_set() and float(tab.hook("status").get_attribute("data-played")) > 0
        assert tab.hook("audio").get_attribute("src") is None and tab.hook("speak").is_disabled()
    finally:
        gate.set()
        service.submit = submit
    tab.done()
    assert float(tab.hook("status").get_attribute("data-played")) > 1.0  # more pieces came after


def test_a_designed_voice_sends_exactly_the_chosen_items(tab):
    tab.hook("voice").select_option(":design")
    tab.hook("design-gender").select_option("female")
    tab.hook("design-age").select_option("elderly")
    tab.hook("design-dialect").select_option("四川话")
    tab.hook("design-accent").select_option("british accent")  # an accent clears the dialect
    assert tab.hook("design-dialect").input_value() == ""
    tab.hook("lang").fill("en")
    tab.hook("text").fill("Lovely weather today.")
    sent = tab.speak(keyboard=True)  # Ctrl+Enter in the text box
    assert sent["instruct"] == "female, elderly, british accent" and sent["voice"] == "auto" and sent["lang"] == "en"
    assert "instructions" not in sent and "seed" not in sent


def test_a_pinned_seed_gives_the_same_bytes_again(tab):
    tab.hook("text").fill("Once more, with the same seed.")
    tab.speak()
    first, seed = tab.download("wav"), tab.hook("seed").input_value()
    tab.hook("seed-pin").check()
    again = tab.speak()
    assert again["seed"] == int(seed)
    assert tab.hook("seed").input_value() == seed and tab.download("wav") == first
    tab.hook("seed").fill("12345")  # a typed seed is pinned and used
    assert tab.hook("seed-pin").is_checked() and tab.speak()["seed"] == 12345


def test_upload_a_recording_save_it_speak_with_it_and_delete_it(tab, server, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "faster_whisper", None)  # no speech recogniser: a transcript is needed
    url, _ = server
    t = np.arange(3 * 24000) / 24000
    tone = 0.3 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    clip = tmp_path / "bob.wav"
    sf.write(clip, tone.astype(np.float32), 24000, subtype="PCM_16")
    tab.hook("upload").set_input_files(str(clip))
    assert tab.hook("voice-name").input_value() == "bob"  # from the file's name
    tab.hook("save-voice").click()  # no transcript: this server has no speech recogniser, it says so
    tab.expect('[data-testid="error"]').to_have_text(re.compile("^field 'ref_text' is missing"), timeout=TIMEOUT_MS)
    tab.expect("#ref-text-error").to_have_text(tab.hook("error").inner_text())
    tab.hook("ref-text").fill("Hello there, this is a short test.")
    tab.hook("save-voice").click()
    tab.expect('[data-testid="saved-voice"][data-voice="bob"]').to_be_visible(timeout=TIMEOUT_MS)
    assert tab.hook("voice").input_value() == "bob"
    listed = httpx.get(url + "/v1/audio/voices", timeout=120).json()["voices"]
    assert [v["text"] for v in listed if v["id"] == "bob"] == ["Hello there, this is a short test."]
    tab.hook("text").fill("Now in the saved voice.")
    assert tab.speak()["voice"] == "bob"
    tab.page.once("dialog", lambda d: d.accept())
    tab.page.locator('[data-testid="delete-voice"][data-voice="bob"]').click()
    tab.expect('[data-testid="saved-voice"][data-voice="bob"]').to_have_count(0, timeout=TIMEOUT_MS)
    assert "bob" not in [v["id"] for v in httpx.get(url + "/v1/audio/voices", timeout=120).json()["voices"]]
    assert tab.hook("voice").input_value() == "auto"


def test_a_recording_from_the_microphone_is_saved_as_a_voice(browser, server):
    url, _ = server
    tab = Page(browser, url, permissions=["microphone"]).open()
    try:
        tab.hook("record").click()
        tab.expect('[data-testid="record"]').to_have_attribute("aria-pressed", "true", timeout=TIMEOUT_MS)
        tab.page.wait_for_timeout(3000)  # Chromium's fake microphone: 3 s of its beeps
        tab.hook("record").click()
        tab.expect('[data-testid="clip-name"]').to_have_text(re.compile(r"^recording, \d"), timeout=TIMEOUT_MS)
        tab.hook("ref-text").fill("Hello there, this is a short test.")
        tab.hook("voice-name").fill("mic")
        tab.hook("save-voice").click()
        tab.expect('[data-testid="saved-voice"][data-voice="mic"]').to_be_visible(timeout=TIMEOUT_MS)
        saved = [v for v in httpx.get(url + "/v1/audio/voices", timeout=120).json()["voices"] if v["id"] == "mic"]
        assert len(saved) == 1 and saved[0]["seconds"] > 1.0
        assert httpx.delete(url + "/v1/audio/voices/mic").status_code == 200
    finally:
        tab.close()


def test_an_out_of_range_setting_shows_the_apis_message(tab, server):
    url, _ = server
    tab.hook("settings").locator("summary").click()
    tab.hook("setting-num_step").fill("100")
    tab.hook("speak").click()
    tab.expect('[data-testid="error"]').to_be_visible(timeout=TIMEOUT_MS)
    sent = tab.speeches()[-1].post_data_json
    assert sent["num_step"] == 100
    message = _api(url, sent).json()["error"]["message"]
    assert message == "field 'num_step' must be an integer in 1..64, got 100"
    assert tab.hook("error").inner_text() == message
    assert tab.hook("setting-num_step").get_attribute("aria-invalid") == "true"
    assert tab.page.locator("#setting-num_step-error").inner_text() == message  # next to the field too
    tab.hook("setting-num_step").fill("8")  # a good value: the take comes, the error goes
    assert tab.speak()["num_step"] == 8
    assert tab.hook("error").is_hidden()


def test_with_an_api_key_the_page_asks_for_it_once_and_works(browser, engine, module_home):
    with running_server(engine, api_key=KEY) as (url, _, _state):
        tab = Page(browser, url).open(ready=False)
        try:
            tab.expect('[data-testid="key-dialog"]').to_be_visible(timeout=TIMEOUT_MS)
            tab.expect("#key-why").to_have_text(re.compile("needs an API key"))
            tab.hook("api-key").fill("nope")
            tab.hook("api-key-save").click()
            tab.expect("#key-why").to_have_text(re.compile("wrong API key"), timeout=TIMEOUT_MS)
            tab.hook("api-key").fill(KEY)
            tab.hook("api-key").press("Enter")
            tab.expect("body").to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
            tab.hook("text").fill("With a key.")
            tab.speak()
            assert tab.page.evaluate("() => [sessionStorage.getItem('omnivoice.apiKey'), localStorage.length]") == [
                KEY,
                0,
            ]
            assert not [r.url for r in tab.requests if KEY in r.url]  # never in a URL
            assert tab.speeches()[-1].all_headers()["authorization"] == f"Bearer {KEY}"  # a header only
            tab.page.reload()  # the same tab: the key is kept, no second question
            tab.expect("body").to_have_attribute("data-ready", "true", timeout=TIMEOUT_MS)
            assert tab.hook("key-dialog").is_hidden()
        finally:
            tab.close()


def test_screenshots_at_1280_and_375_px(browser, server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("page-screenshots")
    print(f"\nscreenshots of the page: {folder}")
    for width in (1280, 375, 320):
        tab = Page(browser, server[0], width=width, height=800).open()
        try:
            tab.hook("voice").select_option(":design")
            tab.hook("text").fill("A short take for the picture.")
            tab.speak()
            tab.hook("settings").locator("summary").click()
            assert tab.page.evaluate("() => document.documentElement.scrollWidth") <= width  # no sideways scroll
            if width != 320:
                shot = folder / f"page-{width}px.png"
                tab.page.screenshot(path=str(shot), full_page=True)
                assert shot.stat().st_size > 10_000
        finally:
            tab.close()
    assert sorted(p.name for p in folder.iterdir()) == ["page-1280px.png", "page-375px.png"]
