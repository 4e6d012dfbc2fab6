"""The hardware record (engine/hardware.py) and the one choice made from it (cpu.decide): what
`auto` runs in each CPU class at 1 and 2 threads, which int8 kernel, and the settings' check and
the loader both asking it."""

from __future__ import annotations

import pytest

from omnivoice_cli.app.settings.layers import FLAG_SOURCE, engine_options, resolve
from omnivoice_cli.engine.fast import cpu
from omnivoice_cli.engine.hardware import Hardware

BASE = {"sse2", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"}
AVX512 = BASE | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}
AMX = AVX512 | {"avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"}
CLASSES = {  # class -> a CPU of it
    "avx2": BASE,  # AVX2 only (Zen 3)
    "avx512": AVX512,  # AVX-512 without bf16 or VNNI (Skylake-SP)
    "avx512-bf16": AVX512 | {"avx512_vnni", "avx512_bf16"},  # Zen 4
    "amx": AMX,  # Sapphire Rapids
}


@pytest.mark.parametrize(
    "name,threads,path",
    [  # (quantize, dtype, int8 kernel) of `--quantize auto --dtype auto`
        ("avx2", 1, ("int8", "float32", "fbgemm")),
        ("avx2", 2, ("int8", "float32", "fbgemm")),
        ("avx512", 1, ("int8", "float32", "onednn")),
        ("avx512", 2, ("int8", "float32", "onednn")),
        ("avx512-bf16", 1, ("int8", "float32", "onednn")),
        ("avx512-bf16", 2, ("int8", "float32", "onednn")),
        ("amx", 1, (None, "bfloat16", "onednn")),  # bf16 first at 1 thread (a tie within 5%, smaller error)
        ("amx", 2, ("int8", "float32", "onednn")),
    ],
)
def test_auto_in_each_class_at_one_and_two_threads(name, threads, path):
    of = cpu.detect(CLASSES[name], "x86_64", env={})
    assert of.name == name
    chosen = cpu.decide(Hardware(quantize="auto"), threads, of=of)
    assert (chosen.quantize, chosen.dtype, chosen.kernel) == path and chosen.dropped is None
    assert chosen.row is cpu.choice(of, threads) and chosen.row.measured  # the measurement behind it
    # the record's own thread count is the default; the exact paths stay exact
    assert cpu.decide(Hardware(quantize="auto", threads=threads), of=of) == chosen
    assert cpu.decide(Hardware(threads=threads), of=of) == cpu.Decision(None, "float32", path[2], None, chosen.row)
    int8 = cpu.decide(Hardware(quantize="int8", threads=threads), of=of)
    assert (int8.quantize, int8.dtype, int8.kernel) == ("int8", "float32", path[2])


@pytest.mark.parametrize("name", list(CLASSES))
@pytest.mark.parametrize("threads", [1, 2])
def test_auto_with_a_dtype_or_compile_asked(name, threads):
    """int8 needs float32 and no compile: asked for another, auto is that exact path, the clash
    named; float32 asked keeps int8 (AMX at 1 thread too); bfloat16 asked is the bf16 body where
    the row puts it first."""
    of = cpu.detect(CLASSES[name], "x86_64", env={})
    bf16_first = name == "amx" and threads == 1

    def auto(**asked):
        d = cpu.decide(Hardware(quantize="auto", **asked), threads, of=of)
        return d.quantize, d.dtype, d.dropped

    assert auto(dtype="float32") == ("int8", "float32", None)
    assert auto(dtype="bfloat16") == ((None, "bfloat16", None) if bf16_first else (None, "bfloat16", "dtype"))
    assert auto(dtype="float16") == (None, "float16", "dtype")
    assert auto(compile=True) == (None, "float32", "compile")


def test_auto_off_the_cpu_and_off_x86():
    amx = cpu.detect(AMX, "x86_64", env={})
    assert cpu.decide(Hardware(quantize="auto"), 1, on_cpu=False, of=amx) == cpu.Decision(
        None, "auto", "onednn", None, cpu.choice(amx, 1)
    )  # a GPU: its checkpoint's dtype, nothing dropped
    arm = cpu.detect({"fp", "asimd", "bf16"}, "aarch64", env={})
    for threads in (1, 2):
        assert cpu.decide(Hardware(quantize="auto"), threads, of=arm) == cpu.Decision(
            None, "float32", "onednn", None, cpu.UNMEASURED
        )


def test_onednns_own_bf16_answer_is_asked_only_where_it_decides():
    amx = cpu.detect(AMX, "x86_64", env={})
    asked: list[int] = []

    def refuses() -> bool:
        asked.append(1)
        return False

    assert cpu.decide(Hardware(quantize="auto"), 2, of=amx, bf16_runs=refuses).quantize == "int8" and asked == []
    assert cpu.decide(Hardware(quantize="auto"), 1, of=amx, bf16_runs=refuses).quantize == "int8" and asked == [1]


def test_the_records_kernel_wins_over_the_class():
    zen3 = cpu.detect(BASE, "x86_64", env={})
    assert cpu.decide(Hardware(quantize="int8"), of=zen3).kernel == "fbgemm"
    assert cpu.decide(Hardware(quantize="int8", int8_kernel="onednn"), of=zen3).kernel == "onednn"


@pytest.mark.parametrize("name", list(CLASSES))
@pytest.mark.parametrize("threads", [1, 2])
def test_the_settings_check_asks_the_same_choice(monkeypatch, name, threads):
    """st.engine_options drops auto (with its notice) exactly where cpu.decide says it would meet a
    dtype or compile asked for."""
    monkeypatch.setattr(cpu, "_INFO", cpu.detect(CLASSES[name], "x86_64", env={}))
    for asked in ({"dtype": "bfloat16"}, {"compile": True}, {"dtype": "float32"}, {}):
        flags = {"quantize": "auto", "threads": threads, **asked}
        resolved, notice = engine_options(resolve((FLAG_SOURCE, flags)))
        dropped = cpu.decide(Hardware(quantize="auto", threads=threads, **asked)).dropped
        assert (resolved["quantize"], notice is not None) == (("none", True) if dropped else ("auto", False))
        if dropped:
            assert notice and notice.startswith(f"--quantize auto runs the body in int8 on this CPU ({name})")
