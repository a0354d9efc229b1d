"""The registry of configuration kinds: what parameters each takes, whether it reads the database,
and one entry point (`run_configuration`) that runs any resolved configuration as production runs
it.

Built in: `bm25`, `dense`, `fused` (here), `fuse` (any configurations combined:
`rankers.combine`), and the backends `http`, `python`, `trec` (their own modules, imported when
first named). A package registers more kinds through the entry-point group
`searcheval.kinds`: each entry point loads a `Kind` (or a function returning one), e.g. in its
pyproject.toml

    [project.entry-points."searcheval.kinds"]
    mykind = "mypackage.searcheval_kind:KIND"

Each configuration is independent of the others: `fused` runs the configurations it names itself
(as the service does), so every configuration can run concurrently. When the run already ran a
configuration with the same inputs (the same `sha256`: kind, parameters, components) over the same
queries at the same depth, `fused` takes its results instead of searching again
(`RunContext.siblings`: the flow hands them on, `reusable_siblings` names them); a sibling with a
failed query, or without one of the queries, is not taken: the component searches again. The BM25
index of a catalog and a parameter set is built once per process and shared, and kept on disk
between runs (`rankers.bm25_cache`).
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from searcheval.defaults import CONFIGURATIONS
from searcheval.errors import InputError
from searcheval.rankers.params import Param, check_params
from searcheval.types import Query, RankedRun, Resource

if TYPE_CHECKING:
    import psycopg

    from searcheval.rankers.limits import Lanes

    Configuration = Any  # searcheval.rankers.configs.Configuration (which imports this module)

ENTRY_POINT_GROUP = "searcheval.kinds"


@dataclass
class RunContext:
    """What a kind's runner may use: the database connection (kinds that read it), the catalog's
    name and resources, the embedding model, the secrets the task layer resolved (Prefect
    Secret blocks by name; never logged, never stored), and the lanes of the configuration's
    limits this shard owns (`searcheval.rankers.limits`; None: its shards share the limits of
    this process)."""

    conn: "psycopg.Connection | None" = None
    catalog: str = ""
    resources: Sequence[Resource] = ()
    model: str = ""
    secrets: Mapping[str, str] = field(default_factory=dict)
    lanes: "Lanes | None" = None
    #: runs of this run's other configurations over these queries at this depth, by
    #: `sibling_key` (a configuration's sha256 and the depth): a component with the same key is
    #: taken from here, not searched again
    siblings: Mapping[str, RankedRun] = field(default_factory=dict)


Runner = Callable[["Configuration", RunContext, Sequence[Query], "np.ndarray | None", int],
                  RankedRun]


@dataclass(frozen=True)
class Kind:
    """A kind of configuration. `run(configuration, context, queries, query_vectors, k)` returns
    its RankedRun (a query that failed is in `errors`, never an empty result); `validate(params,
    entry, file)` checks what the parameter types cannot (cross-field rules) and may return the
    params amended; `references` lists the parameters that name other configurations. `lanes`
    gives the number of lanes of a kind whose limits hold across all shards of a configuration
    (http: its concurrency): shards in several processes each own some of them
    (`searcheval.rankers.limits`)."""

    name: str
    params: Mapping[str, Param]
    run: Runner
    needs_database: bool = False
    validate: Callable[[dict, str, str | None], dict | None] | None = None
    references_params: tuple[str, ...] = ()
    references_kinds: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    secrets: Callable[[dict], list[str]] | None = None  # Secret block names the params use
    lanes: Callable[[dict], int] | None = None  # lanes of the limits shared by all shards
    description: str = ""

    def check(self, params: Mapping[str, Any], entry: str, file: str | None) -> dict:
        checked = check_params(self.params, params, entry, file)
        if self.validate is not None:
            checked = self.validate(checked, entry, file) or checked
        return checked

    def references(self, params: Mapping[str, Any]) -> dict[str, str]:
        """parameter -> the configuration it names; a list of names gives `param[i]` each."""
        out: dict[str, str] = {}
        for p in self.references_params:
            value = params.get(p)
            if isinstance(value, (list, tuple)):
                out.update({f"{p}[{i}]": v for i, v in enumerate(value)})
            elif value is not None:
                out[p] = value
        return out


_kinds: dict[str, Kind] = {}
_lazy = {"http": "searcheval.rankers.http", "python": "searcheval.rankers.python",
         "trec": "searcheval.rankers.trec", "fuse": "searcheval.rankers.combine"}
_entry_points_loaded = False
_registry_lock = threading.Lock()


def register_kind(kind: Kind) -> Kind:
    """Add a kind (a packaged backend's own, or a test's); a name is registered once."""
    if not isinstance(kind, Kind):
        raise InputError(f"expected a searcheval Kind, got {kind!r}", field="kind")
    with _registry_lock:
        existing = _kinds.get(kind.name)
        if existing is not None and existing is not kind:
            raise InputError(f"a kind named {kind.name!r} is registered already", field="kind")
        _kinds[kind.name] = kind
    return kind


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _kinds or ep.name in _lazy:
            continue
        try:
            loaded = ep.load()
            kind = loaded() if callable(loaded) and not isinstance(loaded, Kind) else loaded
            register_kind(kind)
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - a broken plug-in is named, not a traceback
            raise InputError(f"the entry point {ep.name} = {ep.value} of group "
                             f"{ENTRY_POINT_GROUP} does not load: {type(exc).__name__}: {exc}",
                             field="kind") from None


def kind_names() -> list[str]:
    _load_entry_points()
    return list(dict.fromkeys([*_kinds, *_lazy]))


def get_kind(name: object, *, file: str | None = None, field: str = "kind") -> Kind:
    """The kind named `name`: a built-in, a backend module, or an entry point's."""
    if isinstance(name, str):
        if name in _kinds:
            return _kinds[name]
        if name in _lazy:
            importlib.import_module(_lazy[name])  # registers itself
            return _kinds[name]
        _load_entry_points()
        if name in _kinds:
            return _kinds[name]
    raise InputError(f"unknown kind {name!r}; expected one of {', '.join(kind_names())}",
                     file=file, field=field)


