# %% [markdown]
# # Attention as a pointer: readers that answer with a word of the passage
#
# Most attention mixes: the weights average the values into a context vector. A reader can use
# the weights themselves as the answer. Given a passage and a question with one word blanked
# out (`XXXXX`, a *cloze* question), the answer is a word of the passage, so a distribution over
# the passage's positions is already a distribution over answers.
#
# - **The Attention Sum Reader** (Kadlec et al. 2016, eq. 1-4) encodes the passage with a
#   bidirectional GRU (`y_i`) and the question into one vector `u`, and attends by a dot product,
#   `s_i = softmax_i(y_i · u)`. A candidate word `c` may occur several times; its probability is
#   the sum of the attention over its occurrences: `P(c) ∝ Σ_{i: w_i = c} s_i`.
# - **A span reader** (DrQA, Chen et al. 2017) points twice: one distribution for the answer's
#   first word and one for its last, `P_start(i) ∝ exp(p_i W_s q)` and
#   `P_end(j) ∝ exp(p_j W_e q)`, and answers with the span `i ≤ j` maximising
#   `P_start(i) P_end(j)`. It chooses among every span of the passage, not among candidates.
#
# Both read the cloze questions of `qkv.data.cloze`: 20 verses of the World English Bible, the
# 21st with a named entity blanked out, whole books held out for the test split. Both are
# trained here for a few CPU-minutes (each training cell prints how many), far short of the
# budgets of [the reading-comprehension results](../results/reading-cloze.md) (half an hour
# per reader, with the other readers of Hermann et al. 2015 and Chen et al. 2016 beside them).
#
# **Budget.** The whole run's time is in the notebook's metadata (`qkv.seconds`). One switch
# sets every budget: the environment variable `QKV_TUTORIAL_MODE` (`full`, the default, or
# `smoke`: a few steps of small batches on a handful of questions, the same code, which the
# tests run).

# %%
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import display

import qkv
from qkv.tasks.reading.inputs import load_examples

MODE = os.environ.get("QKV_TUTORIAL_MODE", "full")
if MODE not in ("full", "smoke"):
    raise ValueError(f"QKV_TUTORIAL_MODE must be full or smoke, got {MODE!r}")


def budget(full, smoke):
    """The full run's value, or the smoke run's."""
    return full if MODE == "full" else smoke


RUNS = Path(tempfile.mkdtemp(prefix="qkv-tutorial-"))
QUIET = {"train__tensorboard": False, "train__checkpoint_every": None}
# The Bible's questions (the test split's entity questions all come from it); a smoke run reads
# one window in 400 lines: a few dozen questions.
DATA = {"kind": "entities", "sources": ["bible"], "stride": budget(None, 400)}


def train(preset: str, name: str, **overrides) -> Path:
    """Train ``preset`` into ``RUNS / name`` with ``overrides`` (and, in a smoke run, one warm-up
    step and batches of 2,048 words); the trained model's folder. Prints the CPU time taken."""
    smoke = {} if MODE == "full" else {"train__warmup_steps": 1, "train__batch_tokens": 2048}
    started = time.process_time()
    trained = qkv.train(preset, out_dir=str(RUNS / name), **QUIET, **smoke, **overrides)
    print(f"{name}: trained in {time.process_time() - started:.0f} CPU-seconds")
    return trained


# %% [markdown]
# ## The Attention Sum Reader
#
# `reading/cloze-as-reader` trains on the training books of three Bible translations with every
# possible blank of a line made a question; here the World English Bible's books alone, for
# 300 steps (each step reads about 26 passages), about one pass over them. The trainer keeps
# the weights that scored best on the validation books.

# %%
as_dir = train("reading/cloze-as-reader", "as-reader", data__options=DATA,
               train__max_steps=budget(300, 2), train__eval_every=budget(150, 2),
               data__valid_questions=budget(400, 3))  # fmt: skip
as_reader = qkv.load(as_dir)
cloze = load_examples(as_reader.config)  # the questions per split, as the reader reads them
test = cloze["test"]
answers = as_reader.run(test)  # one Answer per question
right = [a.text == ex.candidates[ex.answer] for ex, a in zip(test, answers, strict=True)]
accuracy = sum(right) / len(test)
print(f"test: {len(test)} questions, accuracy {accuracy:.3f}")

# %% [markdown]
# A reader that never reads the question sets a bar: the candidate that occurs most often in
# the passage. (Ten candidates: chance is 0.1.) It is a high bar on these passages, and a few
# CPU-minutes of training bring the reader near it, not far past it: compare the two numbers
# the cell prints. Whether the reader reads the question shows better on the questions whose
# answer is *not* the passage's most frequent candidate: there the frequency rule is always
# wrong, and guessing among the nine others would be right one time in nine. The full run
# asserts that the reader does better than that guess on them.


# %%
def most_frequent(example) -> str:
    """The candidate that occurs most often in the passage (the first of ties)."""
    counts = Counter(word.lower() for word in example.passage)
    return max(example.candidates, key=lambda c: counts[c.lower()])


