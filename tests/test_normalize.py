"""Text normalisation equals the reference's `normalize_text` on the golden table."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.text import normalize as nz
from omnivoice_cli.engine.text.languages import resolve_language

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "normalize" / "golden.json").read_text(encoding="utf-8"))
CASES = [c for c in GOLDEN["cases"] if not c.get("deviation")]
DEVIATIONS = [c for c in GOLDEN["cases"] if c.get("deviation") is True]  # num2words' two-letter fallback
CENTS_ROWS = [c for c in GOLDEN["cases"] if c.get("deviation") == "cents"]  # English money read with its cents

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


@pytest.mark.slow
def test_importing_the_engine_does_not_import_the_extra():
    import subprocess
    import sys

    code = "import omnivoice_cli.engine.text.normalize, omnivoice_cli.engine.text.chunking, omnivoice_cli.engine.text.textcheck, sys; print('kaldifst' in sys.modules, 'num2words' in sys.modules, 'langcodes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]


# ------------------------------------------------------------------ the cents (a deliberate difference)


def test_the_golden_money_row_differs_from_the_reference_only_in_its_cents():
    [row] = CENTS_ROWS
    assert "three point five dollars" in row["reference"]  # the reference loses the cents' zero
    assert nz.normalize_text(row["text"], row["lang"]) == row["ours"]
    assert row["ours"] == row["reference"].replace("three point five dollars", "three dollars fifty")


@pytest.mark.parametrize(
    "text, spoken",
    [
        ("$3.50", "three dollars fifty"),
        ("$1.01", "one dollar oh one"),
        ("$12.00", "twelve dollars"),
        ("$0.99", "ninety nine cents"),
        ("$0.01", "one cent"),
        ("€2.50", "two euros fifty"),
        ("£0.20", "twenty pence"),
        ("$1,234.56", "one thousand two hundred and thirty four dollars fifty six"),
        ("It costs $3.50 today.", "It costs three dollars fifty today."),
        ("$3.50-$4.50", "three dollars fifty - four dollars fifty"),  # never "fifty-four"
        ("Pay $3.50 [laughter] now", "Pay three dollars fifty [laughter] now"),
    ],
)
def test_money_with_two_decimals_is_read_with_its_cents(text, spoken):
    assert nz.normalize_text(text, "en") == spoken


@pytest.mark.parametrize(
    "text, spoken",
    [
        ("$3.5", "three point five dollars"),  # one decimal: not cents
        ("$2.999", "two point nine nine nine dollars"),
        ("$3.50 million", "three point five oh million dollars"),  # a quantity: as the reference
        ("$3.50m", "three point five oh million dollars"),
        ("US$3.50", "three point five us dollars"),
        ("3.50", "three point five oh"),  # no currency
    ],
)
def test_other_amounts_are_read_as_the_reference_reads_them(text, spoken):
    assert nz.normalize_text(text, "en") == spoken
    assert nz._fst_normalizer("en")(text) == spoken  # the reference's FST, with nothing of ours


def test_chinese_money_is_left_to_the_reference():
    [row] = [c for c in CASES if c["lang"] == "zh" and "$3.50" in c["text"]]
    assert "三点五零美元" in nz.normalize_text(row["text"], "zh") == row["reference"]