# -- which configurations exist --------------------------------------------------------------

def check_configurations(names: Sequence[str], configurations=None) -> list[str]:
    """The names, each once, if `configurations` (a `Configurations`; None: the built-in three)
    has them all; InputError naming the unknown ones otherwise."""
    known = list(configurations.entries) if configurations is not None else list(CONFIGURATIONS)
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise InputError(f"unknown configuration(s) {unknown}; expected some of "
                         f"{', '.join(known)}", field="configurations",
                         file=getattr(configurations, "file", None))
    return list(dict.fromkeys(names))


def needs_database(configuration: "Configuration | str") -> bool:
    """Whether the configuration runs on the database (and the query vectors)."""
    if isinstance(configuration, str):
        check_configurations([configuration])
        return configuration in ("dense", "fused")
    kind = get_kind(configuration.kind)
    return kind.needs_database or any(needs_database(c) for c in configuration.components)


def needs_embeddings(configurations: Sequence["Configuration"]) -> bool:
    """Whether any of them reads document or query vectors (else the run embeds nothing)."""
    return any(needs_database(c) for c in configurations)


def lane_count(configuration: "Configuration") -> int | None:
    """The lanes of a configuration's limits that hold across its shards; None: it has none."""
    kind = get_kind(configuration.kind)
    return kind.lanes(configuration.params) if kind.lanes else None


def secret_blocks(configuration: "Configuration") -> list[str]:
    """The Prefect Secret blocks a configuration (and what it names) reads, by name."""
    kind = get_kind(configuration.kind)
    names = list(kind.secrets(configuration.params)) if kind.secrets else []
    for c in configuration.components:
        names += secret_blocks(c)
    return list(dict.fromkeys(names))


def sibling_key(configuration: "Configuration", k: int) -> str:
    """What makes two configurations' runs over the same queries equal: the sha256 of the
    ranker's inputs (kind, parameters, components: `configs.configuration_hash`) and the depth."""
    return f"{configuration.sha256}@{k}"


