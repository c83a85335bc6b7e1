"""The accounts sparkfleet refuses to take over (sparkfleet.hostconfig.accounts), as the sparkfleet role's check."""

from __future__ import annotations

from refusal_cases import ROLE_CASES

from sparkfleet.hostconfig.accounts import account_refusal

NAMES = {"service": "sparkfleet", "door": "sparkfleet-door", "supervisor": "sparkfleet-supervisor",
         "stager": "sparkfleet-stager", "instance_prefix": "sparkfleet-vllm-"}  # fmt: skip
SYSTEM = {"uid": 997, "shell": "/usr/sbin/nologin"}


def test_system_accounts_and_missing_ones_pass() -> None:
    users = {"sparkfleet": SYSTEM, "sparkfleet-door": None, "sparkfleet-supervisor": SYSTEM, "sparkfleet-vllm-tiny": SYSTEM}
    assert account_refusal(users, NAMES, "spark01") is None


def test_a_login_account_as_the_service_user_is_refused_as_the_docs_say() -> None:
    refusal = account_refusal({"alice": {"uid": 1000, "shell": "/bin/bash"}}, {**NAMES, "service": "alice"}, "spark01")
    documented = next(m for what, _, m in ROLE_CASES if what == "an existing login account as the service user")
    assert refusal == f"sparkfleet_user: {documented}"


def test_the_door_supervisor_and_instance_accounts_are_held_to_the_same() -> None:
    users = {
        "sparkfleet": SYSTEM,
        "sparkfleet-door": {"uid": 1001, "shell": "/bin/bash"},
        "sparkfleet-supervisor": {"uid": 0, "shell": "/usr/sbin/nologin"},
        "sparkfleet-stager": {"uid": 1003, "shell": "/bin/sh"},
        "sparkfleet-vllm-chat": {"uid": 1002, "shell": "/bin/zsh"},
        "sparkfleet-vllm-ok": SYSTEM,
    }
    refusal = account_refusal(users, NAMES, "spark01")
    assert refusal is not None and refusal.startswith(
        "sparkfleet-door (uid 1001, shell /bin/bash), sparkfleet-supervisor (uid 0, shell /usr/sbin/nologin), "
        "sparkfleet-stager (uid 1003, shell /bin/sh), sparkfleet-vllm-chat (uid 1002, shell /bin/zsh) on spark01"
    )
    assert "sparkfleet-vllm-<instance>" in refusal and "sparkfleet-vllm-ok" not in refusal


def test_the_door_may_not_be_the_service_user_or_root() -> None:
    same = account_refusal({"sparkfleet": SYSTEM}, {**NAMES, "door": "sparkfleet"}, "h")
    assert same is not None and same.startswith("sparkfleet (uid 997, shell /usr/sbin/nologin) on h")
    root = account_refusal({}, {**NAMES, "supervisor": "root"}, "h")
    assert root is not None and root.startswith("root (the service user) on h")
