# %% [markdown]
# # The Vision Transformer: an image as a sentence of patches
#
# Dosovitskiy et al. (2021), "An Image is Worth 16x16 Words", took the Transformer encoder
# unchanged and fed it an image: cut the image into `p x p` patches, flatten each patch into a
# vector, project it to the model's width, put a learned `[CLS]` token in front and add learned
# positions (their eq. 1):
#
# $$z_0 = [x_\mathrm{class};\ x_p^1 E;\ \dots;\ x_p^P E] + E_\mathrm{pos}$$
#
# The encoder's output at `[CLS]` is the image's vector; a linear head classifies it. Since the
# only thing that mixes patches is attention, the `[CLS]` token's attention says which patches
# the class was read from. This tutorial cuts an image into patches, trains a small ViT on
# scikit-learn's 8x8 digits (`vit/digits`), scores it on the test split, and looks at the `[CLS]`
# attention per layer and head, and at two ways of following it down through the layers:
# attention rollout and attention flow (Abnar & Zuidema 2020).
#
# **Budget.** The training cell prints how long it took; the whole run's time is in the
# notebook's metadata (`qkv.seconds`). One switch sets every budget: the environment variable
# `QKV_TUTORIAL_MODE` (`full`, the default, or `smoke`: a few steps, the same code, which the
# tests run).

# %%
import os
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from IPython.display import display

import qkv
from qkv.attention.rollout import attention_rollout
from qkv.data.images.datasets import load_digits
from qkv.tasks.image_classification.runner import to_model_input
from qkv.tasks.spec import ViewOptions
from qkv.viz.image_attention import image_attention_figure

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
    step); the trained model's folder."""
    smoke = {} if MODE == "full" else {"train__warmup_steps": 1}
    return qkv.train(preset, out_dir=str(RUNS / name), **QUIET, **smoke, **overrides)


# %% [markdown]
# ## Patches
#
# `vit/digits` reads 8x8 grey images with `p = 2`: a 4x4 grid of `P = 16` patches, each a
# vector of `C p^2 = 4` pixel values. The paper's ViT-B/16 reads 224x224 colour images as 196
# patches of 768 values; the recipe is the same. Below: a test digit, the same digit cut along
# the patch grid, and the patch embedding's input, one row per patch in the order the encoder
# reads them (row-major over the grid), `[CLS]` in front of them.

# %%
digits = load_digits()
test_images, test_labels = digits.split("test")  # uint8 (N, 1, 8, 8), int64 (N,)
image = test_images[0]  # (1, 8, 8)
p = 2
patches = image.unfold(1, p, p).unfold(2, p, p)  # (1, 4, 4, p, p): (C, gh, gw, p, p)
rows = patches.permute(1, 2, 0, 3, 4).reshape(-1, p * p)  # (P, C p^2), row-major over the grid
print(f"image {tuple(image.shape)} -> {rows.shape[0]} patches of {rows.shape[1]} values")

fig, axes = plt.subplots(1, 3, figsize=(9, 3), dpi=80, gridspec_kw={"width_ratios": [1, 1, 0.6]})
axes[0].imshow(image[0], cmap="gray_r")
axes[0].set_title(f"a test image (label {digits.classes[test_labels[0]]})")
grid = torch.ones(4 * 3 - 1, 4 * 3 - 1)  # the patches with a 1-pixel gap between them
for r in range(4):
    for c in range(4):
        grid[3 * r : 3 * r + 2, 3 * c : 3 * c + 2] = patches[0, r, c] / 255
axes[1].imshow(grid, cmap="gray_r", vmin=0, vmax=1)
axes[1].set_title("cut into 2x2 patches")
axes[2].imshow(rows / 255, cmap="gray_r", aspect="auto")
axes[2].set_title("x_p: one row per patch")
axes[2].set_xlabel("pixel in the patch")
axes[2].set_ylabel("patch")
for ax in axes[:2]:
    ax.set_xticks([])
    ax.set_yticks([])
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Training the ViT
#
# Four pre-norm layers of four heads, width 64, on 1,439 training digits shifted by up to one
# pixel. The trainer keeps the weights that scored best on the validation split; the test split
# is scored once, at the end.

# %%
started = time.process_time()
trained = train("vit/digits", "vit", train__max_steps=budget(1500, 2), train__max_minutes=None,
                train__eval_every=budget(150, 2))  # fmt: skip
print(f"trained in {time.process_time() - started:.0f} CPU-seconds")
vit = qkv.load(trained)
report = vit.report("test")
print("\n".join(report.lines))
accuracy = report.record["accuracy"]
if MODE == "full":  # ten classes: chance is 0.1
    assert accuracy > 0.85, accuracy

# %% [markdown]
# The model's first step is the same cut: its patch embedding is a `Conv2d` with kernel and
# stride `p`, which applies one linear map `E` to every patch. Applying `E` to the rows above by
# hand gives the same vectors, before `[CLS]` and the positions are added:

# %%
model = vit.model
x = to_model_input(image[None])  # (1, 1, 8, 8) in [-1, 1]
by_conv = model.patch_embed(x).flatten(2).transpose(1, 2)[0]  # (P, D)
E = model.patch_embed.weight.reshape(model.config.hidden_size, -1)  # (D, C p^2)
by_hand = to_model_input(rows[:, None]).flatten(1) @ E.T + model.patch_embed.bias  # (P, D)
print("max |conv - by hand|:", (by_conv - by_hand).abs().max().item())
tokens = model.embed(x)  # (1, 1 + P, D): [CLS] first
print("tokens the encoder reads:", tuple(tokens.shape))

