"""Progress on stderr: live bars on a terminal, plain lines in a log (progress.py)."""

from __future__ import annotations

from omnivoice_cli import progress
from omnivoice_cli.progress import BatchProgress, DownloadProgress, StepProgress


def test_steps_add_up_across_forward_loops():
    p = StepProgress(enabled=False)
    for i in range(1, 33):
        p(i, 32)
    assert (p.completed, p.total) == (32, 32)
    for i in range(1, 17):
        p(i, 16)
    assert (p.completed, p.total) == (48, 48)
    p(1, 1)
    p(1, 1)
    assert (p.completed, p.total) == (50, 50)


def test_plain_lines_for_a_log_one_per_quarter():
    lines: list[str] = []
    with StepProgress(enabled=True, live=False, echo=lines.append) as p:
        for i in range(1, 33):
            p(i, 32)
    assert [ln.split(",")[0] for ln in lines] == [f"generating: {n}/32 steps" for n in (8, 16, 24, 32)]


def test_nothing_when_disabled_or_live_without_plain_lines():
    lines: list[str] = []
    with StepProgress(enabled=False, live=False, echo=lines.append) as p:
        p(1, 1)
    assert lines == []


def test_batch_plain_line_per_finished_line():
    lines: list[str] = []
    with BatchProgress(3, enabled=True, live=False, echo=lines.append) as p:
        p.line("done")
        p.line("skipped")  # nothing was spoken: no line in the log
        p.line("failed")
    assert [ln.split(" (")[0] for ln in lines] == ["[1/3] done", "[3/3] failed"]
    assert (p.done, p.skipped, p.failed) == (1, 1, 1)


def test_loading_prints_one_line_when_not_a_terminal():
    lines: list[str] = []
    with progress.loading("the model (x)", enabled=True, live=False, echo=lines.append):
        pass
    with progress.loading("the model (x)", enabled=False, live=False, echo=lines.append):
        pass
    assert lines == ["loading the model (x) ..."]


def test_download_progress_tenths():
    lines: list[str] = []
    with DownloadProgress("m", enabled=True, live=False, echo=lines.append) as p:
        for done in range(0, 101, 5):
            p(done * 10**6, 100 * 10**6)
    assert len(lines) == 10 and lines[-1] == "downloading m: 100 of 100 MB"


def test_say_feeds_every_step_to_the_bar(invoke, fake_engine, tmp_path, monkeypatch):
    seen: list[tuple[int, int]] = []
    orig = StepProgress.__call__

    def spy(self, done, total):
        seen.append((done, total))
        return orig(self, done, total)

    monkeypatch.setattr(StepProgress, "__call__", spy)
    r = invoke("say", "Hello", "-o", tmp_path / "x.wav", "--num-step", "12")
    assert r.exit_code == 0, r.stderr
    assert seen == [(i, 12) for i in range(1, 13)]
    assert "loading the model (k2-fsa/OmniVoice) ..." in r.stderr  # CliRunner's stderr is no terminal
    assert "generating: 12/12 steps" in r.stderr
