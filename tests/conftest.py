"""Test-wide settings."""

import os

import pytest
import torch
from hypothesis import settings

# Hypothesis' 200 ms deadline fails a property test that a loaded machine merely slowed down: no
# deadline. Examples are derived from each test (derandomize), so a run is repeatable and a
# failure is found again by the next run, not by chance; no example database is written.
settings.register_profile("qkv", deadline=None, derandomize=True, database=None)
settings.load_profile("qkv")

# Under pytest-xdist every worker would start one thread per core: two workers on two cores would
# oversubscribe the CPU and slow training tests many times over. One thread per worker.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def one_thread():
    """For modules of tiny tensors (``pytestmark = pytest.mark.usefixtures("one_thread")``): a
    second intra-op thread only adds synchronisation, which costs seconds per test on a busy
    2-core machine. Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
