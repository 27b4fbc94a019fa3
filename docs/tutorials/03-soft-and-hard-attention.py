# %% [markdown]
# # Soft and hard attention: Show, Attend and Tell
#
# Xu et al. (2015), *Show, Attend and Tell: Neural Image Caption Generation with Visual
# Attention*, write a caption one word at a time with an LSTM that, before each word, looks at
# a grid of image regions. They compare two ways of looking:
#
# - **soft** (deterministic) attention reads a weighted average of every region, the weights a
#   softmax; it is differentiable and trained by backpropagation alone;
# - **hard** (stochastic) attention reads *one* region, drawn from that same distribution; the
#   draw has no gradient, so the choice is trained with REINFORCE (Williams 1992).
#
# Their figures 2 and 3 show both models' attention for each word of a caption: a smooth
# blob for soft attention, a single sharp spot for hard attention. This tutorial reproduces the
# comparison at laptop scale on captions whose right answer is known: strips of two to four of
# scikit-learn's 8x8 handwritten digits, captioned with the digits' names in order ("seven two
# nine"). Word *k* describes tile *k*, so we can check where each word looked.
#
# **Budget.** Both models train in a few minutes on a 2-core CPU (the full run, all cells, takes
# well under ten). One switch sets every budget: the environment variable `QKV_TUTORIAL_MODE`
# (`full`, the default, or `smoke`: a few steps of each, the same code, which the tests run).
# The MNIST presets (`caption/mnist-soft`, `caption/mnist-hard`) train the same models on real
# 28x28 MNIST digits for about 25 minutes each: their scores are in
# [docs/results/captioning.md](../results/captioning.md).

# %%
import csv
import os
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from IPython.display import display

import qkv
from qkv.tasks.captioning.runner import caption_strips

MODE = os.environ.get("QKV_TUTORIAL_MODE", "full")
if MODE not in ("full", "smoke"):
    raise ValueError(f"QKV_TUTORIAL_MODE must be full or smoke, got {MODE!r}")


def budget(full, smoke):
    """The full run's value, or the smoke run's."""
    return full if MODE == "full" else smoke


RUNS = Path(tempfile.mkdtemp(prefix="qkv-tutorial-"))
QUIET = {"train__tensorboard": False, "train__checkpoint_every": None}
# Strips of 2-4 digits (caption/tiny's strips hold 1-2), a fresh draw of strips every epoch.
STRIPS = {
    "data__min_tiles": 2,
    "data__max_tiles": 4,
    "data__train_strips": budget(4000, 64),
    "data__valid_strips": budget(200, 8),
    "data__test_strips": budget(500, 16),
}


def train(preset: str, name: str, **overrides) -> Path:
    """Train ``preset`` into ``RUNS / name`` with ``overrides`` (and, in a smoke run, one warm-up
    step); the trained model's folder."""
    smoke = {} if MODE == "full" else {"train__warmup_steps": 1}
    return qkv.train(preset, out_dir=str(RUNS / name), **QUIET, **smoke, **overrides)


_ = torch.manual_seed(0)  # (the generator it returns is not shown)

# %% [markdown]
# ## The model and soft attention
#
# `caption/tiny` is the paper's model made small. A CNN turns each 8x8 digit into a 2x2 grid of
# region vectors $a_i$ (each with an embedding of its place, so "the first 3" and "the second
# 3" differ). At step $t$ the LSTM's previous state $h_{t-1}$ scores every region with the
# additive score of the paper's eq. (4)-(5),
#
# $$e_{ti} = v^\top \tanh(W h_{t-1} + U a_i), \qquad \alpha_t = \operatorname{softmax}(e_t),$$
#
# and soft attention reads the expected region, gated by a scalar $\beta_t$ (section 4.2.1):
#
# $$z_t = \beta_t \sum_i \alpha_{ti}\, a_i .$$
#
# The loss is the caption's negative log-likelihood plus the "doubly stochastic" penalty
# $\lambda \sum_i (1 - \sum_t \alpha_{ti})^2$ (eq. 14), which asks the model to look at every
# region about once over the whole caption.

# %%
soft_run = train("caption/tiny", "soft", train__max_steps=budget(1200, 2),
                 train__eval_every=budget(300, 2), **STRIPS)  # fmt: skip
soft = qkv.load(soft_run)
print(soft.model.config)

