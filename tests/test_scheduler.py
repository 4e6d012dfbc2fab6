"""The step scheduler's pure functions."""

import math

import pytest
import torch

from omnivoice_cli.engine.model import scheduler


@pytest.mark.parametrize("total, steps, shift", [(648, 32, 0.1), (8, 32, 0.1), (1000, 8, 1.0), (81 * 8, 1, 0.1)])
def test_schedule_reveals_everything_once(total, steps, shift):
    counts = scheduler.reveal_schedule(total, steps, shift)
    assert len(counts) == steps and sum(counts) == total and min(counts) >= 0


def test_schedule_follows_the_shifted_times():
    ts = scheduler.time_steps(4, 1.0)
    assert ts == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    assert scheduler.reveal_schedule(100, 4, 1.0) == [25, 25, 25, 25]
    # a small t_shift reveals few tokens first and many at the end
    counts = scheduler.reveal_schedule(648, 32, 0.1)
    assert counts[0] == math.ceil(648 * scheduler.time_steps(32, 0.1)[1]) and counts[0] < counts[-1]


def test_guidance_zero_is_plain_log_softmax_and_mask_is_never_chosen():
    cond = torch.randn(8, 5, 11)
    lp = scheduler.guided_log_probs(cond.clone(), None, 0.0, mask_id=10)
    assert torch.all(lp[..., 10] == -math.inf)
    torch.testing.assert_close(lp[..., :10].exp().sum(-1) + 0, torch.softmax(cond, -1)[..., :10].sum(-1))
    tokens, conf = scheduler.predict(lp, 0.0, None)
    assert tokens.max() < 10 and torch.equal(conf, lp.max(-1).values)


def test_guidance_pushes_away_from_the_unconditional():
    cond = torch.tensor([[[2.0, 1.0, 0.0]]])
    uncond = torch.tensor([[[3.0, 0.0, 0.0]]])
    lp = scheduler.guided_log_probs(cond, uncond, 2.0, mask_id=2)
    assert lp.argmax(-1).item() == 1  # token 0 is what the unconditional row wants anyway


def test_position_scores_prefer_earlier_codebooks_and_skip_revealed():
    conf = torch.zeros(3, 2)
    revealed = torch.tensor([[True, False], [False, False], [False, False]])
    s = scheduler.position_scores(conf, revealed, 5.0, 0.0, None)
    assert s[0, 0] == -math.inf and s[0, 1] == 0 and s[1, 0] == -5 and s[2, 1] == -10


def test_reveal_writes_exactly_k_best_positions():
    target = torch.full((2, 3), 9)
    tokens = torch.arange(6).view(2, 3)
    scores = torch.tensor([[0.1, 0.9, 0.2], [0.8, -1.0, 0.3]])
    scheduler.reveal(target, tokens, scores, 2)
    assert target.tolist() == [[9, 1, 9], [3, 9, 9]]


def test_sampling_is_reproducible_from_the_generator():
    lp = torch.log_softmax(torch.randn(8, 20, 50), -1)
    a = scheduler.predict(lp, 1.0, torch.Generator().manual_seed(3))[0]
    b = scheduler.predict(lp, 1.0, torch.Generator().manual_seed(3))[0]
    c = scheduler.predict(lp, 1.0, torch.Generator().manual_seed(4))[0]
    assert torch.equal(a, b) and not torch.equal(a, c)
    # class temperature samples only among the top 10% of the vocabulary
    top = lp.topk(5, dim=-1).indices
    assert (top == a[..., None]).any(-1).all()
