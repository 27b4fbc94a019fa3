"""Language-model speed, qkv against Hugging Face ``GPT2LMHeadModel`` on the same weights, in one
run on one machine.

Part 1, generation: greedy tokens per second with the KV cache, batch 1 and 8, for a 6-layer,
384-wide GPT with a 16k vocabulary and for a GPT-2-small-shaped one (12 layers, 768 wide, 50,257
tokens): qkv's :func:`qkv.decoding.generate` against ``GPT2LMHeadModel.generate()`` (both
produce the same tokens: checked), and qkv without its cache at 512 new tokens.

Part 2, training: tokens per second of forward + backward + AdamW step on random token batches
(8 x 256), float32 and bfloat16 autocast, with and without ``torch.compile``, for the 6-layer
model; achieved GFLOP/s against the matrix-product limit measured in the same run.

    PYTHONPATH=src python benchmarks/language_model.py
    # writes docs/results/language-model-speed.md

Randomly initialised weights (no GPT-2 weights exist here): speed does not depend on their values.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from harness.machine import machine_line, script_command, utc_stamp
from harness.report import command_block, log, table, write_section
from harness.timing import best_time

from qkv.decoding.sampling import SamplingConfig, generate
from qkv.interop.gpt2 import from_hf_gpt2

BEGIN, END = "<!-- language-model:begin -->", "<!-- language-model:end -->"
SHAPES = {
    "gpt-6x384-16k": dict(n_layer=6, n_embd=384, n_head=6, vocab_size=16384, n_positions=1024),
    "gpt2-small": dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024),
}


def hf_model(shape: str):
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        **SHAPES[shape], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0
    )
    return transformers.GPT2LMHeadModel(config).eval()


def generation(shape: str, batch: int, new: int, reps: int, uncached: bool) -> dict:
    hf = hf_model(shape)
    ours = from_hf_gpt2(hf)
    torch.manual_seed(1)
    prompt = torch.randint(0, hf.config.vocab_size, (batch, 16))
    sampling = SamplingConfig(max_new_tokens=new, temperature=0.0)

    def run_hf():
        with torch.no_grad():
            return hf.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                pad_token_id=0,
            )[:, 16:].tolist()

    def run_qkv():
        return generate(ours, prompt.tolist(), sampling).tokens

    def run_qkv_bf16():
        return generate(ours, prompt.tolist(), sampling, precision="bfloat16").tokens

    reference = run_hf()
    assert reference == run_qkv(), "qkv and Hugging Face generated different tokens"
    half = run_qkv_bf16()
    same = sum(
        a == b for x, y in zip(half, reference, strict=True) for a, b in zip(x, y, strict=True)
    )
    row = {"shape": shape, "batch": batch, "new_tokens": new}
    row["bf16_same_tokens"] = same / (batch * new)
    row["hf_s"] = best_time(run_hf, reps)
    row["qkv_s"] = best_time(run_qkv, reps)
    row["qkv_bf16_s"] = best_time(run_qkv_bf16, reps)
    if uncached:
        row["qkv_uncached_s"] = best_time(
            lambda: generate(ours, prompt.tolist(), sampling, use_cache=False), 1
        )
    log(f"generation {shape} B={batch} N={new}: {row}")
    return row


def matmul_limit(dtype: torch.dtype) -> float:
    """GFLOP/s of a large square matrix product, the best this machine does."""
    a = torch.randn(2048, 2048, dtype=dtype)
    b = torch.randn(2048, 2048, dtype=dtype)
    seconds = best_time(lambda: a @ b, 5)
    return 2 * 2048**3 / seconds / 1e9


def training(shape: str, mode: str, steps: int, warmup: int) -> dict:
    """Tokens/s of forward, backward and an AdamW step, for HF and for qkv, interleaved."""
    precision, _, compiled = mode.partition("+")
    hf = hf_model(shape).train()
    ours = from_hf_gpt2(hf).train()
    config = hf.config
    torch.manual_seed(2)
    batches = [torch.randint(0, config.vocab_size, (8, 257)) for _ in range(4)]

    def step_fn(model, logits_of):
        optimiser = torch.optim.AdamW(model.parameters(), lr=1e-4)
        run = torch.compile(model) if compiled else model

        def step(batch):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                logits = logits_of(run, batch[:, :-1])
            loss = torch.nn.functional.cross_entropy(
                logits.float().flatten(0, 1), batch[:, 1:].flatten()
            )
            loss.backward()
            optimiser.step()
            optimiser.zero_grad(set_to_none=True)
            return float(loss)

        return step

    steps_of = {
        "hf": step_fn(hf, lambda m, x: m(x).logits),
        "qkv": step_fn(ours, lambda m, x: m(x).logits),
    }
    seconds: dict[str, list[float]] = {"hf": [], "qkv": []}
    for step in steps_of.values():
        for i in range(warmup):
            step(batches[i % len(batches)])
    for i in range(steps):  # interleaved, so drift in the machine's speed hits both alike
        for name, step in steps_of.items():
            start = time.perf_counter()
            step(batches[i % len(batches)])
            seconds[name].append(time.perf_counter() - start)
    tokens = 8 * 256
    n_layer, d, vocab = config.n_layer, config.n_embd, config.vocab_size
    params = n_layer * 12 * d * d + vocab * d  # matrix weights touched per token
    flops = tokens * (6 * params + n_layer * 6 * 2 * 256 * d)  # + attention scores and mix
    row = {"shape": shape, "mode": mode}
    for name in seconds:
        t = statistics.median(seconds[name])
        row[f"{name}_tokens_per_s"] = tokens / t
        row[f"{name}_gflops"] = flops / t / 1e9
    log(f"training {shape} {mode}: {row}")
    return row


def report(results: dict, command: str, minutes: float) -> str:
    lines = [
        BEGIN,
        "## Language models: generation and training against Hugging Face",
        "",
        f"Generated by `benchmarks/language_model.py` on {utc_stamp()} in {minutes:.1f} min: "
        f"{machine_line(torch.get_num_threads(), {'transformers': results['transformers']})}.",
        "",
        *command_block(command),
        "Same weights in both (a randomly initialised `GPT2LMHeadModel` imported into qkv), same "
        "greedy tokens in float32 (checked before timing). `bf16 weights`: qkv's decode step "
        "with its weight copies and cache in bfloat16 (the residual stream and LayerNorms stay "
        "float32); its greedy tokens are compared with Hugging Face's float32 ones (random "
        "weights give near-ties that bfloat16 rounding can flip). Times are the best of the "
        "repetitions.",
        "",
        "### Generation (greedy, KV cache, 16-token prompts)",
        "",
    ]
    rows = []
    for row in results["generation"]:
        total = row["batch"] * row["new_tokens"]
        hf, ours, half = total / row["hf_s"], total / row["qkv_s"], total / row["qkv_bf16_s"]
        uncached = row.get("qkv_uncached_s")
        rows.append(
            [
                row["shape"],
                str(row["batch"]),
                str(row["new_tokens"]),
                f"{hf:,.0f}",
                f"{ours:,.0f}",
                f"{ours / hf:.2f}x",
                f"{half:,.0f}",
                f"{half / hf:.2f}x",
                f"{row['bf16_same_tokens']:.0%}",
                f"{total / uncached:,.1f}" if uncached else "-",
                f"{uncached / row['qkv_s']:.1f}x" if uncached else "-",
            ]
        )
    lines += table(
        [
            "model",
            "batch",
            "new tokens",
            "HF tokens/s",
            "qkv tokens/s",
            "qkv / HF",
            "qkv, bf16 weights",
            "/ HF",
            "same tokens as HF (bf16)",
            "qkv uncached tokens/s",
            "cache speed-up",
        ],
        rows,
    )
    lines += [
        "",
        "### Training (8 x 256 tokens per step, AdamW)",
        "",
        f"Matrix-product limit measured in this run: {results['limit_fp32']:.0f} GFLOP/s in "
        f"float32, {results['limit_bf16']:.0f} in bfloat16 (2048x2048 products).",
        "",
    ]
    rows = []
    for row in results["training"]:
        limit = results["limit_bf16" if row["mode"].startswith("bf16") else "limit_fp32"]
        hf, ours = row["hf_tokens_per_s"], row["qkv_tokens_per_s"]
        rows.append(
            [
                row["shape"],
                row["mode"],
                f"{hf:,.0f}",
                f"{ours:,.0f}",
                f"{ours / hf:.2f}x",
                f"{row['qkv_gflops']:.0f}",
                f"{row['qkv_gflops'] / limit:.0%}",
            ]
        )
    header = ["model", "mode", "HF tokens/s", "qkv tokens/s", "qkv / HF", "qkv GFLOP/s"]
    lines += table([*header, "of the limit"], rows)
    return "\n".join([*lines, "", END])


def main() -> int:
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--train-steps", type=int, default=10)
    parser.add_argument("--train-modes", default="fp32,bf16,fp32+compile,bf16+compile")
    parser.add_argument("--skip-uncached", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("docs/results/language-model-speed.md"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    command = script_command()
    began = time.perf_counter()
    results: dict = {"transformers": transformers.__version__, "generation": [], "training": []}
    for shape in SHAPES:
        for batch in (1, 8):
            results["generation"].append(
                generation(shape, batch, args.new_tokens, args.reps, False)
            )
    if not args.skip_uncached:
        results["generation"].append(generation("gpt-6x384-16k", 1, 512, 1, True))
    results["limit_fp32"] = matmul_limit(torch.float32)
    results["limit_bf16"] = matmul_limit(torch.bfloat16)
    for mode in args.train_modes.split(","):
        results["training"].append(training("gpt-6x384-16k", mode, args.train_steps, 2))
    section = report(results, command, (time.perf_counter() - began) / 60)
    write_section(section, args.out, BEGIN, END, raw=results, raw_path=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
