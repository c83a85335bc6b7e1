"""The chat UI's sign-in lockout (issue 61), in the door's real nginx and njs (sparkfleet_sign_in.js).

Open WebUI counts guesses per account, not per address; the door shuts out an address after its failed sign-ins,
whatever it sends next, and forgets them when one succeeds. Each test signs in from a loopback address of its own,
so the fixture's per-address rate limit (a burst, then one a minute) is its own too.
"""

from __future__ import annotations

from typing import Any

from test_door_nginx import LOCKOUT_FAILURES, LOCKOUT_S, WRONG_PASSWORD, door_url, sign_in

__all__ = ["door_url"]


def test_an_address_with_failed_sign_ins_is_shut_out_even_with_the_right_password(door_url: Any) -> None:
    statuses = [sign_in(door_url, "127.0.0.3", WRONG_PASSWORD)[0] for _ in range(LOCKOUT_FAILURES)]
    assert statuses == [400] * LOCKOUT_FAILURES
    status, headers, text = sign_in(door_url, "127.0.0.3", "right")
    assert status == 429 and "Too many failed sign-ins from this address" in text, text
    assert 0 < int(headers["retry-after"]) <= LOCKOUT_S
    # Another address signs in as before.
    assert sign_in(door_url, "127.0.0.4", "right")[0] == 200


def test_a_sign_in_that_succeeds_forgets_the_failures_before_it(door_url: Any) -> None:
    answers = [sign_in(door_url, "127.0.0.5", password)[0] for password in ("wrong", "right", "wrong", "right")]
    assert answers == [400, 200, 400, 200]


def test_the_lockout_is_not_the_rate_limit(door_url: Any) -> None:
    """A 429 of the rate limit carries no Retry-After and no lockout text: the two stay told apart."""
    answers = [sign_in(door_url, "127.0.0.6", "right") for _ in range(8)]
    limited = [a for a in answers if a[0] == 429]
    assert limited and all("retry-after" not in headers for _, headers, _ in limited)
