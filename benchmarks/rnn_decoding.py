"""Decoding speed of the RNN translation models: the module path (the searches over
``Seq2SeqRNN.step``) against the lean decode step (:mod:`qkv.models.rnn_decode`), in one run on
one machine, one thread.

The model has the preset's size (``configs/rnn-bahdanau.yaml``'s model section: embeddings 256,
encoder 256 per direction, decoder state 512, one GRU layer, vocabulary 4,000 as its data
section's) with random weights, once per decoder kind asked for; 256 random sources of 26-34
tokens, 32 per batch, greedy and beam 4, each sentence's limit ``1.5 * length + 10`` tokens (the
Translator's default rule; random weights rarely end a sentence sooner, so both paths decode the
same number of steps). Each time is the best of ``--reps`` rounds, the two paths interleaved in
each; the outputs of the two paths are compared token for token.

    PYTHONPATH=src python benchmarks/rnn_decoding.py     # writes docs/results/serving.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.machine import load_average, machine_line, script_command, utc_stamp
from harness.report import command_block, log, table, write_section

from qkv.decoding import beam_search, greedy_search
from qkv.models.rnn_decode import LeanRNNDecoder
from qkv.models.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig

BEGIN, END = "<!-- rnn-decoding:begin -->", "<!-- rnn-decoding:end -->"
ROOT = Path(__file__).resolve().parents[1]
VOCAB, SENTENCES, BATCH = 4000, 256, 32


def preset_model(attention: str) -> Seq2SeqRNN:
    config = Seq2SeqRNNConfig(
        VOCAB, VOCAB, embed_dim=256, hidden_dim=256, num_layers=1, cell="gru",
        attention=attention, luong_score="general", dropout=0.2,
    )  # fmt: skip
    torch.manual_seed(0)
    return Seq2SeqRNN(config).eval()


def batches() -> list[tuple[torch.Tensor, torch.Tensor, list[int]]]:
    generator = torch.Generator().manual_seed(1)
    out = []
    for _ in range(SENTENCES // BATCH):
        lengths = torch.randint(26, 35, (BATCH,), generator=generator)
        src = torch.randint(4, VOCAB, (BATCH, int(lengths.max())), generator=generator)
        src[torch.arange(src.size(1))[None, :] >= lengths[:, None]] = 0
        out.append((src, lengths, [int(1.5 * n + 10) for n in lengths.tolist()]))
    return out


def decode(model: object, beam: int, data: list) -> list[list[int]]:
    outputs = []
    with torch.inference_mode():
        for src, lengths, limits in data:
            if beam == 1:
                hyps = greedy_search(model, src, lengths, max_len=limits)  # type: ignore[arg-type]
            else:
                nbest = beam_search(model, src, lengths, beam_size=beam, max_len=limits)  # type: ignore[arg-type]
                hyps = [h[0] for h in nbest]
            outputs += [h.tokens for h in hyps]
    return outputs


def measure(attention: str, reps: int) -> list[dict]:
    model, data = preset_model(attention), batches()
    paths = {"module": model, "lean": LeanRNNDecoder(model)}
    rows = []
    for beam in (1, 4):
        best = {name: float("inf") for name in paths}
        outputs: dict[str, list[list[int]]] = {}
        for rep in range(reps):
            for name in paths if rep % 2 == 0 else reversed(list(paths)):
                start = time.perf_counter()
                outputs[name] = decode(paths[name], beam, data)
                best[name] = min(best[name], time.perf_counter() - start)
                log(f"{attention} beam {beam} {name}: {best[name]:.2f} s")
        same = sum(a == b for a, b in zip(outputs["module"], outputs["lean"], strict=True))
        rows.append({"attention": attention, "beam": beam, **best, "same": same})
    return rows


def render(rows: list[dict], reps: int, minutes: float, load: str) -> str:
    lines = [
        BEGIN,
        "## RNN decoding: the module path against the lean step",
        "",
        f"{utc_stamp()}. {machine_line(1)}. A shared machine (load average {load} at the "
        "start): the ratios are the result, not the absolute times.",
        "",
        f"The preset's size (`configs/rnn-bahdanau.yaml`: embeddings 256, encoder 256 per "
        f"direction, decoder state 512, one GRU layer, vocabulary {VOCAB:,}), random weights; "
        f"{SENTENCES} random sources of 26-34 tokens, {BATCH} per batch, each sentence's limit "
        f"1.5 x its length + 10. Best of {reps} rounds, the paths interleaved; "
        f"{minutes:.1f} minutes in all.",
        "",
    ]
    body = [
        [
            r["attention"], "greedy" if r["beam"] == 1 else f"beam {r['beam']}",
            f"{r['module']:.2f}", f"{r['lean']:.2f}", f"{r['module'] / r['lean']:.2f}x",
            f"{r['same']}/{SENTENCES}",
        ]
        for r in rows
    ]  # fmt: skip
    header = ["decoder", "search", "module path (s)", "lean step (s)", "speed-up", "same output"]
    lines += table(header, body)
    lines += ["", *command_block(script_command()), END]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attention", nargs="+", default=["bahdanau"],
                        choices=["none", "bahdanau", "luong"])  # fmt: skip
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "docs/results/serving.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load, start = load_average(), time.perf_counter()
    rows = [row for attention in args.attention for row in measure(attention, args.reps)]
    section = render(rows, args.reps, (time.perf_counter() - start) / 60, load)
    write_section(section, args.out, BEGIN, END, raw=rows, raw_path=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
