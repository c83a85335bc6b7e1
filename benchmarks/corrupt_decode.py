"""A deliberately corrupted decode for the long-reply check's demonstration (benchmarks/long_reply.py): a vLLM v1
logits processor that, every seventh step, masks each row's best token so greedy decoding takes the runner-up.

vLLM applies logits processors to the logits it samples from, never to prompt logprobs, so one prefill of the same
tokens sees the model as it is: the long-reply check must find the steps a faithful greedy decode would not take.
Load it into a test server of its own (never a served instance):
  PYTHONPATH=DIR vllm serve MODEL --logits-processors corrupt_decode:EverySeventhRunnerUp ...
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor

EVERY = 7


class EverySeventhRunnerUp(LogitsProcessor):
    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.steps = 0

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        pass

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        if self.steps % EVERY == 0:
            best = logits.argmax(dim=-1, keepdim=True)
            logits.scatter_(-1, best, float("-inf"))
        return logits
