"""The one admission of the packed loop (engine/model/admission.py), on its own: who joins the next
forward, within the bounds, in which order; run_jobs and the service both ask it."""

from __future__ import annotations

from dataclasses import dataclass, field

from omnivoice_cli.engine.model.admission import Stagger, admit


@dataclass(eq=False)
class Item:
    name: str
    packed_len: int = 10
    group: int = 0
    step: int = 0
    schedule: list[int] = field(default_factory=lambda: [1] * 8)


def _admit(active, waiting, *, jobs=4, tokens=100, may_join=None, grouped=False):
    return [
        item.name
        for item in admit(
            active,
            waiting,
            max_jobs=jobs,
            max_tokens=tokens,
            tokens=lambda i: i.packed_len,
            group=(lambda i: i.group) if grouped else (lambda i: None),
            may_join=may_join,
        )
    ]


def test_waiting_jobs_join_in_order_up_to_the_job_bound():
    waiting = [Item(c) for c in "abcdef"]
    assert _admit([], waiting, jobs=4) == ["a", "b", "c", "d"]
    assert _admit([Item("x"), Item("y")], waiting, jobs=4) == ["a", "b"]
    assert _admit([Item(c) for c in "wxyz"], waiting, jobs=4) == []


def test_the_token_bound_stops_at_the_first_that_does_not_fit():
    waiting = [Item("a", 40), Item("b", 50), Item("c", 10), Item("d", 1)]
    assert _admit([], waiting, tokens=100) == ["a", "b", "c"]  # 100 positions exactly
    waiting = [Item("a", 40), Item("b", 70), Item("c", 5)]
    assert _admit([], waiting, tokens=100) == ["a"]  # b does not fit: c never jumps ahead of it
    assert _admit([Item("x", 95)], [Item("a", 6)], tokens=100) == []


def test_a_job_alone_always_joins():
    assert _admit([], [Item("big", 500), Item("b", 1)], tokens=100) == ["big"]


def test_the_policy_is_not_asked_for_a_group_with_nothing_in_the_forward():
    asked = []

    def never(forward, item):
        asked.append(item.name)
        return False

    assert _admit([], [Item("a"), Item("b")], may_join=never) == ["a"]
    assert asked == ["b"]  # asked with a in the forward, not for a


def test_the_policy_sees_the_forward_with_those_admitted_before():
    seen = []

    def two_at_most(forward, item):
        seen.append([f.name for f in forward])
        return len(forward) < 2

    assert _admit([Item("x")], [Item("a"), Item("b")], may_join=two_at_most) == ["a"]
    assert seen == [["x"], ["x", "a"]]


def test_groups_fewest_in_the_forward_first_then_the_oldest():
    # group 1 has two jobs in the forward, group 2 one, group 3 none
    active = [Item("x1", group=1), Item("y1", group=1), Item("z2", group=2)]
    waiting = [Item("a1", group=1), Item("b2", group=2), Item("c3", group=3), Item("d3", group=3)]
    order = _admit(active, waiting, jobs=8, grouped=True)
    # c3 (none in) first; then b2 and d3 tie at one in, b2 waited longer; then a1, d3 ...
    assert order == ["c3", "b2", "d3", "a1"]


def test_a_group_joins_in_its_order_and_a_refused_head_holds_its_group():
    waiting = [Item("a1", group=1), Item("b1", group=1), Item("c2", group=2)]
    refuse_1 = lambda forward, item: item.group != 1  # noqa: E731
    assert _admit([Item("x1", group=1)], waiting, grouped=True, may_join=refuse_1) == ["c2"]


def test_a_stagger_admits_after_a_share_of_the_steps():
    stagger = Stagger(cap=4)  # 8 steps: a job joins once the youngest has done 2
    young, older = Item("y", step=1), Item("o", step=5)
    assert _admit([older, young], [Item("a")], may_join=stagger) == []
    young.step = 2
    assert _admit([older, young], [Item("a"), Item("b")], may_join=stagger) == ["a"]  # a is now the youngest
    assert _admit([Item(c, step=8) for c in "wxyz"], [Item("a")], jobs=8, may_join=stagger) == []  # cap 4
