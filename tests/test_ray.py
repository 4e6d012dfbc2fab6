"""`omnivoice batch --ray`: a batch spoken by engine actors on a Ray cluster (cluster.py).

Fast tests run the executor against FakeRay (below: actors run in this process, a test chooses
which calls die) and FakeEngine: groups, retries after a worker died, the bound on retries, a
model that does not load, Ctrl-C. Slow tests start a real local cluster (2 CPUs) with the tiny
checkpoint: 2 workers give the bytes of a local batch; a worker SIGKILLed mid-run is replaced and
the files are still right; Ctrl-C then a rerun leaves the finished files untouched. Without Ray,
--ray says how to install it; --help and a plain batch never import ray.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import GOLDEN, ROOT, TINY_CKPT, files_in
from helpers.cli import write_jsonl
from helpers.ray import ENV, MAIN, RUN, FakeExceptions, FakeQueue, FakeRay
from server_util import free_port

from omnivoice_cli.app.batch import cluster
from omnivoice_cli.app.batch.executor import GROUP_SIZE
from omnivoice_cli.app.batch.manifest import MANIFEST
from omnivoice_cli.engine.errors import CheckpointError, InvalidRequest
from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.planning import Request

slow = pytest.mark.slow


def records(out: Path) -> dict[int, dict]:
    recs = [json.loads(ln) for ln in (out / MANIFEST).read_text().splitlines()]
    assert len({r["line"] for r in recs}) == len(recs)  # one record per line
    return {r["line"]: r for r in recs}


# ------------------------------------------------------------------------------------ pure parts


def _request(text: str, num_step: int = 32) -> Request:
    return Request(text=text, generation=GenerationConfig(num_step=num_step))


def test_line_cost_grows_with_the_text_and_the_steps():
    short, long = _request("Hi."), _request("A much longer line, with many more words to speak than the other one.")
    assert cluster.line_cost(long) > cluster.line_cost(short) > 0
    assert cluster.line_cost(_request("Hi.", 64)) == 2 * cluster.line_cost(short)
    chunked = _request("Words and more words. " * 200)  # cut into chunks: each estimated on its own
    assert cluster.line_cost(chunked) > 50 * cluster.line_cost(long)


def test_groups_are_handed_out_longest_first():
    items = [(f"l{i}", float(c)) for i, c in enumerate([3, 9, 1, 9, 5, 7, 2, 8])]
    groups = cluster.make_groups(items, workers=2)  # 8 lines, 2 workers: 4 groups of 2
    assert [g.lines for g in groups] == [["l1", "l3"], ["l7", "l5"], ["l4", "l0"], ["l6", "l2"]]
    assert [g.cost for g in groups] == [18, 15, 8, 3]
    assert [len(g.lines) for g in cluster.make_groups(items, workers=8)] == [1] * 8
    many = cluster.make_groups([(i, 1.0) for i in range(1000)], workers=2)
    assert {len(g.lines) for g in many} == {GROUP_SIZE, 1000 % GROUP_SIZE}


def test_steps_of_all_workers_add_up():
    assert cluster.sum_steps({}) == (0, 0)
    assert cluster.sum_steps({"worker 1": (3, 32), "worker 2": (10, 16)}) == (13, 48)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"workers": 0}, "--workers must be an integer in 1..10000, got 0"),
        ({"gpus_per_worker": -1}, "--gpus-per-worker must be a number in 0..64"),
        ({"gpus_per_worker": float("nan")}, "--gpus-per-worker must be a number in 0..64"),
        ({"address": " "}, "--ray must be local, auto or a cluster address"),
    ],
)
def test_cluster_options_are_checked(kwargs, message):
    with pytest.raises(InvalidRequest, match=message.replace(".", r"\.")):
        cluster.ClusterOptions(**kwargs)


def test_ray_is_an_extra_and_in_the_test_extra():
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(dep.lower().startswith("ray") for dep in project["dependencies"])
    for extra in ("ray", "test"):
        assert any(dep.startswith("ray") for dep in project["optional-dependencies"][extra]), extra


# ------------------------------------------------------------------------------------ a fake Ray


@pytest.fixture
def fake_ray(monkeypatch):
    def install(**kwargs):
        fake = FakeRay(**kwargs)
        monkeypatch.setattr(cluster, "import_ray", lambda: fake)
        return fake

    return install


def _lines(tmp_path: Path, n: int = 8) -> Path:
    rows = [{"text": f"Line {i}" + ", and more words" * i, "id": f"l{i}", "seed": i} for i in range(n)]
    return write_jsonl(tmp_path / "jobs.jsonl", rows)


def test_fake_cluster_gives_the_local_files(invoke, fake_engine, fake_ray, tmp_path, home):
    src = _lines(tmp_path)
    r = invoke("batch", src, "-o", tmp_path / "local", "--threads", "3", "-q")
    assert r.exit_code == 0, r.stderr
    fake = fake_ray()
    r = invoke("batch", src, "-o", tmp_path / "ray", "--ray", "local", "--workers", "2", "--threads", "3", "-q")
    assert r.exit_code == 0, r.stderr
    assert len(fake.actors) == 2 and fake.runs == 4  # 8 lines: 2 groups a worker
    assert fake.options == {"num_cpus": 3, "num_gpus": 0.0, "max_restarts": 0}
    assert files_in(tmp_path / "ray") == files_in(tmp_path / "local")
    local, ray = records(tmp_path / "local"), records(tmp_path / "ray")
    for n, rec in local.items():
        assert (tmp_path / "ray" / rec["output"]).read_bytes() == (tmp_path / "local" / rec["output"]).read_bytes()
        assert {**ray[n], "seconds": None} == {**rec, "seconds": None}
    assert [r.seed for r in fake_engine.requests[8:]] == [7, 6, 5, 4, 3, 2, 1, 0]  # the longest first
    assert len(fake.killed) == 2  # the workers are let go at the end


@pytest.mark.parametrize("death", ["ActorDiedError", "OutOfMemoryError"])
def test_a_dead_worker_is_replaced_and_its_group_retried(invoke, fake_engine, fake_ray, tmp_path, home, death):
    src = _lines(tmp_path)
    fake = fake_ray(dies=lambda k, tasks: k == 2, death=getattr(FakeExceptions, death))
    r = invoke("batch", src, "-o", tmp_path / "out", "--ray", "local", "--workers", "2", "-q")
    assert r.exit_code == 0, r.stderr
    assert "Warning: worker 2 died (The actor died unexpectedly): its 2 line(s) go to another worker" in r.stderr
    assert len(fake.actors) == 3 and fake.runs == 5
    assert all(rec["status"] == "done" for rec in records(tmp_path / "out").values())
    assert sorted(r.seed for r in fake_engine.requests) == list(range(8))  # each line spoken once


def test_a_group_that_keeps_killing_its_worker_fails_alone(invoke, fake_engine, fake_ray, tmp_path, home):
    src = _lines(tmp_path)
    fake = fake_ray(dies=lambda k, tasks: any(t.number == 8 for t in tasks))  # on every worker
    r = invoke("batch", src, "-o", tmp_path / "out", "--ray", "local", "--workers", "2", "-q")
    assert r.exit_code == 1, r.stderr
    recs = records(tmp_path / "out")
    failed = sorted(n for n, rec in recs.items() if rec["status"] == "failed")
    assert failed == [7, 8]  # the two longest lines
    assert "a Ray worker died 3 times while speaking this line" in recs[8]["error"]
    assert "Error: line 8: a Ray worker died 3 times" in r.stderr
    assert sum(rec["status"] == "done" for rec in recs.values()) == 6
    assert len(fake.actors) == 5  # 2, then a replacement after each death


def test_a_model_that_does_not_load_stops_the_run(invoke, fake_engine, fake_ray, tmp_path, home):
    fake_engine.load_error = CheckpointError("checkpoint '/nowhere' has no config.json")
    fake_ray()
    r = invoke("batch", _lines(tmp_path), "-o", tmp_path / "out", "--ray", "local", "--workers", "2", "-q")
    assert r.exit_code == 1
    assert "Error: checkpoint '/nowhere' has no config.json" in r.stderr
    assert {rec["status"] for rec in records(tmp_path / "out").values()} == {"pending"}


def test_ctrl_c_kills_the_workers_and_keeps_finished_files(invoke, fake_engine, fake_ray, tmp_path, home):
    def interrupt(fake):
        if fake.waits == 4:  # two workers ready, one group back
            os.kill(os.getpid(), signal.SIGINT)

    fake = fake_ray(on_wait=interrupt)
    r = invoke("batch", _lines(tmp_path), "-o", tmp_path / "out", "--ray", "local", "--workers", "2", "-q")
    assert r.exit_code == 130, r.stderr
    assert "stopped by Ctrl-C" in r.stderr
    recs = records(tmp_path / "out")
    done = sorted(n for n, rec in recs.items() if rec["status"] == "done")
    assert done == [7, 8]  # the first group; the rest is pending
    assert files_in(tmp_path / "out") == ["l6.wav", "l7.wav", MANIFEST]
    assert len(fake.killed) == 2


def test_workers_option_needs_ray(invoke, fake_engine, tmp_path, home):
    src = _lines(tmp_path, 1)
    for args in (["--workers", "2"], ["--gpus-per-worker", "1"]):
        r = invoke("batch", src, "-o", tmp_path / "out", *args)
        assert r.exit_code == 2
        assert f"Error: {args[0]} needs --ray" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--device", "cuda:1", "--gpus-per-worker", "1"], "--device cuda:1 picks a GPU, but with --ray each worker"),
        (["--device", "cuda"], "--device cuda with --ray needs --gpus-per-worker"),
        (["--workers", "0"], "--workers must be an integer in 1..10000, got 0"),
    ],
)
def test_cluster_flags_are_checked_before_anything(invoke, fake_engine, fake_ray, tmp_path, home, args, message):
    fake = fake_ray()
    r = invoke("batch", _lines(tmp_path, 1), "-o", tmp_path / "out", "--ray", "local", *args)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"Error: {message}")
    assert not (tmp_path / "out").exists() and fake.actors == []


# ------------------------------------------------------------------------------------ without Ray

NO_RAY = "import sys; sys.modules['ray'] = None; from omnivoice_cli.cli import main; main()"  # import ray fails


@pytest.mark.slow
def test_without_ray_the_option_says_how_to_install_it(tmp_path):
    src = _lines(tmp_path, 2)
    proc = subprocess.run(
        [sys.executable, "-c", NO_RAY, "batch", str(src), "-o", str(tmp_path / "out"), "--ray", "local"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"Error: --ray needs Ray, which is not installed: {cluster.INSTALL_HINT}"
    assert not (tmp_path / "out").exists()


@slow
def test_help_and_a_plain_batch_do_not_import_ray(tmp_path):
    src = tmp_path / "lines.txt"
    src.write_text("Hello there.\n")
    plain = ["batch", str(src), "-o", str(tmp_path / "out"), "--model", str(TINY_CKPT), "--num-step", "2"]
    code = f"""
