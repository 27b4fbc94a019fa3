"""The explorer's load test, smaller: ``benchmarks/explorer_load.py --no-write`` against a
served translation model and Vision Transformer, 16 concurrent clients, invalid requests mixed
in; every request must get its expected answer and the server must stay healthy (the script's
exit status says so). No timing is checked here: the benchmark records latencies."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("sklearn")

from tests.explorer.models import explorer_models
from tests.integration.test_reverse_cli import ROOT


def test_every_request_answered_and_the_server_healthy(tmp_path_factory):
    dirs = explorer_models(tmp_path_factory, ("translation", "vit"))
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "explorer_load.py"),
         "--model", str(dirs["translation"]), "--model", str(dirs["vit"]),
         "--requests", "160", "--clients", "16", "--no-write"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    assert summary["answered_as_expected"] == summary["requests"] == 160
    assert summary["statuses"]["200"] == 140 and summary["healthy_after"]
    assert summary["invalid"]["requests"] == 20
