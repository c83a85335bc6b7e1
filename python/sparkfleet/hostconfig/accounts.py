"""Which existing accounts a host may not give sparkfleet's services: a login account, or root. Pure.

In: the accounts host_facts read (name to uid and shell, or none where the account does not exist) and the names the
roles would use. Out: the refusal, one message naming the variable and what to do, or none. host_prep would otherwise
turn a person's account into the service user's, the door's, the supervisors' or an instance's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Shells that let nobody log in.
NO_LOGIN = ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false")


def _can_log_in(found: Mapping[str, Any]) -> bool:
    return int(found.get("uid", -1)) == 0 or found.get("shell") not in NO_LOGIN


def account_refusal(users: Mapping[str, Mapping[str, Any] | None], names: Mapping[str, str], host: str) -> str | None:
    """The refusal for the accounts on `host`, or None. `names`: the service user (`service`), the door's (`door`),
    the supervisors' (`supervisor`), the stager's (`stager`, optional) and the instances' prefix (`instance_prefix`)."""
    service = names["service"]
    own = [
        names["door"],
        names["supervisor"],
        *([names["stager"]] if "stager" in names else []),
        *(n for n in users if n.startswith(names["instance_prefix"])),
    ]
    taken = []
    for name in own:
        found = users.get(name)
        if name in (service, "root") or (found is not None and _can_log_in(found)):
            taken.append(f"{name} (uid {found['uid']}, shell {found['shell']})" if found else f"{name} (the service user)")
    if taken:
        return (
            f"{', '.join(taken)} on {host}: the front door's, the supervisors', the stager's and the instances' "
            f"accounts (sparkfleet_door_user, sparkfleet_supervisor_user, sparkfleet_stager_user, "
            f"{names['instance_prefix']}<instance>) must be system accounts of their own; remove or rename that account"
        )
    entry = users.get(service)
    if entry is not None and _can_log_in(entry):
        return (
            f"sparkfleet_user: {service} exists on {host} with uid {entry.get('uid', '?')} and shell "
            f"{entry.get('shell', '?')}: a login account would run model code; name a new one (host_prep creates it "
            "with no login shell)"
        )
    return None
