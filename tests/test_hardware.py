"""bfloat16 on CPUs without bfloat16 kernels (AVX2): LSTMs run in float32 instead of failing,
and bfloat16 training and generation warn (``qkv.hardware``). Whether this machine has the
kernels is patched both ways, so the tests hold on any CPU."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

import qkv.hardware as hardware
import qkv.layers.recurrent as recurrent
from qkv.hardware import warn_if_slow_bfloat16


@pytest.mark.parametrize("has", [True, False])
def test_warns_only_on_a_cpu_without_bfloat16(monkeypatch, caplog, has):
    monkeypatch.setattr(hardware, "cpu_has_bfloat16", lambda: has)
    with caplog.at_level(logging.WARNING, logger="qkv.hardware"):
        warned = warn_if_slow_bfloat16("cpu", "train.precision=bf16")
        assert not warn_if_slow_bfloat16(torch.device("meta"), "elsewhere")
    assert warned is not has
    assert ("train.precision=bf16: this CPU has no bfloat16" in caplog.text) is not has


def test_lstm_under_bfloat16_autocast_runs_in_float32_without_the_kernels(monkeypatch):
    monkeypatch.setattr(recurrent, "cpu_has_bfloat16", lambda: False)
    torch.manual_seed(0)
    lstm, gru = nn.LSTM(8, 16, batch_first=True), nn.GRU(8, 16, batch_first=True)
    x = torch.randn(2, 5, 8)
    state = (torch.zeros(1, 2, 16), torch.zeros(1, 2, 16))
    expected, _ = lstm(x, state)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, (h, c) = recurrent.run_rnn(lstm, x, state)
        gru_out, _ = recurrent.run_rnn(gru, x)  # a GRU is called as it is
        gru_direct, _ = gru(x)
    assert out.dtype == h.dtype == c.dtype == torch.float32
    torch.testing.assert_close(out, expected)  # the float32 LSTM itself
    assert torch.equal(gru_out, gru_direct)


@pytest.mark.parametrize(
    ("bf16", "amx", "rows", "warns"),
    [
        (False, False, 32, True),  # no bfloat16 kernels at all
        (True, False, 1, True),  # AVX-512 BF16 without AMX, one row: slower than float32
        (True, False, hardware.FEW_ROWS, False),  # enough rows: faster
        (True, True, 1, False),  # AMX: faster at one row too
    ],
)
def test_bfloat16_decoding_warns_where_it_is_slower(monkeypatch, caplog, bf16, amx, rows, warns):
    monkeypatch.setattr(hardware, "cpu_has_bfloat16", lambda: bf16)
    monkeypatch.setattr(hardware, "cpu_has_amx", lambda: amx)
    with caplog.at_level(logging.WARNING, logger="qkv.hardware"):
        assert hardware.warn_if_slow_bfloat16_decoding("cpu", rows) is warns
        assert not hardware.warn_if_slow_bfloat16_decoding("meta", 1)
    assert bool(caplog.records) is warns


def test_amx_is_read_from_the_cpu_flags():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            flags = next(line.split() for line in handle if line.startswith("flags"))
    except (OSError, StopIteration):
        pytest.skip("no /proc/cpuinfo flags on this system")
    hardware.cpu_has_amx.cache_clear()
    assert hardware.cpu_has_amx() is ("amx_bf16" in flags)
