"""The explorer's JSON API on real (small) trained models of every kind: what it answers equals
what the library computes on its own (outputs and attention weights), the weights keep their
invariants (rows sum to one over the keys, nothing after the query in a causal model), bad
requests get a 4xx naming the problem and never a traceback, and a model is never run by two
threads at once."""

from __future__ import annotations

import base64
import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("sklearn")

from fastapi.testclient import TestClient

from qkv.explorer.app import create_app
from qkv.explorer.session import ExplorerModels
from qkv.explorer.views import DIGITS, Limits
from tests.explorer.models import explorer_models

pytestmark = pytest.mark.usefixtures("one_thread")
ROUNDING = 0.5 * 10**-DIGITS + 1e-7  # what rounding to DIGITS decimals may change
BASE_URL = "http://localhost"  # a Host the explorer answers to (the test client's own is not)


@pytest.fixture(scope="module")
def dirs(explorer_dirs):
    return explorer_dirs


@pytest.fixture(scope="module")
def models(dirs):
    return ExplorerModels.load(list(dirs.values()))


@pytest.fixture(scope="module")
def client(models):
    limits = Limits(max_chars=200, max_image_bytes=20_000, max_image_side=256, max_new_tokens=30)
    return TestClient(create_app(models, limits), base_url=BASE_URL)


