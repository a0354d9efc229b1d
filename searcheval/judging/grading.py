"""What a judge answers for one (query, document) pair, per kind, without the database.

- `openai`: one chat-completions request per pair (httpx), with the `http` kind's behaviour: a
  timeout is that pair's failure; a connection error, a 429 or a 5xx is retried `retries` times,
  waiting `backoff_s` doubled each time (a 429's Retry-After wins, up to `max_backoff_s`); at most
  `concurrency` requests in flight and `rate_limit` started per second. The answer's
  `choices[0].message.content` is read as JSON (`{"grade": 2, "rationale": "..."}`, also inside a
  ```json fence or after some prose: the first `{...}` that parses) or, with `response: pattern`,
  by the judge's regular expression (a `grade` group, an optional `rationale` group). The
  tokens are the answer's `usage`.
- `python`: `module:function(query, document)` returning a grade or (grade, rationale); `query`
  is the golden `Query`, `document` a dict of the fields a prompt may name.
- `cross-encoder`: a sentence-transformers `CrossEncoder` from a local folder scores
  (prompt, document) texts; a score maps to the grade `scale_min + the number of thresholds <= score`
  (`calibrate_thresholds` fits them to human grades).

Whatever goes wrong with one pair (the request failed after its retries, the answer is not
parseable, its grade is outside the dataset's scale, the function raised) is that pair's error,
never a grade.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from searcheval.errors import InputError
from searcheval.judging.judges import Judge, fill
from searcheval.rankers.bounded import MiB, AnswerRefused, Bounds, bounded_client, read_json
from searcheval.rankers.limits import SharedLimits
from searcheval.redaction import redact
from searcheval.types import Query

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
CHARS_PER_TOKEN = 4  # the dry run's estimate of a prompt's tokens


@dataclass
class PairInput:
    """One pair as a judge sees it."""

    query: Query
    doc_id: str
    document: dict  # doc_id, title, text, tags, and the dataset's other fields
    content_hash: str

    @property
    def key(self) -> tuple[str, str]:
        return self.query.id, self.doc_id


@dataclass
class Answer:
    """A judge's answer for one pair: a grade, or the error that stands in for it."""

    grade: int | None = None
    rationale: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    attempts: int = 0
    requests: int = 0
    error: str | None = None
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def prompt_values(pair: PairInput, grade_scale: tuple[int, int], guideline: str) -> dict:
    q = pair.query
    values = {"query": q.text, "query_id": q.id, "intent": q.intent, "persona": q.persona,
              "category": q.category, "guideline": guideline, "scale_min": grade_scale[0],
              "scale_max": grade_scale[1]}
    values.update(pair.document)
    return values


def query_key(pair: PairInput, judge: Judge) -> str:
    """sha256 of the query's text and of the query notes the judge's prompt uses: the query's part
    of the cache key (a grade depends on nothing else of the query)."""
    used = set(re.findall(r"\{(\w+)\}", (judge.params.get("prompt") or "")
                          + (judge.params.get("system") or "")))
    parts = [pair.query.text] + [f"{n}={getattr(pair.query, n)}" for n in
                                 ("intent", "persona", "category") if n in used]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def default_guideline(grade_scale: tuple[int, int], labels: dict | None = None) -> str:
    """The guideline a judge's prompt gets when the dataset names no guideline file: the
    dataset's grade labels (project settings `grade_labels`), highest grade first, else a plain
    statement of the scale. Never another dataset's words."""
    lo, hi = int(grade_scale[0]), int(grade_scale[1])
    if labels:
        return "\n".join(f"{g}: {labels[g]}" for g in range(hi, lo - 1, -1) if labels.get(g))
    return f"Grades from {lo} (not relevant) to {hi} (exactly what the query asks for)."


def render_messages(judge: Judge, pair: PairInput, grade_scale: tuple[int, int],
                    guideline: str) -> list[dict]:
    values = prompt_values(pair, grade_scale, judge.params.get("guideline") or guideline)
    messages = []
    if judge.params.get("system"):
        messages.append({"role": "system", "content": fill(judge.params["system"], values)})
    messages.append({"role": "user", "content": fill(judge.params["prompt"], values)})
    return messages


def estimate_tokens(messages: list[dict]) -> int:
    return max(1, sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN)


# --------------------------------------------------------------------------- answers


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def _json_object(content: str) -> dict | None:
    candidates = [content.strip()] + _FENCE.findall(content)
    start = content.find("{")
    while start != -1:
        candidates.append(content[start:content.rfind("}") + 1])
        start = content.find("{", start + 1)
        if len(candidates) > 12:
            break
    for text in candidates:
        try:
            found = json.loads(text)
        except (ValueError, TypeError):
            continue
        if isinstance(found, dict):
            return found
    return None


