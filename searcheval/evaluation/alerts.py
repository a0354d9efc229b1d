"""Alerts: what went wrong in a run, and delivery to a plain webhook.

Delivery through a Prefect notification block lives in `tasks/` (the library never imports
Prefect). The webhook URL usually carries a token, so it is never logged or put in a message: it
is named by where it came from (`SEARCHEVAL_ALERT_WEBHOOK`).
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field

from searcheval.errors import AlertDeliveryError  # one class: what tasks/ catches

WEBHOOK_ENV = "SEARCHEVAL_ALERT_WEBHOOK"
log = logging.getLogger(__name__)




@dataclass
class Alert:
    run_id: str
    reasons: list[dict] = field(default_factory=list)  # {"kind", "summary", ...details}
    where: str | None = None  # report path or UI address
    diff: str | None = None  # where the diff is (file or artifact): a candidate against the
    # served configuration for a candidate run, else against the previous run
    worst: list[str] = field(default_factory=list)  # the diff's worst queries, with their text
    url: str | None = None  # the flow run's page in the Prefect UI, absolute (PREFECT_UI_URL)
    dataset: str | None = None
    verdict: str | None = None  # the run's verdict line, when it got as far as the gate

    @property
    def subject(self) -> str:
        kinds = ", ".join(sorted({r["kind"] for r in self.reasons}))
        on = f" on {self.dataset}" if self.dataset else ""
        return f"searcheval run {self.run_id}{on}: {kinds}"

    def body(self) -> str:
        lines = [self.subject]
        if self.verdict:
            lines.append(f"verdict: {self.verdict}")
        lines += [f"- {r['summary']}" for r in self.reasons]
        if self.url:
            lines.append(f"flow run: {self.url}")
        if self.where:
            lines.append(f"details: {self.where}")
        if self.diff:
            lines.append(f"diff, query by query: {self.diff}")
        if self.worst:
            lines.append("worst queries:")
            lines += [f"  {line}" for line in self.worst]
        return "\n".join(lines)

    def payload(self) -> dict:
        return {"run_id": self.run_id, "subject": self.subject, "dataset": self.dataset,
                "verdict": self.verdict, "url": self.url, "reasons": self.reasons,
                "where": self.where, "diff": self.diff, "worst": self.worst,
                "text": self.body()}

    def to_dict(self) -> dict:
        return asdict(self)


def failure_reasons(failures: dict | None) -> list[dict]:
    """One reason per configuration whose failed queries make the run incomplete."""
    out = []
    for name in (failures or {}).get("incomplete", []):
        f = failures["configurations"][name]
        out.append({"kind": "incomplete", "configuration": name, "failed": f["failed"],
                    "down": bool(f.get("down")), "endpoint": f.get("endpoint"),
                    "summary": f"run incomplete, not gated: {incomplete_summary(name, f)}"})
    return out


def incomplete_summary(name: str, f: dict) -> str:
    """One configuration's failures in one phrase: a service that is down names its URL (no
    secret: `rankers.http.endpoint`) and the cause; otherwise the count and the first failure."""
    sent = [(q, e) for q, e in f["errors"].items() if not e.get("not_sent")]
    qid, error = (sent or list(f["errors"].items()))[0]
    if f.get("down"):
        where = f" at {f['endpoint']}" if f.get("endpoint") else ""
        not_sent = f", {f['not_sent']} not sent" if f.get("not_sent") else ""
        backend = "the service" if f.get("kind", "http") == "http" else f"the {f['kind']} ranker"
        return (f"{name}: {backend}{where} is down ({error['cause']}): all {f['queries']} "
                f"queries failed{not_sent}")
    return (f"{name}: {f['failed']} of {f['queries']} queries failed (allowed {f['allowed']}); "
            f"first: query {qid!r}: {error['cause']}")


def gate_reasons(gate) -> list[dict]:
    return [{**t.to_dict(), "trip": t.kind, "kind": "gate",
             "summary": f"gate tripped: {t.describe()}"} for t in (gate.tripped if gate else [])]


def coverage_reasons(coverage: dict, judging: dict | None = None) -> list[dict]:
    """One reason per configuration under its judged-share floor; with the run's `judging`
    block, each names the size of its pool of unjudged results and the command that lists it."""
    out = []
    judging = judging or {}
    pool = judging.get("pool") or {}
    for name, c in coverage.items():
        if isinstance(c, dict) and c.get("below_floor"):
            source = c.get("floor_source") or "default"
            reason = {"kind": "coverage", "configuration": name,
                      "value": c.get("judged_share"), "floor": c.get("floor"),
                      "floor_source": source,
                      "summary": f"judged@{c.get('k')} of {name} is {c.get('judged_share'):.3f}, "
                                 f"under the floor {c.get('floor'):.3f} ({source})"}
            size = ((judging.get("configurations") or {}).get(name) or {}).get("pool")
            if size is not None and pool.get("command"):
                reason["pool"] = size
                reason["command"] = pool["command"]
                reason["summary"] += (f"; {size} unjudged pair(s) in its top {c.get('k')} "
                                      f"({pool.get('size')} across configurations): "
                                      f"`{pool['command']}`")
            out.append(reason)
    return out


def agreement_reasons(judging: dict | None) -> list[dict]:
    """Agreement between judges (Krippendorff's alpha) under its floor."""
    a = (judging or {}).get("agreement") or {}
    if not a.get("below_floor"):
        return []
    return [{"kind": "agreement", "alpha": a.get("alpha"), "floor": a.get("floor"),
             "items": a.get("items"),
             "summary": f"judges' agreement (Krippendorff's alpha, ordinal) is "
                        f"{a.get('alpha'):.3f} over {a.get('items')} pair(s) graded by two or "
                        f"more judges, under the floor {a.get('floor'):.3f}"}]


def audit_reasons(judging: dict | None) -> list[dict]:
    """Model judges whose human audit fell below its floor (their grades no longer count)."""
    judges = ((judging or {}).get("judgments") or {}).get("model_judges") or {}
    out = []
    for judge, audit in sorted(judges.items()):
        a = audit.get("agreement") or {}
        floor = (audit.get("policy") or {}).get("floor")
        if a.get("alpha") is not None and floor is not None and a["alpha"] < floor \
                and (a.get("items") or 0) >= (audit.get("policy") or {}).get("minimum", 0):
            out.append({"kind": "model-audit", "judge": judge, "alpha": a["alpha"],
                        "floor": floor, "items": a.get("items"),
                        "summary": f"model judge {judge}: agreement with its human audit is "
                                   f"alpha {a['alpha']:.3f} over {a.get('items')} pair(s), "
                                   f"under the floor {floor:.3f}; its grades are not counted"})
    return out


def stale_reasons(validation: dict) -> list[dict]:
    stale = (validation.get("stale") or {}).get("judgments") or []
    if not stale:
        return []
    first = stale[0]
    return [{"kind": "stale-judgments", "count": len(stale),
             "by_reason": validation["stale"].get("by_reason"),
             "summary": f"{len(stale)} stale judgment(s) left out of scoring (first: "
                        f"{first['query_id']}/{first['doc_id']} {first['reason']})"}]


def post_webhook(url: str, payload: dict, *, attempts: int = 3, backoff_s: float = 0.5,
                 timeout_s: float = 5.0) -> int:
    """POST the JSON payload; retried with backoff; returns the HTTP status.

    Raises AlertDeliveryError after the last attempt, naming the variable, never the URL.
    """
    data = json.dumps(payload).encode("utf-8")
    last = ""
    if not url.lower().startswith(("http://", "https://")):
        raise AlertDeliveryError(f"alert webhook ({WEBHOOK_ENV}) is not an http(s) URL")
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(url, data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError, ValueError) as exc:  # ValueError: a bad URL
            last = type(getattr(exc, "reason", exc)).__name__
        log.warning("alert webhook (%s) attempt %d/%d failed: %s", WEBHOOK_ENV, attempt,
                    attempts, last)
        if attempt < attempts:
            time.sleep(backoff_s * 2 ** (attempt - 1))
    raise AlertDeliveryError(f"alert webhook ({WEBHOOK_ENV}) failed after {attempts} attempts: "
                             f"{last}")


def webhook_url() -> str | None:
    return os.environ.get(WEBHOOK_ENV) or None