def reusable_siblings(configuration: "Configuration",
                      selected: Sequence["Configuration"]) -> list["Configuration"]:
    """The configurations of `selected` whose runs `configuration` can take for a component of
    its own: the same sha256 (so the same kind and parameters), themselves without components.
    Taking one's results is running it again at the same moment of the same run (for an `http`
    or `python` engine, one call of a team's engine per query instead of two)."""
    wanted = {c.sha256 for c in configuration.components if c.sha256}
    return [c for c in selected if c.name != configuration.name and not c.components
            and c.sha256 in wanted]


def _reused(configuration: "Configuration", context: RunContext, queries: Sequence[Query],
            k: int) -> RankedRun | None:
    """The sibling's run of `configuration` over `queries`, if the run has one with every query
    answered (a failed query, or a missing one: None, searched again)."""
    sibling = context.siblings.get(sibling_key(configuration, k)) if configuration.sha256 \
        else None
    if sibling is None or any(q.id in sibling.errors or q.id not in sibling.results
                              for q in queries):
        return None
    ids = [q.id for q in queries]
    share = len(ids) / max(1, len(sibling.results))
    return RankedRun(configuration=configuration.name,
                     results={q: sibling.results[q] for q in ids},
                     latency_ms={q: sibling.latency_ms[q] for q in ids if q in sibling.latency_ms},
                     timing={q: sibling.timing[q] for q in ids if q in sibling.timing},
                     usage={key: value * share for key, value in sibling.usage.items()})


def still_needs_database(configuration: "Configuration", context: RunContext,
                         queries: Sequence[Query], k: int) -> bool:
    """`needs_database`, less the components whose runs the context's siblings hold."""
    if not needs_database(configuration):
        return False
    if get_kind(configuration.kind).needs_database or not configuration.components:
        return True
    return any(needs_database(c) and _reused(c, context, queries, k) is None
               for c in configuration.components)


def run_configuration(configuration: "Configuration", context: RunContext,
                      queries: Sequence[Query], query_vectors: np.ndarray | None,
                      k: int = 100) -> RankedRun:
    """One resolved configuration over `queries` (vectors in the same order), `k` results per
    query; the run is named after the configuration."""
    kind = get_kind(configuration.kind)
    if still_needs_database(configuration, context, queries, k) \
            and (context.conn is None or query_vectors is None):
        raise InputError(f"the {configuration.name} configuration needs the database and query "
                         "vectors", field="configurations")
    cpu = time.thread_time()
    run = kind.run(configuration, context, queries, query_vectors, k)
    usage = dict(run.usage)
    usage["cpu_s"] = usage.get("cpu_s", 0.0) + time.thread_time() - cpu
    usage.setdefault("requests", float(len(queries)))
    return replace(run, configuration=configuration.name, usage=usage)


# -- the built-in kinds ----------------------------------------------------------------------

_indexes: dict[str, Any] = {}
_lock = threading.Lock()


def bm25_index(resources: Sequence[Resource], *, disk: bool = True, **params):
    """The BM25F index of this exact catalog content and parameters: built once per process,
    and (`disk`) kept on disk between processes (`rankers.bm25_cache`)."""
    from searcheval.rankers import bm25_cache
    from searcheval.rankers.bm25 import BM25FIndex

    key = bm25_cache.index_key(resources, params)
    with _lock:
        if key not in _indexes:
            if len(_indexes) >= 4:  # a few catalogs / parameter sets at a time, not old ones
                _indexes.pop(next(iter(_indexes)))
            folder = bm25_cache.cache_dir() if disk else None
            index = bm25_cache.load(key, folder)
            if index is None:
                index = BM25FIndex(resources, **params)
                bm25_cache.save(key, index, folder)
            _indexes[key] = index
        return _indexes[key]


def _run_bm25(configuration, context: RunContext, queries, query_vectors, k) -> RankedRun:
    from searcheval.rankers.bm25 import run_bm25

    index = bm25_index(context.resources, **configuration.params)
    return run_bm25(context.resources, queries, k=k, index=index)


def _run_dense(configuration, context: RunContext, queries, query_vectors, k) -> RankedRun:
    from searcheval.rankers.dense import run_dense

    return run_dense(context.conn, context.catalog, context.model, [q.id for q in queries],
                     query_vectors, k=k, exact=configuration.params["exact"])


_FUSION_FIELDS = ("rrf_k", "weights", "prior_a", "prior_b", "prior_weight", "bm25_floor",
                  "candidate_floor", "abstain_floor", "abstain_margin")


