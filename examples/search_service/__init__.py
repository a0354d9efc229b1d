"""A small real search service to evaluate over HTTP: tantivy (BM25) over any collection
searcheval loads, behind the request and response shapes of its own API and of Elasticsearch /
OpenSearch, Solr, Vespa, Typesense and Meilisearch, with test knobs (failures, delays, malformed
bodies) and counters. README.md beside this file is the contract; `python -m
examples.search_service --fixtures fixtures` runs it.

engine.py    the tantivy index, the search (ranking, filters, tie-break) and the stored document
dialects.py  each API's request parsing and response rendering
knobs.py     the knobs and the counters
app.py       the FastAPI routes and the path every request takes through the knobs
__main__.py  the command line
"""
