"""Apply the automations of deploy/automations.yaml to a Prefect server, by name.

    python deploy/automations.py apply [--file FILE] [--notify TYPE/NAME]
    python deploy/automations.py show  [--file FILE] [--notify TYPE/NAME]

The server is the one PREFECT_API_URL names. `apply` creates each automation that does not exist
yet and updates the one that does (matched by name), so running it twice changes nothing.

Where notifications go, first match wins:
  --notify TYPE/NAME          an existing notification block (slack-webhook/oncall, ...);
  --notify none               nobody: the automations fire (Prefect UI, event feed) and notify
                              nobody, on purpose;
  $SEARCHEVAL_ALERT_WEBHOOK   the webhook the flows alert through: saved as the custom-webhook
                              block `searcheval-alert`, the URL kept as a block secret;
  neither                     what the automations already notify through (a re-application
                              from a shell without the variable keeps the block, or nobody after
                              `--notify none`); on a first application the saved
                              `custom-webhook/searcheval-alert` block, else nobody (a warning
                              says so).
An entry with `notify: false` never notifies (the gate automation: the flow pages the trip
itself, once); it is applied as a record in the event feed.
Exit codes: 0 done, 2 refused input (the file, or a block that does not exist).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence
from uuid import UUID

from searcheval.errors import InputError
from searcheval.io.files import read_yaml_list

AUTOMATIONS_FILE = Path(__file__).resolve().parent / "automations.yaml"
WEBHOOK_ENV = "SEARCHEVAL_ALERT_WEBHOOK"
WEBHOOK_BLOCK = "searcheval-alert"
ENTRY_KEYS = {"name", "description", "tags", "enabled", "trigger", "notify", "set_state"}
STATE_KEYS = {"state", "message"}


def load_automation_specs(path: str | Path = AUTOMATIONS_FILE) -> list[dict[str, Any]]:
    """The entries of the file, checked for shape; templates checked for Jinja syntax."""
    import jinja2

    path = Path(path)
    entries = read_yaml_list(path, "automations")
    names: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"automations[{i}]"
        if not isinstance(entry, dict):
            raise InputError("expected a mapping", file=path, field=where)
        unknown = set(entry) - ENTRY_KEYS
        if unknown:
            raise InputError(f"unknown keys {sorted(unknown)}, expected some of "
                             f"{sorted(ENTRY_KEYS)}", file=path, field=where)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise InputError("expected a non-empty string", file=path, field=f"{where}.name")
        if name in names:
            raise InputError(f"duplicate name {name!r}", file=path, field=f"{where}.name")
        names.add(name)
        if not isinstance(entry.get("trigger"), dict):
            raise InputError("expected a mapping", file=path, field=f"{where}.trigger")
        if "set_state" in entry:  # acts on the flow run instead of notifying (issue 29)
            check_set_state(entry, path, where)
            continue
        notify = entry.get("notify")
        if notify is False:  # records only: the flow pages this event itself
            continue
        if not isinstance(notify, dict) or set(notify) != {"subject", "body"}:
            raise InputError("expected a mapping with `subject` and `body`", file=path,
                             field=f"{where}.notify")
        for key in ("subject", "body"):
            if not isinstance(notify[key], str) or not notify[key].strip():
                raise InputError("expected a non-empty template string", file=path,
                                 field=f"{where}.notify.{key}")
            try:
                jinja2.Environment().parse(notify[key])
            except jinja2.TemplateSyntaxError as exc:
                raise InputError(f"not a valid Jinja template: {exc.message}", file=path,
                                 field=f"{where}.notify.{key}") from exc
    return entries


def check_set_state(entry: dict[str, Any], path: Path, where: str) -> None:
    """`set_state: {state: CRASHED, message: ...}`: the automation changes the flow run's state
    (forced: a run whose worker is gone cannot agree) and notifies nobody itself; the state's own
    event is what the notifying automations see."""
    from prefect.client.schemas.objects import StateType

    spec = entry["set_state"]
    if "notify" in entry:
        raise InputError("either `notify` or `set_state`, not both", file=path, field=where)
    if not isinstance(spec, dict) or set(spec) != STATE_KEYS:
        raise InputError(f"expected a mapping with {sorted(STATE_KEYS)}", file=path,
                         field=f"{where}.set_state")
    if spec["state"] not in StateType.__members__:
        raise InputError(f"expected a state type ({', '.join(StateType.__members__)}), got "
                         f"{spec['state']!r}", file=path, field=f"{where}.set_state.state")
    if not isinstance(spec["message"], str) or not spec["message"].strip():
        raise InputError("expected a non-empty string", file=path,
                         field=f"{where}.set_state.message")


def action_of(spec: dict[str, Any], block_document_id: UUID | None):
    """The one action of an entry: its state change, else a notification through the block
    (a do-nothing action without one)."""
    from prefect.automations import DoNothing, SendNotification
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState

    if "set_state" in spec:
        return ChangeFlowRunState(state=StateType[spec["set_state"]["state"]],
                                  message=spec["set_state"]["message"], force=True)
    notify = spec["notify"]  # False: records only (the flow pages this event itself)
    return (SendNotification(block_document_id=block_document_id,
                             subject=notify["subject"], body=notify["body"])
            if block_document_id and notify is not False else DoNothing())


def build_automations(specs: list[dict[str, Any]], block_document_id: UUID | None, *,
                      file: str | Path = AUTOMATIONS_FILE) -> list:
    """prefect AutomationCore objects: each spec's trigger and its one action (`action_of`)."""
    from prefect.automations import AutomationCore
    from pydantic import ValidationError

    automations = []
    for i, spec in enumerate(specs):
        action = action_of(spec, block_document_id)
        try:
            automations.append(AutomationCore(
                name=spec["name"], description=spec.get("description") or "",
                enabled=spec.get("enabled", True), tags=spec.get("tags") or [],
                trigger=spec["trigger"], actions=[action]))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InputError(f"{first['msg']}", file=file,
                             field=f"automations[{i}].{where}") from exc
    return automations


