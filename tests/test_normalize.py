"""Text normalisation equals the reference's `normalize_text` on the golden table."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.languages import resolve_language
from omnivoice_cli.engine import normalize as nz

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "normalize" / "golden.json").read_text(encoding="utf-8"))
CASES = [c for c in GOLDEN["cases"] if not c.get("deviation")]
DEVIATIONS = [c for c in GOLDEN["cases"] if c.get("deviation")]

pytest.importorskip("kaldifst", reason="the normalize extra is not installed")
pytest.importorskip("num2words", reason="the normalize extra is not installed")


def test_golden_table_covers_the_languages():
    langs = {c["lang"] for c in CASES}
    assert {"en", "zh", "de", "fr", "es", "ru", "ja"} <= langs
    assert sum("[" in c["text"] for c in CASES) >= 8  # the protected-tag cases
    assert sum(c["text"] != c["reference"] for c in CASES) >= 50  # rows where something happens


@pytest.mark.parametrize("case", CASES, ids=[f"{c['lang']}:{c['text'][:30]}" for c in CASES])
def test_equals_reference(case):
    lang, _ = resolve_language(case["lang"])  # as the pipeline does: resolve, then normalise
    assert nz.normalize_text(case["text"], lang) == case["reference"]


@pytest.mark.parametrize("case", DEVIATIONS, ids=[c["lang"] for c in DEVIATIONS])
def test_deviation_leaves_digits_where_num2words_would_use_another_language(case):
    assert "25" not in case["reference"]  # the reference spells them in Finnish / Chechen
    assert nz.normalize_text(case["text"], case["lang"]) == case["text"]


def test_protected_spans_survive_verbatim():
    text = "[B EY1 S] 12 [pause 500ms] [laughter] NI3 HAO3 7"
    out = nz.normalize_text(text, "en")
    for span in ("[B EY1 S]", "[pause 500ms]", "[laughter]"):
        assert span in out
    assert "twelve" in out and "seven" in out
    zh = nz.normalize_text("你好NI3 HAO3，有2个", "zh")
    assert "NI3 HAO3" in zh and "两个" in zh


def test_language_routing():
    assert nz.normalizer_language(None, "abc") == "en"
    assert nz.normalizer_language(None, "中文") == "zh"
    assert nz.normalizer_language("none", "中文") == "zh"
    assert nz.normalizer_language("English", "x") == "en"
    assert nz.normalizer_language("de-AT", "x") == "de"  # tags map as everywhere
    assert nz.normalizer_language("klingon", "中文") == "zh"  # unknown: by script, as the pipeline


def test_reorder_tokens():
    tagged = 'money { currency: "美元" value: "三点五零" } char { value: "," }'
    assert nz.reorder_tokens(tagged, "zh") == 'money { value: "三点五零" currency: "美元" } char { value: "," }'
    kept = 'date { preserve_order: "true" month: "may" day: "five" }'
    assert nz.reorder_tokens(kept, "en") == kept
    assert nz.reorder_tokens('w { v: "say \\"hi\\"" }', "en") == 'w { v: "say \\"hi\\"" }'
    with pytest.raises(ValueError):
        nz.reorder_tokens("not tagged", "en")


def test_missing_extra_is_a_clear_request_error(monkeypatch):
    real_import = builtins.__import__

    def no_extra(name, *args, **kwargs):
        if name in ("kaldifst", "num2words"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    nz._fst_normalizer.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_extra)
    try:
        with pytest.raises(InvalidRequest, match=r"kaldifst.*pip install 'omnivoice-cli\[normalize\]'"):
            nz.normalize_text("5 apples", "en")
        with pytest.raises(InvalidRequest, match=r"num2words.*pip install"):
            nz.normalize_text("5 Äpfel", "de")
        assert nz.normalize_text("keine Zahlen", "de") == "keine Zahlen"  # nothing to do, nothing needed
    finally:
        monkeypatch.undo()
        nz._fst_normalizer.cache_clear()


def test_importing_the_engine_does_not_import_the_extra():
    import subprocess
    import sys

    code = "import omnivoice_cli.engine.normalize, omnivoice_cli.engine.text, sys; print('kaldifst' in sys.modules, 'num2words' in sys.modules, 'langcodes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]
