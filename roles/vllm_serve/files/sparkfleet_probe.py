"""Probe a sparkfleet vLLM instance with a real inference request.

ready     wait until /health answers AND the plan's known-answer check passes: a real request through
          the path clients take, whose reply must hold the expected answer and be no garbage (a
          server whose /health answers while its first request still compiles, hangs or answers
          wrong is not ready); stop early when the unit fails or answers wrong; print one JSON line
          with the timings since the unit's last start.
bench     run `vllm bench serve` (the arguments after --) with the instance's API key in
          OPENAI_API_KEY, read from its environment file (--env-file) or, in the benchmark's transient
          unit whose EnvironmentFile systemd read, from VLLM_API_KEY: never from a command line. For an
          instance on a Unix socket (--url http+unix://...), vLLM's bench speaks TCP only: the probe
          relays a loopback port of the unit's own network namespace to the socket and puts that
          port's URL where the command says {relay}. With --prefix-cache-into RESULT, the run's prefix cache
          queries, hits and hit rate (vLLM's own counters before and after) are added to that result file.
long-reply a long greedy reply with its decode logprobs and the same tokens rescored by one prefill
          (prompt_logprobs), printed as one JSON line for sparkfleet.doctor.longreply to judge.
watchdog  one check for the instance's watchdog timer: the known-answer check with a deadline. It stands
          down while the instance has not been ready since its last start and is within its start budget
          (the plan's, first-start compiles included), counts consecutive failures in a state file, and
          restarts the unit after N of them, saying why; a start that overran its budget is reported with
          the phase it stopped in (loading, compiling, capturing, warming up: its journal says). Busy is
          not wedged: a check that found no answer within its deadline while vLLM's own counters (tokens
          read and generated, engine steps, requests finished) moved is not a failure; a wrong answer is one
          whatever the load, and so is no answer while the counters stand still.
ready and watchdog record a start when the instance first answers right after it (sparkfleet_start.py: the
          milestones and kernels compiled, read from the journal; --textfile-dir for node_exporter).
rank      one check for a headless rank of a native multi-node instance (the group watchdog on a member):
          when rank 0 at the plan's --master-addr/--master-port has closed this rank's connection to its
          rendezvous store (CLOSE-WAIT: rank 0 restarted or stopped), the group this rank joined is gone and
          vLLM's headless rank would wait in it forever; restart the rank so it joins rank 0's next group.
The API key is read from the instance's environment file (root and the supervisors' group, 0640), never from argv.
--url is http://HOST:PORT, or http+unix://SOCKET (the socket's path percent-encoded) for an instance
that serves on a Unix socket behind the door.
"""

from __future__ import annotations

import argparse
import http.client
import io
import ipaddress
import json
import math
import os
import pwd
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from typing import Any, NoReturn

UNIX_SCHEME = "http+unix://"


