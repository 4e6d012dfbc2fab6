"""Development tool: write omnivoice_cli/data/language_aliases.json, the other names of the model's languages.

Run from the repo root in a scratch venv that has `langcodes` and `language_data` (the latter is
13 MB with a native trie, so it is never a dependency of the package):

    python -m venv /tmp/lc && /tmp/lc/bin/pip install langcodes language_data
    /tmp/lc/bin/python tools/make_language_aliases.py

What it writes (read by omnivoice_cli/engine/text/languages.py; nothing here runs at run time):

- "aliases": {normalised name: model id} for the English names (CLDR, Wikidata and the IANA
  registry as gathered by language_data) and the autonyms of the model's 646 languages and of
  the codes langcodes folds into them (`tl` -> `fil`, `cmn` -> `zh`, ...). A name is kept only when
  every language it names is the same model id, and only when the model's own table
  (data/languages.json) does not already have it.
- "macro_members": {macrolanguage: [model ids]} for the macrolanguages the model lacks but has
  members of, from langcodes' own folding (`ne` -> [`npi`], `ak` -> [`fat`, `tw`]).

With `--regions` it writes omnivoice_cli/data/language_regions.json instead (langcodes alone is
enough): the BCP-47 regions (and scripts) whose spoken variety the model has, `ar-EG` -> `arz`,
`zh-HK` -> `yue`, from the table REGIONS below, each row with its source. Every row is checked:
its id is one of the model's, and where its source cites CLDR's likely subtags, the region they
give the id (as langcodes has them) is the tag's.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import langcodes

DATA = Path("omnivoice_cli/data")


def _model_ids() -> tuple[dict[str, str], set[str]]:
    name_to_id = json.loads((DATA / "languages.json").read_text(encoding="utf-8"))["name_to_id"]
    return name_to_id, set(name_to_id.values())


def _macro_members(ids: set[str]) -> dict[str, list[str]]:
    members: dict[str, list[str]] = defaultdict(list)
    for i in sorted(ids):
        macro = langcodes.standardize_tag(i, macro=True)
        if macro != i and macro not in ids:
            members[macro].append(i)
    return dict(members)


def _to_model_id(code: str, ids: set[str], macro: dict[str, list[str]]) -> str | None:
    """The model id a language code stands for, by the same rules as the run-time resolver."""
    try:
        lang = langcodes.Language.get(code, normalize=True).language
    except (langcodes.tag_parser.LanguageTagError, ValueError):
        return None
    if lang is None:
        return None
    for cand in (lang, langcodes.standardize_tag(lang, macro=True)):
        if cand in ids:
            return cand
        if len(macro.get(cand, [])) == 1:
            return macro[cand][0]
    return None


def main() -> None:
    from language_data.names import load_trie, normalize_name
    from language_data.util import data_filename

    name_to_id, ids = _model_ids()
    macro = _macro_members(ids)
    known = {normalize_name(k) for k in name_to_id}

    seen: dict[str, set[str]] = defaultdict(set)  # alias -> model ids it could name
    trie = load_trie(data_filename("trie/en/name_to_language.marisa"))
    for name, code in trie.items():
        target = _to_model_id(code.decode("utf-8"), ids, macro)
        seen[name].add(target)  # None marks a name shared with a language the model lacks
    for i in sorted(ids):
        auto = langcodes.Language.get(i).autonym()
        if auto and auto.lower() != i and auto != langcodes.Language.get(i).display_name():
            seen[normalize_name(auto)].add(i)

    aliases = {
        name: next(iter(targets))
        for name, targets in sorted(seen.items())
        if len(targets) == 1 and None not in targets and name not in known and name
    }
    out = {
        "_about": "Other names of the model's languages (tools/make_language_aliases.py; "
        "data from langcodes and language_data, MIT).",
        "aliases": aliases,
        "macro_members": macro,
    }
    path = DATA / "language_aliases.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{path}: {len(aliases)} aliases, {len(macro)} macrolanguages, {path.stat().st_size} bytes")


# BCP-47 tag -> (model id, source). A plain language (`ar`, `zh`) keeps its own id (`arb`, `zh`);
# a region whose speech is one of the model's varieties goes to it. Sources: CLDR = the CLDR
# likely subtags (the id's default region); ISO = ISO 639-3 (the individual language, member of
# the macrolanguage, and the country the registry gives it). The ovos OmniVoice TTS plugin
# (OpenVoiceOS/ovos-tts-plugin-omnivoice, languages.py) maps the Arabic regions the same way.
_ISO_ARA = "ISO 639-3: {} ({}), member of the macrolanguage ara"
REGIONS: dict[str, tuple[str, str]] = {
    "ar-EG": ("arz", "CLDR likely subtags: arz -> arz_Arab_EG; " + _ISO_ARA.format("arz", "Egyptian Arabic")),
    "ar-MA": ("ary", "CLDR likely subtags: ary -> ary_Arab_MA; " + _ISO_ARA.format("ary", "Moroccan Arabic")),
    "ar-SA": ("ars", "CLDR likely subtags: ars -> ars_Arab_SA; " + _ISO_ARA.format("ars", "Najdi Arabic")),
    "ar-TN": ("aeb", "CLDR likely subtags: aeb -> aeb_Arab_TN; " + _ISO_ARA.format("aeb", "Tunisian Arabic")),
    "ar-DZ": ("arq", "CLDR likely subtags: arq -> arq_Arab_DZ; " + _ISO_ARA.format("arq", "Algerian Arabic")),
    "ar-LY": ("ayl", _ISO_ARA.format("ayl", "Libyan Arabic, Libya")),
    "ar-SD": ("apd", _ISO_ARA.format("apd", "Sudanese Arabic, Sudan")),
    "ar-TD": ("shu", _ISO_ARA.format("shu", "Chadian Arabic, Chad")),
    "ar-IQ": ("acm", _ISO_ARA.format("acm", "Mesopotamian Arabic, Iraq")),
    "ar-LB": ("apc", _ISO_ARA.format("apc", "Levantine Arabic, Lebanon") + " (ajp merged into apc, 2023)"),
    "ar-SY": ("apc", _ISO_ARA.format("apc", "Levantine Arabic, Syria") + " (ajp merged into apc, 2023)"),
    "ar-JO": ("apc", _ISO_ARA.format("apc", "Levantine Arabic, Jordan") + " (ajp merged into apc, 2023)"),
    "ar-PS": ("apc", _ISO_ARA.format("apc", "Levantine Arabic, Palestine") + " (ajp merged into apc, 2023)"),
    "ar-AE": ("afb", _ISO_ARA.format("afb", "Gulf Arabic, United Arab Emirates")),
    "ar-KW": ("afb", _ISO_ARA.format("afb", "Gulf Arabic, Kuwait")),
    "ar-QA": ("afb", _ISO_ARA.format("afb", "Gulf Arabic, Qatar")),
    "ar-BH": ("afb", _ISO_ARA.format("afb", "Gulf Arabic, Bahrain")),
    "ar-OM": ("acx", _ISO_ARA.format("acx", "Omani Arabic, Oman")),
    "zh-HK": ("yue", "CLDR likely subtags: yue -> yue_Hant_HK; ISO 639-3: yue (Cantonese), member of zho"),
    "zh-MO": ("yue", "ISO 639-3: yue (Cantonese, Macau), member of the macrolanguage zho"),
    "pa-PK": (
        "pnb",
        "CLDR likely subtags: pnb -> pnb_Arab_PK, pa_Arab -> pa_Arab_PK; ISO 639-3: pnb (Western Panjabi)",
    ),
    "pa-Arab": ("pnb", "CLDR likely subtags: pa_Arab -> pa_Arab_PK; ISO 639-3: pnb (Western Panjabi, Shahmukhi)"),
    "ku-IQ": ("ckb", "CLDR likely subtags: ckb -> ckb_Arab_IQ; ISO 639-3: ckb (Central Kurdish), member of ku"),
    "ku-IR": ("ckb", "ISO 639-3: ckb (Central Kurdish, Iran), member of the macrolanguage kur"),
}


def _cldr_region(code: str) -> str | None:
    """The region CLDR's likely subtags give `code` (None where langcodes has only its fallback)."""
    full = langcodes.Language.get(code).maximize()
    return (
        None if (full.territory in (None, "ZZ") or (full.script, full.territory) == ("Latn", "US")) else full.territory
    )


def write_regions() -> None:
    _, ids = _model_ids()
    rows = {}
    for tag, (code, source) in sorted(REGIONS.items()):
        parsed = langcodes.Language.get(tag, normalize=True)
        assert code in ids, f"{tag}: {code} is not one of the model's languages"
        region = _cldr_region(code)
        if parsed.territory and region and region != parsed.territory and "CLDR" in source.split(";")[0]:
            raise SystemExit(f"{tag}: CLDR gives {code} the region {region}")
        rows[tag] = {"id": code, "source": source}
    out = {
        "_about": "BCP-47 regions whose spoken variety the model has (tools/make_language_aliases.py --regions).",
        "regions": rows,
    }
    path = DATA / "language_regions.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{path}: {len(rows)} regions")


if __name__ == "__main__":
    write_regions() if "--regions" in sys.argv[1:] else main()
