"""Tests of the engine's text modules: tokenizer, languages, instructs, text rules, durations, chunks."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from omnivoice_cli.engine.errors import CheckpointError, InvalidRequest
from omnivoice_cli.engine.text.canvastext import add_punctuation, combine_text, tokenize_with_nonverbal_tags
from omnivoice_cli.engine.text.chunking import chunk_len_for, chunk_text, is_sentence_break
from omnivoice_cli.engine.text.duration import (
    check_ref_transcript,
    estimate_duration,
    estimate_target_tokens,
    resolve_target_len,
    speech_seconds,
    text_weight,
)
from omnivoice_cli.engine.text.instructs import resolve_instruct
from omnivoice_cli.engine.text.languages import list_languages, resolve_language
from omnivoice_cli.engine.text.tokenizer import MARKER_TOKENS, TextTokenizer
from omnivoice_cli.engine.text.vocabulary import contains_chinese, instruct_vocabulary

FIXTURES = Path(__file__).parent / "fixtures"
TINY_TOKENIZER = FIXTURES / "tiny" / "ckpt" / "tokenizer.json"
# The full-size checkpoint's tokenizer.json (a small trained BPE padded to the real vocabulary
# size, so the markers sit at the real ids), xz-compressed: 5.2 MB of it is padding.
FULL_TOKENIZER = FIXTURES / "full" / "tokenizer.json.xz"
GOLDEN = FIXTURES / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.json"))  # every golden case


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.from_file(TINY_TOKENIZER)


def _golden(case: str) -> dict:
    return json.loads((GOLDEN / f"{case}.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- tokenizer


def test_markers_are_single_ids(tok):
    ids = [tok.special_id(m) for m in MARKER_TOKENS]
    assert len(set(ids)) == 7
    assert tok.special_id("lang_start") == tok.special_id("<|lang_start|>")
    assert tok.encode("<|lang_start|>en<|lang_end|>")[0] == tok.special_id("lang_start")
    assert tok.encode("<|lang_start|>en<|lang_end|>")[-1] == tok.special_id("lang_end")
    assert tok.encode("") == []


def test_full_tokenizer_marker_ids(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(lzma.decompress(FULL_TOKENIZER.read_bytes()))
    full = TextTokenizer.from_file(path)
    assert [full.special_id(m) for m in MARKER_TOKENS] == list(range(151669, 151676))


def test_tokenizer_errors(tmp_path):
    with pytest.raises(CheckpointError, match="missing"):
        TextTokenizer.from_file(tmp_path / "tokenizer.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CheckpointError, match="cannot read tokenizer"):
        TextTokenizer.from_file(bad)
    data = json.loads(TINY_TOKENIZER.read_text(encoding="utf-8"))
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != "<|text_end|>"]
    lacking = tmp_path / "lacking.json"
    lacking.write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match=r"<\|text_end\|>"):
        TextTokenizer.from_file(lacking)


def test_nonverbal_tags_tokenized_alone(tok):
    text = "That is hilarious [laughter] I can't"
    ids = tokenize_with_nonverbal_tags(tok, text)
    expected = tok.encode("That is hilarious ") + tok.encode("[laughter]") + tok.encode(" I can't")
    assert ids == expected
    assert ids != tok.encode(text)  # a plain encode merges " [" differently
    # several tags, adjacent tags, a tag at the edges, an unknown tag left as text
    t2 = "[sigh]你好[question-en][surprise-wa] ok [notatag]"
    assert tokenize_with_nonverbal_tags(tok, t2) == (
        tok.encode("[sigh]")
        + tok.encode("你好")
        + tok.encode("[question-en]")
        + tok.encode("[surprise-wa]")
        + tok.encode(" ok [notatag]")
    )
    assert tokenize_with_nonverbal_tags(tok, "") == []


# ---------------------------------------------------------------- languages


def test_resolve_language():
    assert resolve_language("en") == ("en", None)
    assert resolve_language("English") == ("en", None)
    assert resolve_language("ENGLISH") == ("en", None)
    assert resolve_language("chinese") == ("zh", None)
    assert resolve_language(None) == (None, None)
    assert resolve_language("None") == (None, None)
    assert resolve_language("none") == (None, None)
    code, warning = resolve_language("Klingon")
    assert code is None and "Klingon" in warning and "not recognized" in warning
    # The reference warns on "EN" (its codes are case-sensitive); tags are case-insensitive (BCP-47).
    assert resolve_language("EN") == ("en", None)


def test_list_languages():
    langs = list_languages()
    assert len(langs) == 646
    assert ("en", "English") in langs and ("zh", "Chinese") in langs
    assert dict(langs)["fub"] == "Adamawa Fulfulde"
    assert all(resolve_language(code)[0] == code for code, _ in langs)
    assert all(resolve_language(name)[0] == code for code, name in langs)


# ---------------------------------------------------------------- instructs


def test_instruct_normalisation():
    assert resolve_instruct(None, False) is None
    assert resolve_instruct("  ", False) is None
    assert resolve_instruct("Female, Low Pitch, British Accent", False) == "female, low pitch, british accent"
    assert resolve_instruct(" ,male，elderly, ", False) == "male, elderly"  # separators fixed
    assert resolve_instruct("男，老年", False) == "male, elderly"  # English text: mapped to English
    assert resolve_instruct("male, whisper", True) == "男，耳语"  # Chinese text: mapped to Chinese


def test_instruct_chinese_text_forces_chinese():
    text = "今天天气很好"
    assert contains_chinese(text) and not contains_chinese("hello") and not contains_chinese(None)
    assert resolve_instruct("female, high pitch", contains_chinese(text)) == "女，高音调"


def test_instruct_dialect_forces_chinese_accent_forces_english():
    assert resolve_instruct("male, 四川话", False) == "男，四川话"
    assert resolve_instruct("女, indian accent", True) == "female, indian accent"
    with pytest.raises(InvalidRequest, match="dialect") as e:
        resolve_instruct("male, 四川话, british accent", False)
    assert "\n" not in str(e.value)


def test_instruct_did_you_mean():
    with pytest.raises(InvalidRequest) as e:
        resolve_instruct("femal, low pitch", False)
    msg = str(e.value)
    assert "\n" not in msg
    assert "'femal'" in msg and "did you mean 'female'?" in msg
    with pytest.raises(InvalidRequest) as e:
        resolve_instruct("male, brtish accent, zzzzzz", False)
    msg = str(e.value)
    assert "\n" not in msg
    assert "did you mean 'british accent'?" in msg and "'zzzzzz'" in msg
    assert "'male'" not in msg.split(":", 1)[1].split(".")[0]  # valid items are not named as bad


def test_instruct_conflicts():
    with pytest.raises(InvalidRequest, match="'male' vs 'female'") as e:
        resolve_instruct("male, female", False)
    assert "\n" not in str(e.value)
    with pytest.raises(InvalidRequest, match="'child' vs 'elderly'"):
        resolve_instruct("child, low pitch, elderly", False)
    with pytest.raises(InvalidRequest, match="'male' vs 'female'"):  # conflict across languages
        resolve_instruct("male, 女", False)
    with pytest.raises(InvalidRequest, match="american accent"):
        resolve_instruct("american accent, british accent", False)


def test_instruct_vocabulary():
    cats = instruct_vocabulary()
    assert [c.name for c in cats][:4] == ["gender", "age", "pitch", "style"]
    assert ("male", "男") in cats[0].pairs
    assert ("british accent", None) in cats[4].pairs
    assert (None, "四川话") in cats[5].pairs
    for c in cats:  # every listed item is accepted on its own
        for item in c.items:
            assert resolve_instruct(item, False) is not None


# ---------------------------------------------------------------- canvas text


def test_combine_text():
    assert combine_text("  hello  world ") == "hello world"
    assert combine_text("b", "a.") == "a. b"
    assert combine_text("b", "") == "b"  # empty ref_text is no ref_text
    assert combine_text("line one\nline two\r\n") == "line oneline two"  # newlines dropped, not spaced
    assert combine_text("a\t\t b") == "a b"
    assert combine_text("（注意）") == "(注意)"
    assert combine_text("你好 ， 世界 ok") == "你好，世界ok"
    assert combine_text("今天 很好", "Hi there.") == "Hi there.今天很好"
    assert combine_text("hello  world") == "hello world"


def test_add_punctuation():
    assert add_punctuation("This is the reference voice for the test") == "This is the reference voice for the test."
    assert add_punctuation("  done! ") == "done!"
    assert add_punctuation("你好") == "你好。"
    assert add_punctuation("ok 你好") == "ok 你好。"
    assert add_punctuation("quoted”") == "quoted”"
    assert add_punctuation("wait…") == "wait…"
    assert add_punctuation("") == ""


# ---------------------------------------------------------------- duration


def test_weights_by_script():
    assert text_weight("abc") == 3.0
    assert text_weight(" ") == 0.2
    assert text_weight("你好") == 6.0  # cjk 3.0
    assert text_weight("한") == 2.5  # hangul
    assert text_weight("ア") == 2.2  # kana
    assert text_weight("ب") == 1.5  # arabic
    assert text_weight("ـ") == 0.0  # tatweel
    assert text_weight("\u0301") == 0.0  # combining mark
    assert text_weight("क") == 1.8  # indic
    assert text_weight("ж") == 1.0  # cyrillic
    assert text_weight(".，!") == 1.5  # punctuation 0.5 each
    assert text_weight("7") == 3.5  # digit
    assert text_weight("\u00a0") == 0.2  # Z category
    assert text_weight("\U00020001") == 3.0  # upper planes: cjk
    assert text_weight("🎉") == 0.5  # symbol


def test_estimate_boost_and_speed():
    base = text_weight("Nice to meet you.")
    # long text: linear in weight
    text = "a" * 200
    assert estimate_duration(text, "Nice to meet you.", 25) == pytest.approx(200 / (base / 25))
    # short text: boosted below 50 frames
    est = estimate_duration("hi", "Nice to meet you.", 25)
    lin = 2 / (base / 25)
    assert est == pytest.approx(50 * (lin / 50) ** (1 / 3)) and est > lin
    assert estimate_target_tokens("hi", None, None) == int(est)
    # speed divides the estimate; speed <= 0 is ignored (reference rule)
    assert estimate_target_tokens(text, None, None, speed=2.0) == int(200 / (base / 25) / 2)
    assert estimate_target_tokens(text, None, None, speed=0) == int(200 / (base / 25))
    # with a reference: its text and frame count are the yardstick; empty ref_text falls back
    assert estimate_target_tokens(text, "abcd", 10) == int(200 / (4 / 10))
    assert estimate_target_tokens(text, "", 10) == estimate_target_tokens(text, None, None)
    # never below 1
    assert estimate_target_tokens("", None, None) == 1
    assert estimate_target_tokens("abc", "\u0301", 10) == 1  # weightless reference


def test_resolve_target_len_rules():
    text = "Hello world, this is a small test of the speech oracle."
    assert resolve_target_len(text, None, None) == (81, None)
    assert resolve_target_len(text, None, None, speed=1.3) == (62, 1.3)
    assert resolve_target_len(text, None, None, speed=1.0) == (81, 1.0)
    t, s = resolve_target_len(text, None, None, duration=2.0)
    assert (t, s) == (50, 81 / 50)
    assert resolve_target_len(text, None, None, speed=3.0, duration=2.0) == (50, 81 / 50)  # duration wins
    assert resolve_target_len(text, None, None, duration=0.01) == (1, 81.0)
    for bad in [0, -1.0, float("nan"), float("inf"), True]:
        with pytest.raises(InvalidRequest, match="speed"):
            resolve_target_len(text, None, None, speed=bad)
        with pytest.raises(InvalidRequest, match="duration"):
            resolve_target_len(text, None, None, duration=bad)


# ---------------------------------------------------------------- chunking


def test_chunk_text_rules():
    assert chunk_text("Hello Mr. Smith. How are you? Fine.", 20) == ["Hello Mr. Smith.", "How are you? Fine."]
    # leading punctuation / closing marks join the previous sentence
    assert chunk_text('He said "hi." Then left!!', 10) == ['He said "hi."', "Then left!!"]
    # a chunk under min_chunk_len joins its neighbour
    assert chunk_text("Ok. This is longer.", 5, 3) == ["Ok.", "This is longer."]
    assert chunk_text("A. B. This is longer", 2, 3) == ["A. B.", "This is longer"]
    assert chunk_text("A. B. This is longer", 2, None) == ["A.", "B.", "This is longer"]
    assert chunk_text("你好。今天天气很好，我们走吧！", 8) == ["你好。", "今天天气很好，", "我们走吧！"]
    assert chunk_text("", 10) == []


def _reference_chunk_text(text, chunk_len, min_chunk_len=3):
    """The reference's chunker (omnivoice 0.2.1 `_generate_chunked`'s splitting), as ours was before
    it stopped cutting inside tokens: the oracle for texts without such a mark."""
    t = json.loads((Path(__file__).parent.parent / "omnivoice_cli" / "data" / "text.json").read_text())
    split, closing, abbrevs = set(t["split_punctuation"]), set(t["closing_marks"]), set(t["abbreviations"])
    sentences, cur = [], []
    for ch in text:
        if not cur and sentences and (ch in split or ch in closing):
            sentences[-1].append(ch)
            continue
        cur.append(ch)
        if ch in split:
            if ch == "." and "".join(cur).strip() and "".join(cur).strip().split()[-1] in abbrevs:
                continue
            sentences.append(cur)
            cur = []
    if cur:
        sentences.append(cur)
    merged, chunk = [], []
    for sent in sentences:
        if len(chunk) + len(sent) <= chunk_len:
            chunk.extend(sent)
        else:
            if chunk:
                merged.append(chunk)
            chunk = sent
    if chunk:
        merged.append(chunk)
    final = merged
    if min_chunk_len is not None:
        final = []
        first_short = bool(merged) and len(merged[0]) < min_chunk_len
        for i, c in enumerate(merged):
            if (i == 1 and first_short) or (len(c) < min_chunk_len and final):
                final[-1].extend(c)
            else:
                final.append(c)
    return [c for c in ("".join(c).strip() for c in final) if c]


@pytest.mark.parametrize(
    ("text", "i", "breaks"),
    [
        ("at 21:30 now", 5, False),  # a time
        ("costs 3.5 now", 7, False),  # a decimal
        ("1,000 items", 1, False),  # thousands
        ("１２：３０に", 2, False),  # full-width digits around a full-width colon
        ("the U.S. today", 5, False),  # inside a dotted abbreviation
        ("the U.S. today", 7, False),  # its closing dot
        ("e.g. this", 3, False),
        ("Ph.D. thesis", 4, False),
        ("Hello Mr. Smith", 8, False),  # the reference's abbreviations
        ("see example.com now", 11, False),  # no space after it
        ("It costs 3. Then", 10, True),  # a space after it
        ("It costs 3.", 10, True),  # the end of the text
        ('He said "Stop."Then', 13, True),  # a closing quote after it
        ("Hello.[laughter] Yes", 5, True),  # a tag after it
        ("Wait...what", 4, True),  # another mark after it
        ("It is 5 p.m. now. Next", 16, True),  # a sentence end after an abbreviation
        ("Visit google.com. Next", 16, True),  # a word of more than three letters
        ("你好。我们", 2, True),  # full-width marks: no space after them is normal
        ("你好，我们", 2, True),
        ("你好,世界", 2, True),  # an ASCII mark between characters of a script without spaces
        ("OK.好的", 2, True),
        ("世界.OK.", 2, True),
        ("สวัสดี.ครับ", 6, True),  # Thai, written without spaces
        ("Hallo z.B. hier", 9, False),  # letters of any spaced script
        ("т.е. так", 3, False),
    ],
)
def test_is_sentence_break(text, i, breaks):
    assert text[i] in ".,:：。，" and is_sentence_break(text, i) is breaks


def test_chunks_never_end_inside_a_token():
    text = (
        "The train leaves at 21:30 from platform 4. A ticket costs 3.5 dollars, or 1,000 yen. "
        "Trade with the U.S. grew by 2.75 percent, e.g. in steel, to 12,500,000 tonnes. "
        "会议在２１：３０开始。价格是3.5元，共1,000件。"
    )
    tokens = ["21:30", "3.5", "1,000", "U.S.", "2.75", "e.g.", "12,500,000", "２１：３０"]
    for chunk_len in (1, 10, 40):
        chunks = chunk_text(text, chunk_len, None)
        for token in tokens:
            assert sum(c.count(token) for c in chunks) == text.count(token), (token, chunks)
        assert "".join(chunks).replace(" ", "") == text.replace(" ", "")
    assert chunk_text(text, 1, None)[:4] == [
        "The train leaves at 21:30 from platform 4.",
        "A ticket costs 3.5 dollars,",
        "or 1,000 yen.",
        "Trade with the U.S. grew by 2.75 percent,",
    ]
    assert chunk_text(text, 1, None)[-3:] == ["会议在２１：３０开始。", "价格是3.5元，", "共1,000件。"]
    old = _reference_chunk_text(text, 1, None)  # the reference cuts every one of them
    assert "The train leaves at 21:" in old and "A ticket costs 3." in old and "or 1," in old


@pytest.mark.slow
def test_chunks_are_the_references_where_no_mark_is_inside_a_token():
    """Random texts of words, spaced marks, quotes, the reference's abbreviations and Chinese:
    every chunk length gives the reference's chunks exactly."""
    import random

    rng = random.Random(5)
    words = ["one", "Two", "three", "Mr.", "Dr.", "vs.", "fig.", "7", "2024", "[laughter]", "(aside)", "élan", "naïve"]
    marks = [".", ",", "!", "?", ";", ":", "...", "?!", '."', '!"', ".'", ".)", "。", "，", "！", "”。", "」"]
    zh = ["你好", "今天天气很好", "我们走吧", "東京タワー", "한국어"]
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(1, 40)):
            if rng.random() < 0.15:
                parts.append(rng.choice(zh) + rng.choice(["。", "，", "！", "？", ""]))
            else:
                parts.append(rng.choice(words) + (rng.choice(marks) if rng.random() < 0.35 else ""))
            parts.append(rng.choice([" ", " ", " ", "  ", "\n"]))
        text = "".join(parts).strip()
        for chunk_len in (1, 5, 20, 80, 400):
            for min_len in (3, None):
                assert chunk_text(text, chunk_len, min_len) == _reference_chunk_text(text, chunk_len, min_len), text


