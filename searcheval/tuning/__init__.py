"""Parameter search that never grades itself (`searcheval tune`).

- `space`: the search space (`--param NAME.PARAM=LOW..HIGH[:STEP]`, `=[A, B]`, or a file), every
  dimension checked against its configuration's kind before the first trial;
- `split`: the golden queries split, stratified by category and seeded, into a tuning part and
  a held-out part;
- `search`: trials (Optuna, TPE or grid, seeded) scored on the tuning part only, reusing cached
  result lists (a trial of fused weights re-fuses, never re-searches);
- `verdict`: the chosen configuration once on the held-out part against the served one (the
  paired test, per-query better and worse, the minimum detectable effect), the configurations
  entry to commit and the report;
- `study`: the composition the flow (flows/tune.py) and the benchmark share: check, prepare,
  run the trials, conclude.

The trials and the study live in Postgres (`store.tuning`, migration 009), so a killed study
resumes where it stopped.
"""
