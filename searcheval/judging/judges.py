"""Judges as data: `judges.yaml` loaded, checked and hashed.

    judges:
      gpt-small:
        kind: openai                       # openai | python | cross-encoder
        model: gpt-4o-mini                 # required
        description: a chat model grading with the fixtures' guideline
        params:
          base_url: https://api.openai.com/v1
          api_key: {env: OPENAI_API_KEY}   # or {secret: BLOCK}; never the key itself
          prompt: |
            Query: {query} (intent: {intent})
            Document: {title}
            {text}
            Guideline: {guideline}
            Answer with JSON {"grade": <{scale_min}..{scale_max}>, "rationale": "..."}
          temperature: 0
        prices: {per_1000_input_tokens: 0.15, per_1000_output_tokens: 0.6}
        audit: {share: 0.1, minimum: 30, floor: 0.667, seed: 0}

A judge file is its own file (`judges.yaml` beside `configurations.yaml`), not a section of the
configurations file: a judge is not a configuration (it never runs in `searcheval run`, and it is
refused when it is the model of one). A `judges:` mapping is the only top-level key.

A prompt's placeholders are `{name}` with `name` a word (letters, digits, underscores): any other
brace is text, so a prompt may show a JSON example as it is. The names are those of the query
(`query`, `query_id`, `intent`, `persona`, `category`), of the scale and guideline (`guideline`,
`scale_min`, `scale_max`) and of the documents (`doc_id`, `title`, `text`, `tags`, and any other
field the dataset's documents carry: `network`, `price_usd`, a product's `brand`, ...). A name the
documents lack is refused before any request (`check_prompt`).

A judge's identity (`Judge.sha256`) is the sha256 of its kind, model, prompt and the parameters
that change an answer; how it is reached (base URL, credentials, timeouts, retries, concurrency,
rate) is left out, so moving a judge to another endpoint keeps its cache and its audit.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searcheval.defaults import AGREEMENT_FLOOR
from searcheval.errors import InputError
from searcheval.rankers.params import Param, check_params, check_value

DEFAULT_FILE = "judges.yaml"
KINDS = ("openai", "python", "cross-encoder")
ENTRY_KEYS = ("kind", "model", "description", "params", "prices", "audit")
PRICE_KEYS = ("per_1000_input_tokens", "per_1000_output_tokens", "per_request")
AUDIT_KEYS = ("share", "minimum", "floor", "seed")
CREDENTIAL_WORDS = ("auth", "key", "token", "secret", "password", "cookie")
RESPONSES = ("json", "pattern")

QUERY_FIELDS = ("query", "query_id", "intent", "persona", "category")
SCALE_FIELDS = ("guideline", "scale_min", "scale_max")
BASE_DOCUMENT_FIELDS = ("doc_id", "title", "text", "tags")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

#: the parameters of each kind; those in OPERATIONAL are left out of the judge's identity
SECRET_SPEC = Param("any", None, nullable=True)
PARAMS: dict[str, dict[str, Param]] = {
    "openai": {
        "base_url": Param("string"),
        "api_key": SECRET_SPEC,
        "headers": Param("mapping", {}),
        "prompt": Param("string"),
        "prompt_version": Param("string", "1"),
        "system": Param("string", None, nullable=True),
        "guideline": Param("string", None, nullable=True),
        "temperature": Param("number", 0.0, minimum=0.0, maximum=2.0),
        "max_tokens": Param("integer", 256, minimum=1, maximum=100_000),
        "json_mode": Param("boolean", False),
        "response": Param("string", "json", choices=RESPONSES),
        "pattern": Param("string", None, nullable=True),
        "timeout_s": Param("number", 30.0, above=0.0, maximum=600.0),
        "retries": Param("integer", 2, minimum=0, maximum=10),
        "backoff_s": Param("number", 0.5, minimum=0.0, maximum=60.0),
        "max_backoff_s": Param("number", 30.0, minimum=0.0, maximum=300.0),
        "concurrency": Param("integer", 4, minimum=1, maximum=256),
        "rate_limit": Param("number", None, above=0.0, nullable=True),
    },
    "python": {
        "function": Param("string"),
        "prompt_version": Param("string", "1"),
        "concurrency": Param("integer", 1, minimum=1, maximum=256),
    },
    "cross-encoder": {
        "thresholds": Param("numbers", None, nullable=True),
        "prompt": Param("string", "{query}"),
        "document": Param("string", "{title}\n{text}"),
        "prompt_version": Param("string", "1"),
        "batch_size": Param("integer", 32, minimum=1, maximum=4096),
        "max_length": Param("integer", 512, minimum=8, maximum=8192),
    },
}
OPERATIONAL = frozenset({"base_url", "api_key", "headers", "timeout_s", "retries", "backoff_s",
                         "max_backoff_s", "concurrency", "rate_limit", "batch_size"})


@dataclass(frozen=True)
class AuditPolicy:
    """How a judge's grades are audited: a share of them (at least `minimum`) sampled for humans,
    with `seed`; the grades count while `minimum` pairs are audited and alpha >= `floor`."""

    share: float = 0.1
    minimum: int = 30
    floor: float = AGREEMENT_FLOOR
    seed: int = 0

    def to_dict(self) -> dict:
        return {"share": self.share, "minimum": self.minimum, "floor": self.floor,
                "seed": self.seed}


@dataclass(frozen=True)
class Judge:
    """One resolved judge."""

    name: str
    kind: str
    model: str
    params: dict[str, Any]
    description: str = ""
    prices: dict[str, float] = field(default_factory=dict)
    audit: AuditPolicy = field(default_factory=AuditPolicy)
    file: str | None = None
    sha256: str = ""

    @property
    def prompt_version(self) -> str:
        return str(self.params.get("prompt_version") or "1")

    @property
    def prompt(self) -> str:
        return str(self.params.get("prompt") or "")

    def resolved(self) -> dict:
        """What the judge is, for records and reports (credentials only by their source)."""
        return {"name": self.name, "kind": self.kind, "model": self.model,
                "params": self.params, "prices": self.prices, "audit": self.audit.to_dict(),
                "sha256": self.sha256, "prompt_version": self.prompt_version}


def judge_hash(kind: str, model: str, params: Mapping[str, Any]) -> str:
    """sha256 of kind, model, prompt and the parameters that change an answer."""
    meaning = {k: v for k, v in sorted(params.items()) if k not in OPERATIONAL}
    payload = json.dumps({"kind": kind, "model": model, "params": meaning}, sort_keys=True,
                         separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def placeholders(template: str) -> list[str]:
    return list(dict.fromkeys(PLACEHOLDER.findall(template or "")))


def fill(template: str, values: Mapping[str, Any]) -> str:
    """`template` with each `{name}` replaced by `values[name]` ("" for None); other braces kept."""
    def one(match: re.Match) -> str:
        value = values.get(match.group(1))
        if value is None:
            return ""
        if isinstance(value, (list, tuple)):
            return " ".join(map(str, value))
        return str(value)

    return PLACEHOLDER.sub(one, template)


def _is_credential_name(name: str) -> bool:
    return any(word in name.lower() for word in CREDENTIAL_WORDS)


def _check_secret_spec(spec: Any, where: str, file: str | None) -> None:
    if spec is None:
        return
    if isinstance(spec, Mapping):
        sources = [k for k in ("env", "secret") if k in spec]
        extra = [k for k in spec if k not in ("env", "secret", "prefix")]
        if len(sources) == 1 and not extra and all(isinstance(v, str) for v in spec.values()):
            return
    if isinstance(spec, str):
        raise InputError("a credential is never written in the judges file: use {env: VARIABLE} "
                         "or {secret: BLOCK}", file=file, field=where)
    raise InputError(f"expected {{env: VARIABLE}} or {{secret: BLOCK}}, with an optional prefix, "
                     f"got {spec!r}", file=file, field=where)


def _check_kind(name: str, kind: str, model: str, params: dict, file: str | None) -> None:
    if kind == "openai":
        _check_secret_spec(params["api_key"], f"{name}.api_key", file)
        for header, spec in params["headers"].items():
            where = f"{name}.headers.{header}"
            if isinstance(spec, str) and not _is_credential_name(header):
                continue
            _check_secret_spec(spec, where, file)
        if params["response"] == "pattern":
            if not params["pattern"]:
                raise InputError("response: pattern needs a pattern with a (?P<grade>...) group",
                                 file=file, field=f"{name}.pattern")
            try:
                compiled = re.compile(params["pattern"], re.S)
            except re.error as exc:
                raise InputError(f"expected a regular expression: {exc}", file=file,
                                 field=f"{name}.pattern") from None
            if "grade" not in compiled.groupindex:
                raise InputError("expected a (?P<grade>...) group in the pattern", file=file,
                                 field=f"{name}.pattern")
    elif kind == "python":
        module, _, function = params["function"].partition(":")
        if not module or not function:
            raise InputError(f"expected package.module:function, got {params['function']!r}",
                             file=file, field=f"{name}.function")
    elif kind == "cross-encoder":
        thresholds = params["thresholds"]
        if thresholds is not None and any(b <= a for a, b in zip(thresholds, thresholds[1:])):
            raise InputError(f"expected ascending thresholds, got {thresholds!r}", file=file,
                             field=f"{name}.thresholds")
    for key, value in params.items():  # any other plain string under a credential's name
        if key != "api_key" and _is_credential_name(key) and isinstance(value, str):
            raise InputError("a credential is never written in the judges file", file=file,
                             field=f"{name}.{key}")


def judges_from(raw: Mapping[str, Any], file: str | None) -> dict[str, Judge]:
    """Every judge of a parsed judges file, checked (refusals name the file, judge and field)."""
    if not isinstance(raw, Mapping):
        raise InputError("expected a mapping with `judges:`", file=file, field="judges")
    unknown = [k for k in raw if k != "judges"]
    if unknown:
        raise InputError(f"unknown top-level key {unknown[0]!r}; expected judges", file=file,
                         field=str(unknown[0]))
    entries = raw.get("judges")
    if not isinstance(entries, Mapping) or not entries:
        raise InputError("expected a mapping `judges:` of at least one named judge", file=file,
                         field="judges")
    out = {}
    for name, entry in entries.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}",
                                                         name):
            raise InputError(f"expected a judge name of letters, digits, '_', '-', '.', got "
                             f"{name!r}", file=file, field=str(name))
        if not isinstance(entry, Mapping):
            raise InputError(f"expected a mapping with kind, model and params, got {entry!r}",
                             file=file, field=name)
        bad = [k for k in entry if k not in ENTRY_KEYS]
        if bad:
            raise InputError(f"unknown key {bad[0]!r}; expected some of {', '.join(ENTRY_KEYS)}",
                             file=file, field=f"{name}.{bad[0]}")
        kind = entry.get("kind")
        if kind not in KINDS:
            raise InputError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}",
                             file=file, field=f"{name}.kind")
        params = check_params(PARAMS[kind], entry.get("params") or {}, name, file)
        model = entry.get("model")
        if model is None and kind == "python":
            model = params["function"]
        if not isinstance(model, str) or not model.strip():
            raise InputError("missing: every judge names its model", file=file,
                             field=f"{name}.model")
        _check_kind(name, kind, model, params, file)
        prices = check_value(Param("mapping", {}, keys=PRICE_KEYS,
                                   item=Param("number", minimum=0.0)),
                             entry.get("prices") or {}, f"{name}.prices", file)
        audit_raw = check_value(Param("mapping", {}, keys=AUDIT_KEYS), entry.get("audit") or {},
                                f"{name}.audit", file)
        audit = AuditPolicy(
            share=check_value(Param("number", 0.1, minimum=0.0, maximum=1.0),
                              audit_raw.get("share", 0.1), f"{name}.audit.share", file),
            minimum=check_value(Param("integer", 30, minimum=1),
                                audit_raw.get("minimum", 30), f"{name}.audit.minimum", file),
            floor=check_value(Param("number", AGREEMENT_FLOOR, minimum=-1.0, maximum=1.0),
                              audit_raw.get("floor", AGREEMENT_FLOOR), f"{name}.audit.floor",
                              file),
            seed=check_value(Param("integer", 0), audit_raw.get("seed", 0),
                             f"{name}.audit.seed", file))
        description = entry.get("description") or ""
        out[name] = Judge(name=name, kind=kind, model=model.strip(), params=params,
                          description=str(description), prices=prices, audit=audit, file=file,
                          sha256=judge_hash(kind, model.strip(), params))
    return out


def load_judges(path: str | Path = DEFAULT_FILE) -> dict[str, Judge]:
    """The judges of a YAML file (`judges_from`)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise InputError("no such judges file (expected a YAML file with `judges:`)",
                         file=str(path), field="judges")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise InputError(f"expected YAML: {getattr(exc, 'problem', exc)}", file=str(path),
                         line=None if line is None else line + 1) from None
    return judges_from(raw or {}, str(path))


