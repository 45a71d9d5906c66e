# Two entry points (README quick start): `make demo` and `make test`. Both install what they
# need into .venv first, so they work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch for the venv (the project's machines resolve it to a CPU wheel); TORCH_INDEX, e.g.
# https://download.pytorch.org/whl/cpu, picks the build elsewhere. Any torch >= 2.1 works for
# the package itself.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: install demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install --quiet -e ".[test,parquet,postgres,dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) -m gpuperf_magics.skins.demo

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
