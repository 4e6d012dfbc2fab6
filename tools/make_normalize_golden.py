"""Development tool: the reference's `normalize_text` on a table of sentences -> tests/fixtures/normalize/golden.json.

Run from the repo root with the oracle venv (omnivoice 0.2.1 with WeTextProcessing 1.2.0 and
num2words 0.5.14 installed):

    /work/main/.oracle/venv/bin/python tools/make_normalize_golden.py

Each case goes through the reference as its `generate(normalize_text=True)` does: the language
is resolved first (`_resolve_language`: unknown -> None), then `normalize_text(text, language)`.
tests/test_normalize.py compares ours with every row. Rows marked "deviation" are the two
places where we differ on purpose (see omnivoice_cli/engine/text/normalize.py): `true` where
num2words' two-letter fallback reads Filipino digits in Finnish (the test checks the reference
really does that there and that we leave the digits), "cents" where English money with two
decimals is read with its cents (the row's "ours" is what we say instead).
"""

from __future__ import annotations

import json
import logging
from importlib import metadata
from pathlib import Path

OUT = Path("tests/fixtures/normalize/golden.json")

PROTECTED = [
    ("the [B EY1 S] guitar costs 300 dollars [laughter] really", "en"),
    ("wait [pause 0.5s] then 12 more [pause 500ms] and 3 [pause]", "en"),
    ("[sigh] 2 apples [question-en] and [surprise-wa] 3", "en"),
    ("A price [approx 300 and ] 7", "en"),
    ("我喜欢NI3 HAO3和2个苹果", "zh"),
    ("这把吉他[B EY1 S]要300元[laughter]", "zh"),
    ("等一下[pause 1.5s]还有15分钟", "zh"),
    ("Ich habe [laughter] 3 Katzen [pause 500ms] und 4 Hunde", "de"),
    ("J'ai [B EY1 S] 21 ans [pause]", "fr"),
]

SENTENCES = {
    "en": [
        "I have 2345 apples.",
        "On Jan. 5, 2024 we met; on 2023-12-31 we left.",
        "The meeting is at 3:30 pm, not 14:45.",
        "It is 25km away and weighs 3.5 kg at 37°C.",
        "She came 1st, he was 22nd and they were 103rd.",
        "Pi is about 3.14159 and half is 0.5.",
        "It was -3 degrees, then -12.5.",
        "Call 555-1234 or email a@b.com before 10%.",
        "In 1999 and 2010 there were 1/2 as many.",
        "Chapter IV, page 7, at 7:05 a.m.",
        "1000 people, 1001 nights, 100000 stars.",
        "   leading and trailing 5   ",
    ],
    "zh": [
        "我有2345个苹果。",
        "价格是$3.50，或者100元。",
        "今天是2024年3月5日，会议在下午3:30。",
        "气温-3.5℃，距离25km，重3.5kg。",
        "他是第1名，比分是2:1。",
        "這個東西花了我123塊錢，哪兒呢？",
        "百分之50和50%不一样，1/3也不一样。",
        "电话是13812345678。",
        "ＡＢＣ１２３全角",
    ],
    "de": [
        "Ich habe 2345 Äpfel.",
        "Das kostet 3,50 € oder 12 Euro.",
        "Am 5. März 2024 um 14:30 Uhr.",
        "Es war -7 Grad und 25 km weit.",
        "Sie wurde 1. und er 22.",
    ],
    "fr": [
        "J'ai 2345 pommes.",
        "Ça coûte 3,50 € ou 12 euros.",
        "Le 5 mars 2024 à 14h30.",
        "Il faisait -7 degrés, à 25 km.",
        "Elle est arrivée 1re, lui 22e.",
    ],
    "es": [
        "Tengo 2345 manzanas.",
        "Cuesta 3,50 € o 12 dólares.",
        "El 5 de marzo de 2024 a las 14:30.",
        "Hacía -7 grados a 25 km.",
        "Llegó el 1.º y él el 22.º.",
    ],
    "ru": [
        "У меня 2345 яблок.",
        "Это стоит 3,50 € или 12 рублей.",
        "5 марта 2024 года в 14:30.",
        "Было -7 градусов, 25 км.",
    ],
    "ja": [
        "りんごが2345個あります。",
        "値段は3.50ドルです。",
        "2024年3月5日の14時30分。",
        "気温は-7度、距離は25km。",
    ],
    "it": ["Ho 2345 mele e 3,50 euro."],
    "pt": ["Tenho 2345 maçãs."],
    "ko": ["사과가 2345개 있어요."],
    "arb": ["لدي 2345 تفاحة."],
    "sw": ["Nina machungwa 25."],  # a language num2words lacks: unchanged
}

BY_NAME_OR_NONE = [
    ("I have 2345 apples.", None),  # no language: English by script
    ("我有2345个苹果。", None),  # no language: Chinese by script
    ("I have 2345 apples.", "English"),  # a name
    ("Ich habe 2345 Äpfel.", "German"),
    ("I have 2345 apples.", "klingon"),  # unknown: None, then by script
    ("", "en"),
    ("   ", "en"),
]

DEVIATIONS = [("Mayroon akong 25 na mansanas.", "fil"), ("Naa koy 25 ka mansanas.", "ceb")]
CENTS = [
    (
        "It costs $3.50, or £12 and €1,000,000.",
        "en",
        "It costs three dollars fifty, or twelve pounds and one million euros.",
    )
]


def main() -> None:
    logging.disable(logging.CRITICAL)
    from omnivoice.models.omnivoice import _resolve_language
    from omnivoice.utils.text import normalize_text

    cases = [(t, lang) for lang, texts in SENTENCES.items() for t in texts]
    cases += PROTECTED + BY_NAME_OR_NONE
    rows = []
    for text, lang in cases:
        resolved = _resolve_language(lang)
        rows.append({"lang": lang, "text": text, "reference": normalize_text(text, resolved)})
    for text, lang in DEVIATIONS:
        rows.append({"lang": lang, "text": text, "reference": normalize_text(text, lang), "deviation": True})
    for text, lang, ours in CENTS:
        rows.append(
            {"lang": lang, "text": text, "reference": normalize_text(text, lang), "ours": ours, "deviation": "cents"}
        )
    versions = {p: metadata.version(p) for p in ("omnivoice", "WeTextProcessing", "num2words")}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    doc = {"_about": "reference normalize_text outputs (tools/make_normalize_golden.py)", "versions": versions}
    doc["cases"] = rows
    OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(rows)} cases, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
