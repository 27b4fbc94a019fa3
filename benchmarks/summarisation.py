"""Summarisation and dialogue: the pointer-generator and coverage against the plain
attention model on docstring summaries, and dialogue with attention to the previous turn against
the same model reading no context.

- docstrings, kind ``text`` (a docstring's body -> its summary line) and ``code`` (a function's
  source -> the summary line), configs/summarise/docstrings-pointer-rnn.yaml, 30 CPU-minutes
  each: the plain attention model (``model.copy=false``), the pointer-generator, and the
  pointer-generator with coverage (``model.coverage=true``); beside them the extractive
  baselines of the data card (the body's first sentence; the function's name split into words).
  The test split is decoded twice: as configured (beam 4, trigram block, at least 3 words) and
  with the trigram block off, which is where repetition (and so coverage) can show.
- the same, with See et al.'s one attention (``model.copy_attention=decoder``: the decoder's
  attention is the copy distribution, and coverage enters its score), trained as See et al. did:
  the pointer without coverage for a step budget (``--text-steps``, ``--code-steps``: by default
  the steps the own-attention pointer ran, so they compare at equal steps), then a final phase of
  ``--phase-steps`` steps (default 100) from its best weights (``train.init_from``) with coverage
  (weight 1), and the control: the same phase without coverage (so the difference is coverage,
  not extra steps).
- plays-dialogue (configs/dialogue/plays-rnn.yaml), 15 CPU-minutes each: the reply given the
  previous turn, and the same encoder-decoder, vocabulary and replies with the source left empty
  (``data.options.replies_only=true``): a language model of the replies alone whose perplexity
  is per the same words.
- ACLSum (a transfer test, nothing trained on it): the docstring-text models summarise each
  paper's abstract (its first 200 words, the length they were trained on), scored against each
  aspect's human summary.

Each run trains on one thread until its CPU budget (``train.clock=cpu``) is spent; the CPU time
it took is recorded; runs train two at a time. The runs are defined in ``summarisation_runs.py``,
the findings and tables in ``summarisation_report.py``.

    python benchmarks/summarisation.py                    # train, score, report
    python benchmarks/summarisation.py --only text-plain  # redo one run
    python benchmarks/summarisation.py --report-only      # rewrite the report from the JSON
    python benchmarks/summarisation.py --only text-shared text-shared-coverage text-shared-more \
        --text-steps 4 --phase-steps 2 --out /tmp/smoke --no-extras \
        --extra-set model.hidden_dim=16 model.embed_dim=8 data.valid_examples=4  # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import ROOT
from harness.cli_runs import ONE_THREAD, metrics_rows, train_and_evaluate
from harness.machine import machine_description
from harness.report import log
from summarisation_report import write_report
from summarisation_runs import GROUPS, PHASES, SHARED_STEPS, SUMMARY_CONFIG

from qkv.io import atomic_write_json
from qkv.training.checkpoint import read_json

RUNS = ROOT / "runs" / "summarisation"
RESULTS = ROOT / "docs" / "results" / "summarisation.json"
REPORT = ROOT / "docs" / "results" / "summarisation.md"
SUMMARY_SCORES = ("rouge1", "rouge2", "rougeL", "bleu", "repeated_trigrams", "mean_length",
                  "copied_share", "unk_share", "perplexity")  # fmt: skip


def budget(group: str, steps: dict[str, int], phase: int, long_phase: int = 400) -> list[str]:
    """The settings that bound ``group``'s training: its CPU minutes, or for the one-attention
    pointer its steps (and for a final phase, the run it starts from; it evaluates at its end):
    ``phase`` steps, ``long_phase`` for the ``-long`` phases."""
    minutes = GROUPS[group][2]
    if minutes is not None:
        return [f"train.max_minutes={minutes}"]
    kind, variant = group.split("-", 1)
    if variant == "shared":
        return ["train.max_minutes=null", f"train.max_steps={steps[kind]}"]
    if variant.endswith("-long"):
        phase = long_phase
    # a fresh optimiser: a short warm-up (a tenth of the phase), then the config's constant rate
    return ["train.max_minutes=null", f"train.max_steps={phase}", f"train.eval_every={phase}",
            f"train.warmup_steps={phase // 10}",
            f"train.init_from={RUNS / f'{kind}-shared'}"]  # fmt: skip


def train_and_score(group: str, limits: list[str], extra: list[str]) -> dict[str, object]:
    """Train one run on one thread (``limits``: :func:`budget`; ``extra``: more settings),
    score its test split as configured (``qkv evaluate``) and, for a summariser, without the
    trigram block; its record."""
    config, own, minutes, what = GROUPS[group]
    out = RUNS / group
    sets = [*own, *extra, "train.clock=cpu", *limits, f"out_dir={out}"]
    log(f"training {group}")
    cpu = train_and_evaluate(ROOT / config, sets, out, RUNS / f"{group}.log")
    record: dict[str, object] = {
        "group": group,
        "what": what,
        "config": config,
        "overrides": [
            s
            for s in sets
            if s.startswith(("data.", "model.", "train.init_from", "train.max_steps"))
        ],
        "budget_cpu_minutes": minutes,
        "cpu_minutes": cpu / 60,
        "machine": machine_description(),
        "steps": int(metrics_rows(out)[-1]["step"]),
        "valid_curve": valid_curve(out),
        "test": read_json(out / "results.json")["test"],
    }
    if config == SUMMARY_CONFIG:
        record["test_unblocked"] = _in_subprocess("--score-unblocked", out)
    log(f"finished {group}")
    return record


def valid_curve(out: Path) -> dict[int, float]:
    """``{step: validation ROUGE-L}`` (or loss, for a run chosen by loss) from ``metrics.csv``."""
    rows = metrics_rows(out)
    metric = "valid_rouge_l" if any(r.get("valid_rouge_l") for r in rows) else "valid_loss"
    return {int(r["step"]): float(r[metric]) for r in rows if r.get(metric)}


def _in_subprocess(flag: str, out: Path) -> dict:
    """``flag out`` of this script run on one thread in a process of its own; its JSON."""
    command = [sys.executable, __file__, flag, str(out)]
    done = subprocess.run(command, capture_output=True, text=True, check=True,
                          env={**os.environ, **ONE_THREAD})  # fmt: skip
    return json.loads(done.stdout)


def score_unblocked(out: Path) -> dict[str, float]:
    """The test scores of the summariser in ``out`` decoded without the n-gram block."""
    return _unblocked(out).evaluate("test").scores


def _unblocked(out: Path):
    """The summariser in ``out`` on one thread, decoding without the n-gram block."""
    import dataclasses

    import torch

    from qkv.tasks.summarisation.runner import Summariser

    torch.set_num_threads(1)
    runner = Summariser.load(out)
    runner.decode = dataclasses.replace(runner.decode, no_repeat_ngram=0)
    return runner


def baselines() -> dict[str, dict[str, float]]:
    """The extractive baselines' test scores: ``{kind: scores}``."""
    from qkv.data.pairs.docstrings import first_sentence, load_docstrings, name_words
    from qkv.data.pairs.summary_words import summary_text, summary_tokens
    from qkv.evaluation.summaries import repeated_ngram_share, rouge_scores

    scores = {}
    for kind, extract in (("text", first_sentence), ("code", name_words)):
        pairs = load_docstrings(kind=kind).test
        outputs = [summary_tokens(extract(source)) for source, _ in pairs]
        references = [summary_text(summary_tokens(target)) for _, target in pairs]
        scores[kind] = {
            **rouge_scores([summary_text(o) for o in outputs], references),
            "repeated_trigrams": repeated_ngram_share(outputs, 3),
            "mean_length": sum(map(len, outputs)) / len(outputs),
            "pairs": float(len(pairs)),
        }
    return scores


