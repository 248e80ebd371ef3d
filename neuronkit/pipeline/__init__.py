"""The pipeline frame: what every stage runs on, knowing no particular stage.

`stage` reads the stage table (`neuronkit/data/stages.toml`) into `Stage` and `Step` records and finds each
stage's folder (`neuronkit/stages/<name>/`); `record` is the one record type (`StageResult`), its statuses
and the run directory; `config` the run configuration passed whole (`RunConfig`, `Params`); `flow` how
stages follow each other; `execute` the one executor (`recording`, `run_stage`); `session` the model held
once per process; `check` `neuronkit check`'s steps on a session; `reference` the CPU reference file;
`refusals` explains a step's error; `host_products` makes the CPU side compute as the device does.
"""
