"""The engine service (engine/service.py) on the tiny checkpoint: what it renders, how it schedules."""

import queue
import threading

import numpy as np
import pytest
from helpers.service import Forwards
from server_util import hold_loop, wait_for

from omnivoice_cli.engine.errors import InvalidRequest
from omnivoice_cli.engine.model.config import GenerationConfig
from omnivoice_cli.engine.planning import Request
from omnivoice_cli.engine.service import Service
from omnivoice_cli.engine.stream.cut import StreamConfig, cut_request
from omnivoice_cli.engine.stream.render import stream
from omnivoice_cli.engine.tickets import Busy, RequestCancelled, ServiceStopped

pytestmark = pytest.mark.slow  # every test here runs the tiny model end to end (or a server on it)

G4 = GenerationConfig(num_step=4)
TEXT = "Good morning. The train leaves at seven, so we have time. [pause 0.4s] She packed her bags. Nobody left."
CFG = StreamConfig(first_seconds=1.5, piece_seconds=2.5, sentence_seconds=2.5)  # TEXT in four short pieces


class Collector:
    """on_event for a test: the events of one request, waited for."""

    def __init__(self):
        self.events = queue.Queue()

    def __call__(self, event):
        self.events.put(event)

    def all(self, timeout=120):
        out = []
        while True:
            event = self.events.get(timeout=timeout)
            out.append(event)
            if event.kind != "piece":
                return out


def audio_of(events):
    assert events[-1].kind == "done", events[-1]
    return np.concatenate([e.piece.audio for e in events if e.kind == "piece"])


@pytest.fixture
def service(engine):
    s = Service(engine, max_queue=8, config=CFG).start()
    yield s
    s.stop()


def test_one_piece_equals_generate(engine, service):
    req = Request(text="I can speak in the same voice.", seed=11, generation=G4)
    got = Collector()
    service.submit(req, got)
    events = got.all()
    [plain] = engine.generate([req])
    assert audio_of(events).tobytes() == plain.audio.tobytes()
    summary = events[-1].summary
    assert summary.pieces == 1 and summary.seed == 11 and summary.samples == len(plain.audio)
    assert summary.forwards == 4 and summary.queued >= 0


@pytest.mark.parametrize("with_ref", [False, True], ids=["auto", "ref"])
def test_pieces_equal_the_streamed_render(engine, service, ref_voice, with_ref):
    req = Request(text=TEXT, seed=5, generation=G4, ref=ref_voice if with_ref else None)
    got = Collector()
    service.submit(req, got)
    events = got.all()
    streamed = []
    stream(engine, req, streamed.append, config=CFG)
    pieces = [e.piece for e in events if e.kind == "piece"]
    assert len(pieces) == len(streamed) == len(cut_request(req, CFG)) == 5
    for a, b in zip(pieces, streamed):
        assert (a.index, a.text, a.start, a.seed) == (b.index, b.text, b.start, b.seed)
        assert a.audio.tobytes() == b.audio.tobytes()


def test_requests_packed_together_equal_each_alone(engine, service, ref_voice):
    reqs = [
        Request(text="One two three.", seed=1, generation=GenerationConfig(num_step=4)),
        Request(
            text="A voice by design.",
            seed=2,
            instruct="female, low pitch",
            generation=GenerationConfig(num_step=6, guidance_scale=0.0),
        ),
        Request(text="Cloned. And a second sentence here.", seed=3, ref=ref_voice, generation=G4),
    ]
    alone = []
    for req in reqs:
        got = Collector()
        service.submit(req, got)
        alone.append(audio_of(got.all()))
    before = service.forwards
    gate = hold_loop(service)
    collectors = [Collector() for _ in reqs]
    tickets = [service.submit(req, got) for req, got in zip(reqs, collectors)]
    seen = []
    service.observe(Forwards(seen.append))
    gate.set()
    together = [audio_of(got.all()) for got in collectors]
    for a, b in zip(alone, together):
        assert a.tobytes() == b.tobytes()
    # each request's first piece in the first forward; the clone's second piece joins staggered
    # (its pieces leave one by one), so the run is its two pieces' steps at most
    assert sorted(t for t, _ in seen[0]) == sorted(t.id for t in tickets) and len(cut_request(reqs[2], CFG)) == 2
    assert 6 <= service.forwards - before <= 8


def test_a_new_request_joins_the_running_forwards(engine, service):
    long = Request(
        text="This request has many more steps to run than the other one.",
        seed=1,
        generation=GenerationConfig(num_step=32),
    )
    short = Request(text="Quick.", seed=2, generation=GenerationConfig(num_step=4))
    order = []
    started = threading.Event()

    def on_forward(slots):
        if len(order) == 2:  # two forwards of the long one alone, then the short one arrives
            started.set()
        order.append(sorted(t for t, _ in slots))

    service.observe(Forwards(on_forward))
    a, b = Collector(), Collector()
    long_silent = []  # at the short one's end, told in the loop thread: whether the long one had sent nothing

    def on_short(event):
        if event.kind == "done":
            long_silent.append(a.events.empty())
        b(event)

    ta = service.submit(long, a)
    assert started.wait(120)
    tb = service.submit(short, on_short)
    b_events = b.all()
    assert long_silent == [True]  # the long one (one piece) was still running (read here, it may be done)
    a_events = a.all()
    assert b_events[-1].kind == "done" and a_events[-1].kind == "done"
    assert any(s == sorted([ta.id, tb.id]) for s in order)  # they shared forwards
    assert b_events[-1].summary.forwards == 4 and a_events[-1].summary.forwards == 32


