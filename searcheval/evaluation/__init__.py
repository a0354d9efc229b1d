"""The nightly evaluation's steps as plain functions (`pipeline`), the checks of the inputs
(`validation`), the baseline and the gate (`baseline`, `gate`), what a run found and its renderings
(`report`), the run history (`history`), alerts (`alerts`), diffs of snapshots (`diff`) and a
run's document lookups (`lookups`). Wrapped by the project's tasks/; never imports Prefect."""