def digit_png(*indices: int) -> bytes:
    """Real 8x8 digits from scikit-learn, side by side, as a PNG file."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    images = load_digits().images
    pixels = np.concatenate([(images[i] * (255 / 16)).round().astype("uint8") for i in indices], 1)
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode="L").save(buffer, "PNG")
    return buffer.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def check_rows(view) -> None:
    """Every (layer, head, query) row is a distribution over the keys (to rounding)."""
    weights = torch.tensor(view["layers"], dtype=torch.float64)  # (L, H, Tq, Tk)
    assert weights.shape[2:] == (len(view["queries"]), len(view["keys"]))
    assert weights.min() >= 0
    sums = weights.sum(-1)
    assert torch.allclose(sums, torch.ones_like(sums), atol=ROUNDING * weights.size(-1))


def test_models_health_and_page(client, dirs):
    names = {m["name"]: m for m in client.get("api/models").json()["models"]}
    assert set(names) == {path.name for path in dirs.values()}
    assert names["vit-digits"]["input"] == "image" and names["reverse"]["input"] == "text"
    assert client.get("api/health").json() == {"status": "ok", "models": len(dirs)}
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '"mode":"served"' in page.text and "{{" not in page.text


def test_translation_equals_the_translator(client, models):
    reply = client.post("api/run", json={"model": "reverse", "text": "a b c d"})
    assert reply.status_code == 200, reply.text
    result = reply.json()
    translator = models["reverse"].runner
    translation, maps = translator.attentions("a b c d")
    assert result["output"]["text"] == translator.translate(["a b c d"])[0].text
    views = {v["id"]: v for v in result["views"]}
    assert set(views) == {"cross", "encoder", "decoder"}
    cross = views["cross"]
    assert not cross["self"] and cross["queries"] == translation.target_pieces
    assert cross["keys"] == translation.source_pieces
    for view_id, view in views.items():
        check_rows(view)
        expected = torch.stack(maps[view_id]).double()  # (L, H, Tq, Tk)
        got = torch.tensor(view["layers"], dtype=torch.float64)
        assert (got - expected).abs().max() <= ROUNDING
    # The decoder's row t reads <s> and the tokens before t: nothing after it.
    decoder = torch.tensor(views["decoder"]["layers"])
    assert views["decoder"]["keys"][0] == "<s>"
    assert decoder.triu(1).abs().max() == 0


def test_rnn_translators_one_alignment_or_none(tmp_path_factory):
    dirs = explorer_models(tmp_path_factory, ("bahdanau", "fixed-context"))
    client = TestClient(create_app(ExplorerModels.load(list(dirs.values()))), base_url=BASE_URL)
    result = client.post("api/run", json={"model": "reverse-bahdanau", "text": "a b c"}).json()
    (view,) = result["views"]  # the alignment: one layer, one head
    assert view["id"] == "cross" and len(view["layers"]) == 1 and len(view["layers"][0]) == 1
    check_rows(view)
    result = client.post("api/run", json={"model": "reverse-none", "text": "a b c"}).json()
    assert result["views"] == [] and result["output"]["text"] is not None


def test_language_model_generates_greedily_and_attends_causally(client, models):
    reply = client.post(
        "api/run", json={"model": "kjv-char", "text": "And God said", "max_new_tokens": 12}
    )
    assert reply.status_code == 200, reply.text
    result = reply.json()
    lm = models["kjv-char"].runner
    from qkv.decoding.sampling import SamplingConfig

    expected = lm.generate(["And God said"], SamplingConfig(max_new_tokens=12, temperature=0))[0]
    assert result["output"]["text"] == expected
    (view,) = result["views"]
    assert "".join(view["queries"]) == "And God said" + expected
    check_rows(view)
    weights = torch.tensor(view["layers"], dtype=torch.float64)
    assert weights.triu(1).abs().max() == 0  # causal: no weight on later tokens
    ids = torch.tensor([lm.encode_prompt("And God said" + expected)])
    with torch.inference_mode():
        direct = lm.model(ids, need_weights=True).attentions["decoder"]
    assert (weights - torch.stack([w[0] for w in direct]).double()).abs().max() <= ROUNDING


def test_classifier_and_tagger(client, models):
    text = "the film was superb and witty"
    result = client.post("api/run", json={"model": "classification", "text": text}).json()
    prediction = models["classification"].runner.predict([text])[0]
    assert result["output"]["label"] == prediction.label
    for label, p in prediction.probabilities.items():
        assert result["output"]["probabilities"][label] == pytest.approx(p, abs=1e-6)
    (view,) = result["views"]
    assert (
        view["self"] and view["queries"] == view["keys"] and view["queries"][0] == "<s>"
    )  # [CLS] of a BPE vocabulary
    check_rows(view)
    result = client.post("api/run", json={"model": "tagging", "text": "to walk 7 ."}).json()
    assert result["output"]["tags"] == [
        list(pair) for pair in models["tagging"].runner.tag(["to walk 7 ."])[0]
    ]
    check_rows(result["views"][0])


def test_vision_transformer_maps(client, models):
    reply = client.post("api/run", json={"model": "vit-digits", "image": b64(digit_png(3))})
    assert reply.status_code == 200, reply.text
    result = reply.json()
    (view,) = result["views"]
    assert view["type"] == "image" and (view["width"], view["height"]) == (8, 8)
    assert view["image"].startswith("data:image/png;base64,")
    vit = models["vit-digits"].runner
    from qkv.data.images.datasets import decode_image

    image = decode_image(digit_png(3), channels=1, size=(8, 8))  # the same bytes, read alone
    seen = vit.attention(image)
    groups = {g["name"]: g["maps"] for g in view["groups"]}
    assert list(groups) == ["rollout"] + [f"layer {i}" for i in range(seen.cls_maps.size(0))]
    rollout = torch.tensor(groups["rollout"][0]["grid"], dtype=torch.float64)
    assert (rollout - seen.rollout.double()).abs().max() <= ROUNDING
    assert float(rollout.sum()) == pytest.approx(1.0, abs=ROUNDING * rollout.numel())
    layer = groups["layer 2"]
    assert [m["label"] for m in layer][:2] == ["head mean", "head 0"]
    head = torch.tensor(layer[2]["grid"], dtype=torch.float64)
    assert (head - seen.cls_maps[2, 1].double()).abs().max() <= ROUNDING
    assert result["output"]["label"] == seen.prediction.label


def test_captioner_word_maps(client, models):
    data = digit_png(1, 2)
    result = client.post(
        "api/run", json={"model": "caption-digits", "image": "data:image/png;base64," + b64(data)}
    ).json()
    (view,) = result["views"]
    words = result["output"]["words"]
    (group,) = view["groups"]
    assert [m["label"] for m in group["maps"]] == [f"{i}: {w}" for i, w in enumerate(words)]
    from qkv.data.images.datasets import decode_image

    caption = models["caption-digits"].runner.caption([decode_image(data, channels=1)])[0]
    assert caption.words == words
    for word_map, expected in zip(group["maps"], caption.attention, strict=True):
        grid = torch.tensor(word_map["grid"], dtype=torch.float64)
        assert (grid - expected.double()).abs().max() <= ROUNDING
        assert float(grid.sum()) == pytest.approx(1.0, abs=ROUNDING * grid.numel())


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"model": "nope", "text": "a"}, 404, "unknown model 'nope'; this explorer serves"),
        ({"model": "/etc/passwd", "text": "a"}, 404, "unknown model '/etc/passwd'"),
        ({"model": "reverse"}, 422, 'takes text: "text" must be a string'),
        ({"model": "reverse", "text": "   "}, 422, "the text is empty"),
        ({"model": "reverse", "text": "x" * 201}, 422, "the text has 201 characters; at most 200"),
        ({"model": "reverse", "text": "a", "path": "x"}, 422, "path: Extra inputs"),
        ({"model": "reverse", "text": 5}, 422, "text: Input should be a valid string"),
        ({"model": "reverse", "text": "a", "max_new_tokens": 3}, 422, "for language models"),
        ({"model": "kjv-char", "text": "a", "max_new_tokens": 31}, 422, "between 0 and 30"),
        ({"model": "kjv-char", "text": "a\u2603"}, 422, "outside this model's vocabulary"),
        ({"model": "vit-digits", "text": "a"}, 422, "takes an image"),
        ({"model": "vit-digits", "image": "%%%"}, 422, "image is not valid base64"),
        ({"model": "vit-digits", "image": b64(b"GIF89a no")}, 422, "not a readable image"),
        ({"model": "vit-digits", "image": "data:image/png,xyz"}, 422, "must be base64"),
        ({"model": "caption-digits", "image": b64(b"\0" * 30_000)}, 422, "over 20,000 bytes"),
    ],
)
def test_bad_requests_are_named(client, body, status, message):
    reply = client.post("api/run", json=body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert message in error and "Traceback" not in error


def test_oversized_images_and_bodies(client):
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("L", (300, 8)).save(buffer, "PNG")  # a small file of a too-wide image
    reply = client.post("api/run", json={"model": "vit-digits", "image": b64(buffer.getvalue())})
    assert reply.status_code == 422 and "300x8 pixels; at most 256" in reply.json()["error"]
    reply = client.post(
        "api/run", content=b"x" * 200_000, headers={"content-type": "application/json"}
    )
    assert reply.status_code == 413 and "request body is over" in reply.json()["error"]
    reply = client.post("api/run", content=b"{oops", headers={"content-type": "application/json"})
    assert reply.status_code == 422 and reply.json()["error"] == (
        "the request body is not valid JSON (Expecting property name enclosed in double quotes "
        "at line 1, column 2)"
    )
    assert client.get("api/health").status_code == 200


def test_a_model_is_never_run_by_two_threads(client, models, monkeypatch):
    runner = models["classification"].runner
    original = runner.attention
    active, most = [0], [0]
    guard = threading.Lock()

    def watched(text):
        with guard:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.01)  # widen the window in which a second thread could enter
        try:
            return original(text)
        finally:
            with guard:
                active[0] -= 1

    monkeypatch.setattr(runner, "attention", watched)
    texts = [f"the plot was {w}" for w in ("dull", "superb", "tired", "witty")] * 6
    alone = {t: client.post("api/run", json={"model": "classification", "text": t}).json()
             for t in set(texts)}  # fmt: skip
    with ThreadPoolExecutor(8) as pool:
        replies = list(
            pool.map(
                lambda t: client.post("api/run", json={"model": "classification", "text": t}), texts
            )
        )
    assert all(r.status_code == 200 for r in replies)
    assert most[0] == 1
    assert all(r.json() == alone[t] for r, t in zip(replies, texts, strict=True))


def test_internal_errors_answer_500_without_a_traceback(client, models, monkeypatch):
    def broken(text):
        raise RuntimeError("boom at /secret/path")

    monkeypatch.setattr(models["tagging"].runner, "attention", broken)
    # As a real server: the handler's answer, not the exception re-raised into the test.
    client = TestClient(client.app, base_url=BASE_URL, raise_server_exceptions=False)
    reply = client.post("api/run", json={"model": "tagging", "text": "to walk"})
    assert reply.status_code == 500
    assert reply.json() == {"error": "internal error (RuntimeError); see the server's log"}
    assert client.get("api/health").json()["status"] == "ok"


def test_precision_applies_to_the_models_that_decode(dirs):
    """``qkv serve --precision``: translation and language models decode with those weights;
    a model of another task is refused, naming it (it has no decode step to change)."""
    decoding = [dirs["translation"], dirs["language_model"]]
    models = ExplorerModels.load(decoding, precision="bfloat16")
    assert [m.runner.precision for m in models] == ["bfloat16", "bfloat16"]
    with pytest.raises(ValueError, match="classifier, which takes no precision"):
        ExplorerModels.load([*decoding, dirs["classification"]], precision="int8")
