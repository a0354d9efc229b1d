"""Every default of a run option, once. The CLI flags, the flow parameters and deploy/prefect.yaml
take their defaults from here (tests/deploy/test_config.py checks that prefect.yaml agrees).

Plain constants only: importing this module costs nothing.
"""

from __future__ import annotations

# -- inputs
SPLIT = "test"  # BEIR qrels split
BASELINE = "baseline.json"
OUTPUT = "out"
MAX_GRADE = 3  # top of the grade scale of TREC qrels and traces: grades 0..3
MAX_BAD_SHARE = 0.01  # bad trace lines skipped up to this share of a file, refused above

# -- metrics and their conventions
SCORE_METRICS = ("ndcg@10", "mrr", "recall@20")  # `searcheval score`
REPORT_METRICS = ("ndcg@10", "mrr", "recall@20", "precision@10", "map", "judged@10", "abstention")
GATED_METRICS = ("ndcg@10", "mrr", "recall@20")
REPLAY_METRICS = ("ndcg@10", "mrr", "precision@10", "recall@20", "map")
GAIN = "exponential"  # 2^grade - 1; "linear" is trec_eval's
RELEVANCE_LEVEL = 1  # lowest grade that counts as relevant for MRR, P, R, MAP
NO_RELEVANT = "one"  # nDCG and Recall of a query with no relevant judgment: one | zero | skip
RBP_PERSISTENCE = 0.8  # RBP's p when a name does not give one (ir_measures' default)
ERR_MAX_GRADE = 4  # ERR's stopping probability (2^g - 1) / 2^4, as gdeval (ir_measures' ERR)

# -- the nightly evaluation
CONFIGURATIONS = ("bm25", "dense", "fused")  # the entries of the shipped configurations file
CONFIGURATIONS_FILE = "configurations.yaml"
GATED_CONFIGURATION = "fused"  # what production serves, the one the gate guards
DEPTH = 100  # results per query
SNAPSHOT_DEPTH = 100  # ranks of each ranked list kept in Postgres per run (eval_ranked_results)
SNAPSHOT_RETENTION = "90d"  # the nightly prunes snapshots older than this (metrics history stays)
OUTPUT_RETENTION = "90d"  # ... and the run folders it wrote in `output` older than this
NIGHTLY_KIND = "nightly"  # eval_runs.kind of a scheduled run: its diff is against the last one
LATEST = "latest"  # OUTPUT/latest points at the newest run's folder OUTPUT/<run_id>/
DIFF_METRIC = "ndcg@10"  # `searcheval diff` sorts queries by this metric's delta
DIFF_TOP_K = 10  # results shown side by side, and the "entered / left the top k" of a diff
BASELINES_DIR = "baselines"  # beside baseline.json: baselines/<dataset>.json of other datasets
TOLERANCE = 0.02  # absolute drop of a gated metric that trips the gate
COVERAGE_K = 10  # judged share of each configuration's top k ...
COVERAGE_FLOOR = 0.9  # ... below this share, the run is alerted
MAX_AGE_DAYS = 365  # judgments older than this are stale
MIN_PER_CATEGORY = 3  # fewest golden queries a category may have
SHARDS = 1  # query shards per configuration
EMBED_BATCH = 2048  # texts per embedding task
#: embedding tasks running at once in Prefect's thread pool: one. They take turns at the
#: process's one model anyway; each held a database connection while it waited (22 at WANDS' size
#: held 22 backends), and threads taking turns at torch each keep a team of OpenMP threads
EMBED_TASKS_AT_ONCE = 1
#: a collection of at least this many rows (resources, queries and judgments) is validated in a
#: process of its own that exits after (validation.validate_collection(apart=True)): Great
#: Expectations' ~250 MiB of modules would otherwise stay in the run's process through the
#: embedding and the index (WANDS: 277k rows); a smaller one shares the process's import
VALIDATE_APART_ROWS = 50_000

