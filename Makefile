# neuronkit: the two commands a newcomer needs, each doing its own set-up on a fresh machine.
#   make workbook   run the whole workbook on the bundled model; ends by printing the report's path
#   make test       run every test (the type check, library, notebooks with papermill + nbval, browser)

PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.neuronkit-installed
RUN    ?= runs/tiny-qwen3

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
# Python's bytecode cache on (the gitignored __pycache__ folders), even where the environment turns it off
# (PYTHONDONTWRITEBYTECODE=1): a workbook run starts several interpreters and the tests about a hundred
# (kernels, torchrun ranks, fresh-process checks), each of which would otherwise compile neuronkit's and the
# tests' modules again (~0.5-1 CPU-s apiece; pytest's rewritten test modules are cached the same way).
export PYTHONDONTWRITEBYTECODE :=

.PHONY: setup build-deps system-deps workbook typecheck test bench clean

setup: $(STAMP)

# torch is installed first and pinned: pip then takes the CPU build, and nothing later pulls CUDA. PyPI's
# Linux torch wheels are CUDA builds (GBs of nvidia packages): unless pip already finds a CPU build (a local
# wheelhouse or mirror; macOS wheels are CPU builds), it is taken from PyTorch's CPU index. The package's
# native device runtime (setup.py) then compiles against that torch (--no-build-isolation).
TORCH           := torch==2.13.0
# torchtitan as released, without its dependency resolution (it pins datasets<4.8, below the clients'); the
# dependencies the recipe needs are pyproject's `titan` group.
TITAN           := torchtitan==0.3.0
# litgpt as released, without its dependency resolution (it pins huggingface-hub<1.4, below transformers 5's);
# what it imports besides is in pyproject's `clients` group.
LITGPT          := litgpt==0.5.13
# torchao, for tests/clients, in a folder of its own that nothing imports from unless told to (PYTHONPATH): among
# the venv's packages, transformers (with torchao >= 0.15) and peft would import it in every process that loads a
# model (~2 CPU-s, and warnings about its CUDA kernels on stderr, in every notebook), and torchtitan 0.3.0 fails
# importing torchao 0.14 (peft refuses below 0.16).
TORCHAO         := torchao==0.18.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
IS_CPU_BUILD    := import json, sys; w = json.load(sys.stdin)["install"][0]; \
                   sys.exit("+cpu" not in w["metadata"]["version"] and "macosx" not in w["download_info"]["url"])
$(STAMP): pyproject.toml setup.py $(wildcard neuronkit/device/simulator/csrc/*)
	@command -v $(PYTHON) >/dev/null || { echo "neuronkit needs Python 3.11 ($(PYTHON) not found)"; exit 1; }
	@$(MAKE) --no-print-directory build-deps
	$(PYTHON) -m venv $(VENV)
	@if $(PY) -m pip install --dry-run --no-deps --ignore-installed --quiet --report - "$(TORCH)" 2>/dev/null \
		| $(PY) -c '$(IS_CPU_BUILD)'; then index=""; else index="--extra-index-url $(TORCH_CPU_INDEX)"; fi; \
	echo "$(PY) -m pip install $$index $(TORCH)"; $(PY) -m pip install --quiet $$index "$(TORCH)" "setuptools>=68" ninja
	$(PY) -m pip install --quiet --no-build-isolation -e ".[test,clients,titan]"
	$(PY) -m pip install --quiet --no-deps "$(TITAN)" "$(LITGPT)"
	$(PY) -m pip install --quiet --no-deps --upgrade --target $(VENV)/torchao "$(TORCHAO)"
	$(PY) -c "import torch, sys; v = torch.__version__; sys.exit(0 if v.startswith('2.13.0') and not torch.version.cuda else f'unexpected torch {v} (cuda {torch.version.cuda}): expected the 2.13.0 CPU build')"
	$(PY) -m ipykernel install --sys-prefix --name neuronkit --display-name "Python (neuronkit)" >/dev/null
	touch $(STAMP)

# A C++ compiler, Python's headers for the native device runtime and Python's venv module (Debian packages),
# if missing.
build-deps:
	@missing=""; command -v g++ >/dev/null || missing="g++"; \
	$(PYTHON) -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
		|| missing="$$missing python3-dev"; \
	$(PYTHON) -c "import ensurepip, venv" 2>/dev/null || missing="$$missing $(notdir $(PYTHON))-venv"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi; \
	fi

# Headless Chromium for the report's browser test (Debian packages).
system-deps:
	@if [ ! -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi; \
	fi

workbook: setup
	$(VENV)/bin/neuronkit run tiny-qwen3 --out $(RUN) --overwrite

# mypy, strict on neuronkit/pipeline and neuronkit/stages (pyproject's [tool.mypy]).
typecheck: setup
	$(PY) -m mypy

test: setup system-deps typecheck
	$(PY) -m pytest

bench: setup
	$(PY) bench/bench_device.py

clean:
	rm -rf $(VENV) runs build neuronkit/device/simulator/_native*.so
