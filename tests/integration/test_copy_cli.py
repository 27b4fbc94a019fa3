"""The issue's learning test through the real command line: a copy-heavy synthetic task
(summaries made of invented names, each used once in the corpus, so none is in the vocabulary)
that the pointer-generator learns, RNN and Transformer alike, and the same model without copying
cannot (it can only write ``<unk>``). Each run is 200 steps, seconds on a CPU."""

import json
import re

import pytest

from tests.commands import qkv, qkv_process

CONFIGS = {"rnn": "configs/tiny/copy-pointer-rnn.yaml",
           "transformer": "configs/tiny/copy-pointer-transformer.yaml"}  # fmt: skip


def _train_and_score(config: str, model_dir, *settings: str) -> dict:
    sets = [x for s in settings for x in ("--set", s)]
    result = qkv("train", config, "--quiet", "--set", f"out_dir={model_dir}", *sets)
    assert result.returncode == 0, result.stderr
    result = qkv("evaluate", "--model", str(model_dir), "--examples", "0", "--quiet")
    assert result.returncode == 0, result.stderr
    assert re.search(r"ROUGE-L [\d.]+", result.stdout), result.stdout
    return json.loads((model_dir / "results.json").read_text())["test"]


@pytest.mark.parametrize("kind", CONFIGS)
def test_the_pointer_generator_learns_to_copy_unknown_words(kind, tmp_path):
    model_dir = tmp_path / kind
    scores = _train_and_score(CONFIGS[kind], model_dir)
    assert scores["rougeL"] >= 95.0 and scores["copied_share"] >= 0.95, scores
    result = qkv_process("summarize", "--model", str(model_dir), "--json",
                 "the king of bavotek went to the city of rulamip")  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["tokens"] == ["bavotek", "rulamip"] and out["copied"] == [True, True]
    assert len(out["p_gen"]) == 3 and max(out["p_gen"][:2]) < 0.5  # copied, not generated
    image = tmp_path / "copy.png"
    result = qkv("plot-attention", "--model", str(model_dir), "men came to zuroka and velimat",
                 "-o", str(image))  # fmt: skip
    assert result.returncode == 0 and image.stat().st_size > 1000, result.stderr


def test_without_copying_the_same_model_cannot(tmp_path):
    scores = _train_and_score(CONFIGS["rnn"], tmp_path / "plain", "model.copy=false")
    # Every name is out of the vocabulary: a plain model's words are <unk> or common words.
    assert scores["rougeL"] <= 5.0 and scores["copied_share"] == 0.0, scores
    result = qkv_process("reply", "--model", str(tmp_path / "plain"), "hello")
    assert result.returncode == 2 and "not a reply model" in result.stderr
    assert "Traceback" not in result.stderr
