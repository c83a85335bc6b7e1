"""The library's version: always the sparkfleet.vllm collection version it ships in (a test holds them equal)."""

__version__ = "0.1.0"