def test_busy_beyond_max_queue_and_cancel_frees_a_place(engine):
    service = Service(engine, max_queue=2, config=CFG).start()
    try:
        gate = hold_loop(service)
        tickets = [service.submit(Request(text=TEXT, seed=n, generation=G4), Collector()) for n in range(2)]
        with pytest.raises(Busy) as e:
            service.submit(Request(text="No room.", generation=G4), Collector())
        assert e.value.retry_after >= 1 and "busy" in str(e.value)
        tickets[0].cancel()
        assert service.open == 1
        later = Collector()
        service.submit(Request(text="Room now.", seed=3, generation=G4), later)
        gate.set()
        assert later.all()[-1].kind == "done"
        assert tickets[0].closed and service.stats()["open"] in (0, 1)
    finally:
        service.stop()


def test_a_reservation_holds_its_places_for_its_own_requests(engine):
    """reserve(n): n places of max_queue at once (a script's lines: one admission), or Busy; its
    requests take only these, others only the rest; release() gives them back."""
    service = Service(engine, max_queue=4, config=CFG).start()
    try:
        gate = hold_loop(service)
        mine = service.reserve(3)
        with pytest.raises(Busy, match="3 of its 4 places are taken and this needs 2"):
            service.reserve(2)
        with pytest.raises(InvalidRequest, match=r"5 requests at once are more than the server ever takes \(4,"):
            service.reserve(5)
        service.submit(Request(text="The fourth place.", seed=1, generation=G4), Collector())
        with pytest.raises(Busy):
            service.submit(Request(text="No room.", generation=G4), Collector())
        got = [Collector() for _ in range(4)]
        lines = [Request(text=f"Line {n}.", seed=n, generation=G4) for n in range(4)]
        tickets = [service.submit(lines[n], got[n], places=mine) for n in range(3)]
        with pytest.raises(RuntimeError, match="all 3 reserved places are in use"):
            service.submit(lines[3], got[3], places=mine)
        tickets[0].cancel()  # its place goes back to the reservation, not to the others
        with pytest.raises(Busy):
            service.submit(Request(text="Still no room.", generation=G4), Collector())
        service.submit(lines[3], got[3], places=mine)
        gate.set()
        assert [g.all()[-1].kind for g in got[1:]] == ["done"] * 3
        mine.release()
        wait_for(lambda: service.open == 0, what="every request done")
        late = [Collector() for _ in range(4)]
        for n, c in enumerate(late):
            service.submit(Request(text="Room now.", seed=n, generation=G4), c)  # all four places again
        assert all(c.all()[-1].kind == "done" for c in late)
    finally:
        service.stop()


def test_a_cancelled_request_leaves_at_the_next_forward(engine, service):
    got = Collector()
    seen = []
    ticket = None

    def on_forward(slots):
        seen.append([t for t, _ in slots])
        if len(seen) == 2:
            ticket.cancel()

    service.observe(Forwards(on_forward))
    gate = hold_loop(service)  # no forward before `ticket` is set: on_forward cancels it at the second
    ticket = service.submit(
        Request(text="Cancel me soon please.", seed=1, generation=GenerationConfig(num_step=16)), got
    )
    gate.set()
    other = Collector()
    service.submit(Request(text="Others go on.", seed=2, generation=G4), other)
    assert other.all()[-1].kind == "done"
    assert all(ticket.id not in s for s in seen[3:])  # dropped from the forward after the one it was cancelled in
    assert got.events.empty() or all(e.kind == "piece" for e in got.events.queue)  # no done for it


def test_bad_requests_fail_at_submit_and_failures_stay_with_their_request(engine, service):
    with pytest.raises(InvalidRequest, match="text is empty"):
        service.submit(Request(text="  ", generation=G4), Collector())
    with pytest.raises(InvalidRequest, match="more than one generation holds: add punctuation"):
        service.submit(Request(text="word " * 800, speed=0.1, generation=G4), Collector())  # one 1,000 s piece
    with pytest.raises(InvalidRequest, match="unsupported instruct"):
        service.submit(Request(text="Hi.", instruct="robot voice", generation=G4), Collector())
    real = engine.render
    bad, good = Collector(), Collector()

    def render(req, job, warnings=None):
        if req.text.startswith("Explode"):
            raise RuntimeError("decoder broke")
        return real(req, job, warnings)

    engine.render = render
    try:
        service.submit(Request(text="Explode here.", seed=1, generation=G4), bad)
        service.submit(Request(text="I am fine.", seed=2, generation=G4), good)
        assert bad.all()[-1].error.args[0] == "decoder broke"
        assert good.all()[-1].kind == "done"
    finally:
        del engine.render


