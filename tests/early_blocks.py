"""Loaded by pytest before its installed plugins (pyproject's addopts: `-p early_blocks`): an optional import
that costs seconds and checks nothing here is blocked before nbval's plugin imports nbformat, and Python's
bytecode cache is turned on for the session, as `make test` turns it on.

nbformat validates notebooks with jsonschema's Draft4Validator and no format checker, and jsonschema imports
its optional IRI-syntax checker, rfc3987_syntax, when present; that import builds an Earley parser (2-3 s of
CPU in each of pytest's processes: python-jsonschema/jsonschema#1428). Without it, jsonschema only lacks the
draft 7+ "iri" formats, which no notebook schema uses: what nbformat and nbval check is unchanged.
`neuronkit run` blocks it the same way for its own process (neuronkit/workbook/cli.py).

The bytecode cache (the gitignored __pycache__ folders, and pytest's rewritten test modules beside them): where
the environment turns it off (PYTHONDONTWRITEBYTECODE=1), every pytest worker rewrote and compiled every test
module again, and each of the processes the tests start (kernels, ranks, fresh interpreters, about a hundred)
compiled neuronkit's modules again; the Makefile exports PYTHONDONTWRITEBYTECODE empty for the same reason, and
this does the same for a plain `pytest` (before xdist starts its workers and conftest its servers, so that every
process of the session has the same environment). Whether a module was compiled now or read from its cache
changes nothing it does."""

import os
import sys

sys.modules.setdefault("rfc3987_syntax", None)

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
