"""The configuration kinds and what runs them: the registry (`registry`), the built-in rankers
(`bm25`, `dense`, `fused` in `fusion`) and the embedding model with its cache (`embeddings`).
Imported by the evaluation steps and the benchmarks."""