# %% [markdown]
# ## Hard attention, trained with REINFORCE
#
# The hard model has the same parameters; it differs in how it reads. It draws one region
# $s_t \sim \operatorname{Multinoulli}(\alpha_t)$ and reads only that one, $z_t = \beta_t
# a_{s_t}$ (eq. 8-9). The draw has no gradient, so the score is trained with the REINFORCE
# estimate of eq. (12): the gradient of $\log p(s_t)$ times the reward (here the
# log-likelihood of the words from step $t$ on) minus a baseline $b$, a moving average of the
# reward that reduces the estimate's variance, plus an entropy bonus that keeps the model
# exploring. As in the paper (section 4.1), half of the training strips use the expected
# (soft) context instead of a sample. At evaluation nothing is sampled: the model reads the
# most likely region.
#
# The run's `train:` section weighs the terms; the preset `caption/mnist-hard` uses a
# REINFORCE weight of 0.1 (at the paper's 1, its noise drowned the rest of the gradient in the
# tuning runs of [docs/results/captioning.md](../results/captioning.md)), and so do we.

# %%
hard_run = train("caption/tiny", "hard", model__attention="hard", train__reinforce_weight=0.1,
                 train__entropy_weight=0.01, train__max_steps=budget(1200, 2),
                 train__eval_every=budget(300, 2), **STRIPS)  # fmt: skip
hard = qkv.load(hard_run)
print(hard.model.config.attention, "attention")

# %% [markdown]
# ## How well each one captions
#
# The captioning runner's `report` scores held-out strips (drawn from digits the models never
# saw): **exact match** (the whole caption right), and **alignment accuracy**, the share of
# words whose attention peak lies on their own digit, which only a model that looks in the right
# place gets right. (BLEU, which the report also prints, counts 4-grams: a caption of two to
# four words has few of them, so it says little here.)
#
# Alongside, how *sharp* each model's attention is: the mean of the largest weight
# $\max_i \alpha_{ti}$ per word (1 for a single region; 1/R spread over R regions) and the
# mean entropy of $\alpha_t$ in nats.

# %%
test = soft.test_strips()
rows, said = {}, {}  # said: each model's caption of each test strip
for name, runner in (("soft", soft), ("hard", hard)):
    report = runner.report("test")
    print(f"{name} attention:", *report.lines, sep="\n  ")
    captions = caption_strips(runner.model, runner.vocab, test, batch_size=250)
    said[name] = [c.words for c in captions]
    maps = [c.attention.flatten(1) for c in captions]  # (words, R) per strip, R by its width
    largest = torch.cat([m.max(-1).values for m in maps])  # (all words,)
    entropy = torch.cat([-(m * m.clamp_min(1e-12).log()).sum(-1) for m in maps])
    rows[name] = {
        "exact match": report.record["exact_match"],
        "alignment accuracy": report.record["alignment_accuracy"],
        "mean largest weight": float(largest.mean()),
        "mean entropy (nats)": float(entropy.mean()),
    }
columns = list(rows["soft"])
print(f"{'':6}" + "".join(f"{c:>22}" for c in columns))
for name, row in rows.items():
    print(f"{name:6}" + "".join(f"{row[c]:22.3f}" for c in columns))
if MODE == "full":  # the claims the text makes, checked on this run
    assert all(row["exact match"] > 0.8 for row in rows.values()), rows
    assert rows["hard"]["mean largest weight"] > rows["soft"]["mean largest weight"], rows
    assert rows["hard"]["mean entropy (nats)"] < rows["soft"]["mean entropy (nats)"], rows

# %% [markdown]
# ## Learning curves
#
# Each run's `metrics.csv` records the validation exact match at every evaluation. Look at how
# quickly each model gets there: hard attention's gradient is a noisy estimate, so it tends to
# lag behind soft attention early on.

# %%
fig, ax = plt.subplots(figsize=(5, 3), dpi=80)
for name, run in (("soft", soft_run), ("hard", hard_run)):
    with open(run / "metrics.csv", newline="") as file:
        evaluated = [r for r in csv.DictReader(file) if r["valid_exact_match"]]
    steps = [int(r["step"]) for r in evaluated]
    ax.plot(steps, [float(r["valid_exact_match"]) for r in evaluated], marker="o", label=name)
ax.set_xlabel("training step")
ax.set_ylabel("validation exact match")
ax.set_ylim(0, 1.02)
ax.legend()
plt.show()