import sys
from typer.testing import CliRunner
from omnivoice_cli.cli import app
for args in (["--help"], ["batch", "--help"], {plain!r}):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (args, result.output)
print(sorted(m for m in sys.modules if m == "ray" or m.startswith("ray.")))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert (tmp_path / "out" / "0001.wav").exists()


# ------------------------------------------------------------------------------------ a real cluster (slow)


def _rows() -> list[dict]:
    meta = json.loads((GOLDEN / "clone.json").read_text())["generate_kwargs"]
    rows = [
        {
            "text": f"Line number {i}, with a few words" + " and some more" * (i % 3) + ".",
            "id": f"l{i}",
            "num_step": 16,
            "seed": i,
            **({"instruct": "female, low pitch"} if i >= 5 else {}),  # a designed voice: line 6 designs it
        }
        for i in range(7)
    ]
    rows.append(
        {
            "text": "I speak in the voice of the reference.",
            "id": "clone",
            "ref": str(GOLDEN / meta["ref_audio"]),
            "ref_text": meta["ref_text"],
            "num_step": 16,
            "seed": 7,
        }
    )
    return rows


CLUSTER = ["--ray", "local", "--workers", "2"]


@pytest.fixture(scope="module")
def local_batch(tmp_path_factory):
    """The jobs file and a plain local batch of it (in a subprocess: --threads 1 would stay set here)."""
    pytest.importorskip("ray")
    tmp = tmp_path_factory.mktemp("local")
    src = write_jsonl(tmp / "jobs.jsonl", _rows())
    cmd = MAIN + ["batch", str(src), "-o", str(tmp / "out"), *RUN, "-q"]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**ENV, "OMNIVOICE_HOME": str(tmp / "home")}, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return src, tmp / "out"