def _grade(value, grade_scale: tuple[int, int]) -> int:
    if isinstance(value, bool):
        raise ValueError(f"malformed answer: grade {value!r} is not a whole number")
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise ValueError(f"malformed answer: grade {value!r} is not a whole number")
    lo, hi = int(grade_scale[0]), int(grade_scale[1])
    if not lo <= value <= hi:
        raise ValueError(f"grade {value} outside the scale {lo}..{hi}")
    return value


def parse_answer(content: str, judge: Judge, grade_scale: tuple[int, int]) -> tuple[int, str]:
    """(grade, rationale) of a model's answer; ValueError naming what is wrong otherwise."""
    if not isinstance(content, str) or not content.strip():
        raise ValueError("malformed answer: empty")
    if judge.params.get("response") == "pattern":
        match = re.search(judge.params["pattern"], content, re.S)
        if match is None:
            raise ValueError(f"malformed answer: no match of the pattern in {content[:80]!r}")
        rationale = match.groupdict().get("rationale") or content.strip()
        return _grade(match.group("grade"), grade_scale), rationale.strip()[:2000]
    found = _json_object(content)
    if found is None or "grade" not in found:
        raise ValueError(f"malformed answer: no JSON object with a grade in {content[:80]!r}")
    rationale = next((str(found[k]) for k in ("rationale", "reason", "explanation")
                      if found.get(k) is not None), "")
    return _grade(found["grade"], grade_scale), rationale[:2000]


# --------------------------------------------------------------------------- openai


def resolve_credentials(judge: Judge, secrets: Mapping[str, str]) -> dict[str, str]:
    """The request's headers: the api key (Bearer) and the judge's headers, read now from the
    environment or the resolved Secret blocks (each remembered, so no error text, log or row
    keeps it: searcheval.redaction); a missing one is refused, never echoed."""
    from searcheval.rankers.http import secret_value

    out: dict[str, str] = {}
    specs = dict(judge.params.get("headers") or {})
    if judge.params.get("api_key") is not None:
        specs["Authorization"] = {"prefix": "Bearer ", **judge.params["api_key"]}
    for header, spec in specs.items():
        if isinstance(spec, str):
            out[header] = spec
            continue
        out[header] = spec.get("prefix", "") + secret_value(
            spec, secrets, f"the credential of judge {judge.name}", f"{judge.name}.{header}",
            file=judge.file)
    return out


def secret_blocks(judge: Judge) -> list[str]:
    specs = list((judge.params.get("headers") or {}).values()) + [judge.params.get("api_key")]
    return [s["secret"] for s in specs if isinstance(s, Mapping) and "secret" in s]


def _retry_after(headers, fallback: float, ceiling: float) -> float:
    raw = headers.get("retry-after") if headers is not None else None
    try:
        return min(ceiling, max(0.0, float(raw))) if raw is not None else fallback
    except ValueError:
        return fallback


def ask_chat(client, judge: Judge, limits: SharedLimits, messages: list[dict],
             grade_scale: tuple[int, int]) -> Answer:
    """One pair through its retries (module docstring)."""
    import httpx

    p = judge.params
    body = {"model": judge.model, "messages": messages, "temperature": p["temperature"],
            "max_tokens": p["max_tokens"]}
    if p["json_mode"]:
        body["response_format"] = {"type": "json_object"}
    url = p["base_url"].rstrip("/") + "/chat/completions"
    delay, attempts = p["backoff_s"], 0
    started = time.perf_counter()
    waited = round_trip = 0.0
    bounds = Bounds(deadline_s=p["timeout_s"], max_bytes=p.get("max_response_bytes", 4 * MiB),
                    max_depth=p.get("max_json_depth", 64))
    while True:
        attempts += 1
        status = headers = None
        queued = time.perf_counter()
        with limits.slots:
            limits.wait_turn()
            sent = time.perf_counter()
            waited += sent - queued
            try:
                status, headers, document = read_json(client, bounds, "POST", url, json=body)
                round_trip += time.perf_counter() - sent
                cause = None
            except AnswerRefused as exc:  # a status >= 400, an answer over a bound, not JSON
                status, headers = exc.status, exc.headers
                if status is None or status not in RETRY_STATUSES:
                    text = exc.message if exc.message.startswith("HTTP") or not exc.excerpt \
                        else "malformed answer: " + exc.message
                    if status is not None and status >= 400 and exc.excerpt:
                        text = f"HTTP {status}: {exc.excerpt}"
                    return Answer(error=redact(text)[:300], attempts=attempts,
                                  requests=attempts, seconds=time.perf_counter() - started)
                cause = f"HTTP {status}"
            except httpx.TimeoutException:
                return Answer(error=f"timeout after {p['timeout_s']:g} s", attempts=attempts,
                              requests=attempts, seconds=time.perf_counter() - started)
            except httpx.TransportError as exc:
                cause = f"connection error: {type(exc).__name__}"
        if cause is None:
            answer = _read(document, judge, grade_scale)
            answer.attempts = answer.requests = attempts
            answer.seconds = time.perf_counter() - started
            answer.extra.update(waited_s=waited, round_trip_s=round_trip)
            return answer
        if attempts > p["retries"]:
            return Answer(error=cause + (f" after {attempts} attempts" if attempts > 1 else ""),
                          attempts=attempts, requests=attempts,
                          seconds=time.perf_counter() - started)
        wait = min(delay, p["max_backoff_s"])
        if status == 429:
            wait = _retry_after(headers, wait, p["max_backoff_s"])
        time.sleep(wait)
        waited += wait
        delay *= 2


