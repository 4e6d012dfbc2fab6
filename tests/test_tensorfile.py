"""The one safetensors reader: views and copies, metadata, errors, float reads, atomic writes."""

import json
import os
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from omnivoice_cli.engine.checkpoint.tensorfile import SafetensorsFile, TensorFileError, read_floats, write_file
from omnivoice_cli.engine.errors import CheckpointError

TINY_AT = Path(__file__).parent / "fixtures" / "tiny" / "ckpt" / "audio_tokenizer" / "model.safetensors"


def test_views_and_copies_equal_the_safetensors_package():
    plain = load_file(TINY_AT)
    f = SafetensorsFile(TINY_AT)
    for name, t in plain.items():
        view, copy = f.get(name), f.read(name)
        assert torch.equal(view, t) and torch.equal(copy, t) and copy.dtype == t.dtype
        assert copy.untyped_storage().data_ptr() != view.untyped_storage().data_ptr()


def test_a_misaligned_tensor_is_copied_with_its_values(tmp_path):
    values = torch.tensor([1.5, -2.0, 3.25])
    header = json.dumps({"x": {"dtype": "F32", "shape": [3], "data_offsets": [1, 13]}}).encode()
    header += b" " * (-len(header) % 8)  # the data starts aligned, so the tensor at byte 1 is not
    path = tmp_path / "odd.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" + values.numpy().tobytes())
    f = SafetensorsFile(path)
    assert (f.data_start + 1) % 4 == 1
    assert torch.equal(f.get("x"), values) and torch.equal(f.read("x"), values)


def test_metadata_and_write_file(tmp_path):
    path = tmp_path / "v.safetensors"
    write_file(path, {"codes": torch.arange(6).reshape(2, 3)}, {"format": "x", "text": "Hi."})
    f = SafetensorsFile(path)
    assert f.metadata == {"format": "x", "text": "Hi."} and f.keys() == ["codes"]
    assert f.dtype("codes") == torch.int64 and torch.equal(f.read("codes"), torch.arange(6).reshape(2, 3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.safetensors"]


def test_a_failed_write_leaves_nothing(tmp_path):
    path = tmp_path / "v.safetensors"
    with pytest.raises(ValueError):
        write_file(path, {"codes": torch.arange(6).reshape(2, 3).t()}, {})  # not contiguous: refused
    assert list(tmp_path.iterdir()) == []


def test_errors_name_the_file_and_say_what_is_wrong(tmp_path):
    missing = tmp_path / "none.safetensors"
    with pytest.raises(TensorFileError) as e:
        SafetensorsFile(missing)
    assert e.value.missing and str(e.value) == f"checkpoint file missing: {missing}"
    garbage = tmp_path / "g.safetensors"
    garbage.write_bytes(b"\x02")
    with pytest.raises(CheckpointError) as e:
        SafetensorsFile(garbage)
    assert str(e.value) == f"{garbage} is not a valid safetensors file (file shorter than its 8-byte header length)"
    assert e.value.detail == "file shorter than its 8-byte header length" and not e.value.missing
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(TINY_AT.read_bytes()[:-10])
    with pytest.raises(TensorFileError, match=r"cut\.safetensors is truncated: \d+ bytes, its header needs \d+$"):
        SafetensorsFile(cut)


def test_read_floats_converts_and_lists_every_problem(tmp_path):
    path = tmp_path / "t.safetensors"
    save_file(
        {"a": torch.ones(2, 3, dtype=torch.float16), "b": torch.ones(4, dtype=torch.int64), "x": torch.ones(1)},
        str(path),
    )
    got = read_floats(path, {"a": (2, 3)}, what="the thing")
    assert got["a"].dtype == torch.float32 and torch.equal(got["a"], torch.ones(2, 3))  # "x" ignored
    with pytest.raises(CheckpointError) as e:
        read_floats(path, {"a": (3, 2), "b": (4,), "c": (1,)}, what="the thing")
    assert str(e.value) == (
        f"{path} does not match the thing (3 problems): a has shape [2, 3], expected [3, 2]; "
        "b has dtype torch.int64, expected a float type; missing c [1]"
    )


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_written_file_gets_the_umask_mode_not_0600(tmp_path, umask):
    old = os.umask(umask)
    try:
        write_file(tmp_path / "v.safetensors", {"codes": torch.zeros(2, 3, dtype=torch.int64)}, {"k": "v"})
    finally:
        os.umask(old)
    assert (tmp_path / "v.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask  # another user can read it