def unit_state(unit: str) -> tuple[str, float, bool]:
    """(ActiveState, seconds since its last activation, whether a job such as a restart is queued)."""
    out = subprocess.run(
        ["systemctl", "show", unit, "-p", "ActiveState", "-p", "ActiveEnterTimestampMonotonic", "-p", "Job"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    since = int(values.get("ActiveEnterTimestampMonotonic") or 0) / 1e6
    return values.get("ActiveState", "unknown"), since, bool(values.get("Job", "").strip())


def api_key(env_file: str) -> str | None:
    try:
        with open(env_file, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("VLLM_API_KEY="):
                    value = line.split("=", 1)[1].strip()
                    if len(value) >= 2 and value[0] == value[-1] == '"':
                        value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
                    return value
    except FileNotFoundError:
        pass
    return None


class UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket: the only way into an instance behind the door."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def split_unix_url(url: str) -> tuple[str, str]:
    """(socket path, request path) of an http+unix:// URL."""
    parts = url[len(UNIX_SCHEME) :].partition("/")
    return urllib.parse.unquote(parts[0]), "/" + parts[2]


def request_unix(url: str, data: bytes | None, headers: dict[str, str], timeout: float) -> tuple[int, str]:
    path, target = split_unix_url(url)
    conn = UnixConnection(path, timeout)
    try:
        conn.request("POST" if data else "GET", target, body=data, headers=headers)
        resp = conn.getresponse()
        payload = resp.read()
    except (FileNotFoundError, ConnectionRefusedError, PermissionError) as exc:
        # As urllib reports a refused TCP connection: the instance is not (yet) there.
        raise urllib.error.URLError(exc) from exc
    finally:
        conn.close()
    if resp.status >= 400:
        raise urllib.error.HTTPError(url, resp.status, resp.reason, resp.headers, io.BytesIO(payload))
    return resp.status, payload.decode("utf-8", "replace")


def request(url: str, body: Any = None, key: str | None = None, timeout: float = 10.0) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if url.startswith(UNIX_SCHEME):
        return request_unix(url, data, headers, timeout)
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET", headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read().decode("utf-8", "replace")


def pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:  # noqa: SIM105 - left as written: typing only, no rewrite
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def relay(socket_path: str) -> tuple[socket.socket, int]:
    """A loopback TCP port whose connections go on to the Unix socket; returns (server socket, port)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(256)

    def accept() -> None:
        while True:
            try:
                client = server.accept()[0]
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(socket_path)
            except OSError:
                client.close()
                upstream.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return server, server.getsockname()[1]


def bench(url: str | None, command: list[str], env: dict[str, str], cache_into: str | None) -> NoReturn:
    """Run the bench command; with cache_into, add to that result file the prefix cache's queries and hits over the run,
    read from the instance's own counters before and after (a throughput figure without its hit rate misleads)."""
    before = read_prefix_cache(url) if url and cache_into else None
    if not url or not url.startswith(UNIX_SCHEME):
        done = subprocess.run(command, env=env, check=False)
    else:
        server, port = relay(split_unix_url(url)[0])
        try:
            done = subprocess.run(
                [word.replace("{relay}", f"http://127.0.0.1:{port}") for word in command], env=env, check=False
            )
        finally:
            server.close()
    if cache_into and done.returncode == 0:
        after = read_prefix_cache(url) if url else None
        add_prefix_cache(cache_into, before, after)
    sys.exit(done.returncode)


# The prefix cache's counters (vllm/v1/metrics/loggers.py), in tokens: looked up and found cached. Other requests served
# during a run (a watchdog's check) count too: a few dozen tokens against a benchmark's thousands.
PREFIX_CACHE_COUNTERS = {"vllm:prefix_cache_queries_total": "queries", "vllm:prefix_cache_hits_total": "hits"}


def read_prefix_cache(url: str | None) -> dict[str, float] | None:
    if not url:
        return None
    try:
        counters = engine_counters(request(f"{url}/metrics", timeout=10.0)[1], PREFIX_CACHE_COUNTERS.keys())
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError, OSError):
        return None
    return {word: counters[name] for name, word in PREFIX_CACHE_COUNTERS.items() if name in counters} or None


def add_prefix_cache(path: str, before: dict[str, float] | None, after: dict[str, float] | None) -> None:
    """The run's prefix cache figures into its result: tokens queried and hit, and the hit rate (None: not measured)."""
    with open(path, encoding="utf-8") as handle:
        result = json.load(handle)
    if before is None or after is None:
        result["prefix_cache"] = {"queries": None, "hits": None, "hit_rate": None,
                                  "why": "the instance's /metrics did not give its prefix cache counters"}  # fmt: skip
    else:
        queries = after.get("queries", 0.0) - before.get("queries", 0.0)
        hits = after.get("hits", 0.0) - before.get("hits", 0.0)
        why = None if queries > 0 else "no prefix cache lookups (prefix caching off)"
        result["prefix_cache"] = {"queries": queries, "hits": hits, "hit_rate": hits / queries if queries > 0 else None,
                                  "why": why}  # fmt: skip
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(tmp, path)


class WrongAnswer(ValueError):  # noqa: N818 - tests catch it by this name
    """The server answered, and the answer is wrong or garbage: no amount of waiting fixes that."""


def garbage(text: str) -> str | None:
    """Why a reply is garbage whatever the question was, or None."""
    stripped = text.strip()
    if not stripped:
        return "empty text"
    if "\ufffd" in text:
        return "replacement characters (U+FFFD): tokens that decode to no text"
    if any((ord(c) < 32 and c not in "\n\r\t") or 0x7F <= ord(c) < 0xA0 for c in text):
        return "control characters"
    compact = "".join(stripped.split())
    if len(compact) >= 4 and re.fullmatch(r"(.{1,8}?)\1{3,}", compact, re.S):
        return f"one unit repeated ({compact[:8]!r}...)"
    words = stripped.split()
    if len(words) >= 6:
        top = max(words.count(word) for word in set(words))
        if top / len(words) >= 0.6:
            return f"one token repeated in {top} of {len(words)} words"
    return None


def contains_answer(text: str, expect: str) -> bool:
    """The expected answer not inside a longer word or number (so '204' is not in '2040'), any case."""
    return re.search(rf"(?<![^\W_]){re.escape(expect.casefold())}(?![^\W_])", text.casefold()) is not None


def nan_logprobs(choice: dict[str, Any]) -> int:
    content = (choice.get("logprobs") or {}).get("content") or []
    return sum(1 for entry in content if isinstance(entry.get("logprob"), float) and math.isnan(entry["logprob"]))


def judge_embedding(reply: dict[str, Any]) -> str:
    data = reply.get("data") or []
    vector = data[0].get("embedding") if data else None
    if not isinstance(vector, list) or not vector:
        raise WrongAnswer("no embedding in the reply")
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in vector):
        raise WrongAnswer("the embedding holds NaN or infinite values")
    if not any(vector):
        raise WrongAnswer("the embedding is all zeros")
    return f"embedding of {len(vector)} values"


def judge_chat(reply: dict[str, Any], expect: str | None) -> str:
    """The reply's text (reasoning and content) when it is right; raises WrongAnswer otherwise."""
    choice = reply["choices"][0]
    message = choice.get("message") or {}
    content: str = message.get("content") or ""
    thought: str = message.get("reasoning_content") or message.get("reasoning") or ""
    nans = nan_logprobs(choice)
    if nans:
        raise WrongAnswer(f"{nans} NaN log-probabilities in the reply {content[:80]!r}")
    bad = garbage(content) if content.strip() or not thought else garbage(thought)
    if bad:
        raise WrongAnswer(f"garbage reply ({bad}): {(content or thought)[:80]!r}")
    if expect is not None and not contains_answer(f"{thought}\n{content}", expect):
        raise WrongAnswer(f"wrong answer {(content or thought)[:80]!r}, expected {expect!r}")
    return content or thought


def infer(args: argparse.Namespace, check: dict[str, Any], key: str | None, timeout: float) -> str:
    """The known-answer check through the path clients use: the reply text, or an exception saying why not."""
    status, text = request(f"{args.url}{check['path']}", check["body"], key, timeout=timeout)
    reply = json.loads(text)
    if status != 200:
        raise ValueError(f"unexpected answer ({status}): {text[:200]}")
    if check["path"] == "/v1/embeddings":
        return judge_embedding(reply)
    if not reply.get("choices"):
        raise WrongAnswer(f"a reply with no choices: {text[:200]}")
    return judge_chat(reply, check.get("expect"))


def journal(unit: str, lines: int = 30) -> str:
    return subprocess.run(
        ["journalctl", "-u", unit, "-n", str(lines), "--no-pager", "-o", "cat"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout


def fail(unit: str, reason: str) -> NoReturn:
    print(json.dumps({"unit": unit, "ready": False, "reason": reason, "journal": journal(unit)}))
    sys.exit(1)


def start_log() -> Any:
    """sparkfleet_start.py beside this file (the journal's reading of a start)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sparkfleet_start  # a sibling script, found only once its directory is on the path

    return sparkfleet_start


def record_start(args: argparse.Namespace, since: float, answered: float) -> None:
    """Record the start's milestones (once per start), beside the watchdog's state where it keeps one; nothing about
    the record (the journal, the directories) ever fails the probe."""
    state = getattr(args, "state", None)
    try:
        start_log().record_start(
            args.unit,
            since,
            answered - since,
            budget_s=getattr(args, "budget", None),
            textfile_dir=getattr(args, "textfile_dir", None),
            **({"state_dir": os.path.dirname(state)} if state else {}),
        )
    except Exception as exc:  # the record is a report: the probe's verdict stands without it
        print(f"{args.unit}: start not recorded ({type(exc).__name__}: {exc})", file=sys.stderr)


def ready_wait(args: argparse.Namespace) -> tuple[float, str]:
    """How long readiness waits, and why: the plan's start budget where it is longer than the timeout given (issue 64:
    1,200 s failed starts of 1,390-2,046 s that the unit and the watchdog already allowed, and an upgrade rolled a
    healthy start back)."""
    budget = float(getattr(args, "budget", None) or 0)
    if budget > args.timeout:
        return budget, f"the plan's start budget, {budget:.0f} s, above vllm_serve_ready_timeout ({args.timeout:.0f} s)"
    return float(args.timeout), f"vllm_serve_ready_timeout, {args.timeout:.0f} s"


def ready(args: argparse.Namespace, check: dict[str, Any], key: str | None) -> None:
    began = time.monotonic()
    wait_s, wait_why = ready_wait(args)
    deadline = began + wait_s
    health_at = None
    while time.monotonic() < deadline:
        state, since, job_queued = unit_state(args.unit)
        # A restart passes through failed or inactive on its way back (a stop that timed out ends
        # "failed"); only a unit with no job left to run it is down for good.
        if state in ("failed", "inactive") and not job_queued:
            fail(args.unit, f"the unit is {state}")
        try:
            if health_at is None and request(f"{args.url}/health", timeout=5)[0] == 200:
                health_at = time.monotonic()
            if health_at is not None:
                reply = infer(args, check, key, max(deadline - time.monotonic(), 1))
                now = time.monotonic()
                result = {
                    "unit": args.unit,
                    "ready": True,
                    "health_s": round(health_at - since, 1) if since else None,
                    "ready_s": round(now - since, 1) if since else None,
                    "first_inference_s": round(now - health_at, 2),
                    "waited_s": round(now - began, 1),
                    "wait_s": wait_s,
                    "wait_why": wait_why,
                    "reply": reply,
                    "expect": check.get("expect"),
                }
                print(json.dumps(result))
                if since:
                    record_start(args, since, now)
                return
        except WrongAnswer as exc:
            fail(args.unit, f"{exc}. {check.get('reason', '')}")
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                fail(args.unit, f"the warm-up request was refused ({exc.code}): the key in {args.env_file} does not match")
            if exc.code == 400:
                fail(args.unit, f"the warm-up request was rejected (400): {exc.read().decode('utf-8', 'replace')[:500]}")
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            pass
        time.sleep(2)
    fail(args.unit, f"not ready after {wait_s:.0f} s, {wait_why} (health {'answered' if health_at else 'never answered'})")


# vLLM's own progress counters (vllm/v1/metrics/loggers.py): prompt tokens read, tokens generated, engine steps (the
# count of its per-step histogram) and requests finished. A request finished as aborted or failed is not progress: the
# watchdog's own timed-out check is aborted.
PROGRESS_COUNTERS = {
    "vllm:prompt_tokens_total": "prompt tokens read",
    "vllm:generation_tokens_total": "tokens generated",
    "vllm:iteration_tokens_total_count": "engine steps",
    "vllm:request_success_total": "requests finished",
}
WORK_GAUGES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting"}
NOT_PROGRESS = re.compile(r'finished_reason="(abort|error)"')
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def engine_counters(exposition: str, wanted: Iterable[str] = ()) -> dict[str, float]:
    """vLLM's progress counters and work gauges (or the names wanted) from its /metrics text, each summed over its
    label sets."""
    names = set(wanted) or set(PROGRESS_COUNTERS) | set(WORK_GAUGES)
    totals: dict[str, float] = {}
    for line in exposition.splitlines():
        match = SAMPLE.match(line)
        if not match or match[1] not in names or NOT_PROGRESS.search(match[2] or ""):
            continue
        try:
            value = float(match[3])
        except ValueError:
            continue
        if math.isfinite(value):
            totals[match[1]] = totals.get(match[1], 0.0) + value
    return totals


def read_counters(url: str, timeout: float = 5.0) -> dict[str, float] | None:
    """The instance's counters now, or None when its /metrics does not answer with any (a wedged API server)."""
    try:
        counters = engine_counters(request(f"{url}/metrics", timeout=timeout)[1])
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError, OSError):
        return None
    return counters if any(name in counters for name in PROGRESS_COUNTERS) else None


def progress(before: dict[str, float], after: dict[str, float]) -> str | None:
    """What the engine did between two readings, in words, or None when no counter moved."""
    moved = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in PROGRESS_COUNTERS}
    if not any(delta > 0 for delta in moved.values()):
        return None
    done = ", ".join(f"{delta:.0f} {PROGRESS_COUNTERS[name]}" for name, delta in moved.items() if delta > 0)
    load = ", ".join(f"{after.get(name, 0.0):.0f} {word}" for name, word in WORK_GAUGES.items())
    return f"{done} ({load})"


