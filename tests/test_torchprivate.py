"""The private torch names (engine/torchprivate.py): these and no others, all present in this torch,
used nowhere else in the package. A torch upgrade that renames or drops one fails here first."""

from __future__ import annotations

import ast
from pathlib import Path

from omnivoice_cli.engine import torchprivate

PACKAGE = Path(__file__).resolve().parent.parent / "omnivoice_cli"
HOME = PACKAGE / "engine" / "torchprivate.py"

EXPECTED = (
    "torch.ops.mkldnn._linear_pointwise",
    "torch.ops.mkldnn._linear_pointwise.binary",
    "torch.ops.mkldnn._reorder_linear_weight",
    "torch.ops.mkldnn._convolution_pointwise",
    "torch.ops.mkldnn._convolution_pointwise_.binary",
    "torch.ops.mkldnn._reorder_convolution_weight",
    "torch.ops.mkldnn._is_mkldnn_bf16_supported",
    "torch.ops.mkldnn._nbytes",
    "torch.ops.mkldnn.data_ptr",
    "torch.ops.onednn.qlinear_pointwise",
    "torch.ops.onednn.qlinear_pointwise.binary",
    "torch.ops.onednn.qlinear_prepack",
    "torch._make_per_channel_quantized_tensor",
    "torch.ops.quantized.linear_prepack",
    "torch.ops.quantized.linear_dynamic",
    "torch.Tensor._version",
    "torch.UntypedStorage._weak_ref",
    "torch.UntypedStorage._expired",
    "torch.UntypedStorage._free_weak_ref",
)


def test_the_private_names_are_these():
    assert torchprivate.NAMES == EXPECTED


def test_this_torch_has_every_private_name():
    """The probe on this torch: a name it lacks is named here (and its fast path is off)."""
    assert torchprivate.missing() == []


def test_the_probe_names_what_a_torch_lacks(monkeypatch):
    gone = "torch.ops.mkldnn._no_such_op"
    monkeypatch.setattr(torchprivate, "NAMES", (*torchprivate.NAMES, gone, "torch.UntypedStorage._no_such_attr"))
    torchprivate.get.cache_clear()
    try:
        assert torchprivate.missing() == [gone, "torch.UntypedStorage._no_such_attr"]
        assert not torchprivate.present(torchprivate.LINEAR, gone) and torchprivate.present(torchprivate.LINEAR)
    finally:
        torchprivate.get.cache_clear()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


PRIVATE_PARTS = {part for name in EXPECTED for part in name.split(".") if _private(part)}


def _chain(node: ast.AST) -> list[str]:
    """torch.ops.mkldnn.x -> ["torch", "ops", "mkldnn", "x"]; [] where it is not rooted at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def private_torch_uses(source: str) -> list[str]:
    """Where a source uses a private torch name: torch.ops, torch._x (any private part of a path
    from `torch`), an attribute or a string named as one of EXPECTED's private parts (a tensor's
    `._version`, `getattr(storage, "_weak_ref")`), an import of torch's private modules; as
    "line: the code"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            chain = _chain(node)
            from_torch = chain[:1] == ["torch"] and (chain[1:2] == ["ops"] or any(map(_private, chain[1:])))
            if from_torch or node.attr in PRIVATE_PARTS:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and node.value in PRIVATE_PARTS:
            found.append(f"{node.lineno}: {node.value!r}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            torch_private = any(m.split(".")[0] == "torch" and any(map(_private, m.split("."))) for m in modules)
            if torch_private or "torch.ops" in modules or (modules == ["torch"] and any(map(_private, names))):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return sorted(set(found), key=lambda f: int(f.split(":")[0]))


def test_the_finder_finds_private_torch_uses():
    source = """
import torch
y = torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")
q = torch.ops.onednn.qlinear_prepack(codes, None)
t = torch._make_per_channel_quantized_tensor(c, s, z, 0)
n = t._version
w = getattr(storage, "_weak_ref", None)
from torch._dynamo import config
from torch import _C
ok = torch.backends.mkldnn.is_available() and torch.__version__ and self._storage
"""
    assert sorted({int(f.split(":")[0]) for f in private_torch_uses(source)}) == [3, 4, 5, 6, 7, 8, 9]


def test_no_private_torch_name_is_used_outside_its_module():
    uses = [
        f"{p.relative_to(PACKAGE)}:{u}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if p != HOME
        for u in private_torch_uses(p.read_text())
    ]
    assert uses == []


def test_each_name_is_named_once_and_used():
    """Each name a constant of its module, listed in NAMES, and that constant used by a function of
    the module (a name listed and never used would be a stale probe)."""
    tree = ast.parse(HOME.read_text())
    constants = {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.targets[0], ast.Name)
    }
    named = {c: v for c, v in constants.items() if v in EXPECTED}
    assert sorted(named.values()) == sorted(EXPECTED)  # each once
    used = {
        n.id
        for fn in tree.body
        if isinstance(fn, ast.FunctionDef)
        for n in ast.walk(fn)
        if isinstance(n, ast.Name) and n.id in named
    }
    assert used == set(named)
