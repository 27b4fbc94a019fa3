"""The explorer serves an exported translation model (``qkv serve --engine ctranslate2``): what
its API answers is what CTranslate2Translator and qkv's own Translator give for the same float32
model (greedy, and beam 4 without a length penalty), and its one map is CTranslate2's attention
as the view's title says: the last decoder layer's first head (equal to qkv's teacher-forced
weights there), rows summing to one over the source pieces, EOS included. What an export cannot
show (neuron, rollout, a given target) is refused as for the other runners; a qkv run directory
given with ``--engine ctranslate2`` is one line and exit 2."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from qkv.cli.main import main
from qkv.cli.serving_options import ENGINES
from qkv.ctranslate2.export import export_model
from qkv.ctranslate2.views import with_source_eos
from qkv.data import load_corpus
from qkv.explorer.session import ENGINE_TASKS, ExplorerModels, ViewExtras
from qkv.explorer.views import Limits
from qkv.tasks.run_config import load_run_config
from qkv.tasks.run_skeleton import run_training
from qkv.tasks.spec import ViewOptions
from qkv.tasks.translation.runner import Translator

ctranslate2 = pytest.importorskip("ctranslate2")
pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[2]
QKV_RUN = ROOT / "tests/fixtures/runs/translation"  # a qkv run directory, not an export


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, Path]:
    """The reverse task, 150 steps (about 8 s: most outputs are right and end with EOS), and
    its float32 export."""
    root = tmp_path_factory.mktemp("ct2-explorer")
    run = load_run_config(ROOT / "configs/tiny/reverse-transformer.yaml", [
        f"out_dir={root / 'model'}", "train.max_steps=150", "train.eval_every=150",
        "train.warmup_steps=30", "data.options.n_train=1500", "data.options.n_valid=20",
        "data.options.n_test=40", "data.valid_bleu_sentences=0", "train.tensorboard=false",
        "train.checkpoint_every=null",
    ])  # fmt: skip
    run_training(run, progress=False, overwrite=True)
    return {"model": root / "model", "ct2": export_model(root / "model", root / "ct2").out}


@pytest.fixture(scope="module")
def served(exported):
    return next(iter(ExplorerModels.load([exported["ct2"]], engine="ctranslate2")))


def _texts(model: Path, count: int = 8) -> list[str]:
    options = json.loads((model / "config.json").read_text())["data"]["options"]
    return [source for source, _ in load_corpus("reverse", **options).test][:count]


def _client(exported):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from qkv.explorer.app import create_app

    models = ExplorerModels.load([exported["ct2"]], engine="ctranslate2")
    return TestClient(create_app(models, Limits()), base_url="http://localhost")


def test_the_api_answers_what_both_engines_translate(exported, served):
    client = _client(exported)
    translator = Translator.load(exported["model"])
    texts = _texts(exported["model"])
    ours = [t.text for t in translator.translate(texts, beam_size=1)]
    theirs = served.runner.translator.translate(texts, beam_size=1)
    assert theirs == ours
    ended = 0
    for text, expected in zip(texts, ours, strict=True):
        reply = client.post("api/run", json={"model": served.name, "text": text})
        assert reply.status_code == 200, reply.text
        result = reply.json()
        assert result["output"]["text"] == expected and result["kind"] == "translation"
        (view,) = result["views"]
        assert view["title"].startswith("CTranslate2's cross-attention")
        weights = torch.tensor(view["layers"], dtype=torch.float64)  # (1, 1, T, S)
        seen = translator.views(text)  # qkv's own: target pieces with EOS, S with the EOS
        cross = seen.view("cross")
        rows = view["queries"]
        ended += rows[-1] == "</s>"
        assert view["keys"] == cross.keys and len(view["keys"]) == translator.token_count(text)
        assert rows == cross.queries[: len(rows)]  # EOS row there when CTranslate2 wrote one
        assert weights.shape == (1, 1, len(rows), len(view["keys"]))
        sums = weights.sum(-1)
        assert torch.allclose(sums, torch.ones_like(sums), atol=1e-3)  # the API rounds
    assert ended >= len(texts) // 2  # outputs that end, so that the EOS row is checked


def test_the_map_is_the_last_layer_first_head(exported, served):
    # What the title says, checked against qkv's teacher-forced weights of the same model.
    translator = Translator.load(exported["model"])
    layers, heads = served.runner.translator.layers, served.runner.translator.heads
    assert heads > 1 and f"layer {layers - 1} (the last), head 0 alone of {heads}" in (
        served.runner.title
    )
    for text in _texts(exported["model"]):
        (view,) = served.runner.views(text).views
        (weights,) = view.layers  # (1, T, S)
        cross = translator.views(text).view("cross").layers[-1][0]  # (T + EOS, S): head 0
        torch.testing.assert_close(weights[0], cross[: weights.size(1)], atol=1e-5, rtol=0)
        torch.testing.assert_close(weights.sum(-1), torch.ones(1, weights.size(1)))


def test_beam_search_views_translate_as_the_engines_do(exported, served):
    translator = Translator.load(exported["model"])
    engine = served.runner.translator
    translator.decode = engine.decode = dataclasses.replace(engine.decode, length_penalty=0.0)
    texts = _texts(exported["model"], 4)
    expected = [t.text for t in translator.translate(texts, beam_size=4)]
    assert engine.translate(texts, beam_size=4) == expected
    for text, out in zip(texts, expected, strict=True):
        seen = served.runner.views(text, ViewOptions(beam=4))
        assert seen.summary == out
        (weights,) = seen.views[0].layers
        torch.testing.assert_close(weights.sum(-1), torch.ones(1, weights.size(1)))


def test_what_an_export_cannot_show_is_refused_as_elsewhere(exported, served):
    limits = Limits()
    for extra in ("neuron", "rollout"):
        with pytest.raises(ValueError, match=f"leave out {extra}"):
            served.run(text="a b c", limits=limits, extras=ViewExtras(**{extra: True}))
    with pytest.raises(ValueError, match=r"is for models that write text .* reads none"):
        served.runner.views("a b c", ViewOptions(target="c b a"))
    assert served.describe()["extras"] == []
    client = _client(exported)
    for extra in ("neuron", "rollout"):
        reply = client.post("api/run", json={"model": served.name, "text": "a b", extra: True})
        assert reply.status_code == 422 and f"leave out {extra}" in reply.json()["error"]


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_a_qkv_directory_with_the_ctranslate2_engine_is_one_line(capsys, tmp_path):
    wanted = f"{QKV_RUN} is a qkv run directory, not a CTranslate2 export: pass --engine qkv"
    err = _error(capsys, ["serve", "--engine", "ctranslate2", "--model", str(QKV_RUN)])
    assert wanted in err and "qkv export --format ctranslate2" in err
    argv = ["explore", "--engine", "ctranslate2", "--model", str(QKV_RUN), "a b", "-o"]
    assert wanted in _error(capsys, [*argv, str(tmp_path / "page.html")])
    assert not (tmp_path / "page.html").exists()
    err = _error(capsys, ["serve", "--engine", "ctranslate2", "--model", str(tmp_path)])
    assert f"no exported CTranslate2 model at {tmp_path}" in err


def test_explore_writes_the_page_of_an_export(exported, capsys, tmp_path):
    page = tmp_path / "page.html"
    text = _texts(exported["model"], 1)[0]
    base = ["explore", "--engine", "ctranslate2", "--model", str(exported["ct2"]), text]
    assert main([*base, "-o", str(page)]) == 0, capsys.readouterr().err
    translated = Translator.load(exported["model"]).translate([text], beam_size=1)[0].text
    assert capsys.readouterr().out.splitlines()[0] == translated
    assert "CTranslate2's cross-attention" in page.read_text(encoding="utf-8")
    for extra in ("--neuron", "--rollout"):
        assert f"leave out {extra[2:]}" in _error(capsys, [*base, "-o", str(page), extra])


def test_precision_is_the_compute_type(exported):
    models = ExplorerModels.load([exported["ct2"]], precision="int8", engine="ctranslate2")
    assert next(iter(models)).runner.translator.compute_type == "int8"
    default = ExplorerModels.load([exported["ct2"]], engine="ctranslate2")
    assert next(iter(default)).runner.translator.compute_type == "default"


def test_threads_reach_ctranslate2_and_are_checked(exported, monkeypatch):
    """``qkv serve --threads N`` sets CTranslate2's threads per call, not only PyTorch's."""
    import ctranslate2

    seen, real = [], ctranslate2.Translator

    def recording(*args, **kwargs):
        seen.append(kwargs["intra_threads"])
        return real(*args, **kwargs)

    monkeypatch.setattr(ctranslate2, "Translator", recording)
    ExplorerModels.load([exported["ct2"]], engine="ctranslate2", threads=2)
    ExplorerModels.load([exported["ct2"]], precision="int8", engine="ctranslate2", threads=3)
    ExplorerModels.load([exported["ct2"]], engine="ctranslate2")
    assert seen == [2, 3, 0]  # 0: CTranslate2's own default
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match=f"threads must be an int >= 1, got {bad!r}"):
            ExplorerModels.load([exported["ct2"]], engine="ctranslate2", threads=bad)


def test_the_explorer_knows_the_engines_the_cli_offers():
    assert tuple(ENGINE_TASKS) == ENGINES
    with pytest.raises(ValueError, match="engine must be one of qkv, ctranslate2, got 'onnx'"):
        ExplorerModels.load([QKV_RUN], engine="onnx")


def test_the_eos_column_is_what_the_rows_leave():
    weights = with_source_eos([[0.5, 0.25], [0.0, 1.0]], 2)  # (T=2, S=2 + EOS)
    assert weights.tolist() == [[0.5, 0.25, 0.25], [0.0, 1.0, 0.0]]
    assert with_source_eos([], 3).shape == (0, 4)
    with pytest.raises(ValueError, match=r"shape \(1, 3\); expected \(T, 2\)"):
        with_source_eos([[0.2, 0.2, 0.2]], 2)
    with pytest.raises(ValueError, match=r"sum to up to 1\.5"):
        with_source_eos([[0.75, 0.75]], 2)
