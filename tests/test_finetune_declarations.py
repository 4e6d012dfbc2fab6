"""A fine-tune's declaration files (engine/checkpoint/finetune.py) written to break the reader:
nesting deep enough to exhaust the parser, lone surrogate escapes, terminal control characters,
a name given twice. Each is one line naming the file and the entry, exit 1, before anything starts
(`info`, a `say` dry run, `serve` before it listens)."""

from __future__ import annotations

import json

import pytest
from conftest import error_line

from omnivoice_cli.engine.checkpoint.finetune import read_own
from omnivoice_cli.engine.errors import CheckpointError

DEEP = "[" * 100_000 + "]" * 100_000
VOICE = {"audio": "reference_speakers/a.wav", "text": "hello there"}

HOSTILE = {
    "deep instructs": ("instructs.json", DEEP, "nest"),
    "deep languages": ("languages.json", '{"languages": ' + DEEP + "}", "nest"),
    "deep references": ("references.json", '{"A": {"audio": ' + DEEP + "}}", "nest"),
    "a lone surrogate in an item": ("instructs.json", '["ha\\ud800ppy"]', "surrogate"),
    "a lone surrogate in a language id": ("languages.json", '{"s\\udc00a": "Saudi"}', "surrogate"),
    "a lone surrogate in a transcript": ("references.json", json.dumps({"A": VOICE})[:-3] + '\\udfff"}}', "surrogate"),
    "CSI (U+009B) in an item": ("instructs.json", '["ha\\u009b31mppy"]', "control"),
    "a C1 control in a language name": ("languages.json", '{"sa": "Sau\\u0090di"}', "control"),
    "a bidi override in a voice name": ("references.json", json.dumps({"A\u202e": VOICE}), "control"),
    "a language id twice": ("languages.json", '{"sa": "Saudi", "sa": "Sanskrit"}', "'sa'"),
    "a language id twice in any case": ("languages.json", '{"sa": "Saudi", "SA": "Sanskrit"}', "'SA'"),
    "a language id twice in a list": ("languages.json", '["eg", "EG"]', "'EG'"),
    "a language name twice": ("languages.json", '{"eg": "Egyptian", "sa": "egyptian"}', "'egyptian'"),
    "a language name that is another's id": ("languages.json", '{"eg": "Egyptian", "sa": "EG"}', "'EG'"),
    "an instruct item twice in any case": ("instructs.json", '["happy", "Happy"]', "'Happy'"),
    "a voice twice": ("references.json", '{"A": %s, "A": %s}' % (json.dumps(VOICE), json.dumps(VOICE)), "'A'"),
    "a voice twice in any case": ("references.json", json.dumps({"Karim": VOICE, "KARIM": VOICE}), "'KARIM'"),
}


def _write(ckpt, name: str, text: str) -> None:
    (ckpt / "reference_speakers").mkdir(exist_ok=True)
    (ckpt / "reference_speakers" / "a.wav").write_bytes(b"RIFF")  # only its existence is checked here
    (ckpt / name).write_text(text, encoding="utf-8")


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_declaration_is_a_checkpoint_error_naming_the_file_and_entry(ckpt_copy, case):
    name, text, words = HOSTILE[case]
    _write(ckpt_copy, name, text)
    with pytest.raises(CheckpointError) as e:
        read_own(ckpt_copy)
    message = str(e.value)
    assert message.startswith(str(ckpt_copy / name)) and words in message, message
    assert "\n" not in message and message.isprintable(), message
    message.encode("utf-8")  # printable on any UTF-8 terminal


@pytest.mark.parametrize("case", ["deep instructs", "a lone surrogate in an item", "CSI (U+009B) in an item"])
def test_info_and_a_dry_run_refuse_it_in_one_line(invoke, ckpt_copy, home, case):
    name, text, words = HOSTILE[case]
    _write(ckpt_copy, name, text)
    for args in (("info", "--model", ckpt_copy), ("say", "hello", "--model", ckpt_copy, "--dry-run")):
        r = invoke(*args)
        line = error_line(r, str(ckpt_copy / name), exit_code=1)
        assert words in line and "\x9b" not in r.stdout + r.stderr


def test_serve_refuses_it_before_it_listens(invoke, ckpt_copy, home):
    pytest.importorskip("uvicorn")
    _write(ckpt_copy, "languages.json", '{"sa": "Saudi", "SA": "Sanskrit"}')
    r = invoke("serve", "--model", ckpt_copy, "--port", "0", "--no-ui")
    error_line(r, str(ckpt_copy / "languages.json"), exit_code=1)
    assert "listening" not in r.stdout + r.stderr


def test_the_published_layouts_still_read(finetune):
    assert len(read_own(finetune("lahgtna")).languages) >= 3
    assert [v.name for v in read_own(finetune("voicetut")).voices]
