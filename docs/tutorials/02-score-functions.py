# %% [markdown]
# # Score functions side by side, and why the dot product is scaled
#
# An attention layer turns a query and a set of keys into weights in two steps: a **score
# function** gives each key an energy `e_j = score(q, k_j)`, and a softmax turns the energies
# into weights `a_j = exp(e_j) / sum_i exp(e_i)`. The papers of 2015-2017 differ mostly in the
# score. qkv has each as a small module with one signature, `score(query, key) -> energies`
# (`qkv.attention`):
#
# | score | energy | paper |
# |---|---|---|
# | `Dot` | `q . k` | Luong, Pham & Manning 2015, eq. (8) |
# | `General` (bilinear) | `q^T W k` | Luong et al. 2015, eq. (8) |
# | `Additive` | `v^T tanh(W q + U k)` | Bahdanau, Cho & Bengio 2015, eq. (A.1.2) |
# | `ScaledDot` | `q . k / sqrt(d_k)` | Vaswani et al. 2017, eq. (1) |
# | `Location` | `(W q)_j`: the query alone, no key | Luong et al. 2015, eq. (9) |
#
# The first half of this tutorial trains each on an alignment whose right answer is known; the
# second half measures why Vaswani et al. divide the dot product by `sqrt(d_k)`.
#
# **Budget.** About a minute on a 2-core CPU. One switch sets every budget: the environment
# variable `QKV_TUTORIAL_MODE` (`full`, the default, or `smoke`: a few steps, the same code,
# which the tests run).

# %%
import math
import os

import matplotlib.pyplot as plt
import torch

import qkv
from qkv.studies.score_functions import score_alignments

MODE = os.environ.get("QKV_TUTORIAL_MODE", "full")
if MODE not in ("full", "smoke"):
    raise ValueError(f"QKV_TUTORIAL_MODE must be full or smoke, got {MODE!r}")


def budget(full, smoke):
    """The full run's value, or the smoke run's."""
    return full if MODE == "full" else smoke


plt.rcParams["figure.dpi"] = 80
_ = torch.manual_seed(0)  # one seed for the whole notebook

# %% [markdown]
# ## Each score learns a known alignment
#
# The task (`qkv.studies.score_functions`, the experiment behind `qkv demo`): a "source
# sentence" is `S = 6` random vectors; each of the 6 queries is a noisy copy of one of them, in
# a shuffled order, so the right alignment, which source each query should attend to, is a
# permutation known in advance. The parameterised scores (`General`, `Additive`, `Location`)
# are trained to put their weight there; `Dot` and `ScaledDot` have no parameters and are
# evaluated as they are. Accuracy is the fraction of held-out queries whose largest weight falls
# on the right source.
#
# What to look for: the content-based scores (dot, bilinear, additive, scaled dot) find the
# permutation, one bright cell per row on the circles. `Location` sees only the query, never the
# keys, so it cannot know where a *shuffled* source vector went; the best it can learn is where
# queries tend to point on average, and its accuracy stays near chance (1/6). That is why Luong
# et al. used it only as a baseline: attention by position alone cannot follow reordering.

