"""What a correct server answers: the known-answer check each instance is ready by.

A server that starts and answers garbage (the wrong FP4 kernel on sm_121, a broken chat template)
is the failure that costs Spark users most, and an HTTP 200 says nothing about it. Readiness, the
watchdog and the doctor therefore ask every instance a question whose answer is known, through the
path clients take (the chat endpoint and its template, temperature 0), and judge the reply; the
probe on the host (roles/vllm_serve/files/sparkfleet_probe.py) also refuses replies that are
garbage whatever the question (empty, one unit repeated, replacement or control characters, NaN
log-probabilities). The sandbox model is trained on KNOWN_ANSWERS, so the same check proves the
sandbox for real.
"""

from __future__ import annotations

import json

from ..models import AnswerCheck, KnownAnswer, ModelProfile
from ..sources import SEED_GUIDE, SEED_SM121

# Short, unambiguous, answered the same by any instruct model; the first is every instance's default,
# the field guide's own smoke test ("model should answer 204 (= 12*17)", seed 002 §6).
KNOWN_ANSWERS: tuple[KnownAnswer, ...] = (
    KnownAnswer(question="What is 12*17? Answer with the number only.", answer="204"),
    KnownAnswer(question="What is the capital of France? Answer with one word.", answer="Paris"),
    KnownAnswer(question="Which company makes the DGX Spark? Answer with one word.", answer="NVIDIA"),
    KnownAnswer(question="What is 7+8? Answer with the number only.", answer="15"),
)

# An answer plus its end token; a reasoning model thinks first, so it gets room to reach the answer
# (judged over its reasoning and its content) while staying inside the watchdog's deadline.
ANSWER_TOKENS = 16
REASONING_ANSWER_TOKENS = 512
EMBEDDING_INPUT = "sparkfleet readiness check"

GARBAGE_CAUSES = (
    f"wrong FP4 GEMM kernel on sm_121 gives '!!!!' or empty text ({SEED_SM121}; {SEED_GUIDE} §6), "
    f"a chat template that does not fit the model gives gibberish ({SEED_GUIDE} §7.2.2)"
)


def answer_check(
    profile: ModelProfile,
    served_name: str,
    pooling: bool,
    own: KnownAnswer | None = None,
    template_kwargs: dict[str, bool | int | float | str] | None = None,
) -> AnswerCheck:
    """The request an instance is ready by, what its reply must contain, and why.

    It carries the chat template settings clients are told to send, so the check (and the warm-up it
    is) takes the same template path, and JIT-compiled shapes, as a user's first request.
    """
    # A pooling (embedding) model has no chat endpoint.
    if pooling:
        return AnswerCheck(
            path="/v1/embeddings",
            body={"model": served_name, "input": EMBEDDING_INPUT},
            expect=None,
            reason="a pooling model has no chat endpoint: one embedding, every value finite and not all zero",
        )
    known = own or KNOWN_ANSWERS[0]
    kwargs = dict(template_kwargs or {})
    parsed = profile.reasoning_parser is not None or profile.reasoning_parser_plugin is not None
    # A reasoning model told not to think answers at once; one that thinks gets room to reach the answer.
    reasoning = parsed and kwargs.get("enable_thinking") is not False
    body: dict[str, object] = {
        "model": served_name,
        "messages": [{"role": "user", "content": known.question}],
        "max_tokens": REASONING_ANSWER_TOKENS if reasoning else ANSWER_TOKENS,
        "temperature": 0,
        "logprobs": True,
    }
    if kwargs:
        body["chat_template_kwargs"] = kwargs
    whose = "the intent's own question" if own else "the default question for an instruct model"
    expect = f"the answer must contain {known.answer!r}" if known.answer else "no expected answer (base model)"
    room = f", {REASONING_ANSWER_TOKENS} tokens to think (judged over reasoning and content)" if reasoning else ""
    if kwargs:
        room += f", chat_template_kwargs {json.dumps(kwargs, sort_keys=True)} as clients send them"
    return AnswerCheck(
        body=body,
        expect=known.answer,
        reason=f"{whose} through the chat template at temperature 0{room}; {expect}; garbage causes: {GARBAGE_CAUSES}",
    )
