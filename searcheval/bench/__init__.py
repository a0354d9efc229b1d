"""Rerunnable speed benchmarks, each against its reference tool in the same run. Imported only by
`searcheval benchmark ...`; their reference tools come with the `bench` extra."""
