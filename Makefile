# Two entry points (README quick start): `make demo` and `make test`. Both install what they
# need into .venv first, so they work on a fresh machine. `make docs` builds the documentation
# (docs/, Sphinx) into docs/_build/html with warnings as errors.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch for the venv (the project's machines resolve it to a CPU wheel); TORCH_INDEX, e.g.
# https://download.pytorch.org/whl/cpu, picks the build elsewhere. Any torch >= 2.1 works for
# the package itself.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: install demo test lint docs bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install --quiet -e ".[test,parquet,postgres,dev,docs]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) -m gpuperf_magics.skins.demo

test: install
	$(PY) -m pytest -q tests notebooks --nbval-lax -p no:cacheprovider

lint: install
	$(VENV)/bin/ruff check gpuperf_magics tests benchmarks docs/conf.py
	$(VENV)/bin/mypy

# -E: read every page afresh, so a warning in an unchanged file still fails the build. The build
# runs no benchmark, no notebook (outputs as saved) and no download.
docs: install
	$(PY) -m sphinx -b html -E -W --keep-going -q docs docs/_build/html

bench: install
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/accuracy.py
	$(PY) benchmarks/fit_speed.py

clean:
	rm -rf $(VENV) *.egg-info docs/_build