# %%
alignments = score_alignments(steps=budget(300, 5), seed=0)
figure, axes = plt.subplots(1, len(alignments), figsize=(3 * len(alignments), 3.2))
for ax, result in zip(axes, alignments, strict=True):
    ax.imshow(result.weights.numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
    rows = range(len(result.target))
    ax.scatter(result.target.numpy(), rows, s=120, facecolors="none", edgecolors="red")
    ax.set_title(f"{result.name}\naccuracy {result.accuracy:.0%}", fontsize=10)
    ax.set_xlabel("source position")
axes[0].set_ylabel("query")
figure.suptitle("alignment of one held-out example (red circles: the right source)")
plt.tight_layout()
plt.show()
for result in alignments:
    print(f"{result.name:10s} accuracy {result.accuracy:6.1%}  ({result.train_steps} steps)")

accuracy = {result.name: result.accuracy for result in alignments}
if MODE == "full":  # the claims above, checked on this run
    assert min(accuracy[n] for n in ("Dot", "ScaledDot", "General", "Additive")) > 0.9
    assert accuracy["Location"] < 0.5

# %% [markdown]
# ## Why divide by sqrt(d_k)?
#
# Vaswani et al. 2017 (section 3.2.1 and its footnote 4): "We suspect that for large values of
# `d_k`, the dot products grow large in magnitude, pushing the softmax function into regions
# where it has extremely small gradients. To illustrate why the dot products get large, assume
# that the components of `q` and `k` are independent random variables with mean 0 and variance
# 1. Then their dot product, `q . k = sum_i q_i k_i`, has mean 0 and variance `d_k`."
#
# Each term `q_i k_i` has variance 1, and the `d_k` terms are independent, so the variances add
# up: the standard deviation of the energies grows as `sqrt(d_k)`, and dividing by `sqrt(d_k)`
# brings it back to 1 whatever the head width. First the claim itself, measured:

# %%
widths = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
samples = budget(20000, 500)
variance, scaled_variance = [], []
for d_k in widths:
    q, k = torch.randn(samples, d_k), torch.randn(samples, d_k)
    dots = (q * k).sum(-1)  # (samples,) one q . k each
    variance.append(dots.var().item())
    scaled_variance.append((dots / math.sqrt(d_k)).var().item())
    print(f"d_k = {d_k:5d}   var(q.k) = {variance[-1]:8.1f}   var(q.k / sqrt(d_k)) = "
          f"{scaled_variance[-1]:.2f}")  # fmt: skip

figure, ax = plt.subplots(figsize=(5, 3.5))
ax.loglog(widths, variance, "o-", label="var(q . k)")
ax.loglog(widths, scaled_variance, "s-", label="var(q . k / sqrt(d_k))")
ax.loglog(widths, widths, "k:", label="d_k")
ax.set_xlabel("d_k")
ax.set_ylabel("variance of the energy")
ax.legend()
plt.show()

# %% [markdown]
# ## What large energies do to the softmax
#
# Now put those energies through attention: one query against `S = 32` random keys, with
# `qkv.attend` and the two scores, `Dot()` (unscaled) and `ScaledDot()` (`1/sqrt(d_k)`). Two
# measures of how peaked each row of weights is: the **largest weight** (1 when all the weight
# sits on one key) and the **entropy** `-sum_j a_j log a_j` (`log 32 = 3.47` for a uniform row,
# 0 for a one-hot row).
#
# What to look for: without scaling, the largest weight climbs towards 1 and the entropy falls
# towards 0 as `d_k` grows, although the inputs are equally random at every width: the softmax
# is **saturated**, it picks one key at random. With scaling, both curves stay flat: the
# softmax behaves the same at every head width.

# %%
keys_per_query, queries = 32, budget(2000, 50)


def attention_weights(score, q, k):
    """``qkv.attend``'s weights of queries ``q (N, 1, d)`` over keys ``k (N, S, d)``: (N, S)."""
    return qkv.attend(q, k, k, score=score, need_weights=True).weights[:, 0]


def entropy(weights):
    return -(weights * weights.clamp_min(1e-30).log()).sum(-1)  # (N,)


scores = {"dot (unscaled)": qkv.Dot(), "scaled dot": qkv.ScaledDot()}
peak = {name: [] for name in scores}
spread = {name: [] for name in scores}
for d_k in widths:
    q = torch.randn(queries, 1, d_k)  # (N, 1, d_k)
    k = torch.randn(queries, keys_per_query, d_k)  # (N, S, d_k)
    for name, score in scores.items():
        weights = attention_weights(score, q, k)  # (N, S)
        peak[name].append(weights.max(-1).values.mean().item())
        spread[name].append(entropy(weights).mean().item())

figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
for name in scores:
    left.semilogx(widths, peak[name], "o-", label=name)
    right.semilogx(widths, spread[name], "o-", label=name)
left.set_ylabel("mean largest weight")
right.set_ylabel("mean entropy (nats)")
right.axhline(math.log(keys_per_query), color="k", ls=":", label="uniform: log S")
for ax in (left, right):
    ax.set_xlabel("d_k")
    ax.legend()
plt.tight_layout()
plt.show()
for name in scores:
    print(f"{name:15s} d_k = {widths[-1]}: largest weight {peak[name][-1]:.3f}, "
          f"entropy {spread[name][-1]:.3f} nats")  # fmt: skip

# %% [markdown]
# ## ... and to the gradient
#
# A saturated softmax has almost no gradient. Its Jacobian is `diag(a) - a a^T`, which is zero
# when `a` is one-hot: a small change of the energies changes no weight, so nothing below the
# softmax (the query and key projections) learns. Here a random loss `L = sum_j a_j g_j` (`g`
# random, a stand-in for whatever the layers above want) is backpropagated through the softmax
# to the energies `e = score(q, k)` (each score module is callable: `qkv.Dot()(q, k)` returns the
# energies), and we plot the median gradient norm `|dL/de|` over the queries (the median
# because, unscaled, a rare query whose two best keys happen to tie keeps a large gradient).
#
# What to look for: with scaling the gradient keeps the same size at every width; without it the
# gradient collapses as `d_k` grows (the log scale shows by how many orders of magnitude), which
# is the footnote's "extremely small gradients". Additive attention does not have this
# problem: `tanh` bounds its energies whatever the width, one reason Bahdanau's score worked
# well without any scale.

# %%
gradient = {name: [] for name in scores}
for d_k in widths:
    q = torch.randn(queries, 1, d_k)
    k = torch.randn(queries, keys_per_query, d_k)
    g = torch.randn(queries, 1, keys_per_query)  # what the layers above want of each weight
    for name, score in scores.items():
        energies = score(q, k).detach().requires_grad_(True)  # (N, 1, S)
        (energies.softmax(-1) * g).sum().backward()
        gradient[name].append(energies.grad.norm(dim=-1).median().item())  # typical |dL/de|

figure, ax = plt.subplots(figsize=(5, 3.5))
for name in scores:
    ax.loglog(widths, gradient[name], "o-", label=name)
ax.set_xlabel("d_k")
ax.set_ylabel("median |dL/de|")
ax.legend()
plt.show()
for name in scores:
    print(f"{name:15s} |dL/de| at d_k = {widths[0]}: {gradient[name][0]:.3g}, "
          f"at d_k = {widths[-1]}: {gradient[name][-1]:.3g}")  # fmt: skip

if MODE == "full":  # the claims above, checked on this run
    assert abs(variance[-1] / widths[-1] - 1) < 0.1 and abs(scaled_variance[-1] - 1) < 0.1
    assert peak["dot (unscaled)"][-1] > 0.9 > 0.5 > peak["scaled dot"][-1]
    assert gradient["dot (unscaled)"][-1] < 0.1 * gradient["scaled dot"][-1]

# %% [markdown]
# ## What to take away
#
# * The content-based scores all learn a content alignment; a location score cannot follow a
#   reordering. Which content score is "best" depends on the model around it: Luong et al. 2015
#   (Table 4) found `general` best for their global attention, and Vaswani et al. chose the
#   scaled dot product because it is a single matrix product, fast on GPUs.
# * The dot product's variance grows as `d_k`; without the `1/sqrt(d_k)` the softmax saturates
#   and its gradient vanishes as heads get wider. `qkv.ScaledDot()` is the default score of
#   `qkv.attend`; `ScaledDot(scale=...)` takes another factor.
