"""Tests of omnivoice_cli.engine.model.canvas: every golden canvas is rebuilt exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.model.canvas import Canvas, build_canvas, style_text
from omnivoice_cli.engine.text.canvastext import add_punctuation
from omnivoice_cli.engine.text.chunking import chunk_len_for, chunk_text
from omnivoice_cli.engine.text.duration import estimate_target_tokens, resolve_target_len
from omnivoice_cli.engine.text.instructs import resolve_instruct
from omnivoice_cli.engine.text.languages import resolve_language
from omnivoice_cli.engine.text.tokenizer import TextTokenizer
from omnivoice_cli.engine.text.vocabulary import contains_chinese

FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN = FIXTURES / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.json"))  # every golden case
# one canvas each (the chunked cases, `long` and `long_speed15`, have one per chunk: test_long.py)
SHORT_CASES = [c for c in CASES if len(json.loads((GOLDEN / f"{c}.json").read_text(encoding="utf-8"))["calls"]) == 1]


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.from_file(FIXTURES / "tiny" / "ckpt" / "tokenizer.json")


def _load(case: str) -> tuple[dict, dict[str, torch.Tensor]]:
    g = json.loads((GOLDEN / f"{case}.json").read_text(encoding="utf-8"))
    return g, load_file(str(GOLDEN / f"{case}.safetensors"))


def _assert_canvas(c: Canvas, tensors: dict, key: str, target_len: int, cond_len: int) -> None:
    ids = tensors[f"{key}.input_ids"].long()  # [8, L]
    mask = tensors[f"{key}.audio_mask"].bool()  # [L]
    assert c.input_ids.dtype == torch.long and c.audio_mask.dtype == torch.bool
    assert tuple(c.input_ids.shape) == tuple(ids.shape) and c.length == cond_len
    assert torch.equal(c.input_ids, ids)
    assert torch.equal(c.audio_mask, mask)
    assert c.target_len == target_len and c.target_start == cond_len - target_len
    assert bool((c.input_ids[:, c.target_start :] == 1024).all())


@pytest.mark.parametrize("case", SHORT_CASES)
def test_golden_canvas(tok, case):
    g, t = _load(case)
    kw = g["generate_kwargs"]
    texts = kw["text"] if isinstance(kw["text"], list) else [kw["text"]]
    ref_codes = t.get("prompt0.ref_audio_tokens")  # [8, T_ref] for clone cases
    ref_text = None
    if ref_codes is not None:
        ref_text = g["task"]["ref_texts"][0]
        assert add_punctuation(kw["ref_text"]) == ref_text
    assert torch.equal(t["task.target_lens"], torch.tensor(g["task"]["target_lens"]))
    lang, _ = resolve_language(kw.get("language"))
    call = g["calls"][0]
    assert len(g["calls"]) == 1 and call["texts"] == texts
    for i, text in enumerate(texts):
        n_ref = None if ref_codes is None else int(ref_codes.shape[1])
        target_len, _ = resolve_target_len(text, ref_text, n_ref, kw.get("speed"), kw.get("duration"), 25)
        assert target_len == g["task"]["target_lens"][i] == call["target_lens"][i]
        instruct = resolve_instruct(kw.get("instruct"), contains_chinese(text))
        c = build_canvas(tok, text, target_len, ref_text=ref_text, ref_codes=ref_codes, lang=lang, instruct=instruct)
        _assert_canvas(c, t, f"call0.item{i}", target_len, call["cond_lens"][i])
        if ref_codes is not None:
            assert c.ref_len == ref_codes.shape[1]
            assert torch.equal(c.input_ids[:, c.audio_start : c.target_start], ref_codes)
            assert c.input_ids[0, 0].item() == tok.special_id("denoise")
            assert not c.audio_mask[: c.audio_start].any()


def test_golden_long_canvases(tok):
    """`long`: five chunk calls; chunk 0 alone, chunks 1..4 with chunk 0 (text + tokens) as reference."""
    g, t = _load("long")
    kw = g["generate_kwargs"]
    text = kw["text"]
    lang, _ = resolve_language(kw.get("language"))
    total, _ = resolve_target_len(text, None, None)
    assert total == int(t["task.target_lens"][0])
    chunks = chunk_text(text, chunk_len_for(text, total), min_chunk_len=3)
    assert chunks == [c["texts"][0] for c in g["calls"]]
    first_tokens = t["call0.item0.tokens"]  # [8, T0], chunk 0's generated codes
    for ci, chunk in enumerate(chunks):
        call = g["calls"][ci]
        if ci == 0:
            target_len = estimate_target_tokens(chunk, None, None)
            c = build_canvas(tok, chunk, target_len, lang=lang)
        else:
            target_len = estimate_target_tokens(chunk, chunks[0], int(first_tokens.shape[1]))
            assert call["ref_texts"] == [chunks[0]]
            c = build_canvas(tok, chunk, target_len, ref_text=chunks[0], ref_codes=first_tokens, lang=lang)
        assert [target_len] == call["target_lens"]
        _assert_canvas(c, t, f"call{ci}.item0", target_len, call["cond_lens"][0])


def test_style_text():
    assert style_text(None, None, True, False) == "<|lang_start|>None<|lang_end|><|instruct_start|>None<|instruct_end|>"
    assert style_text("en", "male", True, True).startswith("<|denoise|><|lang_start|>en<|lang_end|>")
    assert not style_text("en", None, False, True).startswith("<|denoise|>")  # denoise off
    assert not style_text("en", None, True, False).startswith("<|denoise|>")  # no reference


def test_canvas_layout(tok):
    ref = torch.randint(0, 1024, (8, 7))
    c = build_canvas(tok, "world", 5, ref_text="Hello.", ref_codes=ref, lang="en", denoise=False)
    n_prefix = len(tok.encode(style_text("en", None, False, True))) + len(
        tok.encode("<|text_start|>Hello. world<|text_end|>")
    )
    assert c.length == n_prefix + 7 + 5 and c.target_start == n_prefix + 7 and c.audio_start == n_prefix
    assert bool((c.input_ids[:, :n_prefix] == c.input_ids[0, :n_prefix]).all())  # text repeated on all rows
    assert c.audio_mask.tolist() == [False] * n_prefix + [True] * 12
    assert c.input_ids[0, 0].item() == tok.special_id("lang_start")


def test_canvas_rejects_bad_values(tok):
    with pytest.raises(InvalidRequest):
        build_canvas(tok, "hi", 0)
    with pytest.raises(InvalidRequest):
        build_canvas(tok, "hi", 2.5)
    with pytest.raises(InvalidRequest, match="shape"):
        build_canvas(tok, "hi", 3, ref_text="a.", ref_codes=torch.zeros(4, 3, dtype=torch.long))
    with pytest.raises(InvalidRequest, match="0..1023"):
        build_canvas(tok, "hi", 3, ref_text="a.", ref_codes=torch.full((8, 3), 1024))