def test_chunk_len_for():
    assert chunk_len_for("x" * 100, 200) == int(15 * 25 / 2.0)


@pytest.mark.parametrize("case", CASES)
def test_golden_target_lens(case):
    """The per-request frame counts equal the reference's `task.target_lens`."""
    from safetensors.numpy import load_file

    g = _golden(case)
    kw = g["generate_kwargs"]
    texts = kw["text"] if isinstance(kw["text"], list) else [kw["text"]]
    ref_text = num_ref = None
    if "ref_text" in kw:
        ref_text = add_punctuation(kw["ref_text"])
        assert [ref_text] * len(texts) == g["task"]["ref_texts"]
        num_ref = int(load_file(GOLDEN / f"{case}.safetensors")["prompt0.ref_audio_tokens"].shape[1])
    lens, speeds = [], []
    for text in texts:
        t, s = resolve_target_len(text, ref_text, num_ref, kw.get("speed"), kw.get("duration"), 25)
        lens.append(t)
        speeds.append(s)
    assert lens == g["task"]["target_lens"]
    if g["task"]["speed"] is None:
        assert all(s is None for s in speeds)
    else:
        assert speeds == pytest.approx(g["task"]["speed"])
    lang = kw.get("language")
    assert [resolve_language(lang)[0]] * len(texts) == g["task"]["langs"]
    assert [resolve_instruct(kw.get("instruct"), contains_chinese(t)) for t in texts] == g["task"]["instructs"]