# %% [markdown]
# ## Where each word looks
#
# Now one held-out strip, and for each word each model's attention over the strip (the paper's
# figures 2 and 3). The strip is picked in code: the first of the longest test strips that both
# models caption correctly, so every word is right and word *k* names tile *k*. Every panel uses
# one colour scale, 0 to 1, so a sharp map is bright and a spread map is dim:
#
# - **soft**: the distribution $\alpha_t$ that the model averaged the regions with;
# - **hard**: the distribution $\alpha_t$ the region is drawn from, with 50 draws from it marked
#   (a dot per region drawn, its size the number of draws) and the region the model reads at
#   evaluation (the most likely one) boxed.
#
# Both should light up the digit the word names, word *k* on tile *k*.

# %%
counts = test.counts.tolist()
references = [soft.vocab.decode(test.caption(i)) for i in range(len(test))]
right = [i for i, ref in enumerate(references) if said["soft"][i] == said["hard"][i] == ref]
if MODE == "full":  # a smoke run's models may caption none right: then it shows the first
    assert right, "neither model captions any test strip correctly"
index = max(right or [0], key=lambda i: (counts[i], -i))  # the first of the longest
strip = test.strip(index)  # uint8 (1, 8, n * 8)
truth = " ".join(references[index])
(soft_caption,) = soft.caption([strip])
(hard_caption,) = hard.caption([strip])
print("reference:", truth)
print("soft:     ", " ".join(soft_caption.words))
print("hard:     ", " ".join(hard_caption.words))


def overlay(ax, weights, title):
    """The strip in grey with ``weights (Gh, Gw)`` laid over it on a 0-1 scale."""
    height, width = strip.shape[1:]
    ax.imshow(strip[0].numpy(), cmap="gray", extent=(0, width, height, 0))
    shown = ax.imshow(weights.numpy(), cmap="inferno", vmin=0, vmax=1, alpha=0.6,
                      extent=(0, width, height, 0))  # fmt: skip
    ax.set_title(title, fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
    return shown


size = soft_caption.region_size  # pixels per region side
words = max(len(soft_caption.words), len(hard_caption.words))
fig, axes = plt.subplots(words, 2, figsize=(7, 1.3 * words), dpi=80, squeeze=False)
for ax in axes.flat:
    ax.axis("off")
generator = torch.Generator().manual_seed(0)
for t, word in enumerate(soft_caption.words):
    overlay(axes[t, 0], soft_caption.attention[t], f"soft: {word!r}")
for t, word in enumerate(hard_caption.words):
    alpha = hard_caption.attention[t]  # (Gh, Gw)
    shown = overlay(axes[t, 1], alpha, f"hard: {word!r}")
    draws = torch.multinomial(alpha.flatten(), 50, replacement=True, generator=generator)
    drawn = torch.bincount(draws, minlength=alpha.numel())
    for region in drawn.nonzero().flatten().tolist():
        row, col = divmod(region, alpha.size(1))
        axes[t, 1].scatter((col + 0.5) * size, (row + 0.5) * size, s=4 * int(drawn[region]),
                           color="cyan", edgecolors="black", linewidths=0.5)  # fmt: skip
    row, col = divmod(int(alpha.argmax()), alpha.size(1))
    axes[t, 1].add_patch(plt.Rectangle((col * size, row * size), size, size, fill=False,
                                       edgecolor="lime", linewidth=1.5))  # fmt: skip
fig.colorbar(shown, ax=axes, shrink=0.6, label="attention weight")
plt.show()

# %% [markdown]
# The same soft-attention maps, as qkv draws any captioner's view (`seen.figure()`, each map
# scaled to its own maximum, which the panel's title gives), and as the explorer's interactive
# page, inline (`display(seen)`: hover a word to see its map).

# %%
seen = soft.views(strip)
figure = seen.figure()
figure.set_dpi(80)
display(figure)
display(seen)

# %% [markdown]
# ## What to take away
#
# - Both models learn to caption the strips, and both learn *where* each word is: look at the
#   alignment accuracy, though neither was ever told which tile a word belongs to.
# - Soft attention spreads its weight (a larger entropy, a smaller largest weight); hard
#   attention concentrates it, because it is rewarded for a region it *reads alone*: a spread
#   distribution would make it read the wrong digit often.
# - The price of hard attention is the training signal: REINFORCE is an unbiased but noisy
#   gradient, which needs a baseline, an entropy bonus, the expected-context half of each batch
#   and a small weight to train at all. Soft attention is the one that became standard: the
#   Transformer's attention is soft.