NOTIFY_NONE = "none"


def notification_block_id(notify: str | None,
                          names: list[str] | None = None) -> tuple[UUID | None, str]:
    """The block the automations notify through, and a description of it for the log. Without
    `--notify` and without the webhook variable: the block the automations `names` already
    notify through, else the saved `searcheval-alert` block, else none."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    if notify == NOTIFY_NONE:
        return None, "nothing (--notify none)"
    if notify:
        if notify.count("/") != 1 or not all(notify.split("/")):
            raise InputError(f"expected TYPE/NAME of a notification block, got {notify!r}",
                             field="--notify")
        block_type, name = notify.split("/")
        with get_client(sync_client=True) as client:
            try:
                document = client.read_block_document_by_name(name, block_type)
            except ObjectNotFound as exc:
                raise InputError(f"no block {notify!r} on the Prefect server",
                                 field="--notify") from exc
        return document.id, f"block {notify}"
    url = os.environ.get(WEBHOOK_ENV)
    if url:
        from prefect.blocks.notifications import CustomWebhookNotificationBlock

        block = CustomWebhookNotificationBlock(
            name=WEBHOOK_BLOCK, url="{{alert_url}}", secrets={"alert_url": url},
            json_data={"source": "prefect-automation", "subject": "{{subject}}",
                       "body": "{{body}}"})
        block_id = block.save(WEBHOOK_BLOCK, overwrite=True)
        return block_id, f"block custom-webhook/{WEBHOOK_BLOCK} (${WEBHOOK_ENV})"
    return existing_block(names or [])


def existing_block(names: list[str]) -> tuple[UUID | None, str]:
    """What the automations `names` on the server already notify through: the block of the first
    that has one (when it still exists), or nobody when they exist without one (`--notify none`);
    when none of them exists yet, `custom-webhook/searcheval-alert` if it was saved before."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        applied = False
        for name in names:
            for automation in client.read_automations_by_name(name):
                applied = True
                for action in automation.actions:
                    block_id = getattr(action, "block_document_id", None)
                    if block_id is None:
                        continue
                    try:
                        document = client.read_block_document(block_id)
                    except ObjectNotFound:
                        continue
                    kind = document.block_type.slug if document.block_type else "block"
                    return block_id, f"block {kind}/{document.name} (kept: already in use)"
        if applied:  # applied before, notifying nobody (--notify none): kept so
            return None, "nothing (kept: the automations notify nobody)"
        try:
            document = client.read_block_document_by_name(WEBHOOK_BLOCK, "custom-webhook")
        except ObjectNotFound:
            return None, "nothing"
        return document.id, f"block custom-webhook/{WEBHOOK_BLOCK} (kept: saved before)"


def apply_automations(automations: list) -> list[tuple[str, str, UUID]]:
    """Create or update each automation by name: [(name, 'created' | 'updated', id)].

    Extra automations with the same name (made by hand in the UI) are deleted, so exactly one
    of each remains."""
    from prefect.client.orchestration import get_client

    applied = []
    with get_client(sync_client=True) as client:
        for automation in automations:
            existing = client.read_automations_by_name(automation.name)
            if existing:
                client.update_automation(existing[0].id, automation)
                for extra in existing[1:]:
                    client.delete_automation(extra.id)
                applied.append((automation.name, "updated", existing[0].id))
            else:
                applied.append((automation.name, "created", client.create_automation(automation)))
    return applied


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python deploy/automations.py",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["apply", "show"])
    parser.add_argument("--file", type=Path, default=AUTOMATIONS_FILE)
    parser.add_argument("--notify", metavar="TYPE/NAME",
                        help="notification block to send through, or `none` (default: "
                             f"${WEBHOOK_ENV} as a custom-webhook block, else the block "
                             "already in use)")
    args = parser.parse_args(argv)
    try:
        specs = load_automation_specs(args.file)
        if args.command == "show":
            placeholder = UUID(int=0) if (args.notify not in (None, NOTIFY_NONE)
                                          or os.environ.get(WEBHOOK_ENV)) else None
            for automation in build_automations(specs, placeholder, file=args.file):
                print(json.dumps(automation.model_dump(mode="json"), indent=2))
            return 0
        block_id, where = notification_block_id(args.notify, [s["name"] for s in specs])
        automations = build_automations(specs, block_id, file=args.file)
        if block_id is None and args.notify != NOTIFY_NONE and "kept" not in where:
            print(f"warning: no --notify block, ${WEBHOOK_ENV} unset and no block in use: the "
                  "automations will fire but notify nobody", file=sys.stderr)
        for name, what, automation_id in apply_automations(automations):
            print(f"{what} {name} ({automation_id}), notifying through {where}")
    except InputError as exc:
        print(f"automations: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
