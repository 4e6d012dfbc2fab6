"""The settings (app/settings/layers.py, values.py): the one precedence function, and the checks of one setting."""

from __future__ import annotations

import pytest

from omnivoice_cli.app.settings.layers import check_engine_options, generation_kwargs, resolve_settings
from omnivoice_cli.app.settings.schema import CHUNK_DEFAULTS, DEFAULTS, GENERATION_DEFAULTS, PRESET_KEYS
from omnivoice_cli.app.settings.setting import SettingsError
from omnivoice_cli.app.settings.values import allowed, check_setting, join_lines

_ = None  # "not given in this layer"

# (setting, preset, flag, JSON line field, expected): built-in defaults < preset < flags < line
PRECEDENCE = [
    ("num_step", _, _, _, 32),
    ("num_step", 16, _, _, 16),
    ("num_step", _, 8, _, 8),
    ("num_step", _, _, 4, 4),
    ("num_step", 16, 8, _, 8),
    ("num_step", 16, _, 4, 4),
    ("num_step", _, 8, 4, 4),
    ("num_step", 16, 8, 4, 4),
    ("guidance_scale", 0.0, _, _, 0.0),  # a falsy value still counts as given
    ("guidance_scale", 1.0, 0.0, _, 0.0),
    ("guidance_scale", 1.0, 3.0, 0.0, 0.0),
    ("denoise", False, _, _, False),
    ("denoise", False, True, _, True),
    ("denoise", _, False, True, True),
    ("lang", "de", _, _, "de"),
    ("lang", "de", "en", _, "en"),
    ("lang", "de", "en", "fr", "fr"),
    ("instruct", _, _, _, None),
    ("instruct", "male", _, "female", "female"),
    ("speed", 1.2, _, _, 1.2),
    ("duration", _, 3.0, 2.0, 2.0),
    ("seed", _, 100, _, 100),
    ("seed", _, 100, 7, 7),
    ("device", "cpu", _, _, "cpu"),
    ("device", "cpu", "cuda", _, "cuda"),
    ("dtype", "bfloat16", _, _, "bfloat16"),
    ("format", "flac", _, _, "flac"),
    ("format", "flac", "ogg", _, "ogg"),
    ("voice", "alice", _, "bob", "bob"),
    ("model", _, "some/model", _, "some/model"),
    ("chunk_duration", _, _, _, 15.0),
    ("chunk_duration", 10.0, _, _, 10.0),
    ("chunk_duration", 10.0, 12.0, _, 12.0),
    ("chunk_duration", 10.0, 12.0, 8.0, 8.0),
    ("chunk_threshold", _, _, _, 30.0),
    ("chunk_threshold", 20.0, _, _, 20.0),
    ("chunk_threshold", 20.0, 25.0, _, 25.0),
    ("chunk_threshold", _, 25.0, 10.0, 10.0),
    ("threads", _, _, _, None),
    ("threads", 2, _, _, 2),
    ("threads", 2, 4, _, 4),
    ("quantize", _, _, _, "none"),
    ("quantize", "int8", _, _, "int8"),
    ("quantize", "int8", "none", _, "none"),  # a flag can turn a preset's int8 off
    ("compile", _, _, _, False),
    ("compile", True, _, _, True),
    ("compile", True, False, _, False),  # --no-compile beats the preset
]


@pytest.mark.parametrize("key,preset,flag,line,expected", PRECEDENCE)
def test_precedence(key, preset, flag, line, expected):
    layers = [{key: v} if v is not None else {} for v in (preset, flag, line)]
    merged = resolve_settings(DEFAULTS, *layers)
    assert merged[key] == expected
    others = {k: v for k, v in merged.items() if k != key}
    assert others == {k: v for k, v in DEFAULTS.items() if k != key}  # nothing else moves
    # None in a layer means "not given there", the same as leaving the key out
    nones = [{key: v} for v in (preset, flag, line)]
    assert resolve_settings(DEFAULTS, *nones)[key] == expected


def test_unknown_setting_in_any_layer():
    for layers in (({"bogus": 1}, {}, {}), ({}, {"bogus": 1}, {}), ({}, {}, {"bogus": 1})):
        with pytest.raises(SettingsError, match="unknown setting 'bogus'"):
            resolve_settings(DEFAULTS, *layers)


