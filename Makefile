# Two entry points (README quick start): `make demo` and `make test`. Both install what they
# need into .venv first, so they work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch; any torch >= 2.1 works for the package itself.
TORCH_SPEC ?= torch==2.13.0

.PHONY: install demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[test,parquet,dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) -m gpuperf_magics.demo

test: install
	$(PY) -m pytest -q tests notebooks --nbval-lax -p no:cacheprovider

lint: install
	$(VENV)/bin/ruff check gpuperf_magics tests benchmarks
	$(VENV)/bin/mypy

bench: install
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/accuracy.py
	$(PY) benchmarks/fit_speed.py

clean:
	rm -rf $(VENV) *.egg-info
