from __future__ import annotations

from orchestrator.ids import new_ulid


def test_ulids_are_26_crockford_chars_and_time_ordered() -> None:
    earlier = new_ulid(now_s=1_700_000_000.0)
    later = new_ulid(now_s=1_700_000_001.0)
    assert len(earlier) == 26 and set(earlier) <= set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
    assert earlier < later
    assert len({new_ulid() for _ in range(1000)}) == 1000
