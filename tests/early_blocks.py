"""Loaded by pytest before its installed plugins (pyproject's addopts: `-p early_blocks`): an optional import
that costs seconds and checks nothing here is blocked before nbval's plugin imports nbformat.

nbformat validates notebooks with jsonschema's Draft4Validator and no format checker, and jsonschema imports
its optional IRI-syntax checker, rfc3987_syntax, when present; that import builds an Earley parser (2-3 s of
CPU in each of pytest's processes: python-jsonschema/jsonschema#1428). Without it, jsonschema only lacks the
draft 7+ "iri" formats, which no notebook schema uses: what nbformat and nbval check is unchanged.
`neuronkit run` blocks it the same way for its own process (neuronkit/workbook/cli.py)."""

import sys

sys.modules.setdefault("rfc3987_syntax", None)
