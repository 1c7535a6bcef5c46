# Two commands for a fresh machine (see README):
#   make book   install everything into .venv and build the book into _build/html
#   make test   install, then run every test: unit tests, strict nbval over every chapter, ...
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: book test install outputs sync student clean

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $(STAMP)

book: install
	$(BIN)/python tools/notebooks.py check
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo "the book is at $(CURDIR)/_build/html/index.html"

test: install
	$(BIN)/python tools/notebooks.py check
	$(BIN)/python -m pytest -n 2 --dist loadscope --nbval lessons tests

# maintainers: after editing a notebook or the package, regenerate the stored outputs and commit them
outputs: install
	$(BIN)/python tools/notebooks.py execute

sync: install
	$(BIN)/python tools/notebooks.py sync

# instructors: student/NN_slug.ipynb and a zip per chapter, solutions removed
student: install
	$(BIN)/python tools/student_edition.py

clean:
	rm -rf _build
