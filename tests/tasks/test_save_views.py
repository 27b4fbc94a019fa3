"""A real runner's views save as figures: ``seen.save`` on the saved fixture runs
(``tests/fixtures/runs/``) writes an SVG whose text (every token, the title naming the view,
the layer and the head) reads back as XML text, a PNG as tall or wide as its matrix, a PDF;
the figure draws the view's own matrix; a bad view, layer, head or suffix is refused and
nothing is written."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from qkv.tasks.run_dir import load_runner
from qkv.viz.image_attention import upsample_map
from tests.viz.test_figure_file import svg_texts

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A copy of the fixture runs (their data paths are relative to it)."""
    copy = tmp_path_factory.mktemp("export") / "runs"
    shutil.copytree(FIXTURES, copy)
    return copy


@pytest.fixture(scope="module")
def translation(runs):
    _, runner = load_runner(runs / "translation")
    return runner.views("a b c d")


def test_an_svg_of_a_translation_holds_every_token_and_the_title(translation, tmp_path):
    path = translation.save(tmp_path / "cross.svg")
    view = translation.views[0]
    assert view.id == "cross" and len(view.layers) == 2 and view.layers[1].size(0) == 2
    texts = svg_texts(path.read_bytes())
    assert "cross-attention (target x source), layer 1, mean of 2 heads" in texts
    assert set(view.keys) | set(view.queries) <= set(texts)  # "</s>" and "▁a" included
    assert {"source", "target"} <= set(texts)  # the view's axis names


def test_a_chosen_view_layer_and_head_is_what_the_figure_draws(translation, tmp_path):
    encoder = translation.view("encoder")
    figure = translation.figure(view="encoder", layer=0, head=1)
    (image,) = figure.axes[0].get_images()
    np.testing.assert_array_equal(np.asarray(image.get_array()), encoder.layers[0][1].numpy())
    assert figure.axes[0].get_title() == "encoder self-attention, layer 0, head 1"
    assert (figure.axes[0].get_xlabel(), figure.axes[0].get_ylabel()) == ("key", "query")
    mean = translation.figure(view=2)  # the decoder's last layer, mean of its heads
    (image,) = mean.axes[0].get_images()
    expected = translation.views[2].layers[-1].mean(0).numpy()
    np.testing.assert_allclose(np.asarray(image.get_array()), expected, rtol=0, atol=1e-7)
    texts = svg_texts(translation.save(tmp_path / "e.svg", view="encoder", layer=0, head=1)
                      .read_bytes())  # fmt: skip
    assert "encoder self-attention, layer 0, head 1" in texts


def test_a_png_is_as_tall_or_wide_as_its_matrix(translation, tmp_path):
    cross, encoder = translation.views[0], translation.views[1]
    assert len(cross.queries) > 3 * len(cross.keys)  # 18 target x 5 source tokens
    with Image.open(translation.save(tmp_path / "cross.png")) as picture:
        assert picture.format == "PNG" and picture.height > picture.width
    with Image.open(translation.save(tmp_path / "enc", view="encoder", format="png")) as picture:
        width, height = picture.size  # 5 x 5 tokens, and a colour bar beside them
        assert picture.format == "PNG" and width > height * 0.9 and height > 0.5 * width
    assert len(encoder.keys) == len(encoder.queries)


def test_refusals_name_what_to_pass_and_write_nothing(translation, tmp_path):
    with pytest.raises(ValueError, match=r"no view 'pooling' .* one of \['cross', 'encoder'"):
        translation.save(tmp_path / "a.svg", view="pooling")
    with pytest.raises(ValueError, match=r"no view 3 of the translation: pass an index below 3"):
        translation.save(tmp_path / "a.svg", view=3)
    with pytest.raises(ValueError, match=r"layer 2 is out of range: .* has 2 layers; pass 0 to 1"):
        translation.save(tmp_path / "a.svg", layer=2)
    with pytest.raises(ValueError, match=r"head 2 is out of range: .* layer 1, has 2 heads"):
        translation.save(tmp_path / "a.svg", head=2)
    with pytest.raises(ValueError, match=r"a.jpg: the file must end in .png, .svg or .pdf"):
        translation.save(tmp_path / "a.jpg")
    with pytest.raises(ValueError, match=r"a.png as svg: its suffix says png"):
        translation.save(tmp_path / "a.png", format="svg")
    assert not list(tmp_path.iterdir())


def test_a_classifier_view_names_its_encoder_layer(runs, tmp_path):
    _, runner = load_runner(runs / "classification")
    seen = runner.views("the film was superb")
    view = seen.views[0]
    texts = svg_texts(seen.save(tmp_path / "c.svg").read_bytes())
    heads = view.layers[-1].size(0)
    where = f"mean of {heads} heads" if heads > 1 else "its one head"
    assert f"{view.title}, layer {len(view.layers) - 1}, {where}" in texts
    assert set(view.keys) <= set(texts)


def test_a_vit_view_draws_the_chosen_map_over_the_image(runs, tmp_path):
    _, runner = load_runner(runs / "image_classification")
    seen = runner.views(runner.read_image(runs / "data/image_classification/digits1.png"))
    view = seen.views[0]
    layer, heads = view.layers - 1, len(view.groups[-1].maps) - 1
    figure = seen.figure(head=heads - 1)
    grid = view.groups[-1].maps[heads][1]  # the last layer's last head, (gh, gw)
    (axes,) = [a for a in figure.axes if len(a.get_images()) == 2]
    expected = upsample_map(grid, *view.image.shape[1:]) / grid.max()
    np.testing.assert_allclose(np.asarray(axes.get_images()[1].get_array()), expected.numpy(),
                               rtol=0, atol=1e-6)  # fmt: skip
    title = f"[CLS] attention to the patches, layer {layer}, head {heads - 1}"
    assert figure.get_suptitle() == title
    assert title in svg_texts(seen.save(tmp_path / "v.svg", head=heads - 1).read_bytes())
    with Image.open(seen.save(tmp_path / "v.png")) as picture:
        assert picture.width > picture.height  # the image and its map side by side


def test_a_caption_view_saves_as_pdf_and_has_no_layers_to_choose(runs, tmp_path):
    _, runner = load_runner(runs / "captioning")
    seen = runner.views(runner.read_image(runs / "data/captioning/digits2.png"))
    assert seen.save(tmp_path / "c.pdf").read_bytes().startswith(b"%PDF")
    with pytest.raises(ValueError, match=r"word by word has no layers or heads"):
        seen.save(tmp_path / "d.pdf", layer=0)
    assert [p.name for p in tmp_path.iterdir()] == ["c.pdf"]