def test_layers_are_not_modified():
    preset, flags, line = {"num_step": 16}, {"num_step": 8}, {"num_step": 4}
    resolve_settings(DEFAULTS, preset, flags, line)
    assert (preset, flags, line) == ({"num_step": 16}, {"num_step": 8}, {"num_step": 4})
    assert DEFAULTS["num_step"] == 32


CHECKS_OK = [
    ("num_step", 1, 1),
    ("num_step", 64, 64),
    ("guidance_scale", 2, 2.0),  # an integer where a number is due becomes a float
    ("guidance_scale", 0, 0.0),
    ("t_shift", 0.5, 0.5),
    ("speed", 1, 1.0),
    ("duration", 30, 30.0),
    ("seed", 0, 0),
    ("seed", 2**63 - 1, 2**63 - 1),
    ("denoise", False, False),
    ("device", "cuda:1", "cuda:1"),
    ("dtype", "bfloat16", "bfloat16"),
    ("format", "ogg", "ogg"),
    ("lang", "klingon", "klingon"),  # an unknown language is refused when the request is built (request.py)
    ("chunk_duration", 5, 5.0),
    ("chunk_duration", 25.5, 25.5),
    ("chunk_threshold", 30, 30.0),
    ("chunk_threshold", 0.5, 0.5),
    ("threads", 1, 1),
    ("threads", 16, 16),
    ("quantize", "int8", "int8"),
    ("quantize", "none", "none"),
    ("compile", True, True),
    ("voice", "alice", "alice"),
    ("voice", "./voices/bob.safetensors", "./voices/bob.safetensors"),
]


@pytest.mark.parametrize("key,value,expected", CHECKS_OK)
def test_check_setting_accepts(key, value, expected):
    got = check_setting(key, value)
    assert got == expected and type(got) is type(expected)


CHECKS_BAD = [
    ("num_step", 0, "must be an integer in 1..64, got 0"),
    ("num_step", 65, "got 65"),
    ("num_step", 16.0, "must be an integer in 1..64, got 16.0 (a number)"),
    ("num_step", True, "got True (a boolean)"),
    ("num_step", "16", "got '16' (a string)"),
    ("guidance_scale", -0.5, "must be a number >= 0, got -0.5"),
    ("guidance_scale", float("nan"), "got nan"),
    ("guidance_scale", float("inf"), "got inf"),
    ("t_shift", 0, "must be a number > 0, got 0.0"),
    ("speed", [1], "got [1] (a list)"),
    ("duration", 0, "must be seconds in (0, 30], got 0.0"),
    ("seed", -1, "got -1"),
    ("seed", 2**63, "got 9223372036854775808"),
    ("denoise", 1, "must be true or false, got 1 (an integer)"),
    ("device", "tpu", "must be auto, cpu, cuda, cuda:N or mps, got 'tpu'"),
    ("dtype", "float64", "must be auto, float32, float16, bfloat16, got 'float64'"),
    ("format", "wma", "must be wav, flac, ogg, opus, mp3, raw, aac, m4a, mulaw, alaw, pcm, got 'wma'"),
    ("lang", 5, "got 5 (an integer)"),
    ("voice", "", "got ''"),
    ("chunk_duration", 0, "must be seconds > 0, got 0.0"),
    ("chunk_duration", -5, "got -5.0"),
    ("chunk_duration", "15", "got '15' (a string)"),
    ("chunk_threshold", 0, "must be seconds in (0, 30], got 0.0"),
    ("chunk_threshold", 31, "got 31.0"),
    ("threads", 0, "must be an integer >= 1, got 0"),
    ("threads", 2.0, "got 2.0 (a number)"),
    ("threads", True, "got True (a boolean)"),
    ("quantize", "int4", "must be int8, auto or none, got 'int4'"),
    ("quantize", 8, "got 8 (an integer)"),
    ("compile", "yes", "must be true or false, got 'yes' (a string)"),
]


