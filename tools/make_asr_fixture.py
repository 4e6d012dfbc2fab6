"""Build tests/fixtures/asr-tiny/: a tiny random-weight Whisper in faster-whisper's on-disk format.

The layout is the default recogniser's (whisper-large-v3-turbo as CTranslate2 converts it:
model.bin, config.json, vocabulary.json, tokenizer.json, preprocessor_config.json; 128 mel bins,
the 51866-token vocabulary with its 100 language tokens and 1501 timestamp tokens), with tiny
layers (d_model 32, 2 encoder and 2 decoder layers) and random weights. Its transcripts are
gibberish; what the tests need is the library's exact code path, offline.

The tokenizer is a byte-level BPE (the 256 byte symbols and filler words of letters in place of
GPT-2's 50,001 learned merges) followed by Whisper's special tokens in their ids.

A development tool only: it needs `transformers` and `ctranslate2`'s converter, never needed at
run time. In an environment with torch, faster-whisper and ctranslate2:

    pip install --target /tmp/asrtool_pkgs --no-deps transformers regex pyyaml
    PYTHONPATH=/tmp/asrtool_pkgs python tools/make_asr_fixture.py [OUT_DIR] [--size tiny|turbo]

`--size turbo` builds the default recogniser's exact size (whisper-large-v3-turbo: d_model 1280,
32 encoder layers, 4 decoder layers, 20 heads; about 0.8 GB at int8) with random weights, for
benchmarks/bench_asr.py.
"""

from __future__ import annotations

import itertools
import json
import shutil
import string
import tempfile
from pathlib import Path

N_TEXT = 50257  # GPT-2's byte-level BPE vocabulary (ids 0..50256)
N_TIMESTAMPS = 1501  # <|0.00|> .. <|30.00|>
N_MELS = 128  # large-v3 and turbo
SEED = 0
SIZES = {
    "tiny": dict(
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
    ),
    "turbo": dict(
        d_model=1280,
        encoder_layers=32,
        decoder_layers=4,
        encoder_attention_heads=20,
        decoder_attention_heads=20,
        encoder_ffn_dim=5120,
        decoder_ffn_dim=5120,
    ),
}
# the language tokens in Whisper's order (large-v3: 100, "yue" last)
LANGUAGES = tuple(
    """en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su yue""".split()
)


def _vocab() -> dict[str, int]:
    from tokenizers.pre_tokenizers import ByteLevel

    symbols = sorted(ByteLevel.alphabet(), key=lambda c: (ord(c) > 255, ord(c)))
    vocab = {c: i for i, c in enumerate(symbols)}
    fillers = ("".join(t) for n in itertools.count(2) for t in itertools.product(string.ascii_lowercase, repeat=n))
    for word in fillers:  # "Ġab", "ab", ... (words, so a random decode reads as words)
        for token in ("\u0120" + word, word):
            if len(vocab) < N_TEXT and token not in vocab:
                vocab[token] = len(vocab)
        if len(vocab) >= N_TEXT:
            break
    return vocab


def _specials() -> list[str]:
    return [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *(f"<|{c}|>" for c in LANGUAGES),
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
        *("<|%.2f|>" % (i * 0.02) for i in range(N_TIMESTAMPS)),
    ]


def build_tokenizer(folder: Path) -> int:
    """tokenizer.json (+ the transformers files the converter reads); -> the vocabulary size."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = _vocab()
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    specials = _specials()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials[:1]])
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in specials[1:]])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    from transformers import WhisperTokenizerFast

    hf = WhisperTokenizerFast(
        tokenizer_file=str(folder / "tokenizer.json"),
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    hf.save_pretrained(str(folder))
    return tok.get_vocab_size(with_added_tokens=True)


def build(out: Path, size: str = "tiny") -> None:
    import torch
    from ctranslate2.converters import TransformersConverter
    from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration

    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = Path(tmp) / "hf"
        n_vocab = build_tokenizer(hf_dir)
        assert n_vocab == N_TEXT + 2 + len(LANGUAGES) + 6 + N_TIMESTAMPS == 51866, n_vocab
        eot, sot = N_TEXT, N_TEXT + 1
        config = WhisperConfig(
            vocab_size=n_vocab,
            num_mel_bins=N_MELS,
            **SIZES[size],
            max_source_positions=1500,
            max_target_positions=448,
            bos_token_id=eot,
            eos_token_id=eot,
            pad_token_id=eot,
            decoder_start_token_id=sot,
        )
        torch.manual_seed(SEED)
        model = WhisperForConditionalGeneration(config).eval()
        lang_ids = {f"<|{c}|>": sot + 1 + i for i, c in enumerate(LANGUAGES)}
        model.generation_config = GenerationConfig(
            decoder_start_token_id=sot,
            eos_token_id=eot,
            pad_token_id=eot,
            suppress_tokens=[],
            begin_suppress_tokens=[220, eot],
            alignment_heads=[[SIZES[size]["decoder_layers"] - 1, h] for h in range(2)],
            lang_to_id=lang_ids,
            is_multilingual=True,
            no_timestamps_token_id=sot + 1 + len(LANGUAGES) + 5,
        )
        model.save_pretrained(str(hf_dir))
        (hf_dir / "preprocessor_config.json").write_text(
            json.dumps(
                {
                    "chunk_length": 30,
                    "feature_extractor_type": "WhisperFeatureExtractor",
                    "feature_size": N_MELS,
                    "hop_length": 160,
                    "n_fft": 400,
                    "n_samples": 480000,
                    "nb_max_frames": 3000,
                    "padding_side": "right",
                    "padding_value": 0.0,
                    "processor_class": "WhisperProcessor",
                    "return_attention_mask": False,
                    "sampling_rate": 16000,
                },
                indent=2,
            )
        )
        if out.exists():
            shutil.rmtree(out)
        TransformersConverter(str(hf_dir), copy_files=["tokenizer.json", "preprocessor_config.json"]).convert(
            str(out), quantization="int8"
        )


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "out", nargs="?", type=Path, default=Path(__file__).resolve().parents[1] / "tests/fixtures/asr-tiny"
    )
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    args = ap.parse_args()
    target = args.out
    build(target, args.size)
    print(target, sorted(p.name for p in target.iterdir()), sum(p.stat().st_size for p in target.iterdir()))
