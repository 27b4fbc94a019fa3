"""Reading comprehension on held-out Bible books and Shakespeare plays (qkv.data.reading.cloze): the
accuracy of each cloze reader on both kinds of question (named entities, common nouns), and the
span reader's exact match and F1 on the same questions written as SQuAD spans, beside the
simple baselines of the data card (docs/data/cloze.md).

- cloze readers (configs/reading/cloze-*.yaml): no attention (the baseline), the Attentive
  Reader (Hermann et al. 2015), the Stanford Attentive Reader (Chen et al. 2016), the Attention
  Sum Reader (Kadlec et al. 2016);
- the span readers: DrQA's document reader (configs/reading/span-bilstm.yaml, Chen et al. 2017)
  and its head on the fine-tuned all-MiniLM-L6-v2 encoder (configs/reading/span-minilm.yaml).

Each run's budget is its step count (so its score does not depend on the machine's load), with
``train.clock=cpu`` and ``train.max_minutes=30`` as a cap; the CPU time each run took is
recorded. Runs train two at a time on one thread each. The runs are defined in
``reading_cloze_runs.py``, the findings and tables in ``reading_cloze_report.py``.

    python benchmarks/reading_cloze.py                      # train, score, report
    python benchmarks/reading_cloze.py --only entities-as_reader
    python benchmarks/reading_cloze.py --report-only        # rewrite the report from the JSON
    python benchmarks/reading_cloze.py --attention ablation-stanford   # where its attention looks
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ThreadPoolExecutor

from harness.cli_runs import metrics_rows, train_and_evaluate
from harness.machine import machine_description
from harness.report import log
from reading_cloze_report import write_report
from reading_cloze_runs import (
    ABLATION_STEPS,
    ABLATIONS,
    CAP,
    CONFIGS,
    GROUPS,
    READERS,
    RESULTS,
    RUNS,
    SPAN_READERS,
    STEPS,
)

from qkv.io import atomic_write_json
from qkv.training.checkpoint import read_json


def train_and_score(group: str) -> dict[str, object]:
    """Train one run on one thread and score its test split; its record."""
    kind, reader = GROUPS[group]
    ablation = group.startswith("ablation-")
    if ablation:
        reader, what, own = ABLATIONS[reader]
        config = READERS[reader][0]
    else:
        config, what, own = READERS[reader]
    out = RUNS / group
    sets = [f"data.options.kind={kind}", *own, *CAP, f"out_dir={out}"]
    if group in STEPS or ablation:
        sets.append(f"train.max_steps={STEPS.get(group, ABLATION_STEPS)}")
    log(f"training {group}")
    cpu = train_and_evaluate(CONFIGS / config, sets, out, RUNS / f"{group}.log")
    test = read_json(out / "results.json")["test"]
    curve, steps = valid_curve(out, "valid_f1" if reader in SPAN_READERS else "valid_accuracy")
    return {
        "group": group,
        "kind": kind,
        "reader": reader,
        "what": what,
        "config": f"configs/reading/{config}",
        "overrides": [f"data.options.kind={kind}", *own],
        "ablation": ablation,
        "cpu_minutes": cpu / 60,
        "machine": machine_description(),
        "steps": steps,
        "valid": max(curve.values()) if curve else None,
        "valid_curve": curve,
        "test": test,
    }


def attention_record(group: str) -> dict[str, float]:
    """The attention readout (:mod:`qkv.tasks.reading.attention_readout`) of ``group``'s trained
    reader on the test questions, on one thread."""
    import dataclasses

    import torch

    from qkv.tasks.reading.attention_readout import attention_readout
    from qkv.tasks.reading.runner import Reader, load_examples

    torch.set_num_threads(1)
    reader = Reader.load(RUNS / group)
    questions = load_examples(reader.config)["test"]
    readout = attention_readout(questions, reader.run(questions), reader.vocab.key)
    return dataclasses.asdict(readout)


def gradient_record(group: str) -> dict[str, dict[str, float]]:
    """How the loss pulls on the attention (:mod:`qkv.tasks.reading.attention_gradient`) of
    ``group``'s reader on the test questions, freshly initialised (seed 0) and trained (its best
    weights), in eval mode (no dropout), on one thread."""
    import dataclasses

    import torch

    from qkv.models.registry import build_model
    from qkv.tasks.reading.attention_gradient import attention_gradient
    from qkv.tasks.reading.runner import Reader, load_examples
    from qkv.tasks.reading.words import reading_batches

    torch.set_num_threads(1)
    reader = Reader.load(RUNS / group)
    questions = load_examples(reader.config)["test"]
    torch.manual_seed(0)
    fresh = build_model(reader.config.family, reader.model.config).eval()
    record = {}
    for name, model in (("init", fresh), ("trained", reader.model)):
        batches = reading_batches(questions, reader.vocab, max_tokens=16000, shuffle=False,
                                  anonymize=reader.inputs.anonymize)  # fmt: skip
        record[name] = dataclasses.asdict(attention_gradient(model, batches))
    return record


def valid_curve(out, metric: str) -> tuple[dict[int, float], int]:
    """``({step: validation score}, last step)`` from a run's ``metrics.csv``."""
    rows = metrics_rows(out)
    curve = {int(r["step"]): float(r[metric]) for r in rows if r.get(metric)}
    return curve, int(rows[-1]["step"])


def _recorded() -> dict[str, dict]:
    return json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.is_file() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="groups to (re)run")
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at once")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--attention", nargs="*", metavar="GROUP",
                        help="add the attention readout of these trained runs")  # fmt: skip
    parser.add_argument("--gradients", nargs="*", metavar="GROUP",
                        help="add how the loss pulls on these runs' attention")  # fmt: skip
    args = parser.parse_args()
    results = _recorded()
    for key, groups, measure in (("attention", args.attention, attention_record),
                                 ("gradient", args.gradients, gradient_record)):  # fmt: skip
        for group in groups or ():
            log(f"{key} of {group}")
            record = {**_recorded()[group], key: measure(group)}
            results = {**_recorded(), group: record}
            atomic_write_json(RESULTS, results)
    if args.attention or args.gradients:
        args.report_only = True
    if not args.report_only:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {g: pool.submit(train_and_score, g) for g in (args.only or list(GROUPS))}
            for name, future in futures.items():
                record = future.result()
                # re-read: another invocation (--only other groups) may have written meanwhile
                results = {**_recorded(), name: record}
                atomic_write_json(RESULTS, results)
    write_report(results, machine_description())


if __name__ == "__main__":
    main()