def pick_judge(judges: Mapping[str, Judge], name: str | None) -> Judge:
    """The judge named `name`; the only one when `name` is None."""
    if name is None:
        if len(judges) == 1:
            return next(iter(judges.values()))
        raise InputError(f"name a judge (--judge): this file has {', '.join(judges)}",
                         field="judge")
    if name not in judges:
        raise InputError(f"no judge {name!r}; the file has {', '.join(judges)}", field="judge")
    return judges[name]


# --------------------------------------------------------------------------- prompt fields


def document_fields(collection) -> set[str]:
    """The fields a prompt may name of this collection's documents."""
    names = set(BASE_DOCUMENT_FIELDS)
    for r in collection.resources:
        if r.network is not None or r.asset is not None or r.price_usd is not None:
            names.update(("network", "asset", "price_usd"))
        names.update(k for k, _ in r.fields)
    return names


def check_prompt(judge: Judge, collection) -> None:
    """Refuse a prompt (or a cross-encoder's document template) naming a field the collection's
    documents lack, before any request."""
    allowed = set(QUERY_FIELDS) | set(SCALE_FIELDS) | document_fields(collection)
    for param in ("system", "prompt", "document"):
        template = judge.params.get(param)
        if not template:
            continue
        unknown = [p for p in placeholders(template) if p not in allowed]
        if unknown:
            raise InputError(f"the prompt names {{{unknown[0]}}}, a field the documents of "
                             f"{collection.name} lack; expected some of "
                             f"{', '.join(sorted(allowed))}", file=judge.file,
                             field=f"{judge.name}.{param}")


