#!/usr/bin/env python3
"""Run every rule and dashboard expression through a live Prometheus' HTTP API.

Each must parse and evaluate; each whose metrics exist must return series. A series is expected
exactly when every raw metric the expression reads (recording rules expanded to what they read) is
known to Prometheus, so a misspelt metric shows up as "absent" and the caller checks that list.
Prints one JSON report; exits 1 on a failure.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.parse
import urllib.request
from typing import Any

METRIC = re.compile(
    r"(?<![\w:])(vllm:[a-z_]+|sparkfleet:[a-z0-9_:]+|sparkfleet_(?:plan|gpu|benchmark)_[a-z_]+|node_[A-Za-z_]+|up)(?![\w:(])"
)
GRAFANA_VARIABLES = {"$host": ".*", "$instance": ".*"}


def api(base: str, path: str, **params: str) -> Any:
    url = f"{base}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            body = json.load(reply)
    except urllib.error.HTTPError as exc:  # a bad query answers 400 with Prometheus' error
        body = json.load(exc)
    if body.get("status") != "success":
        raise ValueError(body.get("error", body))
    return body["data"]


def raw_metrics(expr: str, recorded: dict[str, str], seen: frozenset[str] = frozenset()) -> set[str]:
    names: set[str] = set()
    for name in METRIC.findall(expr):
        if name in recorded and name not in seen:
            names |= raw_metrics(recorded[name], recorded, seen | {name})
        else:
            names.add(name)
    return names


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="http://127.0.0.1:9090")
    parser.add_argument("--dashboard", required=True)
    parser.add_argument("--queries", required=True, help="the monitoring filter's queries: each alert's signal")
    parser.add_argument("--settle", type=float, default=90, help="seconds to wait for series to appear")
    args = parser.parse_args()

    groups = api(args.url, "rules")["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    recorded = {r["name"]: r["query"] for r in rules if r["type"] == "recording"}
    with open(args.dashboard, encoding="utf-8") as handle:
        dashboard = json.load(handle)

    checks: list[dict[str, Any]] = []
    for rule in rules:
        checks.append(
            {
                "source": f"{rule['type']} rule {rule['name']}",
                "expr": rule["query"],
                "alert": rule["type"] == "alerting",
                "health": rule["health"],
                "error": rule.get("lastError"),
            }
        )
    with open(args.queries, encoding="utf-8") as handle:
        signals = [q for q in json.load(handle) if q["kind"] == "signal"]
    loaded_alerts = {r["name"] for r in rules if r["type"] == "alerting"}
    for signal in signals:
        if signal["name"] not in loaded_alerts:
            checks.append(
                {
                    "source": f"alert {signal['name']}",
                    "expr": signal["expr"],
                    "alert": False,
                    "health": "missing",
                    "error": "the rule is not loaded",
                }
            )
        checks.append({"source": f"signal of {signal['name']}", "expr": signal["expr"], "alert": False})
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            checks.append({"source": f"panel {panel['title']!r} {target['refId']}", "expr": expr, "alert": False})

    known = set(api(args.url, "label/__name__/values"))
    deadline = time.monotonic() + args.settle
    failures: list[str] = []
    absent: list[str] = []
    for check in checks:
        if check.get("health", "ok") != "ok":
            failures.append(f"{check['source']}: Prometheus reports {check['health']}: {check['error']}")
            continue
        missing = sorted(raw_metrics(check["expr"], recorded) - known)
        while True:
            try:
                result = api(args.url, "query", query=check["expr"])["result"]
            except ValueError as exc:
                failures.append(f"{check['source']}: {exc}")
                break
            check["series"] = len(result)
            if missing:
                absent.append(f"{check['source']} (no {', '.join(missing)})")
                break
            if result or check["alert"] or time.monotonic() > deadline:
                if not result and not check["alert"]:
                    failures.append(f"{check['source']}: no series although its metrics exist: {check['expr']}")
                break
            time.sleep(2)
    print(
        json.dumps(
            {
                "checked": len(checks),
                "rules": len(rules),
                "panels": len(dashboard["panels"]),
                "absent": absent,
                "failures": failures,
            },
            indent=2,
        )
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
