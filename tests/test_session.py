"""session.py: the app layer's shared rules (hardware record, seeds, warn-once, the run's session)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from omnivoice_cli.app import settings as st
from omnivoice_cli.app.session import Hardware, NoProgress, Session, WarnOnce, check_seed_range, seed_for
from omnivoice_cli.engine.errors import InvalidRequest


def test_engine_kwargs_only_what_is_asked():
    """Moved from test_settings (settings.engine_kwargs is gone): quantize, compile and threads
    reach Engine.load only when asked for, so its own defaults stand."""
    assert Hardware.from_settings(st.DEFAULTS).engine_kwargs() == {"device": "auto", "dtype": "auto"}
    s = {**st.DEFAULTS, "threads": 3, "quantize": "int8"}
    assert Hardware.from_settings(s).engine_kwargs() == {
        "device": "auto",
        "dtype": "auto",
        "threads": 3,
        "quantize": "int8",
    }
    assert Hardware.from_settings({**st.DEFAULTS, "compile": True}).engine_kwargs() == {
        "device": "auto",
        "dtype": "auto",
        "compile": True,
    }
    assert Hardware.from_settings({**st.DEFAULTS, "quantize": "none"}).quantize is None


def test_seed_for_checks_the_last_seed_of_a_run():
    assert seed_for(10, 3) == 13
    assert seed_for(st.MAX_SEED - 2, 2) == st.MAX_SEED
    with pytest.raises(InvalidRequest, match=rf"seed {st.MAX_SEED - 2} \+ 3 is more than {st.MAX_SEED}"):
        seed_for(st.MAX_SEED - 2, 3)
    check_seed_range(st.MAX_SEED, 1)
    with pytest.raises(InvalidRequest):
        check_seed_range(st.MAX_SEED, 2)


def test_warn_once_shows_each_text_once_and_new_only_reports():
    shown: list[str] = []
    once = WarnOnce(shown.append)
    once(["a", "b", "a"])
    once(["b", "c"])
    assert shown == ["a", "b", "c"] and once.shown == ["a", "b", "c"]
    assert once.new(["c", "d", "d"]) == ["d"] and shown == ["a", "b", "c"]  # new() shows nothing


def test_a_session_loads_through_its_status_line_and_notices(fake_engine):
    seen: list[str] = []

    @contextmanager
    def status(message: str):
        seen.append(message)
        yield

    session = Session(echo=seen.append, status=status, notice=seen.append)
    engine, seconds = session.load_engine(Hardware("x", threads=2), encoder=True)
    assert seconds >= 0 and fake_engine.encoder_loads == 1
    assert seen == [
        "loading the model (x) ...",
        "fake notice: weights are for testing only",
        "loading the voice encoder ...",
    ]
    assert fake_engine.loads == [{"model": "x", "device": "auto", "dtype": "auto", "threads": 2}]


def test_no_progress_is_a_progress_that_shows_nothing():
    with NoProgress(3) as p:
        p.line("done")
        p.step(1, 2)
    assert p.shows_steps is False
