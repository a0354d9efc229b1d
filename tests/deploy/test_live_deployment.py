"""The `live` deployment of deploy/prefect.yaml: every 15 minutes, its parameters those of the
library's defaults, valid for the flow."""

from __future__ import annotations

from pathlib import Path

from flows.serve import load_deployment_specs, load_flow
from searcheval import defaults

ROOT = Path(__file__).resolve().parents[2]


def test_live_runs_every_fifteen_minutes_with_the_default_settings():
    spec = {s.name: s for s in load_deployment_specs()}["live"]
    [schedule] = spec.schedules
    assert (schedule.cron, schedule.timezone, schedule.active) == ("*/15 * * * *", "UTC", True)
    assert spec.parameters == {"monitor": defaults.LIVE_MONITOR,
                               "interval_minutes": defaults.LIVE_INTERVAL_MINUTES,
                               "metrics": list(defaults.LIVE_METRICS),
                               "cusum_k": defaults.LIVE_CUSUM_K,
                               "cusum_h": defaults.LIVE_CUSUM_H}
    flow = load_flow(spec, ROOT)
    assert flow.name == "searcheval-live"
    validated = flow.validate_parameters(spec.parameters)
    assert {k: validated[k] for k in spec.parameters} == spec.parameters
    # the ones the file leaves out are the library's defaults too
    assert (validated["warmup"], validated["min_labelled"]) == (defaults.LIVE_WARMUP,
                                                               defaults.LIVE_MIN_LABELLED)