# -- the ranges a run's options are checked against before any work (evaluation/preflight.py)
MAX_TOLERANCE = 1.0  # a tolerance is an absolute drop of a metric in [0, 1]
MAX_DEPTH = 10_000  # results per query, and the k of the judged share
MAX_SHARDS = 1024
MAX_EMBED_BATCH = 100_000
MAX_AGE_LIMIT_DAYS = 36_500  # a hundred years: a larger max_age_days is a typo
MAX_FIELD_CHARS = 1_000_000  # longest CSV/TSV field read (the csv module's own limit is 131072)

# -- statistics
PERMUTATIONS = 10_000  # random sign flips of the paired randomization test beyond 16 pairs
WORST_QUERIES = 5  # queries named per tripped metric
SIGNIFICANCE_LEVEL = 0.05  # two-sided level of the paired tests the gate reports
POWER = 0.8  # power of the minimum detectable effect and of the queries-needed estimate

# -- datasets
WANDS_GRADE_MAP = (("Exact", 3), ("Partial", 1), ("Irrelevant", 0))  # as the seed does (paper: 2/1/0)

# -- judging
JUDGMENT_RULE = "median"  # effective grade: each judge's latest, then median | majority | judge:NAME
JUDGMENT_SOURCES = ("human", "import", "model", "implicit")
POOL_DEPTH = 10  # a pool is the unjudged part of each configuration's top k
POOL_OVERLAP = 0.0  # share of a pool assigned to two judges (agreement needs some)
AGREEMENT_FLOOR = 0.667  # Krippendorff's alpha (ordinal) below which a run is alerted
GUIDELINE_VERSION = "1"  # version of the grading guideline the rating page shows
RATE_PORT = 8765  # `searcheval rate` listens on localhost:RATE_PORT
RATE_TOKEN_ENV = "SEARCHEVAL_RATE_TOKEN"  # the token a non-loopback rating page requires
DISAGREEMENTS = 10  # pairs with the largest disagreement listed in the report

# `searcheval ui`: the local Prefect server and its UI (Prefect's own default port)
UI_HOST = "127.0.0.1"
UI_PORT = 4200

# -- production data (issue 25): the live monitor, implicit judgments, sampled golden queries
LIVE_MONITOR = "live"  # the monitor's name in live_windows (several monitors may coexist)
LIVE_INTERVAL_MINUTES = 15  # window length; the deployment runs as often (deploy/prefect.yaml)
LIVE_METRICS = ("mrr", "precision@5")  # the first one is watched by the change detector
LIVE_CUSUM_K = 0.02  # CUSUM slack: a shortfall below target smaller than this is noise
LIVE_CUSUM_H = 0.15  # CUSUM threshold: alert when the accumulated shortfall exceeds it
LIVE_WARMUP = 4  # windows whose mean becomes the detector's target
LIVE_MIN_LABELLED = 10  # windows with fewer labelled traces do not move the detector
IMPLICIT_MIN_IMPRESSIONS = 10  # a (query, document) pair shown fewer times gets no implicit grade

# How long a nightly flow run may take before it ends Failed (its flow's timeout_seconds), and how
# long `searcheval run --deployment` waits for one beyond that (queueing, start-up) by default.
RUN_TIMEOUT_ENV = "SEARCHEVAL_RUN_TIMEOUT"
RUN_TIMEOUT = 7200  # seconds; 0 in the environment: no timeout
WAIT_MARGIN = 600  # seconds


def run_timeout(environ=None) -> int | None:
    """SEARCHEVAL_RUN_TIMEOUT in seconds (default RUN_TIMEOUT), None for 0 (no timeout)."""
    import os

    from searcheval.errors import InputError

    raw = (os.environ if environ is None else environ).get(RUN_TIMEOUT_ENV)
    if raw is None or not raw.strip():
        return RUN_TIMEOUT
    try:
        seconds = int(raw)
    except ValueError:
        seconds = -1
    if seconds < 0:
        raise InputError(f"expected a whole number of seconds (0: no timeout), got {raw!r}",
                         field=RUN_TIMEOUT_ENV)
    return seconds or None