def repetition_sources(out: Path, limit: int = 200) -> dict[str, float]:
    """Where a pointer-generator's repetition comes from: its first ``limit`` test outputs
    decoded (beam 4) without the n-gram block, the mean ``p_gen`` of the words in repeated
    trigrams against that of all words (near 1: the loops are generated, not copied)."""
    from qkv.evaluation.summaries import repeated_ngram_starts

    runner = _unblocked(out)
    sources = load_corpus_split(runner, limit)
    every, repeated, loops = [], [], 0
    for source in sources:
        response, _, p_gen = runner.details(source)
        p = [float(x) for x in p_gen[: len(response.tokens)]]
        inside = {i + k for i in repeated_ngram_starts(response.tokens, 3) for k in range(3)}
        loops += bool(inside)
        every += p
        repeated += [p[i] for i in sorted(inside)]
    return {
        "outputs": float(len(sources)),
        "outputs_with_a_repeated_trigram": float(loops),
        "p_gen_all": sum(every) / max(len(every), 1),
        "p_gen_repeated": sum(repeated) / max(len(repeated), 1),
        "repeated_words": float(len(repeated)),
    }


def load_corpus_split(runner, limit: int) -> list[str]:
    """The first ``limit`` test sources of ``runner``'s corpus."""
    from qkv.data.pairs.registry import load_corpus

    data = runner.data
    return [s for s, _ in load_corpus(data.corpus, **data.options).test[:limit]]


