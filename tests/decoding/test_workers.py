"""Several batches decoded at once: the same results, in order, and PyTorch's thread count as
it was before."""

import threading

import pytest
import torch

from qkv.decoding.workers import map_batches


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_results_come_in_batch_order(workers):
    batches = [[i, i + 1] for i in range(7)]
    assert list(map_batches(sum, batches, workers)) == [sum(b) for b in batches]


def test_batches_run_on_threads_of_their_own_with_one_torch_thread_each():
    seen = []

    def record(batch):
        seen.append((threading.get_ident(), torch.get_num_threads()))
        return batch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        list(map_batches(record, list(range(6)), workers=2))
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(before)
    assert all(threads == 1 for _, threads in seen)
    assert threading.get_ident() not in {ident for ident, _ in seen}


def test_the_thread_count_is_restored_when_a_batch_fails():
    def fail(batch):
        raise RuntimeError(f"batch {batch}")

    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="batch 0"):
        list(map_batches(fail, [0, 1, 2], workers=2))
    assert torch.get_num_threads() == before


def test_one_batch_runs_on_the_calling_thread():
    caller = threading.get_ident()
    assert list(map_batches(lambda b: threading.get_ident(), [0], workers=4)) == [caller]


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "2"])
def test_a_bad_worker_count_is_refused(workers):
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        list(map_batches(sum, [[1]], workers))
