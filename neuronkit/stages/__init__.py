"""The workbook's stages, one folder each: everything one stage is, in one place.

`neuronkit/data/stages.toml` lists them in migration order (`neuronkit.pipeline.stage` reads it); each row's
folder here holds its options (`__init__.py`), its record types (`evidence.py`), its `neuronkit check` steps
(`steps.py`), what its notebook calls (`run.py`: the stage, and the "Next" paragraph the notebook ends with)
and the report's numbers from its record (`report.py`). Adding a stage is one folder, one table row and one
notebook; the runner, the report and `check()` find it through the table.
"""
