"""The model's seams: the speed paths put modules in place and fill the model's public hooks
(backbone.LayerPath, HiggsDecoder.planner); nothing in the package reassigns an object's class or
writes another object's private attribute, and the model imports nothing of the speed paths."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "omnivoice_cli"
OWN = ("self", "cls")  # an object's own private attributes are its business


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _assigned(node: ast.AST):
    """The targets a statement assigns, tuples unpacked."""
    if isinstance(node, ast.Assign):
        stack = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
        stack = [node.target]
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        stack = [node.optional_vars]
    else:
        return
    while stack:
        t = stack.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            stack.extend(t.elts)
        elif isinstance(t, ast.Starred):
            stack.append(t.value)
        else:
            yield t


def _owner(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def seam_breaches(source: str) -> list[str]:
    """`x.__class__ = ...` (any x) and writes to another object's private attribute (`obj._x = ...`,
    `obj.__dict__[...] = ...`, `setattr(obj, "_x", ...)`, obj not self or cls), each as
    "line: the code"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        for t in _assigned(node):
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) and t.value.attr == "__dict__":
                t = t.value  # obj.__dict__[...] = ...: a write past the attribute machinery
                if _owner(t.value) not in OWN:
                    found.append(f"{node.lineno}: {ast.unparse(t)}")
            elif isinstance(t, ast.Attribute) and (
                t.attr == "__class__" or (_private(t.attr) and _owner(t.value) not in OWN)
            ):
                found.append(f"{node.lineno}: {ast.unparse(t)}")
        if isinstance(node, ast.Call) and len(node.args) >= 2:
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            attr = node.args[1]
            if name in ("setattr", "__setattr__") and isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                if attr.value == "__class__" or (_private(attr.value) and _owner(node.args[0]) not in OWN):
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_finder_finds_class_swaps_and_private_writes():
    source = """
m.__class__ = Other
self.__class__ = Other
model._halves = (a, b)
a, model._rope = 1, f
setattr(model, "_rope", f)
object.__setattr__(model, "__class__", Other)
model.__dict__["x"] = 1
self._mine = 1
cls._mine = 1
model.public = 1
setattr(self, "_mine", 1)
"""
    assert sorted(int(f.split(":")[0]) for f in seam_breaches(source)) == [2, 3, 4, 5, 6, 7, 8]


def test_no_class_swap_and_no_write_to_another_objects_private_attribute():
    breaches = [
        f"{p.relative_to(PACKAGE)}:{b}" for p in sorted(PACKAGE.rglob("*.py")) for b in seam_breaches(p.read_text())
    ]
    assert breaches == []


