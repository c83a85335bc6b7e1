"""The KV pools: how vLLM lays out a model's cache, and what one token and one sequence cost there.

In: a ModelProfile (from sparkfleet.reading), the platform, the vLLM release and the context and concurrency planned.
Out: the pool's geometry (groups, block size, bytes per token, the states and rings it keeps) that the budget sizes
and the plan reports. Three layouts, each read from vLLM's own code:
- cache: the unified pool, one page per group of layers (attention, sliding windows, linear-attention and Mamba
  states, their checkpoints), and the entry point (geometry);
- packed: DeepSeek-V4's packed MLA pool with its window and compressor-state caches;
- indexed: GLM-5-Next's and Qwen4-Exp's pools with their indexers' raw-key rings.
"""