def _read(data, judge: Judge, grade_scale: tuple[int, int]) -> Answer:
    """A grade and its rationale from a chat-completions answer (its JSON, read and bounded)."""
    usage = data.get("usage") if isinstance(data, dict) else None
    tokens_in = int((usage or {}).get("prompt_tokens") or 0)
    tokens_out = int((usage or {}).get("completion_tokens") or 0)
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return Answer(error="malformed answer: no choices[0].message.content",
                      input_tokens=tokens_in, output_tokens=tokens_out)
    try:
        grade, rationale = parse_answer(content, judge, grade_scale)
    except ValueError as exc:
        return Answer(error=str(exc), input_tokens=tokens_in, output_tokens=tokens_out)
    return Answer(grade=grade, rationale=rationale, input_tokens=tokens_in,
                  output_tokens=tokens_out)


def grade_openai(judge: Judge, pairs: list[PairInput], grade_scale: tuple[int, int],
                 guideline: str, secrets: Mapping[str, str]) -> Iterator[tuple[PairInput, Answer]]:
    """Every pair's answer, in the order they arrive."""
    import httpx

    p = judge.params
    headers = resolve_credentials(judge, secrets)
    limits = SharedLimits(p["concurrency"], p["rate_limit"])
    connections = p["concurrency"]
    with bounded_client(headers=headers, concurrency=connections,
                        read_timeout=p["timeout_s"]) as client:
        def one(pair: PairInput) -> Answer:
            began = time.perf_counter()
            messages = render_messages(judge, pair, grade_scale, guideline)
            answer = ask_chat(client, judge, limits, messages, grade_scale)
            answer.extra["total_s"] = time.perf_counter() - began
            return answer

        yield from _threaded(one, pairs, connections)


def _threaded(one: Callable[[PairInput], Answer], pairs: list[PairInput], workers: int
              ) -> Iterator[tuple[PairInput, Answer]]:
    if not pairs:
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(pairs))) as pool:
        futures = {}
        it = iter(pairs)
        # a bounded window of futures: a killed run leaves little in flight
        for pair in it:
            futures[pool.submit(one, pair)] = pair
            if len(futures) >= workers * 4:
                break
        while futures:
            done = next(as_completed(futures))
            pair = futures.pop(done)
            try:
                answer = done.result()
            except Exception as exc:  # noqa: BLE001 - that pair's error, never a grade
                answer = Answer(error=f"{type(exc).__name__}: {exc}"[:300])
            yield pair, answer
            nxt = next(it, None)
            if nxt is not None:
                futures[pool.submit(one, nxt)] = nxt


# --------------------------------------------------------------------------- python


def load_function(judge: Judge) -> Callable:
    module_name, _, name = judge.params["function"].partition(":")
    try:
        module = importlib.import_module(module_name)
        function = getattr(module, name)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"cannot import {judge.params['function']}: {exc}", file=judge.file,
                         field=f"{judge.name}.function") from None
    if not callable(function):
        raise InputError(f"{judge.params['function']} is not callable", file=judge.file,
                         field=f"{judge.name}.function")
    return function


