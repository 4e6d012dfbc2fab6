"""Development tool: write omnivoice_cli/data/language_aliases.json, the other names of the model's languages.

Run from the repo root in a scratch venv that has `langcodes` and `language_data` (the latter is
13 MB with a native trie, so it is never a dependency of the package):

    python -m venv /tmp/lc && /tmp/lc/bin/pip install langcodes language_data
    /tmp/lc/bin/python tools/make_language_aliases.py

What it writes (read by omnivoice_cli/engine/languages.py; nothing here runs at run time):

- "aliases": {normalised name: model id} for the English names (CLDR, Wikidata and the IANA
  registry as gathered by language_data) and the autonyms of the model's 646 languages and of
  the codes langcodes folds into them (`tl` -> `fil`, `cmn` -> `zh`, ...). A name is kept only when
  every language it names is the same model id, and only when the model's own table
  (data/languages.json) does not already have it.
- "macro_members": {macrolanguage: [model ids]} for the macrolanguages the model lacks but has
  members of, from langcodes' own folding (`ne` -> [`npi`], `ak` -> [`fat`, `tw`]).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import langcodes
from language_data.names import load_trie, normalize_name
from language_data.util import data_filename

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


if __name__ == "__main__":
    main()
