"""One configuration of ``benchmarks/serving.py``, in a process of its own: the engine alone on
the machine, at the thread count asked for, with no other engine's idle threads in the process
(PyTorch's spin while CTranslate2 works, and slowed it by half when both shared a process).

    python benchmarks/serving_worker.py '{"kind": "qkv", ...}'  # prints seconds, outputs

Every time is the best of ``reps`` runs after one untimed run (its outputs are the ones printed).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

BATCH = 32


def best_of(call: Callable[[], object], reps: int) -> tuple[float, object]:
    outputs = call()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best, outputs


def sources_of(spec: dict) -> list[str]:
    """The model's test sources (the first ``limit``); qkv batches them itself, and the parent
    gives CTranslate2 the same batches."""
    from qkv.data import load_corpus
    from qkv.tasks.run_dir import load_model_run_config

    run = load_model_run_config(spec["model"])
    return [
        s for s, _ in load_corpus(run.data.corpus, **run.data.options).test[: spec.get("limit")]
    ]


def run_qkv(spec: dict) -> tuple[float, object]:
    import torch

    from qkv.models import lean_step
    from qkv.tasks.translation.runner import Translator

    torch.set_num_threads(spec["threads"])
    sources = sources_of(spec)
    runner = Translator.load(spec["model"], precision=spec["precision"])
    if spec.get("patience"):
        runner.decode = replace(runner.decode, patience=spec["patience"])
    if spec.get("module_path"):
        lean_step.has_lean_step = lambda model: False
    workers = spec["workers"]
    beam = spec["beam"]
    return best_of(
        lambda: [t.text for t in runner.translate(sources, beam_size=beam, batch_size=BATCH,
                                                   workers=workers)],
        spec["reps"],
    )  # fmt: skip


def run_ct2(spec: dict) -> tuple[float, object]:
    """CTranslate2 on the exported model, in a process that never imports torch (its idle
    OpenMP threads would compete with CTranslate2's): the parent passes the source tokens of
    each batch and its length limit, and decodes the target tokens it gets back."""
    import ctranslate2

    work = json.loads(Path(spec["input"]).read_text(encoding="utf-8"))
    engine = ctranslate2.Translator(
        spec["exported"], device="cpu", compute_type=spec["compute_type"],
        intra_threads=spec["intra"], inter_threads=spec["inter"],
    )  # fmt: skip

    def translate() -> list[list[str]]:
        # One call per qkv batch with that batch's length limit; submitted together, so that
        # inter_threads > 1 decodes batches side by side.
        pending = [
            engine.translate_batch(
                tokens, beam_size=spec["beam"], length_penalty=work["alpha"],
                max_batch_size=len(tokens), max_decoding_length=limit, return_scores=False,
                asynchronous=True,
            )
            for tokens, limit in zip(work["tokens"], work["limits"], strict=True)
        ]  # fmt: skip
        return [r.result().hypotheses[0] for batch in pending for r in batch]

    return best_of(translate, spec["reps"])


def run_wrapped(spec: dict) -> tuple[float, object]:
    from qkv.ctranslate2.engine import CTranslate2Translator

    sources = sources_of(spec)
    wrapped = CTranslate2Translator.load(spec["exported"], compute_type="float32",
                                         threads=spec["intra"])  # fmt: skip
    return best_of(lambda: wrapped.translate(sources, beam_size=spec["beam"], batch_size=BATCH),
                   spec["reps"])  # fmt: skip


def gpt2_small():
    """GPT-2 small with random weights (seed 0), the same in every process, as qkv's model."""
    import torch
    import transformers

    from qkv.interop.gpt2 import from_hf_gpt2

    torch.manual_seed(0)
    config = transformers.GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return from_hf_gpt2(transformers.GPT2LMHeadModel(config).eval()), config.vocab_size


def run_gpt2_qkv(spec: dict) -> tuple[float, object]:
    import torch

    from qkv.decoding.sampling import SamplingConfig, generate

    torch.set_num_threads(spec["threads"])
    model, _ = gpt2_small()
    prompts = spec["prompts"]
    sampling = SamplingConfig(max_new_tokens=spec["new"], temperature=0.0)
    return best_of(
        lambda: generate(model, prompts, sampling, precision=spec["precision"]).tokens,
        spec["reps"],
    )


def run_gpt2_ct2(spec: dict) -> tuple[float, object]:
    import ctranslate2

    engine = ctranslate2.Generator(
        spec["exported"], device="cpu", compute_type=spec["compute_type"],
        intra_threads=spec["intra"], inter_threads=1,
    )  # fmt: skip
    prompts = [[f"<t{i}>" for i in row] for row in spec["prompts"]]

    def run() -> list[list[int]]:
        out = engine.generate_batch(
            prompts, max_length=spec["new"], min_length=spec["new"], sampling_topk=1,
            include_prompt_in_result=False,
        )  # fmt: skip
        return [[int(t[2:-1]) for t in r.sequences[0]] for r in out]

    return best_of(run, spec["reps"])


def main() -> int:
    spec = json.loads(sys.argv[1])
    runners = {
        "qkv": run_qkv, "ct2": run_ct2, "wrapped": run_wrapped,
        "gpt2-qkv": run_gpt2_qkv, "gpt2-ct2": run_gpt2_ct2,
    }  # fmt: skip
    seconds, outputs = runners[spec["kind"]](spec)
    print(json.dumps({"seconds": seconds, "outputs": outputs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