def score_aclsum(out: Path) -> dict[str, dict[str, float]]:
    """ROUGE of the summariser in ``out`` on ACLSum's test abstracts, against each aspect's
    summary (the sources cut to the 200 words the model was trained on), beside the abstract's
    first sentence."""
    import torch

    from qkv.data.pairs.aclsum import load_aclsum
    from qkv.data.pairs.docstrings import first_sentence
    from qkv.data.pairs.summary_words import summary_text, summary_tokens
    from qkv.evaluation.summaries import rouge_scores
    from qkv.tasks.summarisation.runner import Summariser

    torch.set_num_threads(1)
    runner = Summariser.load(out)
    scores = {}
    for aspect in ("challenge", "approach", "outcome"):
        pairs = load_aclsum(aspect=aspect, document="abstract").test
        sources = [summary_text(summary_tokens(s)[:200]) for s, _ in pairs]
        outputs = [r.text for r in runner.summarize(sources)]
        references = [summary_text(summary_tokens(t)) for _, t in pairs]
        lead = [summary_text(summary_tokens(first_sentence(s))) for s, _ in pairs]
        scores[aspect] = {
            "model": rouge_scores(outputs, references),
            "first_sentence": rouge_scores(lead, references),
            "pairs": len(pairs),
            "example": [pairs[0][0][:300], outputs[0], references[0]],
        }
    return scores


# --------------------------------------------------------------------------------- report


def _repetition() -> dict[str, dict[str, float]]:
    groups = [g for g in GROUPS if g.endswith(("-pointer", "-coverage", "-shared", "-more"))]
    return {g: _in_subprocess("--score-repetition", RUNS / g) for g in groups
            if (RUNS / g / "results.json").is_file()}  # fmt: skip


def _recorded() -> dict:
    return json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.is_file() else {}


def _save(name: str, record: object) -> dict:
    # re-read: another invocation (--only other runs) may have written meanwhile
    results = {**_recorded(), name: record}
    atomic_write_json(RESULTS, results)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="runs to (re)train")
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at once")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--score-unblocked", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--score-aclsum", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--score-repetition", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--repetition", action="store_true", help="only measure where repetition comes from"
    )
    for kind, steps in SHARED_STEPS.items():
        parser.add_argument(f"--{kind}-steps", type=int, default=steps,
                            help=f"steps of {kind}-shared (the one-attention pointer)")  # fmt: skip
    parser.add_argument("--phase-steps", type=int, default=100,
                        help="steps of the final phases (with and without coverage)")  # fmt: skip
    parser.add_argument("--long-phase-steps", type=int, default=400,
                        help="steps of the longer final phases")  # fmt: skip
    parser.add_argument("--out", type=Path, help="runs, JSON and report here (a smoke run)")
    parser.add_argument("--no-extras", action="store_true",
                        help="skip the baselines and ACLSum (a smoke run)")  # fmt: skip
    parser.add_argument("--extra-set", nargs="*", default=[], help="more --set for every run")
    args = parser.parse_args()
    if args.out is not None:
        global RUNS, RESULTS, REPORT
        RUNS, RESULTS, REPORT = args.out / "runs", args.out / "results.json", args.out / "report.md"
    if min(args.text_steps, args.code_steps, args.phase_steps, args.long_phase_steps) < 1:
        parser.error(
            "--text-steps, --code-steps, --phase-steps and --long-phase-steps must be >= 1"
        )
    children = {"score_unblocked": score_unblocked, "score_aclsum": score_aclsum,
                "score_repetition": repetition_sources}  # fmt: skip
    for flag, score in children.items():
        if getattr(args, flag):  # a child process: JSON on stdout
            print(json.dumps(score(getattr(args, flag))))
            return
    if args.repetition:
        _save("repetition", _repetition())
        write_report(_recorded(), machine_description(), REPORT)
        return
    unknown = sorted(set(args.only or []) - set(GROUPS))
    if unknown:
        parser.error(f"unknown run(s) {', '.join(unknown)}; known: {', '.join(GROUPS)}")
    results = _recorded()
    if not args.report_only:
        if not args.no_extras:
            results = _save("baselines", baselines())
        steps = {"text": args.text_steps, "code": args.code_steps}
        chosen = args.only or list(GROUPS)
        # Two stages: a final phase starts from its -shared run's best weights.
        for stage in ([g for g in chosen if not g.endswith(PHASES)],
                      [g for g in chosen if g.endswith(PHASES)]):  # fmt: skip
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                futures = {g: pool.submit(train_and_score, g, budget(g, steps, args.phase_steps,
                                                                 args.long_phase_steps),
                                          args.extra_set) for g in stage}  # fmt: skip
                for name, future in futures.items():
                    results = _save(name, future.result())
        if not args.no_extras:
            transfer = {g: _in_subprocess("--score-aclsum", RUNS / g)
                        for g in ("text-plain", "text-pointer", "text-coverage")
                        if (RUNS / g / "results.json").is_file()}  # fmt: skip
            results = _save("aclsum", transfer)
        results = _save("repetition", _repetition())
    write_report(results, machine_description(), REPORT)


if __name__ == "__main__":
    main()
