"""The plan made once per request (engine.pipeline.Planned): built with the request (its size
check), reused by the progress bar's total, the dry run and Engine.generate."""

from __future__ import annotations

from conftest import TINY_CKPT

from omnivoice_cli.engine import planning
from omnivoice_cli.engine.planning import Planned, Request, plan_of, plan_request
from omnivoice_cli.ui.progress import StepProgress

TEXT = " ".join(f"Sentence number {i} is here." for i in range(1, 21))  # 20 pieces at these limits
CHUNKS = ["--chunk-threshold", 1, "--chunk-duration", 1]


def count_plans(monkeypatch) -> list[int]:
    """Every plan_request call (it fits its pieces once: planning._fit_pieces), however imported."""
    calls: list[int] = []
    real = planning._fit_pieces

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(planning, "_fit_pieces", counted)
    return calls


def test_one_say_plans_its_text_once_and_the_bar_reaches_its_total(invoke, loaded, tmp_path, monkeypatch):
    """A `say` of a 20-piece text: plan_request runs once (not for the bar, nor again in
    generate), and the bar counts the plan's steps (20 pieces x 2) to exactly that total."""
    plans = count_plans(monkeypatch)
    totals: list = []
    orig_init = StepProgress.__init__

    def spy_init(self, *args, **kwargs):
        totals.append(kwargs.get("total"))
        orig_init(self, *args, **kwargs)

    monkeypatch.setattr(StepProgress, "__init__", spy_init)
    out = tmp_path / "a.wav"
    r = invoke("say", TEXT, "--model", TINY_CKPT, "--num-step", 2, *CHUNKS, "--seed", 1, "-o", out)
    assert r.exit_code == 0, r.stderr
    assert "generating 20 pieces" in r.stderr
    assert len(plans) == 1
    assert totals == [40]  # the plan's steps, known before the model ran
    steps = [ln.split(": ")[1].split(" ")[0] for ln in r.stderr.splitlines() if ln.startswith("generating 20 pieces: ")]
    assert steps and steps[-1] == "40/40" and all(s.endswith("/40") for s in steps)  # exactly its total


def test_the_dry_run_uses_the_plan_built_with_the_request(invoke, monkeypatch):
    plans = count_plans(monkeypatch)
    r = invoke("say", TEXT, "--model", TINY_CKPT, *CHUNKS, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    assert len(plans) == 1


def test_a_planned_request_changed_is_planned_again():
    """A copy of a Planned request with other fields (its recording encoded, another text) does
    not carry the old plan on: Engine.generate plans it again."""
    import dataclasses

    req = Request("Hello there. And more.")
    planned = Planned.of(req, plan_request(req))
    assert planned.own_plan() is planned.plan and plan_of(planned) is planned.plan
    changed = dataclasses.replace(planned, text="Something else entirely.")
    assert changed.own_plan() is None and plan_of(changed).req is changed