frequent = [most_frequent(ex) == ex.candidates[ex.answer] for ex in test]
baseline = sum(frequent) / len(test)
print(f"most frequent candidate: {baseline:.3f}   Attention Sum Reader: {accuracy:.3f}")
others = [r for r, f in zip(right, frequent, strict=True) if not f]
rare = sum(others) / max(len(others), 1)
print(
    f"the {len(others)} questions whose answer is not the most frequent candidate: reader",
    f"{rare:.3f}, most frequent candidate 0, a guess among the other nine {1 / 9:.3f}",
)
if MODE == "full":
    assert rare > 1 / 9, (rare, len(others))

# %% [markdown]
# ## The pointer: attention summed over a candidate's occurrences
#
# One test question. The reader's answer is an `Answer`: its `attention` over every position of
# the passage and the probability of each candidate. Summing the attention over each
# candidate's occurrences and renormalising over the candidates gives those probabilities
# (eq. 3): the answer *is* the attention. The figure shows the attention over the passage,
# each occurrence of a candidate coloured by the candidate, and the candidates' sums.

# %%
example = next(ex for ex in test if ex.passage.count(ex.candidates[ex.answer]) > 1)
answer = as_reader.run([example])[0]
key = as_reader.vocab.key
summed = {
    c: sum(a for w, a in zip(example.passage, answer.attention, strict=True) if key(w) == key(c))
    for c in example.candidates
}
total = sum(summed.values())
print("question:", " ".join(example.question))
print(f"gold: {example.candidates[example.answer]}   answer: {answer.text}")
for c in sorted(summed, key=lambda c: -summed[c]):
    print(f"  {c:<14} summed attention {summed[c] / total:.3f}   P(c) {answer.candidates[c]:.3f}")
assert all(abs(summed[c] / total - answer.candidates[c]) < 1e-4 for c in summed)

# %%
colours = {c: plt.cm.tab10(i) for i, c in enumerate(example.candidates)}
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3), dpi=80,
                                  gridspec_kw={"width_ratios": [3, 1]})  # fmt: skip
positions = range(len(example.passage))
left.bar(positions, answer.attention, color="lightgrey", width=1.0)
for i, word in enumerate(example.passage):
    for c, colour in colours.items():
        if key(word) == key(c):
            left.bar(i, answer.attention[i], color=colour, width=3.0)
left.set_xlabel("passage position")
left.set_ylabel("attention s_i")
left.set_title("attention over the passage (candidates in colour)")
ranked = sorted(example.candidates, key=lambda c: answer.candidates[c])
right.barh(ranked, [answer.candidates[c] for c in ranked], color=[colours[c] for c in ranked])
right.set_title("P(c) = summed attention")
plt.tight_layout()
plt.show()

# %% [markdown]
# The explorer's view of the same kind of answer: `views` takes the question on the first line
# and the passage after it (the candidates are then the passage's named entities). Hover over
# the passage to read each word's weight.

# %%
text = " ".join(example.question) + "\n" + " ".join(example.passage)
display(as_reader.views(text))

# %% [markdown]
# ## The span reader: pointers to the answer's first and last word
#
# `reading/span-bilstm` reads the same questions written as SQuAD spans: the gold answers are
# every occurrence of the blanked word, and the reader is scored with SQuAD's exact match and F1.
# It has no candidates to choose from, so its task is harder than the cloze readers'.

# %%
span_dir = train("reading/span-bilstm", "span-reader", data__options=DATA,
                 train__max_steps=budget(150, 2), train__eval_every=budget(150, 2),
                 data__valid_questions=budget(400, 3))  # fmt: skip
span_reader = qkv.load(span_dir)
spans = load_examples(span_reader.config)["test"]
span_scores = span_reader.score(spans, "test")
print("\n".join(span_scores.lines()))

# %% [markdown]
# The two distributions over the passage for one question: `P_start` and `P_end`, with the gold
# answers' positions marked. A confident reader puts both peaks on one occurrence of the answer
# (here a one-word span: the peaks coincide).

# %%
asked = next((ex for ex in spans if ex.passage == example.passage), spans[0])
pointed = span_reader.run([asked])[0]
print("question:", " ".join(asked.question))
print(f"gold: {asked.answers[0][0]}   answer: {pointed.text} ({pointed.probability:.2f}), "
      f"words {pointed.first}-{pointed.last}")  # fmt: skip
fig, ax = plt.subplots(figsize=(11, 2.8), dpi=80)
ax.plot(pointed.start, label="P_start", color="tab:blue")
ax.plot(pointed.end, label="P_end", color="tab:orange", linestyle="--")
for first, _ in asked.spans:
    ax.axvline(first, color="tab:green", alpha=0.4)
ax.set_xlabel("passage position (green: the gold answer)")
ax.legend()
plt.show()
display(span_reader.views(" ".join(asked.question) + "\n" + asked.context))
