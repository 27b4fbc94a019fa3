"""One ``qkv train`` looks its task up once and resolves its device once: the CLI resolves the
device to join torchrun's process group and hands it to the run, which hands it to the engine."""

from __future__ import annotations

import importlib
import types

from qkv.cli.main import main
from qkv.tasks import registry
from qkv.training import device as device_module
from tests.tasks.test_every_task import QUICK, ROOT


def test_a_run_looks_its_task_up_once_and_resolves_its_device_once(tmp_path, monkeypatch, capsys):
    lookups = []

    def import_module(name):
        lookups.append(name)
        return importlib.import_module(name)

    monkeypatch.setattr(registry, "importlib", types.SimpleNamespace(import_module=import_module))
    registry._spec.cache_clear()
    calls = []
    resolve = device_module.resolve_device

    def counted(name):
        calls.append(name)
        return resolve(name)

    monkeypatch.setattr(device_module, "resolve_device", counted)
    sets = [f"out_dir={tmp_path / 'run'}", *QUICK, "data.options.n_train=100",
            "data.options.n_valid=5", "data.options.n_test=5",
            "data.valid_bleu_sentences=0"]  # fmt: skip
    argv = ["train", str(ROOT / "configs/tiny/reverse-transformer.yaml"), "--quiet",
            "--threads", "1", *[x for s in sets for x in ("--set", s)]]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    assert "model saved in" in capsys.readouterr().out
    assert calls == ["auto"]
    assert lookups == ["qkv.tasks.translation.task"]