def _same_as_local(out: Path, local: Path) -> dict[int, dict]:
    assert files_in(out) == files_in(local)
    recs, expected = records(out), records(local)
    for n, rec in expected.items():
        assert rec["status"] == "done"
        assert (out / rec["output"]).read_bytes() == (local / rec["output"]).read_bytes(), rec["output"]
        assert {**recs[n], "seconds": None} == {**rec, "seconds": None}
    return recs


@slow
def test_two_workers_give_the_bytes_of_a_local_batch(invoke, local_batch, tmp_path, home, monkeypatch, ray_tmp):
    src, local = local_batch
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])  # the workers import this checkout
    monkeypatch.setattr("omnivoice_cli.ui.progress.stderr_is_terminal", lambda: True)  # the bars, fed by the workers
    from omnivoice_cli.ui.progress import BatchProgress

    steps = []
    monkeypatch.setattr(BatchProgress, "step", lambda self, done, total: steps.append((done, total)))
    r = invoke("batch", src, "-o", tmp_path / "out", *RUN, *CLUSTER)
    assert r.exit_code == 0, r.stderr
    assert "Ray: started a local cluster" in r.stderr and "8 lines: 8 done, 0 failed, 0 skipped" in r.stderr
    assert r.stdout == ""
    _same_as_local(tmp_path / "out", local)
    assert steps and max(total for _, total in steps) >= 16  # steps came back from the workers

    import ray

    assert not ray.is_initialized()  # the local cluster was shut down


