"""The configuration kinds and what runs them: the registry (`registry`), the built-in rankers
(`bm25`, `dense`, `fused` in `fusion`), the embedding model with its cache (`embeddings`), and the
limits of a backend's requests held across the shards of a configuration (`limits`). Imported by
the evaluation steps and the benchmarks."""
