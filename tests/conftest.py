"""Test-wide settings."""

import os

import pytest
import torch
from hypothesis import settings

# The `browser` fixture of the page's tests (headless Chromium), for every module that asks.
pytest_plugins = ["tests.browser"]

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


# Scheduling for `make test` (two pytest-xdist workers, `--dist loadgroup`). The modules that
# train or load something expensive once per module run on one worker (an xdist group), so it
# is built once, not once per worker; the longest tests and groups start first, so that neither
# worker is left with a long test at the end while the other is idle. Costs in CPU-seconds on a
# 2-core AMD EPYC (`make test` prints the slowest 15 tests of every run).
ONE_WORKER = (
    "tests/cli/test_train_resume.py",  # 120 s: a reference run, then stops and resumes against it
    "tests/data/reading/test_cloze.py",  # 66 s: the cloze corpora, loaded once
    "tests/cli/test_reading_cli.py",  # 60 s: a reader of each kind
    "tests/ctranslate2/test_ctranslate2.py",  # 42 s: exported models
    "tests/cli/test_hostile.py",  # 22 s: the hostile world
    "tests/cli/test_encoder_cli.py",
    "tests/cli/test_ner_cli.py",
    "tests/cli/test_vision_cli.py",
    "tests/cli/test_caption_cli.py",
    "tests/cli/test_embed_cli.py",
    "tests/tasks/captioning/test_task.py",
    "tests/docs/test_site.py",  # 16 s: the site, built once
    "tests/tasks/image_classification/test_task.py",
    "tests/tasks/test_encoder_tasks.py",
    "tests/explorer/test_browser.py",
)
FIRST = (
    "tests/integration/test_reverse_cli.py",  # 143 s in 4 tests, each on whichever worker is free
    *ONE_WORKER[:4],
    "tests/integration/test_copy_cli.py",
    "tests/cli/test_demo.py",
    "tests/cli/test_torchrun.py",
    "tests/cli/test_language_model_cli.py",
)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    def module(item) -> str:
        return item.nodeid.split("::", 1)[0]

    for item in items:
        if module(item) in ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(module(item)))
    rank = {path: i for i, path in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(module(item), len(FIRST)))  # stable: order kept within
