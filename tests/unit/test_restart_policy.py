"""Restart policy: a table of expected delays, the crash-loop limit, the reset after uptime."""

from __future__ import annotations

import random

import pytest

from orchestrator.daemon.members._restart_policy import RestartPolicy


def _policy(**kwargs: object) -> RestartPolicy:
    return RestartPolicy(rng=random.Random(7), jitter=0.0, **kwargs)  # type: ignore[arg-type]


def test_exponential_backoff_capped() -> None:
    policy = _policy(first_delay=1.0, max_delay=8.0, max_restarts=100, window=1.0)
    delays = [policy.on_exit(now=i * 10.0, exit_code=1, uptime=0.5).delay for i in range(6)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_more_than_max_restarts_in_the_window_is_fatal() -> None:
    policy = _policy(max_restarts=3, window=300.0)
    actions = [policy.on_exit(now=float(i), exit_code=1, uptime=1.0).action for i in range(5)]
    assert actions == ["restart", "restart", "restart", "fatal", "fatal"]


def test_restarts_outside_the_window_do_not_count() -> None:
    policy = _policy(max_restarts=2, window=10.0)
    assert policy.on_exit(now=0.0, exit_code=1, uptime=1).action == "restart"
    assert policy.on_exit(now=5.0, exit_code=1, uptime=1).action == "restart"
    assert policy.on_exit(now=16.0, exit_code=1, uptime=1).action == "restart"


def test_a_long_healthy_run_resets_the_delay() -> None:
    policy = _policy(first_delay=1.0, max_delay=60.0, max_restarts=100, reset_after=600.0)
    for i in range(4):
        policy.on_exit(now=float(i), exit_code=1, uptime=1.0)
    assert policy.on_exit(now=5000.0, exit_code=1, uptime=700.0).delay == 1.0


@pytest.mark.parametrize(("mode", "code", "action"), [
    ("on-failure", 0, "stop"), ("on-failure", 1, "restart"), ("on-failure", None, "restart"),
    ("always", 0, "restart"), ("never", 1, "stop"),
])
def test_modes(mode: str, code: int | None, action: str) -> None:
    policy = _policy(mode=mode)
    assert policy.on_exit(now=0.0, exit_code=code, uptime=1.0).action == action


def test_jitter_stays_within_ten_percent() -> None:
    policy = RestartPolicy(first_delay=10.0, max_delay=10.0, max_restarts=1000,
                           rng=random.Random(1))
    delays = [policy.on_exit(now=float(i), exit_code=1, uptime=1).delay for i in range(200)]
    assert all(9.0 <= d <= 11.0 for d in delays)
    assert len(set(delays)) > 100
