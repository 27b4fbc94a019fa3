"""Training throughput of qkv's engine: target tokens per second with and without bfloat16
autocast and ``torch.compile``, every mode in one run on the same machine and the same batches.

Each model is a real preset (``configs/*.yaml``) trained on its real corpus through
:func:`qkv.training.train`, exactly as ``qkv train`` runs it, for ``--warmup`` steps (not timed:
compilation, allocator warm-up) and then ``--steps`` timed steps. Every mode starts from the same
initial weights and sees the same batches. Modes run in rounds, the order reversed each round,
and the best round counts (the least disturbed by other work on the machine).

    PYTHONPATH=src python benchmarks/training_throughput.py
    # writes docs/results/training-throughput.md

The report goes between ``<!-- training-throughput-cpu:begin -->`` and ``<!-- ...:end -->``
of ``--out`` (``-cuda`` for a GPU run; other sections are left alone). On a CUDA machine
``--device cuda --modes fp32,bf16,fp16,fp32+compile,bf16+compile`` measures the GPU paths
(fp16 with the grad scaler).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch
from harness.machine import machine_line, script_command, utc_stamp
from harness.report import command_block, log, table, write_section

from qkv.data import batches, encode_pairs, load_corpus
from qkv.data.tokens.special import PAD_ID
from qkv.models.registry import build_config, build_model
from qkv.tasks.run_config import load_run_config
from qkv.tasks.translation.train import train_tokenizers, translation_loss
from qkv.training.trainer import resolve_device, train


def markers(device_type: str) -> tuple[str, str]:
    """One section per device type: a CUDA run leaves the CPU numbers alone, and back."""
    return (
        f"<!-- training-throughput-{device_type}:begin -->",
        f"<!-- training-throughput-{device_type}:end -->",
    )


DEFAULT_CONFIGS = ("configs/transformer.yaml", "configs/rnn-bahdanau.yaml")
DEFAULT_MODES = ("fp32", "bf16", "fp32+compile", "bf16+compile")


def prepare(config_path: str, overrides: list[str], n_batches: int):
    """The preset's model factory, its loss and its first ``n_batches`` training batches."""
    config = load_run_config(config_path, overrides)
    corpus = load_corpus(config.data.corpus, **config.data.options)
    src_tok, tgt_tok = train_tokenizers(
        corpus.train, config.data.vocab_size, config.data.shared_vocab
    )
    examples = encode_pairs(corpus.train, src_tok, tgt_tok, max_len=config.data.max_len)
    stream = batches(examples, max_tokens=config.train.batch_tokens, seed=config.train.seed)
    data = [b for _, b in zip(range(n_batches), stream, strict=False)]
    values = {**config.model, "src_vocab_size": src_tok.vocab_size}
    values["tgt_vocab_size"] = tgt_tok.vocab_size
    model_config = build_config(config.family, values)

    def make_model():
        torch.manual_seed(config.train.seed)
        return build_model(config.family, model_config)

    return config, make_model, translation_loss(config.train.label_smoothing), data


def measure(config, make_model, loss_fn, data, mode: str, device: str, warmup: int) -> dict:
    """One run of ``len(data)`` steps in ``mode``; tokens/s over the steps after ``warmup``."""
    precision, _, compiled = mode.partition("+")
    train_config = dataclasses.replace(
        config.train,
        max_steps=len(data),
        max_minutes=None,
        snapshot_minutes=(),
        precision=precision,
        compile=compiled == "compile",
        device=device,
        checkpoint_every=None,
        eval_every=10**9,
        log_every=1,
        tensorboard=False,
    )
    times: list[float] = []
    tokens = [int((b.tgt_out != PAD_ID).sum()) for b in data]

    def timed_loss(model, batch):
        times.append(time.perf_counter())  # the start of each step's forward pass
        return loss_fn(model, batch)

    model = make_model()
    result = train(
        model,
        loss_fn=timed_loss,
        batches=lambda epoch, start: iter(data[start:] if epoch == 0 else data),
        config=train_config,
        count_tokens=lambda batch: int((batch.tgt_out != PAD_ID).sum()),
    )
    end = time.perf_counter()  # the last step ends with .item() on its loss: synchronised
    assert result.steps == len(data), result
    times.append(end)
    timed = sum(tokens[warmup:])
    seconds = times[-1] - times[warmup]
    return {
        "tokens_per_s": timed / seconds,
        "warmup_s": times[warmup] - times[0],
        "final_loss": result.history[-1]["train_loss"],
    }


def report(results: dict, args: argparse.Namespace, command: str, minutes: float) -> str:
    device = resolve_device(args.device)
    begin, end = markers(device.type)
    gpu = None
    if device.type == "cuda":
        gpu = f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    machine = machine_line(torch.get_num_threads(), machine=gpu)
    lines = [
        begin,
        f"## Training throughput ({device.type.upper()})",
        "",
        f"Generated by `benchmarks/training_throughput.py` on {utc_stamp()} "
        f"in {minutes:.1f} min: {machine}.",
        "",
        *command_block(command),
        f"Target tokens per second through `qkv.training.train` (the engine `qkv train` uses), "
        f"{args.steps} timed steps after {args.warmup} untimed ones, the presets' own batch size, "
        f"best of {args.rounds} rounds; the ratio is to float32 without `--compile`. "
        "`warm-up` is the time of the untimed steps (it includes compilation).",
        "",
    ]
    for config_path, by_mode in results.items():
        base = by_mode[args.modes[0]]["tokens_per_s"]
        rows = [
            [
                mode,
                f"{row['tokens_per_s']:,.0f}",
                f"{row['tokens_per_s'] / base:.2f}x",
                f"{row['warmup_s']:.1f}",
                f"{row['final_loss']:.3f}",
            ]
            for mode, row in by_mode.items()
        ]
        header = ["mode", "tokens/s", "ratio", "warm-up (s)", "loss after the run"]
        lines += [f"### {config_path}", "", *table(header, rows), ""]
    if args.note:
        lines += [args.note, ""]
    return "\n".join([*lines, end])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=list(DEFAULT_CONFIGS))
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", type=Path, default=Path("docs/results/training-throughput.md"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--note", default="", help="a paragraph appended to the section")
    args = parser.parse_args()
    args.modes = args.modes.split(",")
    command = script_command()
    began = time.perf_counter()
    results: dict[str, dict[str, dict]] = {}
    for config_path in args.configs:
        config, make_model, loss_fn, data = prepare(config_path, args.set, args.warmup + args.steps)
        best: dict[str, dict] = {}
        for round_ in range(args.rounds):
            order = args.modes if round_ % 2 == 0 else args.modes[::-1]
            for mode in order:
                row = measure(config, make_model, loss_fn, data, mode, args.device, args.warmup)
                log(f"{config_path} {mode} round {round_ + 1}: {row['tokens_per_s']:,.0f} tok/s")
                if mode not in best or row["tokens_per_s"] > best[mode]["tokens_per_s"]:
                    best[mode] = row
        results[config_path] = {m: best[m] for m in args.modes}
    section = report(results, args, command, (time.perf_counter() - began) / 60)
    begin, end = markers(resolve_device(args.device).type)
    write_section(section, args.out, begin, end, raw=results, raw_path=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
