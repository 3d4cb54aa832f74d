# The documentation site (issue 29): MkDocs + Material (the 'docs' extra of pyproject.toml,
# installed by 'make setup'), built offline and strict into build/docs/ (mkdocs.yml): a
# broken link, a missing anchor or a page left out of the navigation fails the build.
# The generated reference pages are rewritten first, from the code.
.PHONY: docs docs-reference

# A fresh clone: 'make setup' installs the extra; a .venv made before it: pip adds it.
$(VENV)/bin/mkdocs:
	@test -x $(PY) || bash scripts/setup.sh
	@test -x $@ || $(VENV)/bin/pip install -q -e '.[docs]'

docs-reference: $(VENV)/bin/mkdocs
	$(PY) scripts/gen-commands-doc.py
	$(PY) scripts/gen-exit-status-doc.py

docs: docs-reference
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --clean --site-dir build/docs
	@echo "docs: build/docs/index.html"

TEST_PREREQS += docs
