"""The one table of metric names: searcheval's own (what every output uses), ir_measures' and
trec_eval's, read case-insensitively. The library, the CLI and the flows parse names through
`parse_metric` here (re-exported by `searcheval.metrics.engine`), so `nDCG@10`, `ndcg_cut_10`,
`ndcg_cut.10` and `ndcg@10` are one metric, published as `ndcg@10`.

| searcheval | ir_measures | trec_eval |
| --- | --- | --- |
| `ndcg@K` | `nDCG@K` | `ndcg_cut_K` |
| `mrr`, `mrr@K` | `RR`, `RR@K` | `recip_rank` |
| `recall@K` | `R@K` | `recall_K` |
| `precision@K` | `P@K` | `P_K` |
| `map`, `map@K` | `AP`, `AP@K` | `map`, `map_cut_K` |
| `judged@K` | `Judged@K` | |
| `rprec` | `Rprec` | `Rprec` |
| `success@K` (also `hits@K`) | `Success@K` | `success_K` |
| `bpref` | `Bpref` | `bpref` |
| `err@K` | `ERR@K` | |
| `rbp`, `rbp(p=P)` | `RBP(rel=L,p=P)` | |
| `rbp_residual`, `rbp_residual(p=P)` | | |
| `abstention` | | |
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Literal

from searcheval.defaults import RBP_PERSISTENCE
from searcheval.errors import InputError

Cutoff = Literal["required", "optional", "none"]
Scheme = Literal["searcheval", "ir_measures", "trec"]
SCHEMES = ("searcheval", "ir_measures", "trec")


@dataclass(frozen=True)
class Kind:
    """One metric kind: its cutoff rule and its names in ir_measures and trec_eval (None: that tool
    has no such measure). `trec_k` is trec_eval's name with a cutoff (`ndcg_cut` -> ndcg_cut_10),
    `trec` its name without one."""

    kind: str
    cutoff: Cutoff
    ir_measures: str | None = None
    trec: str | None = None
    trec_k: str | None = None
    persistence: bool = False  # takes RBP's p


KINDS: dict[str, Kind] = {k.kind: k for k in (
    Kind("ndcg", "required", "nDCG", trec_k="ndcg_cut"),
    Kind("mrr", "optional", "RR", trec="recip_rank"),
    Kind("recall", "required", "R", trec_k="recall"),
    Kind("precision", "required", "P", trec_k="P"),
    Kind("map", "optional", "AP", trec="map", trec_k="map_cut"),
    Kind("judged", "required", "Judged"),
    Kind("rprec", "none", "Rprec", trec="Rprec"),
    Kind("success", "required", "Success", trec_k="success"),
    Kind("bpref", "none", "Bpref", trec="bpref"),
    Kind("err", "required", "ERR"),
    Kind("rbp", "none", "RBP", persistence=True),
    Kind("rbp_residual", "none", persistence=True),
    Kind("abstention", "none"),
)}

# every spelling (lower case) of a kind, without its cutoff
ALIASES: dict[str, str] = {
    "ndcg": "ndcg", "ndcg_cut": "ndcg",
    "mrr": "mrr", "rr": "mrr", "recip_rank": "mrr",
    "recall": "recall", "r": "recall",
    "precision": "precision", "p": "precision",
    "map": "map", "ap": "map", "map_cut": "map",
    "judged": "judged",
    "rprec": "rprec", "r-prec": "rprec", "r_prec": "rprec",
    "success": "success", "hits": "success",
    "bpref": "bpref",
    "err": "err",
    "rbp": "rbp", "rbp_residual": "rbp_residual",
    "abstention": "abstention",
}
# trec_eval's names with the cutoff after `_` or `.` (ndcg_cut_10, P.10, recall_20, success.5)
TREC_WITH_CUTOFF = ("ndcg_cut", "recall", "p", "map_cut", "success")

_AT = re.compile(r"^(?P<kind>[a-z_\-]+?)(?:\((?P<args>[^)]*)\))?(?:@(?P<k>\d+))?$")
_TREC = re.compile(r"^(?P<kind>" + "|".join(TREC_WITH_CUTOFF) + r")[_.](?P<k>\d+)$")
EXPECTED = ("expected one of ndcg@K, mrr, mrr@K, recall@K, precision@K, map, map@K, judged@K, "
            "rprec, success@K, bpref, err@K, rbp, rbp(p=P), rbp_residual, abstention, or their "
            "ir_measures / trec_eval names (nDCG@10, RR, R@20, P@10, AP, ndcg_cut_10, "
            "recip_rank, P_10, recall_20, ...)")


@dataclass(frozen=True)
class Metric:
    kind: str
    k: int | None = None
    p: float | None = None  # RBP's persistence

    @property
    def name(self) -> str:
        """searcheval's name, the one every output uses."""
        base = self.kind
        if self.p is not None and self.p != RBP_PERSISTENCE:
            base = f"{base}(p={self.p:g})"
        return base if self.k is None else f"{base}@{self.k}"

    def name_in(self, scheme: Scheme, relevance_level: int = 1) -> str:
        """The name in `scheme` (`searcheval`, `ir_measures` or `trec`); searcheval's own where
        that tool has no such measure."""
        kind = KINDS[self.kind]
        if scheme == "ir_measures" and kind.ir_measures:
            if kind.persistence:
                return f"{kind.ir_measures}(rel={relevance_level},p={self.p:g})"
            return kind.ir_measures if self.k is None else f"{kind.ir_measures}@{self.k}"
        if scheme == "trec":
            if self.k is None and kind.trec:
                return kind.trec
            if self.k is not None and kind.trec_k:
                return f"{kind.trec_k}_{self.k}"
        return self.name


