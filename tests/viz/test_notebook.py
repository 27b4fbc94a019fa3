"""A notebook's inline display of attention (``Seen._repr_html_``, ``qkv.show_attention``): it
loads nothing from the network, each display is isolated in its own frame with its own ids, and
the data inside equals the views' tokens and weights (saved runs of a translator and a ViT, read
back as a browser would get them)."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import qkv
from qkv.tasks.seen import ImageView, Seen, TokenView
from qkv.viz.view_json import DIGITS
from tests.viz.notebook_html import fetched_urls, frames, page_data, parse

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
ROUNDING = 0.5 * 10**-DIGITS + 1e-7  # what rounding to DIGITS decimals may move a weight

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def translation() -> Seen:
    return qkv.load(RUNS / "translation").views("a b c d")


@pytest.fixture(scope="module")
def vit() -> Seen:
    runner = qkv.load(RUNS / "image_classification")
    return runner.views(runner.read_image(RUNS / "data" / "image_classification" / "digits1.png"))


def the_page(html: str) -> tuple[dict[str, str], str]:
    (frame,) = frames(html)
    return frame, frame["srcdoc"]


def test_a_display_is_a_sandboxed_frame_that_loads_nothing(translation):
    html = translation._repr_html_()
    frame, page = the_page(html)
    # scripts and downloads (the export buttons), but an opaque origin of its own
    assert frame["sandbox"] == "allow-scripts allow-downloads"
    assert fetched_urls(html) == []
    (policy,) = [a["content"] for t, a in parse(page).tags if a.get("http-equiv")]
    assert "default-src 'none'" in policy and "connect-src 'none'" in policy
    data = page_data(page)
    assert data["mode"] == "static" and data["inline"] is True  # never asks a server
    # The only absolute URL anywhere is the SVG namespace, a name that is never fetched.
    urls = set(re.findall(r"https?://[^\s'\"`)]+", page))
    assert urls == {"http://www.w3.org/2000/svg"}


def test_the_url_reader_finds_what_a_browser_would_fetch():
    """The check above would catch a CDN script, a font, an image or a fetch."""
    cases = [
        '<script src="https://cdn.example/require.js"></script>',
        "<style>@font-face { src: url(https://fonts.example/a.woff2) }</style>",
        "<style>@import 'https://cdn.example/a.css';</style>",
        '<img src="//cdn.example/x.png">',
        '<div style="background: url(&quot;http://x.example/a.png&quot;)"></div>',
        "<script>fetch('https://api.example/run')</script>",
        "<script>import('https://cdn.example/d3.js')</script>",
        "<script>import * as d3 from 'https://cdn.example/d3.js';</script>",
        "<script>x.open('GET', 'https://api.example/')</script>",
        "<iframe srcdoc=\"<script src='https://cdn.example/a.js'></script>\"></iframe>",
    ]
    for case in cases:
        assert len(fetched_urls(case)) == 1, case
    assert fetched_urls('<svg xmlns="http://www.w3.org/2000/svg"></svg><a href="#x">x</a>') == []


def test_two_displays_share_no_ids_and_no_globals(translation):
    one, two = translation._repr_html_(), translation._repr_html_()
    ids = [{a["id"] for _, a in parse(h).tags if "id" in a} for h in (one, two)]
    assert ids[0] and ids[0].isdisjoint(ids[1])
    for html, own in zip((one, two), ids, strict=True):
        (script,) = [text for _, text in parse(html).scripts]
        # One closure that names only its own frame, defines no global, and reads no message
        # but its own frame's.
        assert script.startswith("(function () {") and script.endswith("})();")
        assert set(re.findall(r"qkv-[0-9a-f]{32}", script)) == own
        assert "event.source !== frame.contentWindow" in script
    assert the_page(one)[1] == the_page(two)[1]  # the pages themselves are alike


def test_a_translation_display_holds_its_tokens_and_weights(translation):
    data = page_data(the_page(translation._repr_html_())[1])["result"]
    assert data["output"] == translation.output
    views = [v for v in translation.views if isinstance(v, TokenView)]
    assert [v["id"] for v in data["views"]] == [v.id for v in views] == ["cross", "encoder",
                                                                         "decoder"]  # fmt: skip
    for shown, view in zip(data["views"], views, strict=True):
        assert shown["type"] == "tokens" and shown["title"] == view.title
        assert (shown["queries"], shown["keys"]) == (view.queries, view.keys)
        assert shown["self"] == view.self_attention
        assert len(shown["layers"]) == len(view.layers)
        for got, weights in zip(shown["layers"], view.layers, strict=True):
            torch.testing.assert_close(
                torch.tensor(got, dtype=torch.float64), weights.double(), atol=ROUNDING, rtol=0
            )


def test_a_vit_display_holds_its_image_and_maps(vit):
    from PIL import Image

    data = page_data(the_page(vit._repr_html_())[1])["result"]
    (view,) = [v for v in vit.views if isinstance(v, ImageView)]
    (shown,) = data["views"]
    assert shown["type"] == "image" and (shown["height"], shown["width"]) == tuple(
        view.image.shape[1:]
    )
    prefix = "data:image/png;base64,"
    assert shown["image"].startswith(prefix)
    pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(shown["image"][len(prefix) :]))))
    expected = view.image.numpy()
    assert np.array_equal(
        pixels, expected[0] if expected.shape[0] == 1 else expected.transpose(1, 2, 0)
    )
    assert [g["name"] for g in shown["groups"]] == [g.name for g in view.groups]
    for group, maps in zip(shown["groups"], view.groups, strict=True):
        assert [m["label"] for m in group["maps"]] == [label for label, _ in maps.maps]
        for got, (_, grid) in zip(group["maps"], maps.maps, strict=True):
            torch.testing.assert_close(
                torch.tensor(got["grid"], dtype=torch.float64), grid.double(), atol=ROUNDING, rtol=0
            )


def test_the_mimebundle_has_html_and_a_line_of_text(translation):
    bundle = translation._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}
    assert frames(bundle["text/html"])[0]["srcdoc"] == the_page(translation._repr_html_())[1]
    assert bundle["text/plain"].startswith(f"Seen({translation.summary!r}; views: cross (")


# ------------------------------------------------------------------------- show_attention


@pytest.mark.parametrize("shape", [(4, 5), (3, 4, 5), "layers"])
def test_show_attention_shows_the_weights_it_is_given(shape):
    torch.manual_seed(0)
    if shape == "layers":
        weights = [torch.softmax(torch.randn(3, 4, 5), -1) for _ in range(2)]
        expected = weights
    else:
        weights = torch.softmax(torch.randn(*shape), -1)
        expected = [weights if weights.dim() == 3 else weights.unsqueeze(0)]  # (H, Tq, Tk)
    seen = qkv.show_attention(weights, list("abcd"), ["k0", "k1", "k2", "k3", "k4"], title="mine")
    (shown,) = page_data(the_page(seen._repr_html_())[1])["result"]["views"]
    assert (shown["title"], shown["queries"], shown["keys"], shown["self"]) == (
        "mine", list("abcd"), ["k0", "k1", "k2", "k3", "k4"], False
    )  # fmt: skip
    got = torch.tensor(shown["layers"], dtype=torch.float64)  # (L, H, Tq, Tk)
    torch.testing.assert_close(got, torch.stack(expected).double(), atol=ROUNDING, rtol=0)


def test_show_attention_takes_numpy_and_half_and_defaults_keys_to_queries():
    weights = np.full((2, 3, 3), 1 / 3, dtype=np.float16)
    seen = qkv.show_attention(weights, ["x", "y", "z"])
    (view,) = seen.views
    assert isinstance(view, TokenView) and view.self_attention and view.keys == ["x", "y", "z"]
    torch.testing.assert_close(view.layers[0], torch.full((2, 3, 3), 1 / 3), atol=1e-3, rtol=0)


TOKENS = ["a", "b", "c"]
GOOD = torch.full((2, 3, 3), 1 / 3)


T, V = TypeError, ValueError
KEYS4 = torch.ones(3, 4) / 4  # (Tq=3, Tk=4)


@pytest.mark.parametrize(
    "weights, queries, keys, error, message",
    [
        ("0.5", TOKENS, None, T, "weights must be a torch.Tensor or a NumPy array, got str"),
        (torch.ones(3, 3, dtype=torch.long), TOKENS, None, T,
         "floating-point weights, got dtype torch.int64"),
        (torch.ones(3), TOKENS, None, V, r"weights has shape \(3,\); pass \(Tq, Tk\)"),
        (torch.ones(2, 2, 3, 3) / 3, TOKENS, None, V, r"\(2, 2, 3, 3\).*list\(weights\)"),
        ([torch.ones(1, 2, 3, 3) / 3], TOKENS, None, V,
         r"weights\[0\] has shape \(1, 2, 3, 3\).*weights\[0\]\[0\]"),
        ([GOOD, torch.ones(4, 3, 3) / 3], TOKENS, None, V,
         r"weights\[1\] has shape \(4, 3, 3\) but weights\[0\] has \(2, 3, 3\)"),
        ([], TOKENS, None, V, "empty list"),
        (torch.full((3, 3), float("nan")), TOKENS, None, V, "layer 0 of weights holds NaN"),
        (GOOD - 1, TOKENS, None, V, "negative values .*not scores"),
        (torch.ones(3, 0), TOKENS, None, V, "at least 1"),
        (GOOD, ["a", "b"], None, V, "queries has 2 labels but the weights have 3 query rows"),
        (GOOD, ["a", "b", 3], None, T, r"queries\[2\] must be a string, got int: 3"),
        (GOOD, "abc", None, T, "queries must be a list of strings"),
        (KEYS4, TOKENS, None, V, "3 x 4 .*cannot default to the queries; pass the 4 key labels"),
        (KEYS4, TOKENS, ["a"], V, "keys has 1 labels but the weights have 4 key columns"),
    ],
)  # fmt: skip
def test_show_attention_refuses_what_it_cannot_show(weights, queries, keys, error, message):
    with pytest.raises(error, match=message):
        qkv.show_attention(weights, queries, keys)
