"""``qkv serve`` and ``qkv explore`` through the real command line, and the page's inlined data:
the server answers on the port it prints and warns when bound beyond loopback; the exported page
holds everything it needs (no URL to load) and its data reads back exactly, even when the input
tries to close the script element; bad input exits 2 without a traceback and writes nothing."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
pytest.importorskip("sklearn")

from qkv.cli.main import main  # noqa: E402
from qkv.explorer.page import page_data, render_page  # noqa: E402
from qkv.explorer.views import Limits  # noqa: E402
from tests.commands import ROOT, qkv_process  # noqa: E402
from tests.explorer.models import explorer_models  # noqa: E402
from tests.explorer.test_api import digit_png  # noqa: E402

FIXTURE_RUNS = ROOT / "tests" / "fixtures" / "runs"
DATA = re.compile(r'<script id="qkv-data" type="application/json">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    return explorer_models(tmp_path_factory, ("translation", "vit"))


def page_json(html: str) -> dict:
    """The page's data: the first such element (the script's comments may name it again)."""
    return json.loads(DATA.search(html).group(1))


def test_explore_writes_one_self_contained_page(dirs, tmp_path):
    out = tmp_path / "page.html"
    result = qkv_process("explore", "--model", str(dirs["translation"]), "a b c", "-o", str(out))
    assert result.returncode == 0, result.stderr
    html = out.read_text(encoding="utf-8")
    data = page_json(html)
    assert data["mode"] == "static" and data["result"]["input"] == {"text": "a b c"}
    assert result.stdout.splitlines()[0] == data["result"]["output"]["summary"]
    assert {v["id"] for v in data["result"]["views"]} == {"cross", "encoder", "decoder"}
    # Nothing to fetch when it is viewed: no src/href to a URL, no fetch of a remote resource.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "{{" not in html
    (tmp_path / "digit.png").write_bytes(digit_png(5))
    out = tmp_path / "vit.html"
    result = qkv_process(
        "explore", "--model", str(dirs["vit"]), str(tmp_path / "digit.png"), "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    view = page_json(out.read_text(encoding="utf-8"))["result"]["views"][0]
    assert view["type"] == "image" and view["groups"][0]["name"] == "rollout"


def test_explore_neuron_and_rollout_add_vectors_and_views(tmp_path, capsys):
    out = tmp_path / "page.html"
    run = str(FIXTURE_RUNS / "classification")
    assert (
        main(["explore", "--model", run, "a good film", "--neuron", "--rollout", "-o", str(out)])
        == 0
    )
    views = page_json(out.read_text(encoding="utf-8"))["result"]["views"]
    assert [v["id"] for v in views] == ["encoder", "rollout", "flow"]
    q, k = views[0]["neuron"]["q"], views[0]["neuron"]["k"]
    assert len(q) == len(k) == len(views[0]["layers"])  # one (H, T, Dk) pair per layer
    assert len(q[0][0]) == len(k[0][0]) == len(views[0]["queries"])
    assert main(["explore", "--model", run, "a good film", "-o", str(out)]) == 0
    (plain,) = page_json(out.read_text(encoding="utf-8"))["result"]["views"]
    assert "neuron" not in plain  # opt-in


def test_explore_neuron_adds_vectors_to_every_view_of_a_translation(tmp_path, capsys):
    out = tmp_path / "page.html"
    run = str(FIXTURE_RUNS / "translation")
    assert main(["explore", "--model", run, "a b c d", "--neuron", "-o", str(out)]) == 0
    views = page_json(out.read_text(encoding="utf-8"))["result"]["views"]
    assert [v["id"] for v in views] == ["cross", "encoder", "decoder"]
    for view in views:
        q, k = view["neuron"]["q"], view["neuron"]["k"]
        assert len(q) == len(k) == len(view["layers"])  # one (H, Tq, Dk), (H, Tk, Dk) per layer
        assert len(q[0][0]) == len(view["queries"]) and len(k[0][0]) == len(view["keys"])


def test_inlined_data_cannot_close_its_script():
    text = "</script><script>alert(1)</script> & <!-- \u2028"
    result = {"model": "m", "kind": "translation", "input": {"text": text},
              "output": {"summary": text}, "views": []}  # fmt: skip
    data = page_data("static", [{"name": "m"}], Limits(), result)
    html = render_page(data)
    assert html.count("</script>") == 2  # the data's and the script's own closing tags
    assert page_json(html) == json.loads(json.dumps(data))


@pytest.mark.parametrize(
    "argv, message",
    [
        (("explore", "--model", "{vit}", "{tmp}/missing.png", "-o", "{tmp}/a.html"),
         "missing.png: no such image file"),
        (("explore", "--model", "{vit}", "{tmp}/notes.png", "-o", "{tmp}/a.html"),
         "not a readable image"),
        (("explore", "--model", "{translation}", "", "-o", "{tmp}/a.html"), "the text is empty"),
        (("explore", "--model", "{translation}", "caf\udce9", "-o", "{tmp}/a.html"),
         "the text has a lone surrogate (U+DCE9 at character 3)"),  # bytes not UTF-8 in argv
        (("explore", "--model", "{translation}", "a", "-o", "{tmp}/a.png"), "an .html file"),
        (("explore", "--model", "{tmp}", "a", "-o", "{tmp}/a.html"), "no model directory"),
        (("explore", "--model", "{summarisation}", "the king", "--neuron", "-o", "{tmp}/a.html"),
         "the neuron view needs a qkv Transformer's own multi-head attention; this Seq2SeqRNN"),
        (("explore", "--model", "{translation}", "a", "--rollout", "-o", "{tmp}/a.html"),
         "no rollout view"),
        (("serve", "--model", "{translation}", "--port", "70000"), "--port must be between"),
        (("serve", "--model", "{tmp}"), "no model directory"),
        (("serve", "--model", "{translation}", "--allow-host", "explorer.lan:80"),
         "(--allow-host) is a name or address without a scheme, port or path"),
    ],
)  # fmt: skip
def test_bad_input_exits_2(dirs, tmp_path, argv, message, capsys):
    # In process (the CLI's own entry point, without a new interpreter each time).
    (tmp_path / "notes.png").write_text("not an image")
    values = {"vit": dirs["vit"], "translation": dirs["translation"], "tmp": tmp_path,
              "summarisation": FIXTURE_RUNS / "summarisation"}  # fmt: skip
    assert main([a.format(**values) for a in argv]) == 2
    stderr = capsys.readouterr().err
    assert message in stderr and "Traceback" not in stderr
    assert not (tmp_path / "a.html").exists()


def _start(*args: str) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "qkv", "serve", *args, "--port", "0"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = process.stdout.readline()  # "serving NAME (KIND) at http://HOST:PORT/ ..."
    match = re.search(r"at (http://\S+/)", line)
    if match is None:
        process.kill()
        raise AssertionError(f"no address in {line!r}: {process.stderr.read()}")
    return process, match.group(1)


def _get(url: str) -> httpx.Response:
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(url, timeout=5)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_serve_answers_and_stops_on_ctrl_c(dirs):
    process, url = _start("--model", str(dirs["translation"]), "--model", str(dirs["vit"]))
    try:
        assert url.startswith("http://127.0.0.1:")
        assert _get(url + "api/health").json() == {"status": "ok", "models": 2}
        reply = httpx.post(url + "api/run", json={"model": "reverse", "text": "a b"}, timeout=30)
        assert reply.status_code == 200 and reply.json()["views"]
        assert "qkv-data" in _get(url).text
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0 and "Traceback" not in stderr


def test_serve_warns_when_reachable_from_other_machines(dirs):
    process, url = _start(
        "--model", str(dirs["translation"]), "--host", "0.0.0.0", "--allow-host", "explorer.lan"
    )
    try:
        health = url.replace("0.0.0.0", "127.0.0.1") + "api/health"
        assert _get(health).status_code == 200
        # It answers to the names it serves on, and refuses a page naming another (DNS rebinding).
        for host, status in [("0.0.0.0", 200), ("explorer.lan:80", 200), ("evil.example", 421)]:
            reply = httpx.get(health, headers={"host": host}, timeout=5)
            assert reply.status_code == status, (host, reply.text)
        assert "does not answer to Host 'evil.example'" in reply.json()["error"]
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert "warning: binding to 0.0.0.0" in stderr and "no authentication" in stderr
    assert "--allow-host" in stderr