def fusion_params(params: Mapping[str, Any], depth: int = 100):
    from searcheval.rankers.fusion import FusionParams

    values = {name: params[name] for name in _FUSION_FIELDS}
    values["weights"] = tuple(values["weights"])
    return FusionParams(**values, depth=depth)


def _validate_fused(params: dict, entry: str, file: str | None) -> None:
    try:
        fusion_params(params)
    except InputError as exc:
        raise InputError(exc.message, file=file,
                         field=f"{entry}.{exc.field.removeprefix('FusionParams.')}") from None


def _run_fused(configuration, context: RunContext, queries, query_vectors, k) -> RankedRun:
    from searcheval.rankers.fusion import run_fused

    parts, taken_cpu = [], 0.0
    for param in ("lexical", "semantic"):
        component = configuration.component(configuration.params[param])
        reused = _reused(component, context, queries, k)  # the sibling's run, else search now
        if reused is not None:
            taken_cpu += reused.usage.get("cpu_s", 0.0)
            parts.append(reused)
        else:
            parts.append(run_configuration(component, context, queries, query_vectors, k))
    run = run_fused(*parts, context.resources, queries,
                    fusion_params(configuration.params, depth=k))
    # what serving it costs: a taken component's CPU counts as if it had run here
    return replace(run, usage={"cpu_s": taken_cpu}) if taken_cpu else run


_NON_NEGATIVE = dict(minimum=0.0)
register_kind(Kind(
    name="bm25", run=_run_bm25, description="BM25F over name, description and tags",
    params={
        "k1": Param("number", 1.2, "term-frequency saturation", **_NON_NEGATIVE),
        "b": Param("number", 0.75, "length normalisation", minimum=0.0, maximum=1.0),
        "field_weights": Param("mapping", {"name": 3.0, "description": 1.0, "tags": 2.0},
                               "weight of a match in each field",
                               keys=("name", "description", "tags"),
                               item=Param("number", minimum=0.0)),
        "repetition_power": Param("number", 2.0, "exponent of the repetition penalty",
                                  **_NON_NEGATIVE),
    },
    validate=lambda p, entry, file: _validate_bm25(p, entry, file)))


def _validate_bm25(params: dict, entry: str, file: str | None) -> None:
    if not any(w > 0 for w in params["field_weights"].values()):
        raise InputError("expected at least one field weight > 0", file=file,
                         field=f"{entry}.field_weights")


register_kind(Kind(
    name="dense", run=_run_dense, needs_database=True,
    description="cosine nearest neighbours in pgvector",
    params={"exact": Param("boolean", False, "exact search instead of the HNSW index")}))

register_kind(Kind(
    name="fused", run=_run_fused, needs_database=False, validate=_validate_fused,
    description="reciprocal-rank fusion of a lexical and a dense configuration",
    references_params=("lexical", "semantic"),
    references_kinds={"lexical": ("bm25",), "semantic": ("dense",)},
    params={
        "lexical": Param("string", "bm25", "the bm25 configuration it fuses"),
        "semantic": Param("string", "dense", "the dense configuration it fuses"),
        "rrf_k": Param("number", 60.0, "RRF rank offset", minimum=0.0),
        "weights": Param("numbers", [1.0, 1.0], "(lexical, semantic) list weights", length=2,
                         minimum=0.0),
        "prior_a": Param("number", 9.0, "Beta prior pseudo-successes", above=0.0),
        "prior_b": Param("number", 1.0, "Beta prior pseudo-failures", above=0.0),
        "prior_weight": Param("number", 0.04, "largest relative change the prior makes",
                              minimum=0.0, maximum=1.0),
        "bm25_floor": Param("number", 3.0, "a bm25 score above this is a lexical match",
                            minimum=0.0),
        "candidate_floor": Param("number", 0.25, "smallest cosine that counts",
                                 minimum=-1.0, maximum=1.0),
        "abstain_floor": Param("number", 0.45, "best cosine that answers alone",
                               minimum=-1.0, maximum=1.0),
        "abstain_margin": Param("number", 0.06, "lead over the runner-up that also answers",
                                minimum=0.0, maximum=2.0, nullable=True),
    }))

