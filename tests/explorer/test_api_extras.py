"""The explorer's API asks for the views' extras (``"neuron"``: query and key vectors;
``"rollout"``: an encoder's rollout and flow views, a ViT's flow map): ``GET /api/models`` says
which each model shows, and that is exactly what ``POST /api/run`` with the flag on shows (the
others answer 422 with the library's "leave out ..."); a flag that is not a boolean is named."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("sklearn")

from qkv.tasks.view_extras import EXTRAS
from tests.explorer.test_api import b64, client, digit_png, dirs, models  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")
# The explorer's models (tests/explorer/models.py): Transformers for translation, the language
# model, the classifier and the tagger; a ViT; a show-attend-tell captioner.
OFFERED = {
    "reverse": ["neuron"],
    "kjv-char": ["neuron"],
    "classification": ["neuron", "rollout"],
    "tagging": ["neuron", "rollout"],
    "vit-digits": ["rollout"],
    "caption-digits": [],
}
INPUTS = {"reverse": "a b c d", "kjv-char": "In the beginning", "classification": "a witty film",
          "tagging": "to walk 7 ."}  # fmt: skip


def _body(name: str, **flags: object) -> dict:
    if name in INPUTS:
        return {"model": name, "text": INPUTS[name], **flags}
    return {"model": name, "image": b64(digit_png(3, 5) if "caption" in name else digit_png(3)),
            **flags}  # fmt: skip


def _shows(result: dict, extra: str) -> bool:
    views = result["views"]
    if extra == "neuron":
        return any("neuron" in v for v in views)
    groups = [g["name"] for v in views for g in v.get("groups", ())]
    return any(v["id"] == "rollout" for v in views) or "flow" in groups


def test_models_list_the_extras_that_a_run_with_them_shows(client):  # noqa: F811
    listed = {m["name"]: m["extras"] for m in client.get("api/models").json()["models"]}
    assert listed == OFFERED
    for name, offered in listed.items():
        plain = client.post("api/run", json=_body(name))
        assert plain.status_code == 200, plain.text
        for extra in EXTRAS:
            assert not _shows(plain.json(), extra)  # off unless asked for
            reply = client.post("api/run", json=_body(name, **{extra: True}))
            if extra in offered:
                assert reply.status_code == 200, reply.text
                assert _shows(reply.json(), extra), (name, extra)
            else:
                assert reply.status_code == 422, (name, extra, reply.text)
                assert f"leave out {extra}" in reply.json()["error"]


def test_both_extras_at_once(client):  # noqa: F811
    reply = client.post("api/run", json=_body("classification", neuron=True, rollout=True))
    assert reply.status_code == 200, reply.text
    ids = [v["id"] for v in reply.json()["views"]]
    assert ids[:2] == ["encoder", "rollout"] and "neuron" in reply.json()["views"][0]


@pytest.mark.parametrize("value", ["yes", 1, None, [True]])
@pytest.mark.parametrize("extra", EXTRAS)
def test_a_flag_that_is_not_a_boolean_is_named(client, extra, value):  # noqa: F811
    reply = client.post("api/run", json=_body("classification", **{extra: value}))
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert f"{extra}: Input should be a valid boolean" in error and "Traceback" not in error
