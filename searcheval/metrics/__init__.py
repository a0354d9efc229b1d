"""The metric engine (`engine`) and its columnar path over integer-coded arrays (`columnar`), the
one table of metric names (`names`: searcheval's, ir_measures', trec_eval's), scoring per
configuration and category (`scoring`), coverage of the results by the judgments (`coverage`),
statistics for small query sets (`stats`) and the paired comparison of runs (`compare`). Numpy
(and pyarrow for the columnar path): no database, no Prefect."""