def load_state(path: str, since: float) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            state: dict[str, Any] = json.load(handle)
    except (FileNotFoundError, ValueError):
        state = {}
    if state.get("since") != since:  # a new start of the unit: forget the old one
        state = {"since": since, "ready_seen": False, "failures": 0}
    return state


def save_state(path: str, state: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(state, handle)
    os.replace(tmp, path)


def watchdog(args: argparse.Namespace, check: dict[str, Any], key: str | None) -> None:
    active, since = unit_state(args.unit)[:2]
    if active != "active":
        print(f"{args.unit} is {active}: standing down")
        return
    state = load_state(args.state, since)
    age = time.monotonic() - since
    before = read_counters(args.url)
    try:
        infer(args, check, key, args.deadline)
        if not state["ready_seen"]:
            print(f"{args.unit} answered {age:.0f} s after its start: watching it from now on")
            record_start(args, since, time.monotonic())
        state.update(ready_seen=True, failures=0)
        save_state(args.state, state)
        return
    except WrongAnswer as exc:
        reason = f"{type(exc).__name__}: {exc}"
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError, OSError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
        after = read_counters(args.url) if before is not None else None
        did = progress(before, after) if before is not None and after is not None else None
        if did:
            state.update(failures=0, busy_checks=state.get("busy_checks", 0) + 1)
            save_state(args.state, state)
            print(
                f"{args.unit}: busy, not wedged: no answer within {args.deadline:.0f} s ({reason}), while the engine "
                f"made progress: {did}; the check is not counted"
            )
            return
        if before is not None:
            reason += " and no progress in vLLM's counters" if after is not None else " and /metrics stopped answering"
    if not state["ready_seen"] and age < args.start_grace:
        print(f"{args.unit} still starting ({age:.0f} s of {args.start_grace:.0f} s): standing down ({reason})")
        save_state(args.state, state)
        return
    if not state["ready_seen"] and not state.get("overrun"):
        phase, sign = start_log().phase_of(start_log().journal_since(args.unit, since))
        state["overrun"] = phase
        print(
            f"{args.unit} overran its start budget of {args.start_grace:.0f} s without a right answer: it stopped in "
            f"phase {phase}" + (f" (its last sign: {sign})" if sign else "")
        )
    state["failures"] += 1
    print(
        f"{args.unit}: inference check failed ({state['failures']}/{args.failures}) within {args.deadline:.0f} s: {reason}"
    )
    if state["failures"] >= args.failures:
        print(f"{args.unit}: restarting after {state['failures']} consecutive failed inference checks (last: {reason})")
        state.update(failures=0, ready_seen=False)
        save_state(args.state, state)
        subprocess.run(["systemctl", "restart", "--no-block", args.unit], check=True)
        return
    save_state(args.state, state)


CLOSE_WAIT = "08"  # include/net/tcp_states.h


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address of /proc/net/tcp{,6}: IPv4 as one little-endian word, IPv6 as four."""
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return ipaddress.ip_address(raw[::-1])
    address = ipaddress.IPv6Address(b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))
    return address.ipv4_mapped or address


def closed_by_peer(
    master: str, port: int, uid: int | None = None, tables: Iterable[str] = ("/proc/net/tcp", "/proc/net/tcp6")
) -> int:
    """How many connections to master:port its peer has closed while this side still holds them.

    uid: count only the sockets of that user (the rank's service user): another local account's own
    half-closed connection to the same store must not make the watchdog restart the rank.
    """
    wanted = ipaddress.ip_address(master)
    count = 0
    for table in tables:
        try:
            with open(table, encoding="ascii") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 8 or fields[3] != CLOSE_WAIT:
                continue
            if uid is not None and int(fields[7]) != uid:
                continue
            remote, remote_port = fields[2].rsplit(":", 1)
            if int(remote_port, 16) == port and _address(remote) == wanted:
                count += 1
    return count


def plan_argument(plan: dict[str, Any], flag: str) -> str | None:
    """The first value of one of the plan's flags (sparkfleet.models.planned_flag), or None."""
    values = next((f.get("values", []) for f in plan.get("flags", []) if f.get("name") == flag), None)
    return str(values[0]) if values else None


def rank(args: argparse.Namespace) -> None:
    with open(args.plan, encoding="utf-8") as handle:
        plan = json.load(handle)
    master, port = plan_argument(plan, "--master-addr"), plan_argument(plan, "--master-port")
    if not master or not port:
        print(f"{args.plan} has no --master-addr/--master-port: not a rank of a multi-node instance")
        sys.exit(2)
    active, _since, job_queued = unit_state(args.unit)
    if active != "active" or job_queued:
        return
    closed = closed_by_peer(master, int(port), pwd.getpwnam(args.service_user).pw_uid)
    if closed:
        print(
            f"{args.unit}: rank 0 at {master}:{port} closed {closed} of this rank's connections to the group's store: "
            "the group is gone; restarting this rank so it joins the next one"
        )
        subprocess.run(["systemctl", "restart", "--no-block", args.unit], check=True)


LONG_REPLY_PROMPT = "Write a long story about a lighthouse keeper who counts ships, one paragraph per ship."


def long_reply(args: argparse.Namespace, plan: dict[str, Any], key: str | None) -> None:
    """The long-reply check's two requests (sparkfleet.doctor.longreply judges them on the controller): a greedy reply of
    --max-tokens with each token's decode logprob, then the same ids rescored by one prefill (vLLM's prompt_logprobs).
    Prints one JSON line: the reply's tokens and logprobs and the prefill's logprobs at the reply's positions."""
    if plan.get("runner") == "pooling":
        print(json.dumps({"skipped": "a pooling instance generates no reply"}))
        return
    model, url = plan["served_name"], f"{args.url}/v1/completions"
    body = {"model": model, "prompt": LONG_REPLY_PROMPT, "max_tokens": args.max_tokens, "temperature": 0, "logprobs": 1,
            "echo": True, "return_tokens_as_token_ids": True, "ignore_eos": True}  # fmt: skip
    decoded = json.loads(request(url, body, key, timeout=args.timeout)[1])
    choice, generated = decoded["choices"][0], int(decoded["usage"]["completion_tokens"])
    tokens = choice["logprobs"]["tokens"]
    ids = [int(str(t).rsplit(":", 1)[1]) for t in tokens]
    prompt_len = len(ids) - generated
    rescore = {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 1}
    rescored = json.loads(request(url, rescore, key, timeout=args.timeout)[1])["choices"][0]["prompt_logprobs"]
    print(json.dumps({
        "prompt_tokens": prompt_len,
        "reply": {"tokens": tokens[prompt_len:], "token_logprobs": choice["logprobs"]["token_logprobs"][prompt_len:]},
        "prompt_logprobs": rescored[prompt_len:],
    }))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["ready", "watchdog", "bench", "rank", "long-reply"])
    parser.add_argument("--unit")
    parser.add_argument("--url", help="base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--plan", help="the instance's plan.json (holds the warm-up request)")
    parser.add_argument("--env-file", help="the instance's env file (VLLM_API_KEY); bench reads the environment without it")
    parser.add_argument("--timeout", type=float, default=1200, help="ready: seconds to wait")
    parser.add_argument("--state", help="watchdog: state file")
    parser.add_argument("--service-user", help="rank: the user the rank runs as (only its sockets count)")
    parser.add_argument("--max-tokens", type=int, default=512, help="long-reply: the reply's length in tokens")
    parser.add_argument("--deadline", type=float, default=30, help="watchdog: seconds one inference may take")
    parser.add_argument("--failures", type=int, default=3, help="watchdog: consecutive failures before a restart")
    parser.add_argument("--start-grace", type=float, default=900, help="watchdog: seconds a new start may take")
    parser.add_argument("--prefix-cache-into", help="bench: the result file to add the run's prefix cache hits to")
    parser.add_argument("--textfile-dir", help="ready, watchdog: node_exporter's textfile directory for the start's metrics")
    argv = sys.argv[1:]
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.mode == "bench":
        if not command:
            parser.error("bench needs the vllm bench serve command after --")
        # In the benchmark's transient unit systemd has read the env file: the key is in VLLM_API_KEY.
        env = dict(os.environ)
        key = api_key(args.env_file) if args.env_file else env.pop("VLLM_API_KEY", None)
        if key:
            env["OPENAI_API_KEY"] = key
        bench(args.url, command, env, args.prefix_cache_into)
    if args.mode == "rank":
        if not (args.unit and args.plan and args.service_user):
            parser.error("rank needs --unit, --plan and --service-user")
        rank(args)
        return
    if args.mode == "long-reply":
        if not (args.url and args.plan and args.env_file):
            parser.error("long-reply needs --url, --plan and --env-file")
        with open(args.plan, encoding="utf-8") as handle:
            long_reply(args, json.load(handle), api_key(args.env_file))
        return
    if not (args.unit and args.url and args.plan and args.env_file):
        parser.error(f"{args.mode} needs --unit, --url, --plan and --env-file")
    with open(args.plan, encoding="utf-8") as handle:
        plan = json.load(handle)
    check = plan["answer_check"]
    args.budget = plan.get("start_budget_s")
    key = api_key(args.env_file)
    if args.mode == "ready":
        ready(args, check, key)
    else:
        if not args.state:
            parser.error("watchdog needs --state")
        watchdog(args, check, key)


if __name__ == "__main__":
    main()
