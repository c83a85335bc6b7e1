"""What the front door lets through: per client key, per instance, per address without a key, on the chat UI's port."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..models import Strict


class DoorLimits(Strict):
    """Per client key (the anonymous_* limits: per address, for requests without a valid key); a request over a
    limit gets 429."""

    requests_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] = 600
    burst: Annotated[int, Field(ge=0, le=100_000)] = 60
    concurrency: Annotated[int, Field(ge=1, le=100_000)] = 32
    # Admission per instance: one key holds at most its instance's max_num_seqs less this many of that instance's
    # requests in flight, so another key's request is scheduled at once however busy the first keeps it; 0 lets one
    # key take every sequence (a host with one tenant).
    reserved_sequences: Annotated[int, Field(ge=0, le=1024)] = 1
    # Requests an instance holds beyond those it runs (vLLM's own first-come queue, bounded here; past it 429 with
    # Retry-After); null: its max_num_seqs, one more batch.
    instance_queue: Annotated[int, Field(ge=0, le=100_000)] | None = None
    # A request refused for its key's share or a full instance is asked to retry after this (a sequence frees in
    # about an answer's time).
    busy_retry_after_s: Annotated[int, Field(ge=1, le=3600)] = 2
    # Requests whose body is larger than any model's text takes (media: audio, video, images), or of a length not
    # given, in flight at once on the host whatever their key; past it, 429. nginx buffers a body whole before the
    # router knows its model, so this, not each key's concurrency, bounds what media bodies hold.
    large_body_concurrency: Annotated[int, Field(ge=1, le=1000)] = 2
    # A cap over every instance's own body limit (its plan's max_request_mib); null: no cap beyond those.
    max_body_mib: Annotated[int, Field(ge=1, le=1024)] | None = None
    # Long generations and streams: the upstream may be silent this long between two bytes.
    read_timeout_s: Annotated[int, Field(ge=10, le=86_400)] = 3600
    # A client must send its TLS handshake and its whole request head within this (nginx's default is 60 s): a
    # connection held open with a partial head costs a worker connection for no request.
    header_timeout_s: Annotated[int, Field(ge=2, le=300)] = 10
    # TCP connections one client address may hold open to each door port, and each port from every address: the host
    # firewall resets the next before TLS (a connection that never sends its head otherwise holds a worker connection
    # for header_timeout_s), and nginx is sized to hold every connection they admit (sparkfleet.hostconfig.doorgate).
    source_connections: Annotated[int, Field(ge=1, le=65_535)] = 256
    port_connections: Annotated[int, Field(ge=16, le=65_535)] = 2048
    # While an instance starts or restarts the door answers 503 and asks clients to retry after this.
    retry_after_s: Annotated[int, Field(ge=1, le=3600)] = 10
    # A request for a stopped on-demand model waits this long for it to start and answer right, then
    # gets 503 with Retry-After (the start goes on; a later request finds it ready).
    on_demand_wait_s: Annotated[int, Field(ge=10, le=3600)] = 600
    # Requests without a valid key (a scan, a guessed key) count per client address: past the burst they get
    # 429. Generous enough for a client that lost its key, tight enough that a flood costs the door little.
    anonymous_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] = 600
    anonymous_burst: Annotated[int, Field(ge=0, le=100_000)] = 300
    anonymous_concurrency: Annotated[int, Field(ge=1, le=100_000)] = 16
    # The chat UI's port takes no key, so it counts every request per client address. A page load fetches
    # about a hundred scripts and styles at once, hence the burst; webui_concurrency counts only requests with
    # a body (not GET or HEAD), since over HTTP/2 each of those scripts is a request in flight.
    webui_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] = 1200
    webui_burst: Annotated[int, Field(ge=0, le=100_000)] = 300
    webui_concurrency: Annotated[int, Field(ge=1, le=100_000)] = 32
    # Sign-in attempts per client address on the chat UI's port: past the burst one every 60/sign_in_per_minute seconds,
    # the rest 429, so guessing a password takes years, not hours.
    sign_in_per_minute: Annotated[int, Field(ge=1, le=10_000)] = 6
    sign_in_burst: Annotated[int, Field(ge=0, le=1_000)] = 5
    # The lockout (Open WebUI counts guesses per account, not per address): an address with this many failed sign-ins
    # within sign_in_lockout_s is refused (429, Retry-After) until the oldest of them is that old; a success forgets them.
    sign_in_lockout_failures: Annotated[int, Field(ge=1, le=1_000)] = 10
    sign_in_lockout_s: Annotated[int, Field(ge=10, le=86_400)] = 900


def admission(max_num_seqs: int, limits: DoorLimits) -> dict[str, int]:
    """What an instance admits in flight, and one key of it: its queue bounded, a sequence left for another key."""
    queue = max_num_seqs if limits.instance_queue is None else limits.instance_queue
    return {
        "max_num_seqs": max_num_seqs,
        "in_flight": max_num_seqs + queue,
        "key_in_flight": max(1, max_num_seqs - limits.reserved_sequences),
    }