def test_golden_long_chunks():
    """`long`: chunk texts and per-chunk frame counts (chunk 0 is the reference of chunks 1..4)."""
    g = _golden("long")
    text = g["generate_kwargs"]["text"]
    total, _ = resolve_target_len(text, None, None)
    assert total == g["task"]["target_lens"][0] > 30 * 25
    chunks = chunk_text(text, chunk_len_for(text, total, 15.0, 25), min_chunk_len=3)
    assert chunks == [c["texts"][0] for c in g["calls"]]
    first_len = estimate_target_tokens(chunks[0], None, None)
    assert [first_len] == g["calls"][0]["target_lens"]
    for c, chunk in enumerate(chunks[1:], start=1):
        assert g["calls"][c]["ref_texts"] == [chunks[0]]
        assert [estimate_target_tokens(chunk, chunks[0], first_len)] == g["calls"][c]["target_lens"]


# ---------------------------------------------------------------- reference transcript check


def test_speech_seconds_is_the_plain_estimate():
    assert speech_seconds("Nice to meet you.") == pytest.approx(1.0)  # the yardstick
    assert speech_seconds("Nice to meet you. " * 4) == pytest.approx(
        4 * text_weight("Nice to meet you. ") / text_weight("Nice to meet you.")
    )
    assert speech_seconds("hello") < estimate_duration("hello", "Nice to meet you.", 25) / 25  # no boost
    assert speech_seconds("") == 0.0


