"""The closed choices of the flows' parameters, as the Prefect UI's Run form shows them.

Each parameter's description comes from the `Args:` section of its flow's docstring (Prefect
parses it into the deployment's parameter schema). The choices are added to the JSON schema only
(`WithJsonSchema`): the form offers them as a select, while the value is still checked by the
library, so a wrong name passed from the CLI or the API is refused with one clear line, not a
pydantic error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import WithJsonSchema

from searcheval import defaults
from searcheval.errors import InputError
from searcheval.metrics.engine import parse_metrics

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def configuration_choices(path: Path = PROJECT_ROOT / defaults.CONFIGURATIONS_FILE) -> tuple:
    """The entries of the project's configurations file (what the Run form offers); the
    built-ins when the file cannot be read (the flow's preflight then says why)."""
    from searcheval.rankers.configs import load_configurations

    try:
        return tuple(load_configurations(path).entries)
    except (InputError, OSError):
        return tuple(defaults.CONFIGURATIONS)


CONFIGURATION_CHOICES: tuple[str, ...] = configuration_choices()
METRIC_CHOICES: tuple[str, ...] = tuple(dict.fromkeys([
    *defaults.REPORT_METRICS, *defaults.REPLAY_METRICS,
    "ndcg@5", "ndcg@20", "ndcg@100", "mrr@10", "recall@10", "recall@100", "precision@5",
    "map@100", "judged@20"]))
parse_metrics(METRIC_CHOICES)  # every choice is a name the engine accepts
GAINS = ("exponential", "linear")
NO_RELEVANT = ("one", "zero", "skip")


def some_of(choices: tuple[str, ...]) -> WithJsonSchema:
    return WithJsonSchema({"type": "array", "uniqueItems": True,
                           "items": {"type": "string", "enum": list(choices)}})


def some_or_none_of(choices: tuple[str, ...]) -> WithJsonSchema:
    return WithJsonSchema({"anyOf": [{"type": "array", "uniqueItems": True,
                                      "items": {"type": "string", "enum": list(choices)}},
                                     {"type": "null"}]})


def one_of(choices: tuple[str, ...], optional: bool = False) -> WithJsonSchema:
    choice = {"type": "string", "enum": list(choices)}
    return WithJsonSchema({"anyOf": [choice, {"type": "null"}]} if optional else choice)


ConfigurationNames = Annotated[list[str] | None, some_or_none_of(CONFIGURATION_CHOICES)]
MetricNames = Annotated[list[str], some_of(METRIC_CHOICES)]
Gain = Annotated[str | None, one_of(GAINS, optional=True)]
NoRelevant = Annotated[str | None, one_of(NO_RELEVANT, optional=True)]
