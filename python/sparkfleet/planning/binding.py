"""Where an instance listens: vLLM's whole app answers on its bind address, so only loopback is planned unless the
user says the network is trusted. Pure."""

from __future__ import annotations

from ..errors import PlanError
from ..models import Intent


def refuse_open_bind(intent: Intent) -> None:
    if not intent.binds_loopback_only and not intent.allow_unauthenticated_bind:
        raise PlanError(
            "intent.host",
            f"binding {intent.host} exposes vLLM's whole app: its --api-key guards only the /v1 routes "
            "(/invocations, /tokenize, /metrics answer without it)",
            (
                "host 127.0.0.1 with the front_door role in front (TLS, a key on every path)",
                "allow_unauthenticated_bind true on a network you trust entirely",
            ),
        )