@pytest.mark.parametrize("key,value,message", CHECKS_BAD)
def test_check_setting_refuses(key, value, message):
    with pytest.raises(SettingsError) as e:
        check_setting(key, value)
    assert message in str(e.value)


def test_every_setting_has_a_check():
    for key in DEFAULTS:
        allowed(key)  # KeyError if the schema misses one
        if DEFAULTS[key] is not None:
            assert check_setting(key, DEFAULTS[key]) == DEFAULTS[key], key


def test_preset_keys():
    assert set(GENERATION_DEFAULTS) <= set(PRESET_KEYS)
    assert {"lang", "instruct", "voice", "device", "dtype", "format"} <= set(PRESET_KEYS)
    assert {"chunk_duration", "chunk_threshold", "threads", "quantize", "compile", "model"} <= set(PRESET_KEYS)
    assert set(PRESET_KEYS) <= set(DEFAULTS)
    assert "seed" in PRESET_KEYS and "ref" not in PRESET_KEYS  # a preset's seed: its designed voice every run


def test_chunk_settings_are_the_engines():
    from omnivoice_cli.engine.model.config import GenerationConfig

    g = GenerationConfig()
    assert CHUNK_DEFAULTS == {"chunk_duration": g.audio_chunk_duration, "chunk_threshold": g.audio_chunk_threshold}
    kwargs = generation_kwargs({**DEFAULTS, "chunk_duration": 7.5, "chunk_threshold": 12.0})
    assert GenerationConfig(**kwargs).audio_chunk_duration == 7.5
    assert GenerationConfig(**kwargs).audio_chunk_threshold == 12.0


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"quantize": "int8", "compile": True}, "--quantize int8 and --compile cannot be combined"),
        ({"quantize": "int8", "device": "cuda"}, "--quantize int8 runs on the CPU only, not on 'cuda'"),
        ({"quantize": "int8", "device": "mps"}, "runs on the CPU only"),
        ({"quantize": "int8", "dtype": "float16"}, "--quantize int8 starts from float32 weights, not float16"),
    ],
)
def test_engine_option_combinations(changes, message):
    with pytest.raises(SettingsError, match=message.replace("(", r"\(")):
        check_engine_options({**DEFAULTS, **changes})
    check_engine_options({**DEFAULTS, "quantize": "int8", "device": "cpu", "dtype": "float32"})
    check_engine_options({**DEFAULTS, "compile": True, "device": "cuda", "dtype": "float16"})


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Hello world", "Hello world"),
        ("Hello\nworld", "Hello world"),
        ("Hello\r\nworld\r\n", "Hello world"),
        ("end of line  \n   start of the next", "end of line start of the next"),
        ("paragraph one.\n\n\nparagraph two.", "paragraph one. paragraph two."),
        ("  spaced  out  ", "spaced  out"),  # inner spaces are the engine's business
        ("tab\tkept", "tab\tkept"),
        ("a\u2028b\x0bc", "a b c"),
        ("First part. [pause 1.5s]\nSecond part.", "First part. [pause 1.5s] Second part."),
    ],
)
def test_join_lines(text, expected):
    assert join_lines(text) == expected


def test_the_int8_rule_is_the_engines():
    """One rule for int8 with device, dtype and compile: the schema's check before loading and the
    loader's own take it from engine/model/config.py, and name the settings each its own way."""
    from omnivoice_cli.engine.model.config import int8_clash, int8_problem

    assert int8_clash("cpu", "float32", False) is None and int8_clash("auto", None, False) is None
    assert [int8_clash("cuda", None, False), int8_clash(None, "bfloat16", False), int8_clash("cuda", "bf16", True)] == [
        "device",
        "dtype",
        "compile",
    ]
    for values, clash in (
        ({"device": "cuda:1"}, "device"),
        ({"dtype": "float16"}, "dtype"),
        ({"compile": True}, "compile"),
    ):
        with pytest.raises(SettingsError) as e:
            check_engine_options({"quantize": "int8", **values})
        value = values[clash]
        assert str(e.value) == int8_problem(clash, repr(value) if clash == "device" else str(value), lambda k: f"--{k}")
    assert int8_problem("compile", "") == "quantize int8 and compile cannot be combined: choose one"
