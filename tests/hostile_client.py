"""Run one `http` configuration (or one document lookup) against a URL in a fresh process and print
what came back with the process's peak RSS: how the hostile-answer tests measure memory.

    python tests/hostile_client.py run BASE_URL '{"max_response_bytes": ...}' QUERIES
    python tests/hostile_client.py lookup URL_WITH_{id} '{"concurrency": 2}' ID,ID
"""

from __future__ import annotations

import json
import resource
import sys
import time


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM of /proc/self/status), in MB. Not getrusage's
    ru_maxrss: Linux carries that over fork and exec, so a child of a big test process would
    report its parent's size."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(what: str, url: str, params: str, names: str) -> None:
    extra = json.loads(params)
    started = time.monotonic()
    if what == "run":
        from searcheval.rankers.configs import configurations_from
        from searcheval.rankers.registry import RunContext, run_configuration
        from searcheval.types import Query

        entry = {"kind": "http", "served": True,
                 "params": {"base_url": url, "url": "/search", "query_params": {"q": "{text}"},
                            "id": "hits[*].id", "score": "hits[*].score", "retries": 0,
                            **extra}}
        configuration = configurations_from({"configurations": {"web": entry}},
                                            "hostile.yaml")["web"]
        queries = [Query(id=q, text=f"text of {q}") for q in names.split(",")]
        result = run_configuration(configuration, RunContext(secrets={}), queries, None, 10)
        out = {"results": {q: len(h) for q, h in result.results.items()},
               "errors": {q: e["cause"] for q, e in result.errors.items()}}
    else:
        from searcheval.rankers.documents import check_lookup, look_up

        params = check_lookup({"url": url, **extra}, "web", "hostile.yaml")
        found = look_up(params, names.split(","))
        out = {"documents": {d: {"title": len(v["title"] or "")}
                             for d, v in found["documents"].items()},
               "failed": found["failed"], "gone": found["gone"]}
    out["seconds"] = time.monotonic() - started
    out["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
