# %% [markdown]
# # Copying and coverage: the pointer-generator
#
# A summary often repeats words of its source that the model's vocabulary does not hold: names,
# numbers, identifiers. See et al. (2017, "Get To The Point", eq. 8-9) let an attentional
# sequence-to-sequence model *point*: at each output step `t` it computes a probability of
# generating from the vocabulary, `p_gen = σ(w_h·h*_t + w_s·s_t + w_x·x_t + b)`, and mixes
#
# $$P(w) = p_\mathrm{gen} P_\mathrm{vocab}(w) + (1 - p_\mathrm{gen}) \sum_{i: w_i = w} a^t_i$$
#
# so a word of the source can be written by copying it, with the attention `a^t` as the copy
# distribution, whether the vocabulary knows it or not. Such models repeat themselves; See et
# al.'s *coverage* (eq. 10-13) keeps the sum of the attention so far, `c^t = Σ_{t'<t} a^{t'}`,
# feeds it to the attention and adds the loss `Σ_i min(a^t_i, c^t_i)`, which is paid for
# attending again to what was already covered (`train.coverage_weight` scales it).
#
# Here the pointer-generator summarises code documentation (`summarise/docstrings-pointer-rnn`:
# a function's docstring body -> its one-line summary, from the Python sources installed on the
# machine), trained on a small budget and scored with ROUGE; then `tiny/copy-pointer-rnn`, whose
# summaries are names that occur once in the whole corpus, shows copying in its pure form. The
# numbers at full scale (longer training, with and without copying and coverage) are in
# [the summarisation results](../results/summarisation.md).
#
# **Budget.** The full run is sized for about ten minutes on a 2-core CPU; the notebook's
# metadata (`qkv.seconds`) records how long the run shown here took. One switch sets every
# budget: the environment variable `QKV_TUTORIAL_MODE` (`full`, the default, or `smoke`: a few
# steps of each on a slice of the data, the same code, which the tests run).

# %%
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from IPython.display import display

import qkv
from qkv.data import load_corpus
from qkv.evaluation.summaries import repeated_ngram_share

MODE = os.environ.get("QKV_TUTORIAL_MODE", "full")
if MODE not in ("full", "smoke"):
    raise ValueError(f"QKV_TUTORIAL_MODE must be full or smoke, got {MODE!r}")


def budget(full, smoke):
    """The full run's value, or the smoke run's."""
    return full if MODE == "full" else smoke


RUNS = Path(tempfile.mkdtemp(prefix="qkv-tutorial-"))
QUIET = {"train__tensorboard": False, "train__checkpoint_every": None}


def train(preset: str, name: str, **overrides) -> Path:
    """Train ``preset`` into ``RUNS / name`` with ``overrides`` (and, in a smoke run, one warm-up
    step and small batches); the trained model's folder."""
    smoke = {} if MODE == "full" else {"train__warmup_steps": 1, "train__batch_tokens": 400}
    return qkv.train(preset, out_dir=str(RUNS / name), **QUIET, **smoke, **overrides)


# %% [markdown]
# ## The pointer-generator on docstrings
#
# A pair: the body of a docstring (its description, arguments, examples) and its summary line.
# The report decodes the test split with beam search (beam 4, at least 3 words, no trigram
# twice) and scores it with ROUGE-1, -2 and -L (F1 of unigram, bigram and longest-common-
# subsequence overlap with the reference), with the share of output words copied from the
# source and a few examples.

# %%
# the docstrings of the standard library, numpy and torch (a smoke run: numpy's short ones)
DOCSTRINGS = {"kind": "text", **budget({}, {"packages": "numpy", "max_source_words": 60})}
pairs = load_corpus("docstrings", **DOCSTRINGS)
test = pairs.split("test")
print(f"{len(test)} test pairs; one of them:\n  source: {test[0][0][:200]}...\n  "
      f"summary: {test[0][1]}")  # fmt: skip
docstrings = train("summarise/docstrings-pointer-rnn", "pointer",
                   train__max_steps=budget(250, 2), train__max_minutes=None,
                   train__eval_every=budget(125, 2),
                   data__options=DOCSTRINGS, data__valid_examples=budget(100, 4))  # fmt: skip
summariser = qkv.load(docstrings)
report = summariser.report("test", limit=budget(None, 4))
print("\n".join(report.lines))

# %% [markdown]
# ## `p_gen` per output word, and the copy attention
#
# For one test docstring, each word of the summary with its `p_gen`: near 1 the word came from
# the vocabulary, near 0 it was copied from the source through the attention. A model this
# young leans on the vocabulary: the report's `copied` share above and the `p_gen` values
# below say how much it copies (on this budget, little or nothing: it first learns the common
# words of summaries, and the summaries it writes are generic). Copying identifiers and rare
# words comes with longer training, and in its pure form with the tiny model at the end. The
# view after it is the copy attention, each output word's row over the source (its label
# carries `p_gen`), then the decoder's own cross-attention.

