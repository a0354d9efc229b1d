"""Prefect events the flows emit for automations to act on.

`searcheval.verdict` is emitted at the end of every evaluation that got as far as the gate (its
resource's name is the verdict line). `searcheval.gate.tripped` is emitted when the served configuration fails the gate. Its resource
is the evaluation run (`searcheval.run.<run_id>`); inside a flow run Prefect adds the flow run,
flow and deployment as related resources, so an automation can match on any of them. The
payload carries what a notification needs: which metrics tripped, by how much, against which
baseline. No secret and no database URL is ever part of an event.
"""

from __future__ import annotations

from typing import Any

from prefect.events import emit_event

GATE_TRIPPED = "searcheval.gate.tripped"
VERDICT = "searcheval.verdict"


def gate_event_resource(result) -> dict[str, str]:
    """The event's resource: the evaluation run, labelled with configuration and run label."""
    gate = result.gate
    return {
        "prefect.resource.id": f"searcheval.run.{result.run_id}",
        "prefect.resource.name": f"searcheval run {result.run_id}",
        "searcheval.configuration": gate.configuration,
        "searcheval.label": result.label or "",
    }


def gate_event_payload(result) -> dict[str, Any]:
    """What tripped: the metrics with baseline, value and delta, and one summary line."""
    gate = result.gate
    return {
        "run_id": result.run_id,
        "flow_run_id": result.flow_run_id,
        "label": result.label,
        "configuration": gate.configuration,
        "baseline": gate.baseline_path,
        "tolerance": gate.tolerance,
        "tripped": [trip.to_dict() for trip in gate.tripped],
        "summary": "; ".join(trip.describe() for trip in gate.tripped),
    }


def emit_gate_event(result):
    """Emit `searcheval.gate.tripped` for an EvaluationResult whose gate tripped.

    Returns the emitted prefect Event, or None when there is nothing to report (no gate, or it
    passed) or when Prefect has nowhere to send events.
    """
    gate = getattr(result, "gate", None)
    if gate is None or gate.passed:
        return None
    return emit_event(GATE_TRIPPED, resource=gate_event_resource(result),
                      payload=gate_event_payload(result))


def emit_verdict_event(run_id: str, line: str, passed: bool | None):
    """Emit `searcheval.verdict` at the end of a run: its resource's name is the verdict line,
    so `prefect deployment run --watch` (which prints the events of the flow run, and its logs
    only when the server streams them) shows the verdict and where the report is."""
    return emit_event(VERDICT, resource={"prefect.resource.id": f"searcheval.run.{run_id}",
                                         "prefect.resource.name": line},
                      payload={"run_id": run_id, "verdict": line, "passed": passed})