def test_transcript_check_warns_on_a_partial_transcript():
    w = check_ref_transcript("hello", 4.1)
    assert w is not None and "\n" not in w
    assert "about 0.4 s" in w and "4.1 s" in w and "is the transcript complete?" in w
    long = check_ref_transcript("This is a much longer transcript than the recording could hold at all.", 1.0)
    assert long is not None and "only 1.0 s" in long and "about 4." in long


def test_transcript_check_is_quiet_when_it_fits_or_cannot_tell():
    assert check_ref_transcript("Nice to meet you.", 1.0) is None
    assert check_ref_transcript("Nice to meet you.", 1.9) is None  # within 2x
    assert check_ref_transcript("Nice to meet you.", 2.1) is not None
    assert check_ref_transcript("Nice to meet you.", 0.55) is None
    assert check_ref_transcript("Nice to meet you.", 0.45) is not None
    assert check_ref_transcript(None, 3.0) is None and check_ref_transcript("  ", 3.0) is None
    assert check_ref_transcript("hello", 0.0) is None
    assert check_ref_transcript("\u0301", 3.0) is None  # weightless text: nothing to compare


@pytest.mark.parametrize("case", ["clone", "clone_16k"])
def test_transcript_check_quiet_on_the_fixture_references(case):
    """The real references: ref_24k.wav / ref_16k.wav with their transcripts, at the length the
    reference prepared them to (its prompt's frames / 25)."""
    from safetensors.numpy import load_file

    g = _golden(case)
    frames = load_file(GOLDEN / f"{case}.safetensors")["prompt0.ref_audio_tokens"].shape[1]
    assert check_ref_transcript(g["generate_kwargs"]["ref_text"], frames / 25) is None
    assert check_ref_transcript("hello", frames / 25) is not None  # the same recording, a partial transcript
