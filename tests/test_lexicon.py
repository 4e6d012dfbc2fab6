"""The pronunciation lexicon (app/lexicon.py, `--lexicon FILE`, setting `lexicon`): whole-word
replacements made before normalisation, on every speaking command and the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnivoice_cli.app.lexicon import load_lexicon, parse_lexicon
from omnivoice_cli.app.request import References, Voices, build_request
from omnivoice_cli.app.settings.layers import FLAG_SOURCE, resolve
from omnivoice_cli.app.settings.schema import HTTP_SETTINGS, LINE_SETTINGS, PRESET_KEYS
from omnivoice_cli.app.settings.setting import SettingsError
from omnivoice_cli.engine.errors import InvalidRequest

TINY_TOKENIZER = Path(__file__).parent / "fixtures" / "tiny" / "ckpt" / "tokenizer.json"

LEXICON = """\
GIF = "jif"
"New York" = "Noo York"
New = "Nu"
"café" = "kafay"
"Москва" = "Moskva"
"कम" = "kam"
"打折" = "打ZHE2"
"東京" = "とうきょう"
".NET" = "dot net"
pause = "PAWS"
alpha = "beta"
beta = "gamma"
um = ""
us = "us-ci"

[case-sensitive]
US = "you ess"
"""

CASES = [
    # whole words, any case at the top level; the punctuation around a word is kept
    ("A GIF, a gif and a Gif!", "A jif, a jif and a jif!"),
    ("(GIF) GIF's GIF-like", "(jif) jif's jif-like"),
    ("GIFs GIF2 GIF_x xGIF", "GIFs GIF2 GIF_x xGIF"),  # parts of words are not replaced
    # the [case-sensitive] table: as written only; over a case-insensitive entry of the same length
    ("US and us, USA", "you ess and us-ci, USA"),
    # several words, any spacing between them in the text; the longest key first, then shorter ones
    ("New York, New  York, New\nYork", "Noo York, Noo York, Noo York"),
    ("New Yorker and New", "Nu Yorker and Nu"),
    # Unicode words: accents (and their case), Cyrillic, a combining mark, a Devanagari vowel sign
    ("un café, CAFÉ, cafés", "un kafay, kafay, cafés"),
    ("в Москве и Москва!", "в Москве и Moskva!"),
    ("cafe\u0301 is not cafe", "cafe\u0301 is not cafe"),  # (no entry "cafe": the mark keeps café whole)
    ("कम है, कमा", "kam है, कमा"),
    # scripts without spaces: the literal string; a Latin key next to them is its own word
    ("这批货物打折出售", "这批货物打ZHE2出售"),
    ("東京に行く", "とうきょうに行く"),
    ("我喜欢GIF图片", "我喜欢jif图片"),
    # a key that starts with punctuation has no boundary there
    ("I use .NET daily.", "I use dot net daily."),
    # bracketed tags are never looked into; one pass (a replacement is not replaced again)
    ("[pause 1s] pause [B EY1 S]", "[pause 1s] PAWS [B EY1 S]"),
    ("alpha beta", "beta gamma"),
    ("so um yes", "so  yes"),  # "" drops the word
]


@pytest.fixture(scope="module")
def lexicon():
    return parse_lexicon(LEXICON, "words.toml")


@pytest.mark.parametrize("text,expected", CASES)
def test_replacements(lexicon, text, expected):
    assert lexicon.apply(text)[0] == expected


def test_what_was_replaced_is_listed_as_in_the_text(lexicon):
    text, replaced = lexicon.apply("Gif in New  York")
    assert text == "jif in Noo York"
    assert replaced == [("Gif", "jif"), ("New  York", "Noo York")]


@pytest.mark.parametrize(
    "content,expected",
    [
        ('GIF = "jif"\n\nSQL = \n', "lexicon file 'w.toml', line 3: TOML syntax error: Invalid value (column 7)"),
        ('GIF = "jif"\ncafé = "x"\n', "lexicon file 'w.toml', line 2: TOML syntax error"),
        (
            'GIF = "jif"\nSQL = 3\n',
            "lexicon file 'w.toml', line 2: 'SQL' must map to its replacement (a string), got 3",
        ),
        ('GIF = ["jif"]\n', "line 1: 'GIF' must map to its replacement (a string), got ['jif'] (a list)"),
        ('"" = "x"\n', "lexicon file 'w.toml', line 1: a key is empty"),
        ('"  " = "x"\n', "a key is empty"),
        ('GIF = "jif"\n[words]\nSQL = "sequel"\n', "line 2: unknown table [words]; the one table is [case-sensitive]"),
        ('GIF = "jif"\ngif = "giff"\n', "line 2: 'gif' and 'GIF' are the same words in another case: keep one"),
        ('"[pause]" = "x"\n', "holds a bracket"),
        ('GIF = "jif"\n"unclosed = 1\n', "line 2: TOML syntax error"),
    ],
)
def test_bad_files_name_the_file_and_line(tmp_path, content, expected):
    path = tmp_path / "w.toml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidRequest) as e:
        load_lexicon(path, fresh=True)
    message = str(e.value).replace(str(path), "w.toml")
    assert expected in message and "\n" not in message


def test_missing_folder_and_binary_files(tmp_path):
    with pytest.raises(InvalidRequest, match="lexicon file '.*nope.toml' does not exist"):
        load_lexicon(tmp_path / "nope.toml")
    with pytest.raises(InvalidRequest, match="is a folder"):
        load_lexicon(tmp_path)
    (tmp_path / "bin.toml").write_bytes(b'GIF = "jif"\nX = "\xff"\n')
    with pytest.raises(InvalidRequest, match=r"line 2: not UTF-8 text"):
        load_lexicon(tmp_path / "bin.toml")


def _words(tmp_path, content=LEXICON, name="words.toml") -> Path:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return path


def test_a_bad_file_is_one_line_and_exit_2(invoke, fake_engine, tmp_path):
    path = _words(tmp_path, 'GIF = "jif"\n\nSQL = \n')
    r = invoke("say", "A GIF.", "--lexicon", path, "--dry-run")
    assert r.exit_code == 2
    assert r.stderr.strip() == f"Error: lexicon file '{path}', line 3: TOML syntax error: Invalid value (column 7)"
    r = invoke("say", "A GIF.", "--lexicon", tmp_path / "nope.toml", "-o", tmp_path / "x.wav")
    assert r.exit_code == 2 and "does not exist" in r.stderr and fake_engine.loads == []


def test_dry_run_json_shows_the_text_after_the_lexicon(invoke, fake_engine, tmp_path):
    path = _words(tmp_path)
    r = invoke("say", "The GIF of New York, by the US.", "--lexicon", path, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["text"] == "The jif of Noo York, by the you ess."
    assert [p["text"] for p in report["pieces"]] == [report["text"]]
    assert report["replaced"] == [
        {"words": "GIF", "say": "jif"},
        {"words": "New York", "say": "Noo York"},
        {"words": "US", "say": "you ess"},
    ]
    assert report["settings"]["lexicon"] == {"value": str(path), "from": "flag"}
    r = invoke("say", "The GIF.", "--lexicon", path, "--dry-run")
    assert r.exit_code == 0 and r.stdout.startswith("text: The jif.\nlexicon: 1 replaced\n")
    assert fake_engine.loads == []


def test_the_lexicon_comes_before_normalisation(invoke, fake_engine, tmp_path):
    pytest.importorskip("kaldifst")
    path = _words(tmp_path, '"3M" = "three em"\n')
    r = invoke("say", "3M made $3.", "--lexicon", path, "--normalize", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["text"] == "three em made three dollars."
    r = invoke("say", "3M made $3.", "--normalize", "--dry-run", "--json")  # without it the number is read
    assert "three em" not in json.loads(r.stdout)["text"]


def _built(text: str, **values):
    settings = resolve((FLAG_SOURCE, values))
    return build_request(text, settings, refs=References(), voices=Voices(), seed=1)


@pytest.mark.parametrize(
    "content,text,lang,written",
    [
        ('bass = "[B EY1 S]"\n', "He plays the bass for $3.", "en", "He plays the [B EY1 S] for three dollars."),
        ('"打折" = "打ZHE2"\n', "这批货物打折出售，有2个。", "zh", "这批货物打ZHE2出售,有两个."),
    ],
)
def test_pronunciation_forms_reach_the_canvas_tokens(tmp_path, content, text, lang, written):
    """A CMU pronunciation (English) or uppercase pinyin with a tone digit (Chinese) as a value
    passes normalisation untouched and gives the text tokens of the form written in the text, as
    the reference tokenizes it (the tokenizer's plain call on the wrapped text: no non-verbal tag)."""
    pytest.importorskip("kaldifst")
    from tokenizers import Tokenizer

    from omnivoice_cli.engine.model.canvas import build_canvas
    from omnivoice_cli.engine.text.canvastext import combine_text
    from omnivoice_cli.engine.text.tokenizer import TextTokenizer

    built = _built(text, lexicon=str(_words(tmp_path, content)), normalize=True, lang=lang)
    assert built.request.text == written
    tok = TextTokenizer.from_file(TINY_TOKENIZER)
    canvas = build_canvas(tok, built.request.text, 5, lang=lang)
    style = tok.encode("<|lang_start|>" + lang + "<|lang_end|><|instruct_start|>None<|instruct_end|>")
    wrapped = "<|text_start|>" + combine_text(written) + "<|text_end|>"
    reference = Tokenizer.from_file(str(TINY_TOKENIZER)).encode(wrapped, add_special_tokens=False).ids
    assert canvas.input_ids[0, len(style) : canvas.target_start].tolist() == reference


def test_a_preset_path_is_relative_to_the_preset_folder(invoke, fake_engine, tmp_path, monkeypatch):
    folder = tmp_path / "presets"
    folder.mkdir()
    _words(folder)
    (folder / "mine.toml").write_text('lexicon = "words.toml"\n', encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # no words.toml here
    r = invoke("say", "A GIF.", "--preset", folder / "mine.toml", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["text"] == "A jif."
    assert report["settings"]["lexicon"]["value"] == str(folder / "words.toml")
    assert report["settings"]["lexicon"]["from"].startswith("preset")
    (elsewhere / "other.toml").write_text('GIF = "gift"\n', encoding="utf-8")  # a flag wins over the preset
    r = invoke("say", "A GIF.", "--preset", folder / "mine.toml", "--lexicon", "other.toml", "--dry-run", "--json")
    assert json.loads(r.stdout)["text"] == "A gift."


def test_a_batch_line_cannot_set_it(invoke, fake_engine, tmp_path):
    path = _words(tmp_path)
    src = tmp_path / "jobs.jsonl"
    src.write_text('{"text": "One GIF."}\n{"text": "Two.", "lexicon": "words.toml"}\n', encoding="utf-8")
    r = invoke("batch", src, "-o", tmp_path / "out", "--lexicon", path, "--dry-run", "--json")
    assert r.exit_code == 1
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["text"] for x in rows] == ["One jif."]
    assert "line 2: unknown field 'lexicon' (lexicon is set for the whole run: give --lexicon" in r.stderr


def test_every_speaking_command_takes_it():
    import typer.main

    import omnivoice_cli.cli as cli

    root = typer.main.get_command(cli.app)
    for name in ("say", "batch", "dub", "serve", "wyoming", "mcp"):
        options = {o for p in root.commands[name].params for o in p.opts}
        assert "--lexicon" in options, name
    assert "lexicon" in PRESET_KEYS and "lexicon" not in LINE_SETTINGS + HTTP_SETTINGS


def test_wyoming_and_mcp_requests_go_through_it(tmp_path):
    """The engine-loop servers (app/door/speaker.py): the command's lexicon for every request; a
    request's settings cannot name one."""
    from omnivoice_cli.app.door.speaker import Speaker, SpeakerOptions

    path = _words(tmp_path, 'GIF = "jif"\n')
    speaker = Speaker(SpeakerOptions(layers=((FLAG_SOURCE, {"lexicon": str(path)}),)), load=lambda: None)
    assert speaker.build("A GIF.", settings={"seed": 1}).request.text == "A jif."
    with pytest.raises(
        SettingsError,
        match=r"field 'lexicon' is not a known setting \(it is set when the command starts: --lexicon\)",
    ):
        speaker.build("A GIF.", settings={"lexicon": str(path)})


# --- the server ---------------------------------------------------------------------------------


def test_serve_checks_the_file_before_it_listens(invoke, tmp_path):
    pytest.importorskip("uvicorn")
    r = invoke("serve", "--lexicon", tmp_path / "nope.toml", "--port", "0")
    assert r.exit_code == 2 and "lexicon file" in r.stderr and "does not exist" in r.stderr


@pytest.mark.slow
def test_serve_lexicon_over_http(engine, tmp_path):
    """serve --lexicon: every request's text goes through the lexicon loaded at the start (the
    file changed later changes nothing); a request cannot name a lexicon (400, saying why)."""
    pytest.importorskip("uvicorn")
    import httpx
    from server_util import running_server

    path = _words(tmp_path, 'GIF = "jif"\n')
    load_lexicon(path, fresh=True)  # what `serve` does when it starts (commands/common.run_settings)
    layers = ((FLAG_SOURCE, {"num_step": 4, "lexicon": str(path)}),)
    with running_server(engine, layers=layers) as (url, _, _):
        path.write_text('GIF = "giff"\n', encoding="utf-8")
        with httpx.Client(base_url=url, timeout=120) as client:

            def speak(text: str, **extra) -> httpx.Response:
                body = {"model": "omnivoice", "input": text, "response_format": "wav", "seed": 5, **extra}
                return client.post("/v1/audio/speech", json=body)

            replaced, written, other = speak("A GIF."), speak("A jif."), speak("A gif.")
            assert replaced.status_code == written.status_code == 200, replaced.text
            assert replaced.content == written.content == other.content
            assert speak("A giff.").content != written.content  # another text: other audio
            refused = speak("A GIF.", lexicon="words.toml")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "lexicon" and "serve --lexicon" in error["message"]
    assert "a request cannot name a file" in error["message"]
