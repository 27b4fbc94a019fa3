# %% [markdown]
# # Transformers as language models
#
# A language model gives the probability of the next token given the ones before it. Radford
# et al. (2018, 2019: GPT and GPT-2) made the decoder half of the Transformer (Vaswani et al.
# 2017) the standard one: a stack of blocks of *causal* self-attention, each position attending
# to itself and the positions before it, trained to minimise the cross-entropy of the next
# token,
#
# $$\mathcal{L} = -\frac{1}{T}\sum_{t=1}^{T} \log p(x_t \mid x_{<t}), \qquad
# \text{perplexity} = e^{\mathcal{L}} .$$
#
# This tutorial trains a character model of Shakespeare (the char-rnn setting of Karpathy 2015,
# with a Transformer, as in nanoGPT), scores it, samples from it, and shows what the KV cache
# does for generation. Then it checks qkv's GPT against Hugging Face's GPT-2 implementation.
#
# **Budget.** The full run takes under ten minutes on a 2-core CPU: the training is cut to 300
# steps, a fraction of the preset's 4,000 (30 minutes). The preset's full run reaches a
# validation loss of about 1.5 nats per character: its numbers, curve and samples are in
# [docs/results/shakespeare-char.md](../results/shakespeare-char.md). One switch sets every
# budget: the environment variable `QKV_TUTORIAL_MODE` (`full`, the default, or `smoke`: a few
# steps, the same code, which the tests run).

# %%
import csv
import os
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import torch

import qkv
from qkv.decoding.sampling import SamplingConfig, generate
from qkv.interop.gpt2 import from_hf_gpt2

with warnings.catch_warnings():  # transformers loads tqdm's notebook bars: no ipywidgets here
    warnings.filterwarnings("ignore", message="IProgress not found")  # (and no bar is shown)
    from transformers import GPT2Config, GPT2LMHeadModel

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


_ = torch.manual_seed(0)  # (the generator it returns is not shown)

# %% [markdown]
# ## A character model of Shakespeare
#
# `lm/shakespeare-char` is a 4-layer, 256-wide GPT reading 256 characters at a time (about 3.2
# million parameters), trained on Shakespeare's works with two plays held out for validation
# (*Julius Caesar*, *The Tempest*) and two for test. We keep the model and cut the training to
# a number of steps (the cosine schedule ends with them); no time limit, so the result does not
# depend on how busy the machine is.

# %%
shakespeare = train(
    "lm/shakespeare-char",
    "shakespeare",
    train__max_steps=budget(300, 2),
    train__max_minutes=None,
    train__batch_tokens=budget(4096, 512),  # the preset's 16 sequences of 256 (smoke: 2)
    train__eval_every=budget(100, 2),
    data__valid_tokens=budget(20000, 600),
)
lm = qkv.load(shakespeare)
parameters = sum(p.numel() for p in lm.model.parameters())
print(f"{parameters:,} parameters; {lm.model.config}")

# %% [markdown]
# ## Validation loss and perplexity
#
# The run's `metrics.csv` holds the training loss and, every `eval_every` steps, the loss on
# the start of the validation plays. Then the runner's `report` scores a larger part of them:
# loss in nats per character, perplexity (the model is as uncertain as a uniform choice among
# that many characters; the vocabulary has about 100) and bits per character. A model that
# knew only the characters' frequencies would score about 3.3 nats; look at how far below it
# the run gets, and compare with the full run's 1.50 in
# [docs/results/shakespeare-char.md](../results/shakespeare-char.md).

# %%
with open(shakespeare / "metrics.csv", newline="") as file:
    metrics = list(csv.DictReader(file))
fig, ax = plt.subplots(figsize=(5, 3), dpi=80)
trained = [r for r in metrics if r.get("train_loss")]
checked = [r for r in metrics if r.get("valid_loss")]
ax.plot([int(r["step"]) for r in trained], [float(r["train_loss"]) for r in trained],
        label="training")  # fmt: skip
ax.plot([int(r["step"]) for r in checked], [float(r["valid_loss"]) for r in checked],
        marker="o", label="validation")  # fmt: skip
ax.set_xlabel("step")
ax.set_ylabel("loss (nats per character)")
ax.legend()
plt.show()

report = lm.report("valid", limit=budget(50000, 600))
print(*report.lines, sep="\n")
if MODE == "full":
    assert report.record["loss"] < 3.0, report.record