def test_call_runs_on_the_loop_and_stop_refuses(engine):
    service = Service(engine, max_queue=4).start()
    assert service.call(lambda e: e.sample_rate).result(30) == engine.sample_rate
    thread = service.call(lambda e: threading.current_thread().name).result(30)
    assert thread == "omnivoice-engine"
    gate = hold_loop(service)
    got = Collector()
    service.submit(Request(text="Stopped under me.", generation=G4), got)
    threading.Timer(0.2, gate.set).start()
    service.stop()
    assert isinstance(got.all()[-1].error, RequestCancelled)
    with pytest.raises(ServiceStopped):
        service.submit(Request(text="Too late.", generation=G4), Collector())


def test_stop_ends_the_running_forward_between_its_layers(engine):
    """stop() while a forward runs: its next layer does not run, the loop thread ends, and the
    request is told (RequestCancelled) rather than left waiting (issue 23: a server stopping at once)."""
    service = Service(engine, max_queue=4, config=CFG).start()
    layers = engine.model.llm.layers
    calls, stopped = [], threading.Event()

    def first(module, args):
        calls.append(0)
        if calls.count(0) == 2 and not stopped.is_set():  # layer 0 of the second forward
            stopped.set()
            service.stop(timeout=0)  # from the loop thread itself: does not wait for itself

    def second(module, args):
        calls.append(1)

    handles = [
        layers[0].input_layernorm.register_forward_pre_hook(first),
        layers[1].input_layernorm.register_forward_pre_hook(second),
    ]
    try:
        got = Collector()
        service.submit(Request(text=TEXT, seed=3, generation=G4), got)
        events = got.all()
        service._thread.join(120)
    finally:
        for h in handles:
            h.remove()
    assert calls == [0, 1, 0]  # the second forward stopped after its first layer
    assert isinstance(events[-1].error, RequestCancelled) and not service._thread.is_alive()
    assert service.forwards == 1


def test_a_cancel_of_all_the_forward_holds_ends_it_between_its_layers(engine):
    """A cancel while a forward holds only that request's jobs (a barge-in): its next layer does
    not run, the engine is free, and the service goes on with the next request."""
    service = Service(engine, max_queue=4, config=CFG).start()
    layers = engine.model.llm.layers
    calls, ticket = [], None

    def first(module, args):
        calls.append(0)
        if calls.count(0) == 2 and ticket is not None and not ticket.closed:  # layer 0 of the second forward
            ticket.cancel()

    def second(module, args):
        calls.append(1)

    handles = [
        layers[0].input_layernorm.register_forward_pre_hook(first),
        layers[1].input_layernorm.register_forward_pre_hook(second),
    ]
    try:
        got = Collector()
        gate = hold_loop(service)  # no forward before `ticket` is set: the hook cancels it in the second
        ticket = service.submit(Request(text=TEXT, seed=3, generation=GenerationConfig(num_step=16)), got)
        gate.set()
        wait_for(lambda: ticket.closed and service.stats()["active_jobs"] == 0, what="the forward to end")
        assert calls == [0, 1, 0]  # the second forward stopped after its first layer
        assert service.forwards == 1
    finally:
        for h in handles:
            h.remove()
    try:
        after = Collector()
        service.submit(Request(text="Next one.", seed=4, generation=G4), after)
        assert after.all()[-1].kind == "done"  # the loop goes on
        assert got.events.empty() or all(e.kind == "piece" for e in got.events.queue)
    finally:
        service.stop()


class Watcher:
    """An Observer (Service.observe) that keeps what it is told."""

    def __init__(self):
        self.sizes, self.summaries, self.errors = [], [], []

    def forward(self, pieces, positions):
        self.sizes.append((len(pieces), positions))

    def finished(self, summary):
        self.summaries.append(summary)

    def failed(self, error):
        self.errors.append(error)


def test_an_observer_is_told_of_each_forward_and_each_request_end(engine, service):
    watcher = Watcher()
    service.observe(watcher)
    before = service.forwards
    gate = hold_loop(service)
    done, cancelled = Collector(), Collector()
    service.submit(Request(text="One two three.", seed=1, generation=G4), done)
    ticket = service.submit(Request(text="This one is cancelled.", seed=2, generation=G4), cancelled)
    ticket.cancel()
    gate.set()
    [*_, last] = done.all()
    assert watcher.summaries == [last.summary]
    assert len(watcher.sizes) == service.forwards - before == 4
    assert all(jobs == 1 and positions > 0 for jobs, positions in watcher.sizes)
    assert watcher.errors == []  # a request its caller cancelled has no error event
    gate, stopped = hold_loop(service), Collector()
    service.submit(Request(text="Never spoken.", seed=3, generation=G4), stopped)
    service.stop(timeout=0)  # the loop is held: it stops once the gate opens
    gate.set()
    [event] = stopped.all()
    assert watcher.errors == [event.error] and isinstance(event.error, RequestCancelled)
