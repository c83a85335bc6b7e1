"""The largest request body an instance takes: what the front door lets through to it, and no more.

vLLM counts a prompt in tokens and the door counts bytes, so the limit follows the instance's context: a
door sized for the largest image a multimodal model might get would let every text model's clients make
nginx hold tens of MiB per request (issue 30: a 32 MiB default, 32 requests at once per key).
"""

from __future__ import annotations

import math

from ..models import MediaLimits

MIB = 1024 * 1024
# A prompt token is a few bytes of UTF-8 on average; merged runs (whitespace, separators) and JSON escapes
# (\uXXXX is 6 bytes a character, an emoji 12) stretch some, so the bound per token of context is generous.
BYTES_PER_TOKEN = 24
# What travels beside the prompt: message structure, tool schemas, sampling settings.
ENVELOPE_MIB = 1
# Images travel base64-encoded in the body (4/3 of their size): room for a few photos of a few MiB each.
IMAGES_MIB = 32
SOURCE = "issue 30 (a body the door buffers while it finds the model); sparkfleet.planning.requestsize"
# Media travel base64-encoded (4/3 of their bytes). Audio as speech encoders take it: 16 kHz mono 16-bit PCM WAV
# (an hour: 146.5 MiB in a body). Video as an mp4 of 1080p H.264 at 8 Mbit/s (two minutes: 152.6 MiB); a higher
# bitrate needs intent.max_request_mib. A photo: up to 16 MiB in a body.
BASE64 = 4 / 3
AUDIO_BYTES_PER_S = 16_000 * 2
VIDEO_BYTES_PER_S = 1_000_000
IMAGE_MIB = 16


def text_mib(max_model_len: int) -> int:
    """What a text request of the instance's context takes in a body, in MiB."""
    return math.ceil(max_model_len * BYTES_PER_TOKEN / MIB) + ENVELOPE_MIB


def media_mib(media: MediaLimits) -> tuple[int, str]:
    """What the media one request may carry take in a body, and how that was counted."""
    audio = media.audio_s * AUDIO_BYTES_PER_S * BASE64 / MIB
    video = media.video_s * VIDEO_BYTES_PER_S * BASE64 / MIB
    images = media.images * IMAGE_MIB
    parts = [
        f"{what} {mib:.1f} MiB"
        for what, mib in (
            (f"{media.audio_s} s of 16 kHz mono WAV", audio),
            (f"{media.video_s} s of 8 Mbit/s video", video),
            (f"{media.images} image(s)", images),
        )
        if mib
    ]
    return math.ceil(audio + video + images), ", ".join(parts) + " (base64)"


def max_request_mib(
    max_model_len: int, multimodal: bool, override: int | None = None, media: MediaLimits | None = None
) -> tuple[int, str]:
    """The instance's body limit in MiB, and why."""
    if override is not None:
        return override, "intent.max_request_mib"
    text = text_mib(max_model_len)
    why = f"{max_model_len} tokens x {BYTES_PER_TOKEN} B + {ENVELOPE_MIB} MiB of envelope"
    if media is not None:
        size, counted = media_mib(media)
        return text + size, f"{why} + what one request may carry by the model's card: {counted}"
    if multimodal:
        return text + IMAGES_MIB, f"{why} + {IMAGES_MIB} MiB of base64 images (a multimodal model)"
    return text, f"{why} (text only)"