def grade_python(judge: Judge, pairs: list[PairInput], grade_scale: tuple[int, int]
                 ) -> Iterator[tuple[PairInput, Answer]]:
    function = load_function(judge)

    def one(pair: PairInput) -> Answer:
        started = time.perf_counter()
        try:
            got = function(pair.query, dict(pair.document))
            grade, rationale = got if isinstance(got, tuple) and len(got) == 2 else (got, "")
            return Answer(grade=_grade(grade, grade_scale), rationale=str(rationale or "")[:2000],
                          seconds=time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - that pair's error
            return Answer(error=f"{type(exc).__name__}: {exc}"[:300],
                          seconds=time.perf_counter() - started)

    yield from _threaded(one, pairs, judge.params["concurrency"])


# --------------------------------------------------------------------------- cross-encoder

_encoders: dict[str, object] = {}
_encoder_lock = threading.Lock()


def load_cross_encoder(judge: Judge):
    from pathlib import Path

    path = Path(judge.model).expanduser()
    if not path.is_dir():
        raise InputError("expected a local folder of a sentence-transformers CrossEncoder",
                         file=judge.file, field=f"{judge.name}.model")
    with _encoder_lock:
        if str(path) not in _encoders:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import CrossEncoder

            _encoders[str(path)] = CrossEncoder(str(path), device="cpu",
                                                max_length=judge.params["max_length"])
        return _encoders[str(path)]


def cross_encoder_scores(judge: Judge, pairs: list[PairInput], grade_scale: tuple[int, int]
                         ) -> list[float]:
    model = load_cross_encoder(judge)
    texts = []
    for pair in pairs:
        values = prompt_values(pair, grade_scale, "")
        texts.append((fill(judge.params["prompt"], values), fill(judge.params["document"], values)))
    scores = model.predict(texts, batch_size=judge.params["batch_size"], show_progress_bar=False)
    return [float(s) for s in scores]


def grade_of_score(score: float, thresholds: Iterable[float], grade_scale: tuple[int, int]) -> int:
    return int(grade_scale[0]) + sum(1 for t in thresholds if score >= t)


def calibrate_thresholds(scores: list[float], grades: list[int], grade_scale: tuple[int, int]
                         ) -> list[float]:
    """Thresholds that give the scores the humans' distribution of grades (equipercentile): the
    share of scores under threshold g equals the share of human grades under g."""
    import numpy as np

    lo, hi = int(grade_scale[0]), int(grade_scale[1])
    if len(scores) != len(grades) or not scores:
        raise InputError("expected audited pairs with both a score and a human grade",
                         field="calibrate")
    ordered = np.sort(np.asarray(scores, dtype=float))
    out = []
    for g in range(lo + 1, hi + 1):
        below = sum(1 for x in grades if x < g) / len(grades)
        index = min(len(ordered) - 1, max(0, int(round(below * len(ordered)))))
        value = float(ordered[index]) if below < 1 else float(ordered[-1]) + 1e-9
        if out and value <= out[-1]:
            value = out[-1] + 1e-9
        out.append(value)
    return out


def grade_cross_encoder(judge: Judge, pairs: list[PairInput], grade_scale: tuple[int, int]
                        ) -> Iterator[tuple[PairInput, Answer]]:
    thresholds = judge.params.get("thresholds")
    if thresholds is None:
        raise InputError("this cross-encoder has no thresholds yet: calibrate them on its audit "
                         "(searcheval judgments calibrate) and write them in the judges file",
                         file=judge.file, field=f"{judge.name}.thresholds")
    expected = int(grade_scale[1]) - int(grade_scale[0])
    if len(thresholds) != expected:
        raise InputError(f"expected {expected} thresholds for the scale {grade_scale[0]}.."
                         f"{grade_scale[1]}, got {len(thresholds)}", file=judge.file,
                         field=f"{judge.name}.thresholds")
    batch = judge.params["batch_size"]
    for start in range(0, len(pairs), batch):
        chunk = pairs[start:start + batch]
        began = time.perf_counter()
        try:
            scores = cross_encoder_scores(judge, chunk, grade_scale)
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - the chunk's pairs' error
            for pair in chunk:
                yield pair, Answer(error=f"{type(exc).__name__}: {exc}"[:300])
            continue
        each = (time.perf_counter() - began) / len(chunk)
        for pair, score in zip(chunk, scores):
            yield pair, Answer(grade=grade_of_score(score, thresholds, grade_scale),
                               rationale=f"score {score:.4f}", seconds=each,
                               extra={"score": score})


def answers(judge: Judge, pairs: list[PairInput], grade_scale: tuple[int, int], guideline: str,
            secrets: Mapping[str, str] | None = None) -> Iterator[tuple[PairInput, Answer]]:
    """Every pair's answer from `judge`, in the order they arrive."""
    if judge.kind == "openai":
        return grade_openai(judge, pairs, grade_scale, guideline, secrets or {})
    if judge.kind == "python":
        return grade_python(judge, pairs, grade_scale)
    return grade_cross_encoder(judge, pairs, grade_scale)