# %% [markdown]
# ## What `[CLS]` attends to, layer by layer
#
# `vit.views(image, ViewOptions(rollout=True))` shows, for one test image, the `[CLS]` row of
# each layer's attention laid over the image as a 4x4 map (the mean of the heads and each
# head), after two maps that sum the whole stack up: the rollout and the flow (both below). Look
# at how early layers spread their weight while later heads pick out strokes of the digit;
# different heads of one layer often look at different parts.

# %%
seen = vit.views(image, ViewOptions(rollout=True))
print(seen.describe(), "-- label:", digits.classes[test_labels[0]])
display(seen)

# %% [markdown]
# The same maps as static figures. `ImageView.figure(layer=..., head=...)` draws one layer's
# map (here the first layer's head mean). The view's `groups` hold every map as a `(gh, gw)`
# grid: its first `view.summaries` groups are the rollout and the flow, group
# `view.summaries + l` is layer `l` (its head mean, then each head), and
# `qkv.viz.image_attention.image_attention_figure` lays any stack of them over the image (here
# every head of the last layer).

# %%
view = seen.view("vit")
display(view.figure(layer=0))
summary, layers = view.groups[: view.summaries], view.groups[view.summaries :]
print("summaries:", [group.name for group in summary], "-- layers:", len(layers))
last = layers[-1].maps[1:]  # [("head 0", (gh, gw)), ...]: the last layer's heads
heads = torch.stack([grid for _, grid in last])  # (H, gh, gw)
titles = [f"layer {view.layers - 1}, {label}" for label, _ in last]
display(image_attention_figure(image, heads, titles, title="[CLS] attention, last layer"))
plt.close("all")

# %% [markdown]
# ## Attention rollout and attention flow
#
# One layer's map says what `[CLS]` reads from that layer's input, but after the first layer
# every token is already a mixture of patches. Abnar & Zuidema (2020) follow the mixture down
# in two ways, both from each layer's head-mean weights `W_l` plus the residual,
# `A_l = (W_l + I) / 2`:
#
# - **Rollout** (their eq. 1) multiplies the layers through, `Ã = A_L ... A_1`: the `[CLS]` row
#   of `Ã` adds up every path from `[CLS]` at the top to a patch at the bottom, each path's
#   weight the product of its edges.
# - **Flow** (their section 3) reads the stack as a flow network whose edges have capacities
#   `A_l[i, j]`, and gives each patch the maximum flow from `[CLS]` at the top to that patch at
#   the bottom. A path carries no more than its weakest edge, so flow spreads the credit more
#   evenly over the patches than rollout does.
#
# Rollout computed here from the model's own weights is the view's rollout group. In the
# figure each map has its own colour scale, up to the largest weight its title gives.

# %%
with torch.inference_mode():
    weights = model(x, need_weights=True).attentions  # L x (1, H, 1 + P, 1 + P)
rolled = attention_rollout(weights)[0, 0, 1:]  # (P,): [CLS]'s row without [CLS]
rolled = (rolled / rolled.sum()).reshape(4, 4)  # (gh, gw)
groups = {group.name: group.maps[0][1] for group in summary}  # "rollout", "flow": (gh, gw)
print("max |rollout by hand - the view's|:", (rolled - groups["rollout"]).abs().max().item())
means = [group.maps[0][1] for group in layers]  # each layer's head mean
maps = torch.stack([*means, groups["rollout"], groups["flow"]])  # (L + 2, gh, gw)
titles = [f"layer {i} mean" for i in range(len(means))] + ["rollout", "flow"]
display(image_attention_figure(image, maps, titles, title="[CLS] per layer, rolled out, flowed"))
plt.close("all")

# %% [markdown]
# Rollout and flow over a few test digits, each titled with the model's answer and its
# probability (`vit.attention(image, flow=True)` returns both maps). Look at where the weight
# sits, on the strokes that tell this digit from the others or spread over the background, and
# compare the flow with the rollout of the same digit, drawn on one colour scale (zero to the
# larger of the two maps' largest weights): the cell prints the share of the patch that each
# map weighs most (1/16 would be a flat map).

# %%
shown = budget(6, 2)
fig, axes = plt.subplots(3, shown, figsize=(10 * shown / 6, 5.2), dpi=80, squeeze=False)
for i in range(shown):
    one = vit.attention(test_images[i], flow=True)
    label = one.prediction.label
    axes[0, i].imshow(test_images[i][0], cmap="gray_r")
    axes[0, i].set_title(f"{label} ({one.prediction.probabilities[label]:.2f})")
    top = max(one.rollout.max(), one.flow.max()).item()  # one scale for the digit's two maps
    axes[1, i].imshow(one.rollout, cmap="inferno", vmin=0, vmax=top)
    axes[2, i].imshow(one.flow, cmap="inferno", vmin=0, vmax=top)
    print(f"digit {i}: largest patch share, rollout {one.rollout.max():.3f}, "
          f"flow {one.flow.max():.3f}")  # fmt: skip
    for ax in axes[:, i]:
        ax.axis("off")
axes[1, 0].set_title("rollout")
axes[2, 0].set_title("flow")
plt.tight_layout()
plt.show()
