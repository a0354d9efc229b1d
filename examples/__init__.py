"""Examples that run against searcheval; not installed (run them from the repository root)."""
