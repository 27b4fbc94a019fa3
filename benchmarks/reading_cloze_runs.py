"""The reading benchmark's runs: each reader's config and settings, the ablations of the
Stanford reader, the step budgets and where the results go (``benchmarks/reading_cloze.py``
trains them, ``reading_cloze_report.py`` writes them up)."""

from __future__ import annotations

from harness import ROOT

CONFIGS = ROOT / "configs" / "reading"
RUNS = ROOT / "runs" / "reading-cloze"
RESULTS = ROOT / "docs" / "results" / "reading-cloze.json"
REPORT = ROOT / "docs" / "results" / "reading-cloze.md"
CARD = ROOT / "docs" / "data" / "cloze.json"
CAP = ["train.clock=cpu", "train.max_minutes=30"]
KINDS = ("entities", "nouns")
# Each reader: its config, what the report calls it, and settings of its own.
READERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "no_attention": ("cloze-no-attention.yaml", "no attention (baseline)", ()),
    "attentive": ("cloze-attentive.yaml", "Attentive Reader", ()),
    "stanford": ("cloze-stanford.yaml", "Stanford Attentive Reader", ()),
    "as_reader": ("cloze-as-reader.yaml", "Attention Sum Reader", ()),
    "span": ("span-bilstm.yaml", "span reader (DrQA)", ()),
    "span_minilm": ("span-minilm.yaml", "span reader on fine-tuned MiniLM, casing feature", ()),
    "span_minilm_nocase": (
        "span-minilm.yaml",
        "span reader on fine-tuned MiniLM, no casing feature",
        ("model.casing_dim=0",),
    ),
}
SPAN_READERS = ("span", "span_minilm", "span_minilm_nocase")
# One factor at a time against the Stanford reader as configured (and the AS Reader beside it),
# named entities, an equal ABLATION_STEPS each: the factors Chen et al. 2016 and Kadlec et al.
# 2016 trained with that qkv's configs do not.
ABLATION_STEPS = 1200
ABLATIONS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "stanford": ("stanford", "Stanford reader as configured", ()),
    "stanford-anonymize": (
        "stanford",
        "+ candidates relabelled per example, reshuffled every batch",
        ("data.anonymize=true",),
    ),
    "stanford-untied": (
        "stanford",
        "+ output embedding of its own (not the input's)",
        ("model.tie_output=false",),
    ),
    "stanford-sgd": (
        "stanford",
        "+ SGD, lr 0.1, gradients clipped at norm 10",
        ("train.optimizer=sgd", "train.lr=0.1", "train.clip_norm=10"),
    ),
    "stanford-sizes": (
        "stanford",
        "+ Chen et al.'s sizes: embeddings 100, dropout 0.2",
        ("model.embed_dim=100", "model.dropout=0.2"),
    ),
    "stanford-in-question": (
        "stanford",
        "+ a feature: the passage word occurs in the question",
        ("model.question_feature=true",),
    ),
    "stanford-anonymize-untied": (
        "stanford",
        "+ relabelled candidates and an output embedding of their own",
        ("data.anonymize=true", "model.tie_output=false"),
    ),
    "stanford-chen": (
        "stanford",
        "Chen et al.'s recipe: relabelling, own output embedding, SGD 0.1, embeddings 100, "
        "dropout 0.2",
        (
            "data.anonymize=true",
            "model.tie_output=false",
            "train.optimizer=sgd",
            "train.lr=0.1",
            "train.clip_norm=10",
            "model.embed_dim=100",
            "model.dropout=0.2",
        ),
    ),
    "as_reader": ("as_reader", "Attention Sum Reader as configured", ()),
    "as_reader-anonymize": (
        "as_reader",
        "+ candidates relabelled per example, reshuffled every batch",
        ("data.anonymize=true",),
    ),
    "as_reader-in-question": (
        "as_reader",
        "+ a feature: the passage word occurs in the question",
        ("model.question_feature=true",),
    ),
}
GROUPS = {f"{kind}-{reader}": (kind, reader) for kind in KINDS for reader in READERS}
GROUPS.update({f"ablation-{name}": ("entities", name) for name in ABLATIONS})
# Step budgets that differ from the config's (3,400 steps, about 30 CPU-minutes): for lack of
# session time, the Attentive Reader and the reader without attention on entities, and every
# noun run, get 1,200 (the report compares them with the others' validation at step 1,200).
STEPS: dict[str, int] = {
    "entities-attentive": 1200,
    "entities-no_attention": 1200,
    **{f"nouns-{reader}": 1200 for reader in READERS},
}