# --------------------------------------------------------------------------- independence


def _model_names(value: str) -> set[str]:
    value = value.strip().rstrip("/")
    names = {value.lower()}
    tail = value.replace("\\", "/").split("/")[-1]
    if tail:
        names.add(tail.lower())
    return names


def ranking_models(configurations, embedding_model: tuple[str, str | None] | None = None
                   ) -> list[tuple[str, str, str | None]]:
    """(configuration, model name or path, weights hash or None) of every model the configurations
    rank with: the embedding model of those that read vectors (`embedding_model`: (name or path,
    its fingerprint)), and any parameter named `model` / `model_path` / `reranker`."""
    from searcheval.rankers.registry import needs_embeddings

    out = []
    for c in configurations:
        if embedding_model is not None and needs_embeddings([c]):
            out.append((c.name, embedding_model[0], embedding_model[1]))
        stack = [c.params]
        while stack:
            params = stack.pop()
            for key, value in params.items():
                if key in ("model", "model_path", "reranker", "model_name") \
                        and isinstance(value, str):
                    out.append((c.name, value, _weights_hash(value)))
                elif isinstance(value, Mapping):
                    stack.append(value)
    return out


def _weights_hash(path: str) -> str | None:
    try:
        if Path(path).expanduser().is_dir():
            from searcheval.rankers.embeddings import model_fingerprint

            return model_fingerprint(path)
    except Exception:  # noqa: BLE001 - not a model folder: no weights to compare
        return None
    return None


