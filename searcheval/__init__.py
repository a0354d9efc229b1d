"""searcheval: search-quality evaluation. The library never imports Prefect."""

__version__ = "0.1.0"
