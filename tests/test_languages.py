"""Language codes, tags and names people use map to the model's ids; what the reference accepts is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnivoice_cli.engine.text.languages import list_languages, resolve_language

DATA = Path(__file__).resolve().parent.parent / "omnivoice_cli" / "data"

TABLE = [
    # model ids and names, as the reference
    ("en", "en"),
    ("zh", "zh"),
    ("yue", "yue"),
    ("English", "en"),
    ("CHINESE", "zh"),
    ("adamawa fulfulde", "fub"),
    # case of a code (the reference is case-sensitive and warns)
    ("EN", "en"),
    ("De", "de"),
    # BCP-47 tags: a region or script the model lacks falls back to the language
    ("en-US", "en"),
    ("en-gb", "en"),
    ("pt-BR", "pt"),
    ("zh-Hant", "zh"),
    ("zh-Hans-CN", "zh"),
    ("zh-TW", "zh"),
    ("es-419", "es"),
    ("sr-Latn", "sr"),
    ("yue-HK", "yue"),
    ("zh-yue", "yue"),
    ("en_US", "en"),
    ("en_US.UTF-8", "en"),
    (" fr-CA ", "fr"),
    # ISO 639-2/B, 639-2/T and 639-3
    ("eng", "en"),
    ("fra", "fr"),
    ("fre", "fr"),
    ("deu", "de"),
    ("ger", "de"),
    ("zho", "zh"),
    ("chi", "zh"),
    ("jpn", "ja"),
    ("spa", "es"),
    ("rus", "ru"),
    ("kor", "ko"),
    ("per", "fa"),
    ("cmn", "zh"),
    ("tgl", "fil"),
    # deprecated codes and macrolanguages with one model language under them
    ("iw", "he"),
    ("in", "id"),
    ("tl", "fil"),
    ("ne", "npi"),
    ("nep", "npi"),
    ("or", "ory"),
    ("ar", "arb"),
    # other names and autonyms
    ("Mandarin", "zh"),
    ("Farsi", "fa"),
    ("Tagalog", "fil"),
    ("Arabic", "arb"),
    ("Punjabi", "pa"),
    ("Deutsch", "de"),
    ("français", "fr"),
    ("Español", "es"),
    ("中文", "zh"),
    ("日本語", "ja"),
    ("Brazilian Portuguese", "pt"),
    ("Haitian-Creole", "ht"),
]


@pytest.mark.parametrize("given, expected", TABLE)
def test_maps_without_a_warning(given, expected):
    assert resolve_language(given) == (expected, None)


@pytest.mark.parametrize(
    "given, hint",
    [
        ("Englsh", "'English' (en)"),
        ("Chinse", "'Chinese' (zh)"),
        ("Frnch", "'French' (fr)"),
        ("Japanes", "'Japanese' (ja)"),
    ],
)
def test_near_miss_warns_with_did_you_mean(given, hint):
    code, warning = resolve_language(given)
    assert code is None
    assert f"'{given}'" in warning and f"did you mean {hint}?" in warning and "language-agnostic" in warning
    assert "\n" not in warning


@pytest.mark.parametrize("given", ["Klingon", "klingon", "tlh", "xx", "", "q!", "english please", "zz-ZZ"])
def test_unknown_warns_and_goes_on_without_a_language(given):
    code, warning = resolve_language(given)
    assert code is None and f"'{given}'" in warning and "not recognized" in warning and "did you mean" not in warning


def test_macrolanguage_with_several_model_languages_names_them():
    code, warning = resolve_language("ak")  # Akan: Fanti and Twi
    assert code is None
    assert "'fat' (Fanti)" in warning and "'tw' (Twi)" in warning and "language-agnostic" in warning


def test_none():
    assert resolve_language(None) == (None, None)
    assert resolve_language("NONE") == (None, None)


def test_every_input_the_reference_accepts_gives_its_id():
    name_to_id = json.loads((DATA / "languages.json").read_text(encoding="utf-8"))["name_to_id"]
    for name, code in name_to_id.items():
        assert resolve_language(code) == (code, None)
        assert resolve_language(name) == (code, None)
        assert resolve_language(name.upper()) == (code, None)


def test_aliases_never_shadow_the_models_own_names():
    name_to_id = json.loads((DATA / "languages.json").read_text(encoding="utf-8"))["name_to_id"]
    extra = json.loads((DATA / "language_aliases.json").read_text(encoding="utf-8"))
    ids = set(name_to_id.values())
    assert set(extra["aliases"].values()) <= ids
    assert not set(extra["aliases"]) & set(name_to_id)
    assert all(set(m) <= ids and m for m in extra["macro_members"].values())


def test_list_languages_filter():
    assert len(list_languages()) == len(list_languages(None)) == len(list_languages("  ")) == 646
    assert list_languages("english") == [("en", "English"), ("lir", "Liberian English")]
    assert ("zh", "Chinese") in list_languages("CHIN") and ("yue", "Cantonese") not in list_languages("chin")
    assert list_languages("deutsch") == [("de", "German")]  # a name it resolves
    assert ("pt", "Portuguese") in list_languages("pt-BR")  # a tag it resolves
    assert ("fil", "Filipino") in list_languages("FIL")  # matches the code
    assert list_languages("klingon") == []


# ---------------------------------------------------------------- regions to varieties

REGIONS = [  # the check: a region whose variety the model has goes to it
    ("ar-EG", "arz"),
    ("ar-MA", "ary"),
    ("ar-SA", "ars"),
    ("ar-TN", "aeb"),
    ("ar-IQ", "acm"),
    ("ar-LB", "apc"),
    ("ar-SY", "apc"),
    ("ar-JO", "apc"),
    ("ar-PS", "apc"),
    ("ar-AE", "afb"),
    ("ar-KW", "afb"),
    ("ar-QA", "afb"),
    ("ar-BH", "afb"),
    ("ar-OM", "acx"),  # Omani Arabic: the model has it (the ovos plugin maps it so too)
    ("ar-LY", "ayl"),
    ("ar-SD", "apd"),
    ("ar-DZ", "arq"),
    ("ar-TD", "shu"),
    ("zh-HK", "yue"),
    ("zh-MO", "yue"),
    ("pa-PK", "pnb"),
    ("ku-IQ", "ckb"),
    # spelled otherwise
    ("ar_EG", "arz"),
    ("ar_EG.UTF-8", "arz"),
    ("AR-eg", "arz"),
    ("ar-Arab-EG", "arz"),
    ("zh-Hant-HK", "yue"),
    ("pa-Arab", "pnb"),
    # no variety of the region in the model: the language, as before
    ("ar", "arb"),
    ("Arabic", "arb"),
    ("ar-YE", "arb"),
    ("ar-001", "arb"),
    ("zh", "zh"),
    ("zh-CN", "zh"),
    ("zh-TW", "zh"),
    ("pa", "pa"),
    ("pa-IN", "pa"),
    ("fa-AF", "fa"),  # no Dari in the model
]


@pytest.mark.parametrize("given, expected", REGIONS)
def test_a_region_goes_to_its_variety(given, expected):
    assert resolve_language(given) == (expected, None)


def test_every_region_row_is_a_model_language_with_its_source():
    from omnivoice_cli.engine.text.languages import language_regions

    name_to_id = json.loads((DATA / "languages.json").read_text(encoding="utf-8"))["name_to_id"]
    rows = json.loads((DATA / "language_regions.json").read_text(encoding="utf-8"))["regions"]
    assert len(language_regions()) == len(rows) >= 20
    for tag, code, source in language_regions():
        assert code in name_to_id.values() and resolve_language(tag) == (code, None)
        assert tag not in name_to_id and tag.split("-")[0] not in rows  # never a model name or a plain language
        assert ("CLDR" in source or "ISO 639-3" in source) and code in source


def test_dry_run_and_languages_show_the_variety(invoke, fake_engine):
    for tag, code in [("ar-EG", "arz"), ("zh-HK", "yue"), ("ar", "arb"), ("zh", "zh")]:
        r = invoke("say", "مرحبا" if tag.startswith("ar") else "你好", "--lang", tag, "--dry-run", "--json")
        assert r.exit_code == 0, r.stderr
        assert json.loads(r.stdout)["lang"] == code
    r = invoke("languages", "ar-EG")
    assert r.exit_code == 0 and "arz\tEgyptian Arabic" in r.stdout.splitlines()
    r = invoke("languages", "--regions")
    lines = [line.split("\t") for line in r.stdout.splitlines()]
    assert r.exit_code == 0 and ["ar-EG", "arz", "Egyptian Arabic"] == lines[[x[0] for x in lines].index("ar-EG")][:3]
    assert all(len(x) == 4 and x[3] for x in lines)
    r = invoke("languages", "--regions", "cantonese")
    assert [x.split("\t")[:2] for x in r.stdout.splitlines()] == [["zh-HK", "yue"], ["zh-MO", "yue"]]


# ------------------------------------------------------------------ an unknown --lang is refused

DID_YOU_MEAN = "unknown language 'englsh': did you mean 'English' (en)?"


@pytest.mark.parametrize("given", ["klingon", "englsh", "ak"])
def test_say_refuses_an_unknown_language_with_a_did_you_mean(invoke, fake_engine, home, given):
    """The engine warns and speaks language-agnostic, as the reference does; the tool refuses
    (exit 2, one line naming the value and what is allowed) unless asked for none."""
    r = invoke("say", "Hello.", "--lang", given, "--dry-run")
    assert r.exit_code == 2 and r.stdout == ""
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: --lang: ") and f"'{given}'" in line and "none speaks any language" in line
    if given == "englsh":
        assert DID_YOU_MEAN in line
    assert invoke("say", "Hello.", "--lang", "none", "--dry-run").exit_code == 0


def test_every_way_in_refuses_it_in_the_same_words(invoke, fake_engine, home, tmp_path):
    """A flag of batch (before any line: exit 2), a batch line's field (that line fails), a preset."""
    lines = tmp_path / "lines.txt"
    lines.write_text("Hello.\n")
    r = invoke("batch", lines, "-o", tmp_path / "out", "--lang", "englsh")
    assert r.exit_code == 2 and DID_YOU_MEAN in r.stderr and not (tmp_path / "out").exists()
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"text": "Hello.", "lang": "englsh"}) + "\n" + json.dumps({"text": "Hi."}) + "\n")
    r = invoke("batch", jobs, "-o", tmp_path / "out2")
    assert r.exit_code == 1 and f"line 1: field 'lang': {DID_YOU_MEAN}" in r.stderr
    assert [q.text for q in fake_engine.requests] == ["Hi."]
    preset = tmp_path / "mine.toml"
    preset.write_text('lang = "englsh"\n')
    r = invoke("say", "Hello.", "--preset", preset, "--dry-run")
    assert r.exit_code == 2 and DID_YOU_MEAN in r.stderr