def judge_weights_hash(judge: Judge) -> str | None:
    return _weights_hash(judge.model) if judge.kind == "cross-encoder" else None


def check_independent(judge: Judge, models: list[tuple[str, str, str | None]]) -> None:
    """The product's rule: a judge is never the model of a configuration it judges. Refused by
    name (the last path component, case folded) or by weights hash, naming both."""
    mine = _model_names(judge.model)
    weights = judge_weights_hash(judge)
    for configuration, model, their_weights in models:
        same_name = bool(mine & _model_names(model))
        same_weights = weights is not None and their_weights is not None \
            and weights == their_weights
        if same_name or same_weights:
            how = "the same weights" if same_weights and not same_name else "the same model"
            raise InputError(f"judge {judge.name!r} (model {judge.model}) is {how} as "
                             f"configuration {configuration!r} ranks with ({model}): a judge is "
                             "never the model of a configuration it judges", file=judge.file,
                             field=f"{judge.name}.model")


def check_against_configurations(judge: Judge, configurations, model_path: str | None = None
                                 ) -> None:
    """`check_independent` against every configuration given (a `Configurations` or a list),
    whose vectors come from the embedding model at `model_path` (the packaged all-MiniLM-L6-v2
    when None); its weights are hashed only when the judge has weights of its own."""
    from searcheval.rankers.embeddings import model_name

    selected = list(configurations.entries.values()) if hasattr(configurations, "entries") \
        else list(configurations)
    path = model_path
    if path is None:
        from searcheval.rankers.embeddings import default_model_path

        try:
            path = str(default_model_path())
        except ImportError:
            path = None
    weights = None
    if judge_weights_hash(judge) is not None and path is not None:
        weights = _weights_hash(path)
    name = model_name(model_path) if model_path else "all-MiniLM-L6-v2"
    models = ranking_models(selected, (name, weights))
    if path is not None:
        models += [(c, path, w) for c, m, w in models if m == name]
    check_independent(judge, models)
