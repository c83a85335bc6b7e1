"""sparkfleet plan | explain | catalog | monitoring | release lock."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .bench import check_summary, compare
from .catalog import load_catalog
from .doctor.hang import GpuReading, classify, parse_ras
from .errors import PlanError
from .hostconfig.monitoring import dashboard, rules_document, thresholds
from .models import Platform
from .planargs import add_plan_args, make_plan
from .planning.catalogspeed import catalog_speed
from .planning.choices import DEFAULT_VLLM
from .recipes import InstallInputs
from .report import render_explain, render_report
from .versions import CAPABILITIES


def _catalog(as_json: bool) -> str:
    catalog = load_catalog()
    if as_json:
        return json.dumps({k: v.model_dump(mode="json") for k, v in catalog.items()}, indent=2)
    rows = [f"{'model':<62} {'format':<26} {'weights':>8} {'context':>9} {'decode':>13}  notes"]
    for profile in catalog.values():
        notes = ", ".join(
            x
            for x in (
                "MoE" if profile.moe else "dense",
                "MLA" if profile.mla else "",
                profile.state_layers.kind.value if profile.state_layers else "",
                "MTP" if profile.speculative.mtp else "",
                "DFlash" if profile.speculative.dflash_drafter else "",
                f"{profile.layout.nodes} Sparks" if profile.layout else "",
            )
            if x
        )
        decode = catalog_speed(profile)
        rows.append(
            f"{profile.id:<62} {profile.checkpoint_format.value:<26} {profile.weights_gib:>6.1f}Gi "
            f"{profile.native_max_context:>9} {f'~{decode.value:.0f} tok/s' if decode else '-':>13}  {notes}"
        )
    rows.append(
        "decode: predicted single-stream tok/s on a Spark (on its recipe's Sparks where it names them) at 1,024 tokens, "
        "CUDA graphs, the recipe's KV dtype "
        "(sparkfleet plan MODEL --platform gb10 shows its range)"
    )
    return "\n".join(rows)


def _monitoring(artifact: str, alerts: str) -> str:
    th = thresholds(json.loads(alerts))
    if artifact == "rules":
        return yaml.safe_dump(rules_document(th), sort_keys=False, width=120)
    return json.dumps(dashboard(), indent=2) + "\n"


def _add_release_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--platform", choices=[x.value for x in Platform], required=True)
    p.add_argument("--vllm-version", help="default: the newest release of the platform (gb10 0.33.0, cpu 0.32.0)")
    p.add_argument(
        "--capability",
        action="append",
        default=[],
        choices=sorted(CAPABILITIES),
        help="a capability the release (a fork) carries beyond --vllm-version; repeatable",
    )
    p.add_argument("--torch-version", help="default: what the vLLM release requires")
    p.add_argument("--torchvision-version", help="default: what the vLLM release requires")
    p.add_argument("--flashinfer-version", help="default: what the vLLM release requires")
    p.add_argument("--ray-version", help="add Ray (multi-node serving)")
    p.add_argument("--source", choices=["pypi", "git"], default="pypi")
    p.add_argument("--git-repo", help="a vLLM fork (with --source git)")
    p.add_argument("--git-ref", help="branch, tag or commit of --git-repo; locked to its commit sha")
    p.add_argument("--index-url", action="append", help="an extra index (repeat); default: the platform's")
    p.add_argument("--find-links", action="append", default=[], help="a local wheel directory (repeat)")
    p.add_argument("--extra-package", action="append", help="an extra requirement resolved with vLLM (repeat)")
    p.add_argument(
        "--flashinfer-jit-cache-index", help="where FlashInfer's prebuilt kernels come from (default: FlashInfer's index)"
    )
    p.add_argument(
        "--flashinfer-compile",
        action="store_true",
        help="gb10: lock no prebuilt FlashInfer kernels (FlashInfer compiles them at first start)",
    )
    p.add_argument("--b12x", action="store_true", help="gb10, vLLM 0.33+: add vLLM's b12x extra (SM120/121 kernels)")
    p.add_argument("--python-version", help="the target's Python (default: gb10 3.12, cpu 3.11)")
    p.add_argument("--arch", help="the target's architecture (gb10 is aarch64; cpu default: this machine's)")
    p.add_argument("--glibc", help="the target's glibc, e.g. 2.39 (default: gb10 DGX OS 2.39, cpu 2.28)")
    p.add_argument("--json", action="store_true", help="print the whole lock as JSON")
    p.add_argument("--output", help="write the lock (JSON, what vllm_install_lock_file takes) to this file")
    p.add_argument("--wheelhouse", help="download every wheel of the lock into this directory")


# The CLI spells the role's install variables as flags.
_CLI_FLAGS = {
    "vllm_install_vllm_source": "--source",
    "vllm_install_vllm_git_repo": "--git-repo",
    "vllm_install_vllm_git_ref": "--git-ref",
    "vllm_install_flashinfer_index_url": "--flashinfer-jit-cache-index",
    "vllm_install_flashinfer_prebuilt": "--flashinfer-compile",
    "vllm_install_index_urls": "--index-url",
    "vllm_install_lock_find_links": "--find-links",
    "vllm_install_extra_packages": "--extra-package",
}


def _release_inputs(args: argparse.Namespace) -> InstallInputs:
    from .recipes import inputs_from

    values = {
        "platform": args.platform,
        "uv_version": "0.0.0",
        "python_version": args.python_version,
        "vllm_source": args.source,
        "vllm_version": args.vllm_version or DEFAULT_VLLM[Platform(args.platform)],
        "vllm_git_repo": args.git_repo,
        "vllm_git_ref": args.git_ref,
        "torch_version": args.torch_version,
        "torchvision_version": args.torchvision_version,
        "flashinfer_version": args.flashinfer_version,
        "ray_version": args.ray_version,
        "flashinfer_index_url": args.flashinfer_jit_cache_index,
        "flashinfer_prebuilt": not args.flashinfer_compile,
        "b12x": args.b12x,
        "index_urls": args.index_url,
        "lock_find_links": args.find_links,
        "extra_packages": args.extra_package,
    }
    try:
        return inputs_from(values)
    except PlanError as exc:
        base = exc.variable.split("[")[0]
        flag = _CLI_FLAGS.get(base, base.replace("vllm_install_", "--").replace("_", "-"))
        raise PlanError(flag, exc.problem, exc.suggestions) from exc


def _release_lock(args: argparse.Namespace) -> str:
    from .recipes import packages_for
    from .resolver import download_wheelhouse, lock_for, lock_json

    platform = Platform(args.platform)
    inputs = _release_inputs(args)
    arch = args.arch or (None if platform is Platform.GB10 else os.uname().machine)
    lock = lock_for(inputs, host_arch=arch, host_glibc=args.glibc, cache_dir=None, naming="cli")
    text = lock_json(lock)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    if args.wheelhouse:
        count = download_wheelhouse(lock, args.wheelhouse, packages_for(inputs).index_urls, tuple(args.find_links))
        print(f"wheelhouse: {count} wheels in {args.wheelhouse}", file=sys.stderr)
    if args.json:
        return text
    rows = [f"release {lock.release_id}  ({lock.platform.value}, {lock.target}, Python {lock.python})"]
    rows += [f"  {name:<20} {value}" for name, value in lock.summary().items()]
    rows.append(
        f"  {len(lock.packages)} packages locked with hashes" + (f"; written to {args.output}" if args.output else "")
    )
    return "\n".join(rows) + "\n"


def _read_log(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _explain_journal(path: str, flags: dict[str, list[str]]) -> int:
    """Print what the log says was loaded and every known signature; non-zero when one is red."""
    from .doctor import Status, log_findings, render

    findings = log_findings("log", _read_log(path), flags)
    if not findings:
        print(f"{path}: no line vLLM writes about what it selected, and no known signature")
        return 0
    print(render(path, findings))
    return 1 if any(f.status is Status.RED for f in findings) else 0


def _read_summary(path: str, name: str) -> dict[str, Any]:
    candidate = Path(path) / "summary.json" if Path(path).is_dir() else Path(path)
    try:
        return check_summary(json.loads(candidate.read_text(encoding="utf-8")), name)
    except (OSError, json.JSONDecodeError) as exc:
        raise PlanError(name, f"{candidate} cannot be read as JSON: {exc}") from exc


def _bench_compare(a: str, b: str) -> str:
    return compare(_read_summary(a, "A"), _read_summary(b, "B"), (a, b))


def _hang(paths: list[str], gpus: list[str]) -> str:
    readings = []
    for given in gpus:
        host, _sep, values = given.partition("=")
        try:
            util, watts = (float(v) for v in values.split(","))
        except ValueError as exc:
            raise PlanError("--gpu", f"{given!r} is not HOST=UTIL,WATTS (such as s1=0.96,18.4)") from exc
        readings.append(GpuReading(host=host, utilization=util, watts=watts))
    polls = []
    for path in paths:
        try:
            polls.append(parse_ras(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise PlanError("POLL", f"{path}: not a readable RAS output ({exc})") from exc
    verdict = classify(polls, readings)
    return f"{verdict.kind}: {verdict.detail}\ntry: {verdict.lever}\nsource: {verdict.source}\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sparkfleet", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    add_plan_args(sub.add_parser("plan", help="plan memory, argv and env for a model"))
    explain = sub.add_parser(
        "explain",
        help="every argv entry and env var with its reason and source; with --journal, what a vLLM log says it loaded",
    )
    add_plan_args(explain, model_optional=True)
    explain.add_argument(
        "--journal",
        metavar="FILE",
        help="a vLLM log (a journal, a container's output, '-' for stdin): the backends it selected, compared with "
        "the plan's flags when a model is given, and every known GB10 signature with its cause and fix",
    )
    cat = sub.add_parser("catalog", help="list the model profiles")
    cat.add_argument("--json", action="store_true")
    mon = sub.add_parser("monitoring", help="print the Prometheus rules or the Grafana dashboard")
    mon.add_argument("artifact", choices=["rules", "dashboard"])
    mon.add_argument("--alerts", default="{}", help="alert thresholds as JSON (the role's monitoring_alerts)")
    rel = sub.add_parser("release", help="releases: resolve and lock a vLLM release for a target")
    _add_release_args(rel.add_subparsers(dest="release_command", required=True).add_parser("lock", help=__doc__))
    bench = sub.add_parser("bench", help="benchmark results: compare two summaries side by side")
    compare_parser = bench.add_subparsers(dest="bench_command", required=True).add_parser(
        "compare", help="what differs between two runs' setups, and each shared point's median and spread"
    )
    compare_parser.add_argument("a", metavar="A", help="a summary.json the benchmark playbook wrote, or its directory")
    compare_parser.add_argument("b", metavar="B", help="another one")
    hang = sub.add_parser(
        "hang",
        help="why a cluster hangs: NCCL RAS polls (echo verbose status | nc localhost 28028, a few seconds apart) and "
        "the GPUs' utilisation and power, classified, with the lever to try first",
    )
    hang.add_argument("polls", nargs="+", metavar="POLL", help="RAS outputs (text or JSON), oldest first")
    hang.add_argument(
        "--gpu", action="append", default=[], metavar="HOST=UTIL,WATTS", help="a member's GPU (0.96,18.4), repeatable"
    )
    args = parser.parse_args(argv)
    if getattr(args, "model", "") is None and not getattr(args, "journal", None):
        parser.error("explain needs a model, or --journal FILE, or both")
    try:
        if args.command == "release":
            print(_release_lock(args), end="")
            return 0
        if args.command == "bench":
            print(_bench_compare(args.a, args.b), end="")
            return 0
        if args.command == "catalog":
            print(_catalog(args.json))
            return 0
        if args.command == "hang":
            print(_hang(args.polls, args.gpu), end="")
            return 0
        if args.command == "monitoring":
            print(_monitoring(args.artifact, args.alerts), end="")
            return 0
        if args.command == "explain" and args.journal and args.model is None:
            return _explain_journal(args.journal, {})
        result, note = make_plan(args)
        if args.command == "explain" and args.journal:
            return _explain_journal(args.journal, {f.name: f.values for f in result.flags})
    except PlanError as exc:
        print(f"sparkfleet: {exc}", file=sys.stderr)
        return 2
    except (ValidationError, ValueError) as exc:
        print(f"sparkfleet: invalid input: {exc}", file=sys.stderr)
        return 2
    if note and not args.json:
        print(f"note: {note}", file=sys.stderr)
    if args.command == "explain":
        print(render_explain(result), end="")
    elif args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        print(render_report(result), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