def parse_metric(name: str) -> Metric:
    """A metric from any of its names (case-insensitive): see the module's table."""
    text = str(name).strip().lower().replace(" ", "")
    trec = _TREC.match(text)
    if trec:
        kind, k, args = ALIASES[trec["kind"]], trec["k"], None
    else:
        match = _AT.match(text)
        if not match or match["kind"] not in ALIASES:
            raise InputError(f"unknown metric {name!r}; {EXPECTED}", field="metrics")
        kind, k, args = ALIASES[match["kind"]], match["k"], match["args"]
    spec = KINDS[kind]
    if spec.cutoff == "required" and k is None:
        raise InputError(f"metric {name!r} needs a cutoff, e.g. {kind}@10", field="metrics")
    if spec.cutoff == "none" and k is not None:
        raise InputError(f"metric {name!r} takes no cutoff", field="metrics")
    if k is not None and int(k) < 1:
        raise InputError(f"metric {name!r}: the cutoff must be >= 1", field="metrics")
    p = _persistence(name, args) if spec.persistence else None
    if args is not None and not spec.persistence:
        raise InputError(f"metric {name!r} takes no parameters", field="metrics")
    return Metric(kind, int(k) if k is not None else None, p)


def _persistence(name: str, args: str | None) -> float:
    """RBP's `p` from `p=0.5` (ir_measures' `rel=` is the relevance level: taken, not used)."""
    p = RBP_PERSISTENCE
    for part in filter(None, (args or "").split(",")):
        key, _, value = part.partition("=")
        if key == "rel":
            continue
        try:
            if key != "p":
                raise ValueError
            p = float(value)
        except ValueError:
            raise InputError(f"metric {name!r}: expected rbp(p=P) with 0 < P < 1",
                             field="metrics") from None
    if not 0.0 < p < 1.0:
        raise InputError(f"metric {name!r}: the persistence p must be in (0, 1)", field="metrics")
    return p


def parse_metrics(names: str | Iterable[str]) -> list[Metric]:
    """A comma-separated list or an iterable of names; duplicates (under any spelling) once.
    Commas inside parentheses (`RBP(rel=1,p=0.5)`) belong to the name."""
    if isinstance(names, str):
        names = [n for n in re.split(r",(?![^(]*\))", names) if n.strip()]
    metrics = [n if isinstance(n, Metric) else parse_metric(n) for n in names]
    if not metrics:
        raise InputError("no metric named", field="metrics")
    return list(dict.fromkeys(metrics))


def canonical(names: str | Iterable[str]) -> list[str]:
    """searcheval's names of the metrics named in any spelling."""
    return [m.name for m in parse_metrics(names)]
