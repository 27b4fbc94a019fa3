"""One ``qkv train`` resolves its device once: the CLI resolves it to join torchrun's process
group, hands it to the run, and the run hands it to the engine."""

from __future__ import annotations

from qkv.cli.main import main
from qkv.training import device as device_module
from tests.tasks.test_every_task import QUICK, ROOT


def test_a_run_resolves_its_device_once(tmp_path, monkeypatch, capsys):
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