def _descendants(pid: int) -> dict[int, str]:
    """{pid: command line} of every process below `pid`."""
    parent, cmd = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmd[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = {}, [pid]
    while frontier:
        p = frontier.pop()
        for child, ppid in parent.items():
            if ppid == p and child not in found:
                found[child] = cmd.get(child, "")
                frontier.append(child)
    return found


@contextmanager
def _running(src: Path, out: Path, tmp_path: Path, ray_tmp: str):
    """`omnivoice batch --ray local` started in a child process, killed on the way out if a test
    left it running (a failed assertion or a timeout), so no cluster outlives its test."""
    cmd = MAIN + ["batch", str(src), "-o", str(out), *RUN, *CLUSTER]
    env = {**ENV, "OMNIVOICE_HOME": str(tmp_path / "home"), "RAY_TMPDIR": ray_tmp}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _wait_for(proc: subprocess.Popen | None, what, seconds: float = 240):
    """what()'s first true value, while `proc` runs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        assert proc is None or proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    if proc is not None:
        proc.kill()
    pytest.fail(f"timed out: {proc.communicate() if proc else what}")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@slow
def test_a_worker_killed_mid_run_is_replaced(local_batch, tmp_path, ray_tmp):
    src, local = local_batch
    with _running(src, tmp_path / "out", tmp_path, ray_tmp) as proc:
        running = lambda: [p for p, c in _descendants(proc.pid).items() if c.startswith("ray::OmnivoiceWorker.run")]
        victim = _wait_for(proc, running)[0]
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
    stderr = stderr.decode()
    assert proc.returncode == 0, stderr
    assert "died" in stderr and "go to another worker" in stderr and stdout == b""
    _same_as_local(tmp_path / "out", local)


@slow
def test_ctrl_c_then_rerun(local_batch, tmp_path, ray_tmp):
    src, local = local_batch
    out = tmp_path / "out"
    with _running(src, out, tmp_path, ray_tmp) as proc:
        cluster_pids = set()

        def first_record():
            cluster_pids.update(_descendants(proc.pid))
            return (out / MANIFEST).exists() and (out / MANIFEST).read_text().count("\n") >= 1

        _wait_for(proc, first_record)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    stderr = stderr.decode()
    assert proc.returncode == 130, stderr
    assert "stopped by Ctrl-C" in stderr and "Traceback" not in stderr
    assert sorted(records(out)) == list(range(1, 9))  # one record per line already
    finished = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.glob("*.wav")}
    assert 0 < len(finished) < 8, sorted(finished)
    assert files_in(out) == sorted([*finished, MANIFEST])  # complete files only, no temporaries
    for name, (_, data) in finished.items():
        assert data == (local / name).read_bytes(), name
    assert cluster_pids
    _wait_for(None, lambda: not [p for p in cluster_pids if _alive(p)], 120)  # the local cluster is gone

    with _running(src, out, tmp_path, ray_tmp) as rerun:
        _, stderr = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, stderr.decode()
    assert f"{len(finished)} skipped" in stderr.decode()
    for name, stamp in finished.items():
        assert ((out / name).stat().st_mtime_ns, (out / name).read_bytes()) == stamp, name  # untouched
    recs = _same_as_local(out, local)
    assert [json.loads(ln)["line"] for ln in (out / MANIFEST).read_text().splitlines()] == list(range(1, 9))
    assert {rec["status"] for rec in recs.values()} == {"done"}


@slow
def test_a_cluster_started_apart_runs_the_drivers_code(local_batch, tmp_path, ray_tmp):
    """`ray start --head` here, without this checkout on its path: --ray ADDRESS joins it, the
    workers run the driver's copy of the package (sent with the job), and the cluster stays up."""
    src, local = local_batch
    small = write_jsonl(tmp_path / "jobs.jsonl", _rows()[:2])  # the same names, seeds and settings
    port = free_port()
    ray_cli = Path(sys.executable).parent / "ray"
    if not ray_cli.exists():
        pytest.skip("no `ray` command beside this Python")
    import secrets

    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}  # this cluster's own token
    # RAY_TMPDIR (ray_tmp): the head's address file stays out of /tmp/ray, where any ray.init() would find it
    head_env = {**{k: v for k, v in ENV.items() if k != "PYTHONPATH"}, **auth, "RAY_TMPDIR": ray_tmp}
    head = subprocess.Popen(
        [
            str(ray_cli),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--num-cpus=1",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        env=head_env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        import socket

        _wait_for(head, lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, 120)
        cmd = MAIN + ["batch", str(small), "-o", str(tmp_path / "out"), *RUN, "--ray", f"127.0.0.1:{port}"]
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
            env={**ENV, **auth, "RAY_TMPDIR": ray_tmp, "OMNIVOICE_HOME": str(tmp_path / "home")},
        )
        assert proc.returncode == 0, proc.stderr
        assert f"Ray: connected to the cluster at 127.0.0.1:{port}" in proc.stderr and proc.stdout == ""
        assert head.poll() is None  # not ours to stop
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops what it started
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
    for name in ("l0.wav", "l1.wav"):
        assert (tmp_path / "out" / name).read_bytes() == (local / name).read_bytes(), name


def test_a_designing_line_is_spoken_once_and_the_other_workers_clone_its_voice(
    invoke, loaded, generated, fake_ray, tmp_path, home
):
    """A designed voice with --ray: its designing line is generated once (its worker speaks it as
    the voice's render), and the lines cloning it on the other worker wait for that voice, so no
    worker renders the design apart: as many generations as lines, the records a local batch's."""
    instruct = "female, low pitch"
    rows = [{"text": f"Line {i}, in the designed voice.", "instruct": instruct, "seed": i} for i in range(4)]
    rows.insert(2, {"text": "A plain line in the model's own voice.", "seed": 9})
    src = write_jsonl(tmp_path / "jobs.jsonl", rows)
    fast = ("--model", str(TINY_CKPT), "--num-step", "2", "--threads", "1", "-q")
    r = invoke("batch", src, "-o", tmp_path / "local", *fast)
    assert r.exit_code == 0, r.stderr
    generated.clear()  # what the run below generates
    fake = fake_ray()
    r = invoke("batch", src, "-o", tmp_path / "ray", *fast, "--ray", "local", "--workers", "2")
    assert r.exit_code == 0, r.stderr
    assert len(fake.actors) == 2 and fake.runs >= 2
    assert sorted(g.text for g in generated) == sorted(row["text"] for row in rows)  # no render apart
    local, ray = records(tmp_path / "local"), records(tmp_path / "ray")
    assert {n: {**rec, "seconds": None} for n, rec in ray.items()} == {
        n: {**rec, "seconds": None} for n, rec in local.items()
    }
    assert len({ray[n]["voice_prompt"] for n in (1, 2, 4, 5)}) == 1 and ray[3]["voice_prompt"] is None


def test_a_resumed_ray_batch_clones_the_voice_its_designing_line_gave(
    invoke, loaded, generated, fake_ray, tmp_path, home
):
    """The designing line done by an earlier run: a worker speaks its first piece again for the
    voice (nothing saved of it), and the lines spoken now clone the voice a whole run gave them."""
    instruct = "female, low pitch"
    rows = [{"text": f"Line {i}, in the designed voice.", "instruct": instruct, "seed": i} for i in range(3)]
    src = write_jsonl(tmp_path / "jobs.jsonl", rows)
    out = tmp_path / "ray"
    args = ("batch", src, "-o", out, "--model", str(TINY_CKPT), "--num-step", "2", "--threads", "1", "-q")
    fake_ray()
    r = invoke(*args, "--ray", "local", "--workers", "2")
    assert r.exit_code == 0, r.stderr
    whole = records(out)
    for n in (2, 3):
        (out / whole[n]["output"]).unlink()
    generated.clear()  # what the run below generates
    fake_ray()
    r = invoke(*args, "--ray", "local", "--workers", "2")
    assert r.exit_code == 0, r.stderr
    assert sorted(g.text for g in generated) == [row["text"] for row in rows]  # line 1 again, for its voice
    resumed = records(out)
    assert resumed[1] == whole[1] and [resumed[n]["voice_prompt"] for n in (2, 3)] == [whole[1]["voice_prompt"]] * 2


def test_a_designing_lines_steps_feed_the_steps_bar(
    invoke, loaded, tiny_engine, generated, fake_ray, tmp_path, home, monkeypatch
):
    """The worker that speaks a designing line (a group of its own) reports its steps as it does
    any other group's: every generation's steps reach the queue the driver sums for the bar."""
    import types

    queue = FakeQueue()
    monkeypatch.setitem(sys.modules, "ray.util.queue", types.SimpleNamespace(Queue=lambda **kw: queue))
    monkeypatch.setattr("omnivoice_cli.ui.progress.stderr_is_terminal", lambda: True)  # the bars: a steps queue
    instruct = "female, low pitch"
    rows = [{"text": f"Line {i}, in the designed voice.", "instruct": instruct, "seed": i} for i in range(3)]
    rows.append({"text": "A plain line in the model's own voice.", "seed": 9})
    src = write_jsonl(tmp_path / "jobs.jsonl", rows)
    fast = ("--model", str(TINY_CKPT), "--num-step", "2", "--threads", "1")
    fake_ray()
    r = invoke("batch", src, "-o", tmp_path / "ray", *fast, "--ray", "local", "--workers", "2")
    assert r.exit_code == 0, r.stderr
    runs, last = [], {}  # the steps of each group a worker ran: its last report before its (0, 0)
    for name, done, total in queue.puts:
        if total == 0:
            runs.append(last.pop(name, None))
        else:
            last[name] = (done, total)
    assert len(runs) >= 2 and None not in runs, queue.puts  # no group left the bar without its steps
    assert all(done == total for done, total in runs), queue.puts
    assert sum(total for _, total in runs) == sum(tiny_engine.plan(req).steps for req in generated)