# %% [markdown]
# ## Generated text
#
# Sampling at temperature 0.8 from the 40 most likely characters (the preset's `decode:`
# section), as many characters as fit the 256 of context after the prompt. After a few hundred
# steps the model has learned the shape of a play (speakers' names in
# capitals, line breaks, common words) long before it learns sense.

# %%
room = lm.model.config.max_len - len(lm.encode_prompt("ROMEO.\n"))  # characters after it
sampling = SamplingConfig(max_new_tokens=budget(room, 20), temperature=0.8, top_k=40, seed=0)
print(lm.generate(["ROMEO.\n"], sampling)[0])

# %% [markdown]
# ## The KV cache
#
# Generating token $t+1$ needs the keys and values of every earlier position in every layer.
# Without a cache the model recomputes them all at each step: the whole prefix goes through the
# network again, so each new token costs more than the last. With the **KV cache** each step
# feeds only the new token; its keys and values are appended to the cache, and its query attends
# over the cached ones. The result must be the same tokens: the cache changes the cost, not the
# computation. We generate greedily both ways (`qkv.decoding.sampling.generate`,
# `use_cache=True` or `False`) and time each.

# %%
prompt = lm.encode_prompt("ROMEO.\n")
greedy = SamplingConfig(max_new_tokens=budget(200, 8), temperature=0.0)
timings, outputs, limit = {}, {}, lm.model.config.max_len
with torch.inference_mode():
    for cached in (True, False):
        start = time.perf_counter()
        out = generate(lm.model, [prompt], greedy, use_cache=cached, context=limit)
        timings[cached] = (time.perf_counter() - start) / greedy.max_new_tokens
        outputs[cached] = out.tokens[0]
print("same tokens:", outputs[True] == outputs[False])
for cached in (True, False):
    print(f"{'with' if cached else 'without'} the cache: {1000 * timings[cached]:.2f} ms per token")
print(repr(lm.tokenizer.decode(outputs[True])))
assert outputs[True] == outputs[False]

# %% [markdown]
# ## GPT-2's weights, imported and checked against Hugging Face
#
# qkv's `TransformerLM` is GPT-2's architecture (pre-norm blocks, learned positions, GELU, an
# output layer tied to the embedding), and `qkv.interop.gpt2` imports GPT-2 weights from a
# Hugging Face `GPT2LMHeadModel` (`from_hf_gpt2`) or its saved folder (`load_gpt2`), splitting
# the fused `c_attn` projection into queries, keys and values and transposing GPT-2's `Conv1D`
# weights. The minGPT test is that the imported model's logits equal Hugging Face's.
#
# **No pretrained GPT-2 weights exist on this machine**, so the model below is a small GPT-2
# with **random** weights, built from a `GPT2Config`. The check is of the architecture and of
# the import, not of GPT-2's knowledge: if a projection were transposed, a layer norm misplaced
# or the head untied, the logits would differ by far more than float32 rounding.

# %%
_ = torch.manual_seed(0)  # (the generator it returns is not shown)
config = GPT2Config(vocab_size=500, n_positions=64, n_embd=96, n_layer=3, n_head=4,
                    bos_token_id=None, eos_token_id=None)  # fmt: skip
hf = GPT2LMHeadModel(config).eval()
ours = from_hf_gpt2(hf).eval()
ids = torch.randint(0, config.vocab_size, (2, 40))  # (B, T)
with torch.inference_mode():
    theirs = hf(ids).logits  # (B, T, V)
    mine = ours(ids).logits
difference = float((theirs - mine).abs().max())
print(f"logits {tuple(mine.shape)}, largest |Hugging Face - qkv|: {difference:.2e}")
torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)

# %% [markdown]
# And greedy generation from each, token for token (Hugging Face's `generate`; qkv's with the KV
# cache):

# %%
prompt_ids = ids[0, :5].tolist()
new = 20
with torch.inference_mode():
    theirs = hf.generate(torch.tensor([prompt_ids]), max_new_tokens=new, do_sample=False,
                         pad_token_id=0)[0, len(prompt_ids):].tolist()  # fmt: skip
    mine = generate(ours, [prompt_ids], replace(greedy, max_new_tokens=new)).tokens[0]
print("Hugging Face:", theirs)
print("qkv:         ", mine)
assert theirs == mine
