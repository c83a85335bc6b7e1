"""Human-readable renderings of a ServePlan."""

from __future__ import annotations

import shlex

from .models import GIB, ServePlan
from .models.speed import Band


def _bar(value: float, total: float, width: int = 40) -> str:
    filled = round(width * value / total) if total else 0
    return "#" * max(0, min(width, filled))


def render_report(plan: ServePlan) -> str:
    m = plan.memory
    lines = [
        f"sparkfleet plan: {plan.model}  ({plan.platform.value}, vLLM {plan.vllm_version}, {plan.mode})",
        "",
        f"  context {plan.max_model_len:,} tokens x {plan.max_num_seqs} sequences, KV dtype {plan.kv_cache_dtype}, "
        f"block {plan.block_size}",
        f"  KV cache {m.kv:.2f} GiB = {plan.kv_tokens:,} tokens as vLLM reports them, "
        f"{plan.max_concurrency_at_context:.2f} requests at full context",
        f"  --gpu-memory-utilization {plan.gpu_memory_utilization:.2f}   "
        f"--kv-cache-memory-bytes {plan.kv_cache_memory_bytes:,}",
        f"  needs {plan.required_available_bytes / GIB:.1f} GiB MemAvailable at start; "
        f"MemoryMax={plan.systemd.memory_max} MemorySwapMax={plan.systemd.memory_swap_max} (host-side RAM only: "
        "on GB10 cgroups do not see GPU allocations, the host memory guard keeps MemAvailable's floor)",
        f"  starts within {plan.start_budget_s} s (the watchdog waits it out; the unit's start timeout is at least this)",
        *(
            [f"  clients: give each request max_tokens {plan.min_max_tokens:,} or more (a reasoning trace spends it first)"]
            if plan.min_max_tokens
            else []
        ),
        f"  loads the checkpoint {plan.load_strategy.value}"
        + (f", holding {m.load_transient:.2f} GiB beside the weights while it loads" if m.load_transient else "")
        + (
            f"; first-start kernel compiles may hold {m.first_start_compile:.0f} GiB of host RAM beside it"
            if m.first_start_compile
            else ""
        ),
        "",
        f"  memory (GiB of {m.total:.1f})",
    ]
    parts = [
        ("weights", m.weights),
        ("runtime", m.runtime),
        ("activation", m.activation),
        ("cuda graphs", m.cudagraph),
        ("model extra", m.extra),
        ("drafter", m.drafter),
        ("encoder", m.encoder),
        ("kv cache", m.kv),
        ("process", m.process_baseline),
        ("host reserve", m.host_reserve),
        ("headroom", m.headroom),
    ]
    for name, value in parts:
        if value:
            lines.append(f"    {name:<13}{value:8.2f}  {_bar(value, m.total)}")
    lines += _speed_lines(plan)
    lines += ["", "  command", "    " + " \\\n      ".join(_argv_lines(plan)), "", "  environment"]
    lines += [f"    {k}={v}" for k, v in plan.env.items()]
    lines += [f"    {k}=<from the 0640 environment file>" for k in plan.secret_env]
    if plan.warnings:
        lines += ["", "  warnings"] + [f"    ! {w}" for w in plan.warnings]
    return "\n".join(lines) + "\n"


def _band(b: Band, unit: str) -> str:
    return f"{b.value:,.1f} {unit} ({b.low:,.1f}-{b.high:,.1f})"


def _speed_lines(plan: ServePlan) -> list[str]:
    s = plan.speed
    if s is None:
        return []
    rows = [
        (f"decode, one stream at {s.context_tokens:,} tokens", _band(s.decode, "tok/s")),
        (
            f"aggregate at {s.concurrency} streams",
            f"{_band(s.aggregate, 'tok/s')}, {s.curve[-1].per_user_tps:,.1f} tok/s each",
        ),
        ("prefill", _band(s.prefill, "tok/s")),
        ("first token", ", ".join(f"{t.ttft_s:.2f} s at {t.prompt_tokens:,} tokens" for t in s.ttft)),
    ]
    if s.speculative is not None:
        rows.append(("with speculation, one stream", f"{_band(s.speculative, 'tok/s')}: {s.speculative_basis}"))
    rows.append(
        (
            "by concurrency",
            ", ".join(f"{p.concurrency}: {p.aggregate_tps:,.0f} ({p.per_user_tps:,.1f} each)" for p in s.curve),
        )
    )
    where = "a Spark" if plan.nodes == 1 else f"{plan.nodes} Sparks ({_split(plan)})"
    header = f"  speed on {where} (predicted; each range is the calibration's leave-one-model-out error)"
    return ["", header] + [f"    {label:<36}{value}" for label, value in rows]


def _split(plan: ServePlan) -> str:
    """How a multi-node plan spreads over its Sparks, from its own parallel flags."""
    sizes = {flag.name: flag.values[0] for flag in plan.flags if flag.values}
    tp, pp = sizes.get("--tensor-parallel-size", "1"), sizes.get("--pipeline-parallel-size", "1")
    parts = [f"tensor parallel {tp}"] if tp != "1" else []
    parts += [f"{pp} pipeline stages"] if pp != "1" else []
    return ", ".join(parts) or "one GPU a Spark"


def _argv_lines(plan: ServePlan) -> list[str]:
    """`vllm serve MODEL`, then one line a flag."""
    lines = [" ".join(shlex.quote(word) for word in plan.argv[:3])]
    lines += [" ".join(shlex.quote(word) for word in (flag.name, *flag.values)) for flag in plan.flags]
    return lines


def render_explain(plan: ServePlan) -> str:
    lines = [f"why each line of the {plan.model} plan is there", ""]
    for reason in plan.reasons:
        lines.append(f"  {reason.item}")
        lines.append(f"      why:    {reason.reason}")
        lines.append(f"      source: {reason.source}")
    return "\n".join(lines) + "\n"
