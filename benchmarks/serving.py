"""Serving speed: qkv's own decoding against CTranslate2 on the same weights, in one run on one
machine.

Part 1, translation: the 1,016 test verses of the Bible corpus translated by a trained model
directory (the demo model and the 60-minute preset), beam 4 and greedy, 32 sentences per batch,
2 threads, text in and text out:

- qkv before this work: the searches over ``Transformer.step`` (the module path);
- qkv's lean decode step (:mod:`qkv.models.transformer.decode`) with float32, bfloat16 and int8
  weights (:mod:`qkv.layers.packed_linear`), beam search exact (qkv's default: a sentence runs
  while a live hypothesis could still win under the GNMT penalty) and with patience 1
  (CTranslate2's rule: a sentence stops once ``K`` hypotheses have finished);
- CTranslate2 on the exported model (``qkv export --format ctranslate2``), float32 and int8,
  called as a user would: ``translate_batch`` over all sentences, ``max_batch_size=32``, its own
  length penalty (``|Y|^alpha``) at the model's alpha;
- ``qkv translate --engine ctranslate2``: the same CTranslate2 model behind qkv's decoding rules
  (per-sentence length limits, GNMT ranking of 2K finished hypotheses).

Each configuration's BLEU (sacrebleu) and its share of outputs identical to qkv float32's are
recorded beside its time.

Part 2, generation: GPT-2 small (random weights, 124M parameters), 128 greedy tokens after a
16-token prompt, batch 1 and 8: qkv's decode step in float32, bfloat16 and int8 against
CTranslate2 float32 and int8 on the exported model. A decoded token reads every weight once, so
each precision's floor is its bytes over the memory bandwidth, measured in this run (the best
time to sum a 1 GiB float32 tensor).

    PYTHONPATH=src:benchmarks python benchmarks/serving.py \\
        --models runs/demo runs/transformer           # writes docs/results/serving.md

Every time is the best of ``--reps`` repetitions, the configurations interleaved in each.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.machine import machine_line, script_command, utc_stamp
from harness.report import command_block, log, table, write_section

BEGIN, END = "<!-- serving:begin -->", "<!-- serving:end -->"
ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "docs/results/serving.json"
THREADS = 2


def ct2():
    import ctranslate2

    return ctranslate2


def interleaved(calls: dict[str, Callable[[], object]], reps: int) -> dict[str, float]:
    """Best wall time of each call over ``reps`` rounds, the calls interleaved in each round."""
    best = {name: float("inf") for name in calls}
    for _ in range(reps):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


# -- part 1: translation ------------------------------------------------------------------------


def translation(model_dir: Path, reps: int, work: Path, limit: int | None = None) -> dict:
    from qkv.ctranslate2.engine import CTranslate2Translator
    from qkv.ctranslate2.export import export_model, token_strings
    from qkv.data import load_corpus
    from qkv.evaluation.bleu import corpus_scores
    from qkv.models import lean_step
    from qkv.tasks.translation.runner import Translator

    qkv = {p: Translator.load(model_dir, precision=p) for p in ("float32", "bfloat16", "int8")}
    patient = {p: Translator.load(model_dir, precision=p) for p in qkv}
    for runner in patient.values():
        runner.decode = replace(runner.decode, patience=1.0)
    base = qkv["float32"]
    pairs = load_corpus(base.data.corpus, **base.data.options).test[:limit]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    exported = work / f"{model_dir.name}-ct2"
    export_model(model_dir, exported, overwrite=True)
    engines = {
        ct: ct2().Translator(str(exported), device="cpu", compute_type=ct,
                             intra_threads=THREADS, inter_threads=1)
        for ct in ("float32", "int8")
    }  # fmt: skip
    wrapped = CTranslate2Translator.load(exported, compute_type="float32", threads=THREADS)
    src_tokens = token_strings(base.source_tokenizer)
    target_ids = {t: i for i, t in enumerate(token_strings(base.target_tokenizer))}
    limit = max(base.decode.max_len(len(base.source_tokenizer.encode(s)) + 1) for s in sources)
    alpha = base.decode.length_penalty

    def ct2_translate(ct: str, beam: int) -> list[str]:
        tokens = [[src_tokens[i] for i in base.source_tokenizer.encode(s)] for s in sources]
        out = engines[ct].translate_batch(
            tokens, beam_size=beam, length_penalty=alpha, max_batch_size=32,
            max_decoding_length=limit, return_scores=False,
        )  # fmt: skip
        return [base.target_tokenizer.decode([target_ids[t] for t in r.hypotheses[0]]) for r in out]

    def module_path(beam: int) -> list[str]:
        saved = lean_step.has_lean_step
        lean_step.has_lean_step = lambda model: False
        try:
            return [t.text for t in base.translate(sources, beam_size=beam, batch_size=32)]
        finally:
            lean_step.has_lean_step = saved

    rows = []
    for beam in (4, 1):
        calls: dict[str, Callable[[], list[str]]] = {
            "qkv module path (before)": lambda b=beam: module_path(b)
        }
        for precision, runner in qkv.items():
            calls[f"qkv {precision}"] = lambda r=runner, b=beam: [
                t.text for t in r.translate(sources, beam_size=b, batch_size=32)
            ]
        if beam > 1:  # the exact search, then CTranslate2's stopping rule (patience 1)
            for precision, runner in patient.items():
                calls[f"qkv {precision}, patience 1"] = lambda r=runner, b=beam: [
                    t.text for t in r.translate(sources, beam_size=b, batch_size=32)
                ]
        for ct in engines:
            calls[f"CTranslate2 {ct}"] = lambda c=ct, b=beam: ct2_translate(c, b)
        calls["qkv --engine ctranslate2 (float32)"] = lambda b=beam: wrapped.translate(
            sources, beam_size=b, batch_size=32
        )
        outputs = {name: call() for name, call in calls.items()}  # warm-up, and the outputs
        seconds = interleaved(calls, reps)
        reference = outputs["qkv float32"]
        for name, hyps in outputs.items():
            rows.append({
                "model": model_dir.name, "search": "greedy" if beam == 1 else f"beam {beam}",
                "config": name, "seconds": seconds[name],
                "bleu": corpus_scores(hyps, refs).bleu,
                "same_as_qkv_float32": sum(a == b for a, b in zip(hyps, reference, strict=True))
                / len(reference),
            })  # fmt: skip
            log(f"{model_dir.name} beam {beam} {name}: {rows[-1]}")
    return {"model": str(model_dir), "sentences": len(sources), "rows": rows}


# -- part 2: GPT-2 small generation --------------------------------------------------------------


def bandwidth() -> float:
    """Bytes per second to read memory: the best time to sum a 1 GiB float32 tensor."""
    big = torch.ones(2**28)
    best = min(_timed(lambda: big.sum()) for _ in range(7))
    return big.numel() * 4 / best


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def generation(reps: int, work: Path, new: int = 128) -> dict:
    import transformers

    from qkv.ctranslate2.convert import SpecialTokens, language_model_spec, save_spec
    from qkv.decoding.sampling import SamplingConfig, generate
    from qkv.interop.gpt2 import from_hf_gpt2

    torch.manual_seed(0)
    config = transformers.GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    ours = from_hf_gpt2(transformers.GPT2LMHeadModel(config).eval())
    vocabulary = [f"<t{i}>" for i in range(config.vocab_size)]
    special = SpecialTokens(bos=vocabulary[0], eos=vocabulary[-1], unk=vocabulary[1])
    exported = work / "gpt2-small-ct2"
    save_spec(language_model_spec(ours, vocabulary, special=special), exported, overwrite=True)
    engines = {
        ct: ct2().Generator(str(exported), device="cpu", compute_type=ct,
                            intra_threads=THREADS, inter_threads=1)
        for ct in ("float32", "int8")
    }  # fmt: skip
    sampling = SamplingConfig(max_new_tokens=new, temperature=0.0)
    floors = {p: ours.decode_weights(p).nbytes for p in ("float32", "bfloat16", "int8")}
    measured = bandwidth()
    rows = []
    for batch in (1, 8):
        torch.manual_seed(1)
        prompt = torch.randint(0, config.vocab_size - 1, (batch, 16)).tolist()

        def run_qkv(precision: str, p=prompt) -> list[list[int]]:
            return generate(ours, p, sampling, precision=precision).tokens

        def run_ct2(ct: str, p=prompt) -> list[list[int]]:
            out = engines[ct].generate_batch(
                [[vocabulary[i] for i in row] for row in p], max_length=new, min_length=new,
                sampling_topk=1, include_prompt_in_result=False,
            )  # fmt: skip
            return [[int(t[2:-1]) for t in r.sequences[0]] for r in out]

        calls: dict[str, Callable[[], list[list[int]]]] = {}
        for precision in floors:
            calls[f"qkv {precision}"] = lambda x=precision: run_qkv(x)
        for ct in engines:
            calls[f"CTranslate2 {ct}"] = lambda c=ct: run_ct2(c)
        outputs = {name: call() for name, call in calls.items()}
        seconds = interleaved(calls, reps)
        reference = outputs["qkv float32"]
        for name, tokens in outputs.items():
            precision = name.split()[-1]
            same = sum(a == b for x, y in zip(tokens, reference, strict=True)
                       for a, b in zip(x, y, strict=False))  # fmt: skip
            row = {
                "batch": batch, "config": name, "ms_per_token": seconds[name] / new * 1e3,
                "same_tokens_as_qkv_float32": same / (batch * new),
            }  # fmt: skip
            if precision in floors:
                row["floor_ms"] = floors[precision] / measured * 1e3
            rows.append(row)
            log(f"gpt2 batch {batch} {name}: {row}")
    return {"bandwidth_gb_s": measured / 1e9, "bytes": floors, "new_tokens": new, "rows": rows}


# -- the section ----------------------------------------------------------------------------------


def render(results: dict, command: str, minutes: float) -> str:
    versions = {"ctranslate2": results["ctranslate2"]}
    lines = [
        BEGIN,
        "## Serving: qkv's decoding against CTranslate2",
        "",
        f"Generated by `benchmarks/serving.py` on {utc_stamp()} in {minutes:.1f} min: "
        f"{machine_line(THREADS, versions)}.",
        "",
        *command_block(command),
    ]
    for part in results.get("translation", []):
        rows = part["rows"]
        lines += [
            f"### Translation: `{part['model']}`, {part['sentences']:,} test verses, batch 32",
            "",
        ]
        for search in dict.fromkeys(r["search"] for r in rows):
            group = [r for r in rows if r["search"] == search]
            ct2_f32 = next(r["seconds"] for r in group if r["config"] == "CTranslate2 float32")
            ct2_best = min(r["seconds"] for r in group if r["config"].startswith("CTranslate2"))
            body = [
                [
                    r["config"], f"{r['seconds']:.2f}", f"{r['seconds'] / ct2_f32:.2f}",
                    f"{r['seconds'] / ct2_best:.2f}", f"{r['bleu']:.2f}",
                    f"{r['same_as_qkv_float32']:.1%}",
                ]
                for r in group
            ]  # fmt: skip
            lines += [f"{search}:", ""]
            lines += table(
                ["configuration", "seconds", "/ CT2 float32", "/ CT2 best", "BLEU",
                 "outputs identical to qkv float32"],
                body,
            )  # fmt: skip
            lines.append("")
    gen = results.get("generation")
    if gen:
        lines += [
            f"### GPT-2 small (124M, random weights), {gen['new_tokens']} greedy tokens after 16",
            "",
            f"Memory bandwidth measured in this run: {gen['bandwidth_gb_s']:.1f} GB/s (sum of a "
            "1 GiB float32 tensor). Floor: the bytes one token reads (every linear weight and "
            "the output projection) over that bandwidth: "
            + ", ".join(f"{p} {b / 1e6:.0f} MB" for p, b in gen["bytes"].items())
            + ".",
            "",
        ]
        body = []
        for r in gen["rows"]:
            floor = r.get("floor_ms")
            body.append([
                str(r["batch"]), r["config"], f"{r['ms_per_token']:.2f}",
                f"{floor:.2f}" if floor else "-",
                f"{r['ms_per_token'] / floor:.2f}" if floor else "-",
                f"{r['same_tokens_as_qkv_float32']:.1%}",
            ])  # fmt: skip
        lines += table(
            ["batch", "configuration", "ms per token (step)", "floor ms", "/ floor",
             "tokens identical to qkv float32"],
            body,
        )  # fmt: skip
        lines.append("")
    lines.append(END)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=["runs/demo", "runs/transformer"])
    parser.add_argument("--parts", nargs="*", default=["translation", "generation"])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "docs/results/serving.md")
    parser.add_argument("--raw", type=Path, default=RAW, help="the measurements as JSON")
    parser.add_argument("--limit", type=int, default=None, help="first N test verses (a smoke run)")
    parser.add_argument("--new-tokens", type=int, default=128, help="GPT-2 tokens per prompt")
    args = parser.parse_args(argv)
    torch.set_num_threads(THREADS)
    start = time.perf_counter()
    results: dict = {"ctranslate2": ct2().__version__, "translation": []}
    with tempfile.TemporaryDirectory() as tmp:
        if "translation" in args.parts:
            for model in args.models:
                part = translation(Path(model), args.reps, Path(tmp), args.limit)
                results["translation"].append(part)
        if "generation" in args.parts:
            results["generation"] = generation(args.reps, Path(tmp), args.new_tokens)
    minutes = (time.perf_counter() - start) / 60
    section = render(results, script_command(), minutes)
    write_section(section, args.out, BEGIN, END, raw=results, raw_path=args.raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
