"""Model reading: a checkpoint's config.json (and its weight bytes) to the ModelProfile the planner plans.

In: the config as the hub or a local directory has it (sparkfleet.hub, sparkfleet.localmodel read the files).
Out: a ModelProfile: layers and attention shape, which layers keep a per-sequence state and its size, per-layer
block layouts, indexers and their rings, and the context limit vLLM derives. Each family is read the way vLLM reads
it:
- families: the family table, one entry per architecture family (its layer rule, class defaults, state reader,
  KV-pool rule and proof); the one place a model_type is named;
- config: the entry point (profile_from_config) and the text config of multimodal wrappers;
- states: which layers hold a KV cache, which a per-sequence state, and how big that state is;
- blocks: one block per layer (DeciLM / Nemotron-NAS, Nemotron-H Puzzle);
- indexers: what an indexed (sparse) attention layer keeps beside its KV cache (indexer keys, raw-key rings);
- defaults: what a model class fills in that the config leaves out;
- context: the longest context vLLM derives from the config.
"""
