"""Language codes, tags and names people use map to the model's ids; what the reference accepts is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnivoice_cli.engine.languages import list_languages, resolve_language

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
