"""The largest request body an instance takes: what the front door lets through to it, and no more.

vLLM counts a prompt in tokens and the door counts bytes, so the limit follows the instance's context: a
door sized for the largest image a multimodal model might get would let every text model's clients make
nginx hold tens of MiB per request (issue 30: a 32 MiB default, 32 requests at once per key).
"""

from __future__ import annotations

import math

MIB = 1024 * 1024
# A prompt token is a few bytes of UTF-8 on average; merged runs (whitespace, separators) and JSON escapes
# (\uXXXX is 6 bytes a character, an emoji 12) stretch some, so the bound per token of context is generous.
BYTES_PER_TOKEN = 24
# What travels beside the prompt: message structure, tool schemas, sampling settings.
ENVELOPE_MIB = 1
# Images travel base64-encoded in the body (4/3 of their size): room for a few photos of a few MiB each.
IMAGES_MIB = 32
SOURCE = "issue 30 (a body the door buffers while it finds the model); sparkfleet.planning.requestsize"


def max_request_mib(max_model_len: int, multimodal: bool, override: int | None = None) -> tuple[int, str]:
    """The instance's body limit in MiB, and why."""
    if override is not None:
        return override, "intent.max_request_mib"
    text = math.ceil(max_model_len * BYTES_PER_TOKEN / MIB) + ENVELOPE_MIB
    if multimodal:
        return (
            text + IMAGES_MIB,
            f"{max_model_len} tokens x {BYTES_PER_TOKEN} B + {ENVELOPE_MIB} MiB of envelope + {IMAGES_MIB} MiB of "
            "base64 images (a multimodal model)",
        )
    return text, f"{max_model_len} tokens x {BYTES_PER_TOKEN} B + {ENVELOPE_MIB} MiB of envelope (text only)"