def _imported(path: Path, root: Path = PACKAGE) -> set[str]:
    """The package modules a file under `root` (the package) imports, as dotted names relative to it."""
    package = list(path.relative_to(root).parts[:-1])  # a module's package, or an __init__'s own
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            module = [*package[: len(package) - node.level + 1], *(node.module.split(".") if node.module else [])]
            out.add(".".join(module))
            out.update(".".join([*module, a.name]) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("omnivoice_cli."):
            out.add(node.module.removeprefix("omnivoice_cli."))
            out.update(f"{node.module.removeprefix('omnivoice_cli.')}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name.removeprefix("omnivoice_cli.") for a in node.names if a.name.startswith("omnivoice_cli."))
    return out


def _fast_imports(model_folder: Path, root: Path = PACKAGE) -> set[str]:
    return {
        f"{p.relative_to(root)} -> {m}"
        for p in sorted(model_folder.rglob("*.py"))
        for m in _imported(p, root)
        if m == "engine.fast" or m.startswith("engine.fast.")
    }


def test_the_model_imports_nothing_of_the_speed_paths():
    assert _fast_imports(PACKAGE / "engine" / "model") == set()


def test_the_import_reader_sees_a_models_imports_of_the_speed_paths(tmp_path):
    model = tmp_path / "omnivoice_cli" / "engine" / "model"
    model.mkdir(parents=True)
    (model / "codec.py").write_text("from ..fast.codecplan import build_plan\nfrom ..fast import memory\n")
    (model / "other.py").write_text(
        "from omnivoice_cli.engine.fast import narrow\nfrom ..errors import CheckpointError\n"
    )
    assert _fast_imports(model, tmp_path / "omnivoice_cli") == {
        "engine/model/codec.py -> engine.fast.codecplan",
        "engine/model/codec.py -> engine.fast.codecplan.build_plan",
        "engine/model/codec.py -> engine.fast",
        "engine/model/codec.py -> engine.fast.memory",
        "engine/model/other.py -> engine.fast",
        "engine/model/other.py -> engine.fast.narrow",
    }


# ------------------------------------------------------------------------------- the seams at work


def test_the_plain_layer_path_is_the_default_and_an_installed_one_is_what_runs(engine):
    import torch

    from omnivoice_cli.engine.model.backbone import PLAIN, LayerPath
    from omnivoice_cli.engine.model.generation import pack
    from omnivoice_cli.engine.planning import Request

    model = engine.model
    assert model.layer_path is PLAIN
    batch, _ = pack([engine.prepare(Request(text="Hello there.", lang="en"))], "cpu")
    calls = []

    def inputs(layer, h, cos, sin):
        calls.append(layer)
        return PLAIN.inputs(layer, h, cos, sin)

    with torch.inference_mode():
        want = model(batch)
        model.use_layer_path(LayerPath(PLAIN.rope, inputs, PLAIN.outputs))
        try:
            got = model(batch)
        finally:
            model.use_layer_path(PLAIN)
    assert torch.equal(got, want) and calls == list(model.llm.layers)


def test_the_codec_decodes_by_its_module_tree_until_loading_installs_its_plan(tiny_ckpt):
    import torch

    from omnivoice_cli.engine.fast import codecplan
    from omnivoice_cli.engine.model.codec import read_codec_decoder
    from omnivoice_cli.engine.model.config import ModelConfig

    dec = read_codec_decoder(tiny_ckpt / "audio_tokenizer", ModelConfig.from_checkpoint(tiny_ckpt).codec)
    codes = torch.randint(0, 1024, (1, 8, 6), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        want = dec.forward(codes)
    assert dec.planner is None and dec.plan() is None and torch.equal(dec.decode(codes), want)
    codecplan.install_plan(dec)
    assert isinstance(dec.plan(), codecplan.CodecPlan)
    floor = 1e-4 * float(want.abs().max())  # equal to float rounding (tests/test_codecplan.py holds it closer)
    torch.testing.assert_close(dec.decode(codes), want, rtol=0, atol=floor)


def test_the_narrow_path_puts_its_modules_in_place_with_the_plain_ones_parameters(tiny_ckpt):
    import torch

    from omnivoice_cli.engine.fast import linears, narrow
    from omnivoice_cli.engine.hardware import Hardware
    from omnivoice_cli.engine.model.backbone import RMSNorm
    from omnivoice_cli.engine.pipeline import Engine

    model = Engine.load(str(tiny_ckpt), Hardware(device="cpu", dtype="float32")).model
    norms = {name: m.weight for name, m in model.named_modules() if isinstance(m, RMSNorm)}
    linears.convert_layers(model, linears.int8_kind())  # the int8 layers of this CPU and torch build
    narrow.install_narrow(model, torch.float32)
    after = {name: m for name, m in model.named_modules() if isinstance(m, RMSNorm)}
    assert after.keys() == norms.keys() and all(after[n].weight is w for n, w in norms.items())
    assert all(isinstance(m, narrow.LeanRMSNorm) for m in after.values())
    assert {type(layer.self_attn) for layer in model.llm.layers} == {narrow.NarrowAttention}
    assert model.layer_path is narrow.NARROW
