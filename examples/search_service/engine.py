"""The search engine behind every endpoint: a tantivy index over a collection searcheval loads.

tantivy is a Lucene-like engine written in Rust (BM25 over an inverted index), not searcheval's own
BM25. Each document is indexed with two analyzed text fields, `title` (the listing's name, or a
BEIR title) and `text` (description and tags, or a BEIR abstract), an exact-match `id`, and, when
the collection has them, the fixtures' exact-match `network` and `asset` and a numeric `price_usd`.

A query is free text, never query syntax: it is cut into tokens by the same analyzer that indexed
the documents (lowercase, English stop words removed, English stemming), and a document matches
when it holds at least one token in either field. Filters are strict, as in Elasticsearch: a
document lacking the filtered field (every BEIR document) never satisfies the filter.
"""

from __future__ import annotations

from dataclasses import dataclass

import tantivy

from searcheval import Collection, Filters, Resource

FIELDS = ("title", "text")


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    document: Resource


@dataclass(frozen=True)
class Results:
    hits: list[Hit]  # the requested page, best first
    total: int  # every document the query matches (the engines' numFound, found, totalCount)
    documents: int  # every document in the index (Typesense's out_of)


def _analyzer() -> tantivy.TextAnalyzer:
    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.remove_long(40))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.stopword("english"))
            .filter(tantivy.Filter.stemmer("english"))
            .build())


def source(resource: Resource) -> dict:
    """The stored document, as the engine-shaped responses return it (`_source`, `document`, ...).

    Fields a collection does not have (a BEIR document has no tags, network, asset or price)
    are left out rather than set to null.
    """
    doc = {"id": resource.id, "title": resource.name, "text": resource.description}
    if resource.tags:
        doc["tags"] = list(resource.tags)
    for name in ("network", "asset", "price_usd"):
        if getattr(resource, name) is not None:
            doc[name] = getattr(resource, name)
    return doc


class Engine:
    """An in-memory tantivy index of one collection, and its documents by id."""

    def __init__(self, collection: Collection):
        self.name = collection.name
        self.documents: dict[str, Resource] = {r.id: r for r in collection.resources}
        self._analyzer = _analyzer()
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("id", stored=True, tokenizer_name="raw")
        for field in FIELDS:
            builder.add_text_field(field, tokenizer_name="example")
        builder.add_text_field("network", tokenizer_name="raw")
        builder.add_text_field("asset", tokenizer_name="raw")
        builder.add_float_field("price_usd", indexed=True, fast=True)
        self._schema = builder.build()
        self._index = tantivy.Index(self._schema)  # in memory: rebuilt at every start
        self._index.register_tokenizer("example", self._analyzer)
        writer = self._index.writer(heap_size=64_000_000, num_threads=1)
        for r in collection.resources:
            fields = {"id": r.id, "title": r.name, "text": " ".join([r.description, *r.tags])}
            if r.network is not None:
                fields["network"] = r.network
            if r.asset is not None:
                fields["asset"] = r.asset
            if r.price_usd is not None:
                fields["price_usd"] = float(r.price_usd)
            writer.add_document(tantivy.Document(**fields))
        writer.commit()
        writer.wait_merging_threads()
        self._index.reload()
        self._searcher = self._index.searcher()

    def tokens(self, text: str) -> list[str]:
        """The query's distinct tokens, in order, as the index analyzed the documents."""
        return list(dict.fromkeys(self._analyzer.analyze(text)))

    def search(self, text: str, k: int, filters: Filters = Filters(), offset: int = 0,
               exclude: frozenset[str] = frozenset()) -> Results:
        """Ranks offset+1 .. offset+k by BM25 score, descending; ties by id descending (as trec_eval).

        `exclude` names documents to leave out (the `gone_documents` knob).
        """
        documents = len(self.documents.keys() - exclude)
        tokens = self.tokens(text)
        if not tokens:
            return Results(hits=[], total=0, documents=documents)
        Q, Occur = tantivy.Query, tantivy.Occur
        words = Q.boolean_query([(Occur.Should, Q.term_query(self._schema, field, token))
                                 for field in FIELDS for token in tokens])
        clauses = [(Occur.Must, words)]
        constraints = []
        if filters.network is not None:
            constraints.append(Q.term_query(self._schema, "network", filters.network))
        if filters.asset is not None:
            constraints.append(Q.term_query(self._schema, "asset", filters.asset))
        if filters.max_price_usd is not None:
            constraints.append(Q.range_query(self._schema, "price_usd", tantivy.FieldType.Float,
                                             upper_bound=float(filters.max_price_usd)))
        # A constraint scores 0, so a filter changes which documents match, never their order.
        clauses += [(Occur.Must, Q.const_score_query(c, 0.0)) for c in constraints]
        clauses += [(Occur.MustNot, Q.term_query(self._schema, "id", d)) for d in sorted(exclude)]
        query = Q.boolean_query(clauses)
        # Fetch past the k-th hit until the score drops, so that every document tied with the
        # k-th is a candidate and the id tie-break decides between them, not tantivy's doc order.
        end = offset + k
        limit = end + 1
        while True:
            result = self._searcher.search(query, limit)
            found = result.hits
            if len(found) < limit or end == 0 or found[-1][0] < found[end - 1][0]:
                break
            limit *= 2
        ranked = [(score, self._searcher.doc(address)["id"][0]) for score, address in found]
        ranked.sort(key=lambda h: h[1], reverse=True)
        ranked.sort(key=lambda h: h[0], reverse=True)  # stable: ties stay in id-descending order
        hits = [Hit(id=d, score=float(s), document=self.documents[d]) for s, d in ranked[offset:end]]
        return Results(hits=hits, total=result.count, documents=documents)
