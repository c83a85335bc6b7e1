"""The long-reply check against a served model: a long greedy reply rescored by one prefill (sparkfleet.doctor.longreply).

1. Decode: `/v1/completions` at temperature 0 for `--max-tokens` tokens, with vLLM's `logprobs`, `echo` and
   `return_tokens_as_token_ids`: the prompt's and the reply's token ids, and each reply token's logprob as decoded.
2. Rescore: the same ids as the prompt of one request with vLLM's `prompt_logprobs`: each reply token's logprob as one
   prefill computes it, and the best at its position.
3. Judge: drift between the two and greedy steps the prefill would not have taken; red names the instance, its
   speculation and its KV dtype (from `--plan`, the instance's plan file) and exits 1.

It speaks to any OpenAI endpoint of vLLM: the front door (`--url https://HOST --key-file F --ca F`) or a server of
its own. Figures measured on the cpu sandbox are CPU figures, not a Spark's.

Run: uv run python benchmarks/long_reply.py --url URL --model NAME [--key-file F] [--ca F] [--plan F] [--max-tokens 256]
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from sparkfleet.doctor.longreply import instance_label, judge, steps, token_ids

PROMPT = "Write a long story about a lighthouse keeper who counts ships, one paragraph per ship."


def ask(args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    headers = {"Content-Type": "application/json"}
    if args.key_file:
        headers["Authorization"] = f"Bearer {Path(args.key_file).read_text().strip()}"
    request = urllib.request.Request(f"{args.url}/v1/completions", json.dumps(body).encode(), headers)
    context = ssl.create_default_context(cafile=args.ca) if args.ca else None
    with urllib.request.urlopen(request, timeout=args.timeout, context=context) as reply:
        return dict(json.loads(reply.read()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--key-file")
    parser.add_argument("--ca")
    parser.add_argument("--plan")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    decoded = ask(args, {"model": args.model, "prompt": args.prompt, "max_tokens": args.max_tokens, "temperature": 0,
                         "logprobs": 1, "echo": True, "return_tokens_as_token_ids": True, "ignore_eos": True})  # fmt: skip
    choice = decoded["choices"][0]
    generated = int(decoded["usage"]["completion_tokens"])
    ids = token_ids(choice["logprobs"])
    prompt_len = len(ids) - generated
    reply = {k: choice["logprobs"][k][prompt_len:] for k in ("tokens", "token_logprobs")}
    rescored = ask(args, {"model": args.model, "prompt": ids, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 1})
    verdict = judge(
        steps(reply, rescored["choices"][0]["prompt_logprobs"], prompt_len),
        instance_label(args.model, json.loads(Path(args.plan).read_text()) if args.plan else None),
    )
    print(json.dumps({"prompt_tokens": prompt_len, **verdict.model_dump()}, indent=1))
    return 0 if verdict.status == "green" else 1


if __name__ == "__main__":
    sys.exit(main())
