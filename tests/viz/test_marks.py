"""Marks on a self-attention view's tokens and words in its figure: a view refuses marks of the
wrong length or on two sequences, naming the lengths; its JSON holds the marks and, merged into
words, each word's first piece's; its saved SVG labels each marked token ``"word [type]"``; and
``save(..., words=True)`` draws the merge worked by hand, its title saying so."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qkv.tasks.seen import ImageView, MapGroup, Seen, TokenView
from qkv.viz.view_json import token_view, views_json
from tests.viz.test_figure_file import svg_texts

pytestmark = pytest.mark.usefixtures("one_thread")

PIECES = ["<s>", "▁Paul", "▁Smi", "th", "▁flew", "</s>"]
MARKS = ["", "person", "person", "person", "", ""]
# one layer, two heads of (6, 6) rows summing to one
LAYERS = [torch.softmax(torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(0)), -1)]


def _view(marks=MARKS, **changes) -> TokenView:
    fields = {"id": "encoder", "title": "encoder self-attention", "queries": PIECES,
              "keys": PIECES, "layers": LAYERS, "self_attention": True, "marks": marks}  # fmt: skip
    return TokenView(**{**fields, **changes})


def test_marks_of_the_wrong_length_or_on_two_sequences_are_refused_naming_the_lengths():
    with pytest.raises(ValueError, match=r"of .encoder. has 5 entries for 6 tokens; pass one"):
        _view(MARKS[:-1])
    with pytest.raises(ValueError, match=r"has 7 entries for 6 tokens"):
        _view([*MARKS, ""])
    cross = torch.softmax(torch.randn(1, 2, 6), -1)  # (H, Tq, Tk)
    with pytest.raises(ValueError, match=r"2 queries and 6 keys of two sequences; pass marks=None"):
        _view(queries=["a", "b"], layers=[cross], self_attention=False)
    with pytest.raises(TypeError, match=r"must be str \(''"):
        _view(["", "person", None, "", "", ""])
    with pytest.raises(TypeError, match=r"a list of str \(one per token\), got a str"):
        _view("person")
    with pytest.raises(ValueError, match=r"has 5 entries for 6 tokens"):
        token_view("v", "t", PIECES, PIECES, LAYERS, self_attention=True, marks=MARKS[:-1])


def test_the_json_holds_the_marks_and_each_word_takes_its_first_pieces_mark():
    (shown,) = views_json([_view(["", "person", "place", "", "", ""])])
    assert shown["marks"] == ["", "person", "place", "", "", ""]
    assert shown["words"]["queries"] == ["<s>", "Paul", "Smith", "flew", "</s>"]
    assert shown["words"]["marks"] == ["", "person", "place", "", ""]  # "▁Smi" gives Smith's
    (bare,) = views_json([_view(None)])
    assert "marks" not in bare and "marks" not in bare["words"]


def test_a_saved_svg_labels_each_marked_token_with_its_mark(tmp_path):
    texts = svg_texts(Seen({"summary": "s"}, [_view()]).save(tmp_path / "v.svg").read_bytes())
    assert {"▁Paul [person]", "▁Smi [person]", "th [person]", "▁flew", "<s>"} <= set(texts)
    assert "▁flew [" not in " ".join(texts)  # unmarked tokens keep their bare labels
    words = svg_texts(_view().save(tmp_path / "w.svg", words=True).read_bytes())
    assert {"Paul [person]", "Smith [person]", "flew"} <= set(words)


def test_the_words_figure_draws_the_merge_worked_by_hand_and_its_title_says_so():
    # Pieces a, ▁b, c of two words: {▁a} and {▁b, c}; one head.
    weights = torch.tensor([[[0.5, 0.25, 0.25], [0.125, 0.5, 0.375], [0.0, 0.25, 0.75]]])
    view = TokenView("enc", "enc", ["▁a", "▁b", "c"], ["▁a", "▁b", "c"], [weights], True)
    figure = Seen({"summary": "s"}, [view]).figure(words=True)
    # A word receives the sum over its pieces (columns) and gives their mean (rows).
    expected = np.array([[0.5, 0.25 + 0.25], [(0.125 + 0.0) / 2, (0.5 + 0.375 + 0.25 + 0.75) / 2]])
    (image,) = figure.axes[0].get_images()
    np.testing.assert_allclose(np.asarray(image.get_array()), expected, rtol=0, atol=1e-7)
    assert figure.axes[0].get_title() == "enc, layer 0, its one head, pieces merged into words"
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["a", "bc"]
    pieces = view.figure()
    assert pieces.axes[0].get_title() == "enc, layer 0, its one head"


def test_words_are_refused_where_there_are_no_pieces_to_merge(tmp_path):
    words = TokenView("enc", "enc", ["a", "b"], ["a", "b"], [torch.full((1, 2, 2), 0.5)], True)
    with pytest.raises(ValueError, match=r"enc carry no subword markers .*pass words=False"):
        words.save(tmp_path / "a.svg", words=True)
    image = ImageView("vit", "vit", torch.zeros(1, 4, 4, dtype=torch.uint8),
                      [MapGroup("g", [("m", torch.ones(2, 2))])])  # fmt: skip
    with pytest.raises(ValueError, match=r"vit is over an image: no pieces to merge"):
        Seen({"summary": "s"}, [image]).save(tmp_path / "b.svg", words=True)
    assert not list(tmp_path.iterdir())
