"""Test-wide settings."""

import os

import torch

# Under pytest-xdist every worker would start one thread per core: two workers on two cores would
# oversubscribe the CPU and slow training tests many times over. One thread per worker.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