# %%
source = test[1][0]
seen = summariser.views(source)
print("reference:", test[1][1])
print("summary:  ", seen.output["text"])
for word, p_gen, copied in zip(seen.output["tokens"], seen.output["p_gen"],
                               seen.output["copied"], strict=False):  # fmt: skip
    print(f"  {word:<18} p_gen {p_gen:.2f}{'  (copied: out of the vocabulary)' if copied else ''}")
words = seen.output["p_gen"][: len(seen.output["tokens"])]  # the end-of-summary step left out
print(f"{sum(p < 0.5 for p in words)} of {len(words)} words with p_gen below 0.5 (mostly copied)")
display(seen)

# %% [markdown]
# ## Coverage
#
# The coverage vector after each step is the running sum of the copy attention. Over the whole
# summary it says how much attention each source word received: a word attended at several
# steps gets a total above 1, and each such step pays See et al.'s coverage loss
# `Σ_i min(a^t_i, c^t_i)`. The model here was trained without coverage (`model.coverage: false`),
# so nothing discouraged it from attending twice. The plot shows the final coverage over the
# source and the coverage loss of each output step, computed from the view's copy attention.

# %%
copy = seen.view("copy").layers[0][0]  # (T + 1, S): each output step over the source
coverage = torch.cumsum(copy, dim=0) - copy  # (T + 1, S): c^t, the attention before step t
step_loss = torch.minimum(copy, coverage).sum(-1)  # (T + 1,)
fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 4.5), dpi=80)
top.bar(range(copy.size(1)), copy.sum(0))
top.axhline(1.0, color="grey", linestyle=":")
top.set_ylabel("coverage after the summary")
top.set_xlabel("source position")
written = [*seen.output["tokens"], "</s>"]
bottom.bar(range(len(written)), step_loss)
bottom.set_xticks(range(len(written)), written, rotation=60, fontsize=8)
bottom.set_ylabel("coverage loss")
plt.tight_layout()
plt.show()
print(f"coverage loss of this summary: {step_loss.sum():.3f}; most attended source words:",
      ", ".join(seen.view("copy").keys[i] for i in copy.sum(0).topk(5).indices))  # fmt: skip

# %% [markdown]
# The copy attention itself as a static figure (`seen.figure(view="copy")`): the rows are the
# `a^t` whose running sum is the coverage.

# %%
display(seen.figure(view="copy", layer=0))
plt.close("all")

# %% [markdown]
# Repetition, See et al.'s way: the share of an output's trigrams that occur earlier in it. The
# report's decoding blocks repeated trigrams outright (Paulus et al.'s trick); decoding the same
# test docstrings without the block shows how much the model repeats on its own. Training with
# coverage (`model.coverage: true`, loss weight `train.coverage_weight`) is meant to lower that
# share; the summarisation results compare both at full scale, where on this docstring text it
# did not, and say why.

# %%
sources = [s for s, _ in test[: budget(100, 4)]]
blocked = summariser.respond(sources)
summariser.decode = replace(summariser.decode, no_repeat_ngram=0)
free = summariser.respond(sources)
for name, outputs in (("with the trigram block", blocked), ("without it", free)):
    share = repeated_ngram_share([r.tokens for r in outputs], n=3)
    print(f"{name:<24} repeated trigrams {100 * share:.1f}%")

# %% [markdown]
# ## Copying what was never seen: `tiny/copy-pointer-rnn`
#
# A small budget of docstrings teaches the model common words first. The copying mechanism in
# its pure form: synthetic texts whose summaries are invented names, each used once in the whole
# corpus, so no vocabulary can hold them and only copying can write them. Trained briefly, the
# pointer-generator writes names it has never seen: look at the report's `copied` share and at
# `p_gen` near 0 for each name it writes (the words marked copied are out of its vocabulary).

# %%
tiny = train("tiny/copy-pointer-rnn", "copy", train__max_steps=budget(200, 2),
             data__options__n_train=budget(3000, 200))  # fmt: skip
copier = qkv.load(tiny)
print("\n".join(copier.report("test", limit=budget(None, 4)).lines))
named = copier.views("the king of bavotek went to rulamip and spoke")
print("summary:", named.output["text"])
for word, p_gen, copied in zip(named.output["tokens"], named.output["p_gen"],
                               named.output["copied"], strict=False):  # fmt: skip
    print(f"  {word:<12} p_gen {p_gen:.2f}{'  (copied)' if copied else ''}")
display(named.figure(view="copy", layer=0))
plt.close("all")
