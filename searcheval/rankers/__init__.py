"""The configuration kinds and what runs them: the registry (`registry`), the configurations file
and its parameters (`configs`, `params`), the built-in rankers (`bm25`, `dense`, and the fused
kind in `fusion`), the backends of a team's own engine (`http` with its `templates`, `python`,
`trec`), the document lookups (`documents`), the embedding model with its cache (`embeddings`),
and the limits of a backend's requests held across the shards of a configuration (`limits`).
Imported by the evaluation steps and the benchmarks."""
