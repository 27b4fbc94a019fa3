"""Serving speed: qkv's own decoding against CTranslate2 on the same weights, in one run on one
machine.

Part 1, translation: the 1,016 test verses of the Bible corpus translated by a trained model
directory (the demo model; the 60-minute preset when given), beam 4 and greedy, the same
batches of 32 sentences (sorted by length, qkv's) and the same per-batch length limits given to
every engine, text in and text out. **Each configuration runs in a process of its own**
(``serving_worker.py``), at each thread layout the engine offers on 2 cores: one batch on two
threads, and two batches at once on one thread each (qkv's ``workers``, CTranslate2's
``inter_threads``), and CTranslate2 on one thread alone:

- qkv before this work: the searches over ``Transformer.step`` (the module path);
- qkv's lean decode step (:mod:`qkv.models.transformer.decode`) with float32, bfloat16 and int8
  weights (:mod:`qkv.layers.packed_linear`), beam search exact (qkv's default: a sentence runs
  while a live hypothesis could still win under the GNMT penalty) and with patience 1
  (CTranslate2's rule: a sentence stops once ``K`` hypotheses have finished);
- CTranslate2 on the exported model (``qkv export --format ctranslate2``), float32 and int8,
  its own length penalty (``|Y|^alpha``) at the model's alpha;
- ``qkv translate --engine ctranslate2``: the same CTranslate2 model behind qkv's decoding rules
  (per-sentence length limits, GNMT ranking of 2K finished hypotheses).

Each configuration's BLEU (sacrebleu) and its share of outputs identical to qkv float32's are
recorded beside its time.

Part 2, generation: GPT-2 small (random weights, 124M parameters), 128 greedy tokens after a
16-token prompt, batch 1 and 8, each configuration in a process of its own on 1 and on 2
threads: qkv's decode step in float32, bfloat16 and int8 against CTranslate2 float32 and int8
on the exported model. A decoded token reads every weight once, so each precision's floor is its
bytes over the memory bandwidth, measured in this run (the best time to sum a 1 GiB float32
tensor).

    PYTHONPATH=src:benchmarks python benchmarks/serving.py \\
        --models runs/demo                             # writes docs/results/serving.md

Every time is the best of ``--reps`` runs after one untimed run, in the configuration's own process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


# -- part 1: translation ------------------------------------------------------------------------


def in_process(spec: dict) -> dict:
    """One configuration run by ``serving_worker.py`` in a process of its own."""
    argv = [sys.executable, str(Path(__file__).with_name("serving_worker.py")), json.dumps(spec)]
    env = {**os.environ, "OMP_NUM_THREADS": str(spec.get("threads", spec.get("intra", 1)))}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{spec} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ct2_input(model_dir: Path, work: Path, limit: int | None) -> tuple[Path, list[list[int]]]:
    """The file CTranslate2's workers read: the source tokens of qkv's batches (sorted by length,
    32 each) and each batch's length limit; and the batches' sentence indices."""
    from qkv.ctranslate2.export import token_strings
    from qkv.data import load_corpus
    from qkv.tasks.translation.runner import Translator

    base = Translator.load(model_dir)
    sources = [s for s, _ in load_corpus(base.data.corpus, **base.data.options).test[:limit]]
    encoded = [base.source_tokenizer.encode(s) for s in sources]
    order = sorted(range(len(sources)), key=lambda i: len(encoded[i]))
    batches = [order[i : i + 32] for i in range(0, len(order), 32)]
    strings = token_strings(base.source_tokenizer)
    limits = [base.decode.max_len(len(ids) + 1) for ids in encoded]  # EOS counted, as qkv does
    path = work / f"{model_dir.name}-ct2-input.json"
    path.write_text(json.dumps({
        "tokens": [[[strings[t] for t in encoded[i]] for i in rows] for rows in batches],
        "limits": [max(limits[i] for i in rows) for rows in batches],
        "alpha": base.decode.length_penalty,
    }), encoding="utf-8")  # fmt: skip
    return path, batches


def ct2_texts(model_dir: Path, batches: list[list[int]], tokens: list[list[str]]) -> list[str]:
    """The target token strings CTranslate2 returned, batch by batch, as texts in test order."""
    from qkv.ctranslate2.export import token_strings
    from qkv.tasks.translation.runner import Translator

    target = Translator.load(model_dir).target_tokenizer
    ids = {t: i for i, t in enumerate(token_strings(target))}
    order = [i for rows in batches for i in rows]
    texts = dict(zip(order, (target.decode([ids[t] for t in hyp]) for hyp in tokens), strict=True))
    return [texts[i] for i in range(len(order))]


def translation_configs(model: str, exported: str, beam: int, reps: int, limit: int | None):
    """``{name: spec}``: each engine at each thread layout it offers on 2 cores."""
    common = {"model": model, "beam": beam, "reps": reps, "limit": limit}
    configs = {}
    if beam > 1:
        configs["qkv module path (before), 2 threads"] = {
            **common, "kind": "qkv", "precision": "float32", "threads": 2, "workers": 1,
            "module_path": True,
        }  # fmt: skip
    for precision in ("float32", "bfloat16", "int8"):
        configs[f"qkv {precision}, 2 batches at once x 1 thread"] = {
            **common, "kind": "qkv", "precision": precision, "threads": 2, "workers": 2,
        }  # fmt: skip
        configs[f"qkv {precision}, 1 batch x 2 threads"] = {
            **common, "kind": "qkv", "precision": precision, "threads": 2, "workers": 1,
        }  # fmt: skip
    if beam > 1:
        for precision in ("float32", "int8"):
            configs[f"qkv {precision}, patience 1, 2 batches at once x 1 thread"] = {
                **common, "kind": "qkv", "precision": precision, "threads": 2, "workers": 2,
                "patience": 1.0,
            }  # fmt: skip
    for ct in ("float32", "int8"):
        for intra, inter in ((2, 1), (1, 1), (1, 2)):
            layout = f"{inter} batches at once x {intra} thread" + ("s" if intra > 1 else "")
            configs[f"CTranslate2 {ct}, {layout}"] = {
                **common, "kind": "ct2", "exported": exported, "compute_type": ct,
                "intra": intra, "inter": inter, "input": str(Path(exported) / "input.json"),
            }  # fmt: skip
    configs["qkv --engine ctranslate2 (float32, 2 threads)"] = {
        **common, "kind": "wrapped", "exported": exported, "intra": 2,
    }  # fmt: skip
    return configs


def translation(model_dir: Path, reps: int, work: Path, limit: int | None = None) -> dict:
    from qkv.ctranslate2.export import export_model
    from qkv.data import load_corpus
    from qkv.evaluation.bleu import corpus_scores
    from qkv.tasks.run_dir import load_model_run_config

    run = load_model_run_config(model_dir)
    pairs = load_corpus(run.data.corpus, **run.data.options).test[:limit]
    refs = [t for _, t in pairs]
    exported = work / f"{model_dir.name}-ct2"
    export_model(model_dir, exported, overwrite=True)
    given, batches = ct2_input(model_dir, work, limit)
    given.replace(exported / "input.json")
    rows = []
    for beam in (4, 1):
        configs = translation_configs(str(model_dir), str(exported), beam, reps, limit)
        results = {name: in_process(spec) for name, spec in configs.items()}
        for name, spec in configs.items():
            if spec["kind"] == "ct2":
                results[name]["outputs"] = ct2_texts(model_dir, batches, results[name]["outputs"])
        reference = results["qkv float32, 1 batch x 2 threads"]["outputs"]
        for name, result in results.items():
            hyps = result["outputs"]
            rows.append({
                "model": model_dir.name, "search": "greedy" if beam == 1 else f"beam {beam}",
                "config": name, "seconds": result["seconds"],
                "bleu": corpus_scores(hyps, refs).bleu,
                "same_as_qkv_float32": sum(a == b for a, b in zip(hyps, reference, strict=True))
                / len(reference),
            })  # fmt: skip
            log(f"{model_dir.name} beam {beam} {name}: {rows[-1]}")
    return {"model": str(model_dir), "sentences": len(pairs), "rows": rows}


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
    from serving_worker import gpt2_small

    from qkv.ctranslate2.convert import SpecialTokens, language_model_spec, save_spec

    ours, vocab = gpt2_small()
    vocabulary = [f"<t{i}>" for i in range(vocab)]
    special = SpecialTokens(bos=vocabulary[0], eos=vocabulary[-1], unk=vocabulary[1])
    exported = work / "gpt2-small-ct2"
    save_spec(language_model_spec(ours, vocabulary, special=special), exported, overwrite=True)
    floors = {p: ours.decode_weights(p).nbytes for p in ("float32", "bfloat16", "int8")}
    del ours
    measured = bandwidth()
    rows = []
    for batch in (1, 8):
        torch.manual_seed(1)
        prompts = torch.randint(0, vocab - 1, (batch, 16)).tolist()
        common = {"batch": batch, "new": new, "reps": reps, "prompts": prompts}
        configs: dict[str, dict] = {}
        for threads in (1, 2):
            for precision in floors:
                configs[f"qkv {precision}, {threads} thread{'s' * (threads > 1)}"] = {
                    **common, "kind": "gpt2-qkv", "precision": precision, "threads": threads,
                }  # fmt: skip
            for ct in ("float32", "int8"):
                configs[f"CTranslate2 {ct}, {threads} thread{'s' * (threads > 1)}"] = {
                    **common, "kind": "gpt2-ct2", "exported": str(exported),
                    "compute_type": ct, "intra": threads,
                }  # fmt: skip
        results = {name: in_process(spec) for name, spec in configs.items()}
        reference = results["qkv float32, 1 thread"]["outputs"]
        for name, result in results.items():
            tokens = result["outputs"]
            precision = name.split(",")[0].split()[-1]
            same = sum(a == b for x, y in zip(tokens, reference, strict=True)
                       for a, b in zip(x, y, strict=False))  # fmt: skip
            row = {
                "batch": batch, "config": name, "ms_per_token": result["seconds"] / new * 1e3,
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
            ct2_f32 = min(
                r["seconds"] for r in group if r["config"].startswith("CTranslate2 float32")
            )  # its best thread layout
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
    parser.add_argument("--models", nargs="*", default=["runs/demo"])
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
