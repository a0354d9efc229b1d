"""The `bm25` configuration: BM25F over a resource's name, description and tags.

Terms: `tokenize` lowercases and splits on anything that is not a letter or digit (punctuation,
hyphens, underscores), then `analyze` drops Lucene's 33 English stop words and strips plurals with
Lucene's EnglishMinimalStemmer ("prices" -> "price"; it also maps "news" -> "new"). Tags are a
set: a tag listed twice (in any case) is counted once.

Scoring (Robertson & Zaragoza's BM25F, "simple BM25 extension to multiple weighted fields"):

    weighted, length-normalised term frequency of t in document d, summed over the fields f
        tf~(t, d) = sum_f  w_f * tf_f(t, d) / (1 - b + b * len_f(d) / avglen_f)
    saturated once, over the evidence of all fields together
        score(q, d) = quality(d) * sum over distinct terms t of q of  idf(t) * tf~ (k1 + 1) / (tf~ + k1)
    idf(t) = max(0, ln((N - n_t + 0.5) / (n_t + 0.5)))     n_t: documents holding t in a weighted field
    quality(d) = product over f in (name, tags) of  min(1, (distinct terms_f + 1) / terms_f) ** repetition_power

Keyword stuffing must not win. What does the work:
- saturation (k1): one term's score is bounded by idf * (k1 + 1) however often it is repeated, and
  it is saturated once across the fields, so repeating a word in the name, the description and the
  tags cannot add up three bounded scores as it would with one BM25 per field;
- length normalisation (b): repetitions make a field longer, which divides its frequencies down;
- field weights: a match in the short, reviewed name counts more than one in the free text;
- the repetition penalty `quality(d)`. Saturation, b and weights only bound what stuffing gains
  on the words it repeats; a stuffed listing also matches query words the genuine one never uses
  ("api", "real-time"), and on the fixtures that alone won: without the penalty
  `weather-forecast-stuffed` beat `weather-forecast` on "weather forecast api" and
  `free-crypto-price-api` beat `crypto-prices` on "real-time bitcoin price api" for every k1 in
  {0.9, 1.2, 1.6}, b in {0.5, 0.75, 0.9}, name weight {2, 3}, tags weight {1, 2}. A name or tag
  list that repeats its own words is the stuffing signal (repetition is a classic content-spam
  feature, Ntoulas et al. 2006), so each of these two fields may repeat one term once for free
  ("Image Generation" with tags "images", "text-to-image" is not penalised) and beyond that its
  ratio of distinct to total terms scales the whole score. Descriptions are left to k1 and b:
  natural prose repeats words (on SciFact the penalty costs nothing: nDCG@10 0.6832 with it,
  0.6836 without). With power 2 the genuine listing leads on all three adversarial fixture
  queries by a factor >= 1.13 in all 36 settings above (1.41 at the defaults); with power 1 it
  still lost q15 in all 36.

Why not rank-bm25: `rank_bm25.BM25Okapi` scores one token list per document. One BM25Okapi per
field, summed with weights, saturates each field on its own (the stuffing weakness above) and
gives each field its own idf; one token list with the name repeated w times loses the per-field
length normalisation and allows integer weights only. Its `get_scores` also walks every document
in Python for every query term: on SciFact (5,183 documents, 300 test queries) two BM25Okapi
(title, text) took p50 52 ms / p95 107 ms per query, against p50 < 1 ms / p95 < 1 ms here.
So the index is a scipy sparse matrix of precomputed (document, term) impacts and a query adds
up a few of its columns. rank-bm25 stays as the reference the unit tests compare the saturation
and length normalisation with.

IDF: the Robertson/Sparck Jones idf ln((N - n + 0.5) / (n + 0.5)) is negative for a term held by
more than half the documents; in an 18-listing catalog that is any word in 10 listings.
rank-bm25 replaces such values with epsilon * (mean idf of the vocabulary), a positive number that
depends on the whole vocabulary. Here they are floored at 0: a term held by half the documents or
more is no evidence for any of them, so a query made only of such words matches nothing, which
the fused configuration's abstention rule relies on ("no lexical evidence").

Defaults (textbook k1 and b; weights and the repetition power as round numbers, checked on the 15
fixture queries and SciFact only, untuned beyond that):

| constant | default | meaning |
| --- | --- | --- |
| `k1` | 1.2 | term-frequency saturation (0: a match counts the same however often; larger: repeats count longer) |
| `b` | 0.75 | strength of the length normalisation, 0..1, the same for every field |
| `field_weights["name"]` | 3.0 | weight of a match in the name |
| `field_weights["description"]` | 1.0 | weight of a match in the description |
| `field_weights["tags"]` | 2.0 | weight of a match in the de-duplicated tags |
| `repetition_power` | 2.0 | exponent of the repetition penalty (0 turns it off) |

Measured with these defaults: SciFact (BEIR test split, 300 queries) nDCG@10 0.683 (BEIR's
published BM25 0.665); per-query search p50 0.4-0.7 ms, p95 0.7-1.0 ms on a 2-core machine
(depending on load), index build 0.8-1.8 s.

Ranks: scores descending, ties broken by document id descending (as trec_eval does). Only
documents with a score > 0 are returned, each once.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from scipy import sparse

from searcheval.errors import InputError
from searcheval.types import Query, RankedRun, Resource

CONFIGURATION = "bm25"
FIELDS = ("name", "description", "tags")
DEFAULT_FIELD_WEIGHTS: Mapping[str, float] = {"name": 3.0, "description": 1.0, "tags": 2.0}
DEFAULT_K1 = 1.2
DEFAULT_B = 0.75
DEFAULT_REPETITION_POWER = 2.0
# the short fields in which a repeated word is stuffing, not language
REPETITION_FIELDS = ("name", "tags")

# A token is a run of letters and digits; everything else (punctuation, hyphens, underscores,
# whitespace) separates tokens. Unicode letters count as letters.
_TOKEN = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    """Lowercase (casefold) and split on anything that is not a letter or digit.

    `tokenize("Weather-Forecast API, v2!")` is `["weather", "forecast", "api", "v2"]`.
    """
    return _TOKEN.findall(text.casefold())


# Lucene's English stop set (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET).
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)


def stem(token: str) -> str:
    """Plural stripping only: Lucene's EnglishMinimalStemmer (Harman's S-stemmer).

    "prices" -> "price", "forecasts" -> "forecast", "queries" -> "query"; "bus", "class",
    "goes" and "shoes" are left alone.
    """
    n = len(token)
    if n < 3 or token[-1] != "s" or token[-2] in "us":
        return token
    if token[-2] == "e":
        if n > 3 and token[-3] == "i" and token[-4] not in "ae":
            return token[:-3] + "y"
        if token[-3] in "iaoe":
            return token
    return token[:-1]


def analyze(text: str) -> list[str]:
    """The index terms of a text: `tokenize`, drop `STOPWORDS`, `stem`."""
    return [stem(t) for t in tokenize(text) if t not in STOPWORDS]


def field_texts(resource: Resource) -> dict[str, str]:
    """The text of each field; tags are a set, so a tag repeated (in any case) counts once."""
    tags: list[str] = []
    seen: set[str] = set()
    for tag in resource.tags:
        key = tag.strip().casefold()
        if key and key not in seen:
            seen.add(key)
            tags.append(tag)
    return {"name": resource.name, "description": resource.description, "tags": " ".join(tags)}


def field_tokens(resource: Resource) -> dict[str, list[str]]:
    """The tokens of each field (`analyze` of `field_texts`)."""
    return {f: analyze(text) for f, text in field_texts(resource).items()}


def _check_params(field_weights: Mapping[str, float] | None, k1: float, b: float,
                  repetition_power: float) -> dict[str, float]:
    weights = dict(DEFAULT_FIELD_WEIGHTS)
    if field_weights is not None:
        unknown = sorted(set(field_weights) - set(FIELDS))
        if unknown:
            raise InputError(f"unknown field(s) {unknown}; expected some of {', '.join(FIELDS)}",
                             field="field_weights")
        weights.update(field_weights)
    for name, w in weights.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise InputError(f"expected a finite weight >= 0, got {w!r}",
                             field=f"field_weights.{name}")
    if not any(w > 0 for w in weights.values()):
        raise InputError("expected at least one field weight > 0", field="field_weights")
    if isinstance(k1, bool) or not isinstance(k1, (int, float)) or not math.isfinite(k1) or k1 < 0:
        raise InputError(f"expected a finite k1 >= 0, got {k1!r}", field="k1")
    if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0.0 <= b <= 1.0:
        raise InputError(f"expected b in [0, 1], got {b!r}", field="b")
    if (isinstance(repetition_power, bool) or not isinstance(repetition_power, (int, float))
            or not math.isfinite(repetition_power) or repetition_power < 0):
        raise InputError(f"expected a finite repetition_power >= 0, got {repetition_power!r}",
                         field="repetition_power")
    return {f: float(weights[f]) for f in FIELDS}


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"expected a whole number k >= 1, got {k!r}", field="k")


class BM25FIndex:
    """BM25F over name, description and tags of a fixed set of resources.

    The whole score of every (document, term) pair is computed once here, so `search` only adds up
    the columns of the query's terms.
    """

    def __init__(
        self,
        resources: Iterable[Resource],
        field_weights: Mapping[str, float] | None = None,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        repetition_power: float = DEFAULT_REPETITION_POWER,
    ) -> None:
        self.field_weights = _check_params(field_weights, k1, b, repetition_power)
        self.repetition_power = float(repetition_power)
        self.k1 = float(k1)
        self.b = float(b)
        resources = list(resources)
        self.ids: list[str] = []
        seen: set[str] = set()
        for r in resources:
            if r.id in seen:
                raise InputError(f"duplicate resource id {r.id!r}", field="id")
            seen.add(r.id)
            self.ids.append(r.id)
        n_docs = len(self.ids)
        self.vocabulary: dict[str, int] = {}
        # per field: each token's term (column) and each document's length, counted in numpy.
        # A column is given at a term's first appearance (documents in order, then the fields,
        # then the tokens), as a per-document Counter would; `known` maps a raw token to its
        # column once (-1: a stop word), so `analyze` runs once per distinct token
        known: dict[str, int] = {}
        columns = {f: [] for f in FIELDS}
        lengths = {f: np.zeros(n_docs) for f in FIELDS}
        token_counts = {f: np.zeros(n_docs, dtype=np.int64) for f in FIELDS}
        vocabulary = self.vocabulary
        for row, r in enumerate(resources):
            for f, text in field_texts(r).items():
                tokens = _TOKEN.findall(text.casefold())
                cols = [known.get(t, -2) for t in tokens]
                if -2 in cols:  # tokens never seen: their terms, in order
                    for i, t in enumerate(tokens):
                        if cols[i] == -2:
                            if t not in known:
                                known[t] = -1 if t in STOPWORDS else \
                                    vocabulary.setdefault(stem(t), len(vocabulary))
                            cols[i] = known[t]
                if -1 in cols:
                    cols = [c for c in cols if c >= 0]
                columns[f].extend(cols)
                token_counts[f][row] = len(cols)
        shape = (n_docs, len(vocabulary))
        counted: dict[str, sparse.csr_matrix] = {}
        for f in FIELDS:
            lengths[f][:] = token_counts[f]
            rows = np.repeat(np.arange(n_docs, dtype=np.int32), token_counts[f])
            cols = np.asarray(columns[f], dtype=np.int32)
            columns[f] = []
            # duplicates (a term repeated in the field) are summed: the term frequency
            counted[f] = sparse.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=shape)
        self.quality = np.ones(n_docs)
        for f in REPETITION_FIELDS:
            if self.field_weights[f] <= 0:
                continue
            distinct = np.diff(counted[f].indptr).tolist()
            for row, total in enumerate(token_counts[f].tolist()):
                if total:
                    distinct_share = min(1.0, (distinct[row] + 1) / total)
                    self.quality[row] *= distinct_share ** self.repetition_power
        pseudo_tf = sparse.csr_matrix(shape)
        for f in FIELDS:
            w = self.field_weights[f]
            if w == 0.0:
                continue
            tf = counted[f]
            avg = lengths[f].mean() if n_docs else 0.0
            norm = 1.0 - self.b + self.b * lengths[f] / avg if avg > 0 else np.ones(n_docs)
            # norm is 0 only for an empty field with b = 1, whose row holds no entry anyway
            scale = np.divide(w, norm, out=np.zeros(n_docs), where=norm > 0)
            pseudo_tf = pseudo_tf + sparse.diags(scale) @ tf
        pseudo_tf = sparse.csr_matrix(pseudo_tf)
        pseudo_tf.eliminate_zeros()
        # documents holding each term in a field that counts
        df = np.bincount(pseudo_tf.indices, minlength=shape[1]).astype(float)
        self.idf = np.maximum(0.0, np.log((n_docs - df + 0.5) / (df + 0.5)))
        impact = pseudo_tf.copy()
        x = impact.data
        impact.data = self.idf[impact.indices] * x * (self.k1 + 1.0) / (x + self.k1)
        impact = sparse.diags(self.quality) @ impact
        impact = sparse.csr_matrix(impact)
        impact.eliminate_zeros()
        self._impact = impact.tocsc()
        # rank of each id in ascending order, for "ties by doc id descending"
        order = sorted(range(n_docs), key=self.ids.__getitem__)
        self._id_rank = np.empty(n_docs, dtype=np.int64)
        self._id_rank[order] = np.arange(n_docs)

    def __len__(self) -> int:
        return len(self.ids)

    def idf_of(self, term: str) -> float:
        """The idf of an index term (as `analyze` makes them); 0.0 for a term no document holds."""
        col = self.vocabulary.get(term)
        return float(self.idf[col]) if col is not None else 0.0

    def scores(self, text: str) -> np.ndarray:
        """The BM25F score of every document (in `self.ids` order) for a query text."""
        cols = sorted({self.vocabulary[t] for t in analyze(text) if t in self.vocabulary})
        if not cols or not self.ids:
            return np.zeros(len(self.ids))
        return np.asarray(self._impact[:, cols].sum(axis=1)).ravel()

    def search(self, text: str, k: int = 100) -> list[tuple[str, float]]:
        """The k best documents with a score > 0: best first, ties by document id descending."""
        _check_k(k)
        scores = self.scores(text)
        hits = np.flatnonzero(scores > 0.0)
        if hits.size == 0:
            return []
        order = np.lexsort((self._id_rank[hits], scores[hits]))[::-1][:k]
        return [(self.ids[i], float(scores[i])) for i in hits[order]]


def run_bm25(
    resources: Sequence[Resource],
    queries: Sequence[Query],
    k: int = 100,
    index: BM25FIndex | None = None,
    **params,
) -> RankedRun:
    """The `bm25` configuration over `queries`; `params` go to `BM25FIndex` (field_weights, k1, b).

    The index is built once (or passed in, already built over `resources`); latency_ms is the time
    of each query's `search` (perf_counter).
    """
    _check_k(k)
    if index is None:
        index = BM25FIndex(resources, **params)
    results: dict[str, list[tuple[str, float]]] = {}
    latency: dict[str, float] = {}
    for q in queries:
        if q.id in results:
            raise InputError(f"duplicate query id {q.id!r}", field="id")
        start = time.perf_counter()
        hits = index.search(q.text, k)
        latency[q.id] = (time.perf_counter() - start) * 1000.0
        results[q.id] = hits
    return RankedRun(configuration=CONFIGURATION, results=results, latency_ms=latency)
