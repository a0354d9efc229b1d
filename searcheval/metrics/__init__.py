"""The metric engine (`engine`), scoring per configuration and category (`scoring`), coverage of
the results by the judgments (`coverage`), statistics for small query sets (`stats`) and the
paired comparison of runs (`compare`). Pure numpy: no database, no Prefect, no files."""
