# Two commands for a fresh machine (see README):
#   make book   install everything into .venv and build the book into _build/html
#   make test   build the book, then run every test: package unit tests, strict nbval over every chapter,
#               the student editions, browser tests of the built book, and the widget tests on ipywidgets 7.7.1
# Python 3.11 (the course pins torch==2.13.0 for it); python3 where no python3.11 is on the PATH
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Colab's ipywidgets 7.7.1, in an environment of its own
VENV7  := .venv-ipyw7
STAMP7 := $(VENV7)/.installed

.PHONY: book test test-ipywidgets7 install outputs sync student bench clean vendor browser-test

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $(STAMP)

# self-hosted JS: `npm ci` from package-lock.json, then copy into book/_static/vendor/ (no npm: CDN fallback, with a notice)
vendor: install
	$(BIN)/python tools/vendor_js.py

book: install vendor
	$(BIN)/python tools/notebooks.py check
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo "the book is at $(CURDIR)/_build/html/index.html"

test: book $(STAMP7)
	$(BIN)/python -m pytest -n 2 --dist loadscope --nbval lessons tests
	$(MAKE) --no-print-directory test-ipywidgets7

$(STAMP7): tests/requirements-ipywidgets7.txt pyproject.toml
	$(PYTHON) -m venv $(VENV7)
	$(VENV7)/bin/python -m pip install --quiet --upgrade pip
	$(VENV7)/bin/python -m pip install --quiet -r tests/requirements-ipywidgets7.txt
	$(VENV7)/bin/python -m pip install --quiet --no-deps -e .
	touch $(STAMP7)

test-ipywidgets7: $(STAMP7)
	$(VENV7)/bin/python -m pytest -q -W "ignore::DeprecationWarning" tests/test_explorers.py tests/test_plots.py tests/test_checks.py

# the built book in headless Chromium only (needs `make book`)
browser-test: install
	$(BIN)/python -m pytest -n 2 --dist load tests/browser

# maintainers: after editing a notebook or the package, regenerate the stored outputs and commit them
outputs: install
	$(BIN)/python tools/notebooks.py execute

sync: install
	$(BIN)/python tools/notebooks.py sync

# instructors: student/NN_slug.ipynb and a zip per chapter, solutions removed
student: install
	$(BIN)/python tools/student_edition.py

# the explorers' speed: one update against a naive redraw, side by side in one run (figures in the README)
bench: install
	$(BIN)/python tools/bench_explorers.py

clean:
	rm -rf _build
