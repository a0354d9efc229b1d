"""Scale-out: the pure helpers that cut and join the work, the runner settings, and the nightly
flow on a Dask LocalCluster giving exactly the numbers of the default runner."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from prefect_records import task_runs_of

from flows.runners import RunnerSettings, runner_settings
from searcheval import store
from searcheval.cli import main
from searcheval.errors import InputError
from searcheval.evaluation import pipeline
from searcheval.rankers.embeddings import CachedEmbedder
from searcheval.store import database
from searcheval.types import Collection, Query, RankedRun, Resource

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- cutting and joining


def test_text_batches_are_consecutive_and_keep_the_order():
    texts = [f"t{i}" for i in range(7)]
    assert pipeline.text_batches(texts, 3) == [["t0", "t1", "t2"], ["t3", "t4", "t5"], ["t6"]]
    assert pipeline.text_batches(texts, 7) == [texts]
    assert pipeline.text_batches([], 8) == []
    with pytest.raises(InputError, match="embed_batch"):
        pipeline.text_batches(texts, 0)


def test_collection_texts_are_documents_then_queries_each_once():
    resources = [Resource("a", "Alpha", "first"), Resource("b", "Beta", "")]
    queries = [Query("q1", "Beta"), Query("q2", "gamma")]
    collection = Collection("c", resources, queries, [])
    assert pipeline.collection_texts(collection) == ["Alpha\nfirst", "Beta", "gamma"]


def test_shard_bounds_are_near_equal_and_never_empty():
    assert pipeline.shard_bounds(7, 3) == [(0, 3), (3, 5), (5, 7)]  # 7 = 3 + 2 + 2
    assert pipeline.shard_bounds(4, 2) == [(0, 2), (2, 4)]
    assert pipeline.shard_bounds(2, 5) == [(0, 1), (1, 2)]  # no empty shard
    assert pipeline.shard_bounds(0, 3) == [(0, 0)]
    with pytest.raises(InputError, match="shards"):
        pipeline.shard_bounds(5, 0)
    with pytest.raises(InputError, match="shards"):
        pipeline.check_scale_out(True, 8)


def test_query_shards_keep_each_vector_with_its_query():
    queries = [Query(f"q{i}", f"text {i}") for i in range(5)]
    vectors = np.arange(10, dtype=np.float32).reshape(5, 2)
    shards = pipeline.query_shards(queries, vectors, 2)
    assert [(s.number, s.of) for s in shards] == [(1, 2), (2, 2)]
    assert [[q.id for q in s.queries] for s in shards] == [["q0", "q1", "q2"], ["q3", "q4"]]
    assert shards[1].query_vectors.tolist() == [[6.0, 7.0], [8.0, 9.0]]
    with pytest.raises(InputError, match="one query vector per query"):
        pipeline.query_shards(queries, vectors[:4], 2)


def test_merge_runs_gives_back_the_unsharded_run():
    whole = RankedRun("dense", {"q1": [("a", 0.9), ("b", 0.5)], "q2": [], "q3": [("c", 0.7)]},
                      {"q1": 1.0, "q2": 2.0, "q3": 3.0})
    parts = [RankedRun("dense", {"q1": whole.results["q1"], "q2": []}, {"q1": 1.0, "q2": 2.0}),
             RankedRun("dense", {"q3": whole.results["q3"]}, {"q3": 3.0})]
    merged = pipeline.merge_runs(parts)
    assert merged == whole
    assert list(merged.results) == ["q1", "q2", "q3"]  # the order of the queries
    with pytest.raises(InputError, match="repeats query 'q3'"):
        pipeline.merge_runs(parts + [RankedRun("dense", {"q3": []})])
    with pytest.raises(InputError, match="'bm25' run, expected 'dense'"):
        pipeline.merge_runs([parts[0], RankedRun("bm25", {"q3": []})])
    with pytest.raises(InputError, match="at least one shard"):
        pipeline.merge_runs([])


def _configurations():
    from searcheval.rankers.configs import configurations_from

    return configurations_from({"configurations": {
        "web": {"kind": "http", "served": True, "params": {
            "url": "http://127.0.0.1:9/search?q={text}", "id": "hits[*].id", "concurrency": 3}},
        "bm25": {"kind": "bm25"}}}, "<test>")


def test_on_a_cluster_an_http_configuration_owns_lanes_per_shard_and_others_do_not():
    from searcheval.rankers.limits import Lanes

    queries = [Query(f"q{i}", f"text {i}") for i in range(15)]
    vectors = np.zeros((15, 1), dtype=np.float32)
    configurations = _configurations()
    web, bm25 = configurations["web"], configurations["bm25"]
    # threads: every kind in the same near-equal shards, sharing the process's limits
    for c in (web, bm25):
        shards = pipeline.configuration_shards(c, queries, vectors, 4, together=True)
        assert [(len(s.queries), s.lanes) for s in shards] == [(4, None)] * 3 + [(3, None)]
    # a cluster: the http configuration in at most `concurrency` (3) shards, each owning lanes,
    # the queries in proportion; bm25 has no limits to share
    shards = pipeline.configuration_shards(web, queries, vectors, 4, together=False)
    assert [(s.number, s.of, len(s.queries), s.lanes) for s in shards] == [
        (1, 3, 5, Lanes(0, 1, 3)), (2, 3, 5, Lanes(1, 2, 3)), (3, 3, 5, Lanes(2, 3, 3))]
    assert [q.id for s in shards for q in s.queries] == [q.id for q in queries]
    assert [(len(s.queries), s.lanes) for s in pipeline.configuration_shards(
        web, queries, vectors, 2, together=False)] == [(10, Lanes(0, 2, 3)), (5, Lanes(2, 3, 3))]
    assert [(len(s.queries), s.lanes) for s in pipeline.configuration_shards(
        bm25, queries, vectors, 2, together=False)] == [(8, None), (7, None)]
    with pytest.raises(InputError, match="one query vector per query"):
        pipeline.configuration_shards(web, queries, vectors[:4], 2, together=False)


def test_only_the_thread_pool_runs_the_shards_in_the_flows_process():
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner

    from flows.runners import shards_share_process

    assert shards_share_process(ThreadPoolTaskRunner())
    assert not shards_share_process(DaskTaskRunner(address="tcp://127.0.0.1:1"))
    assert not shards_share_process()  # outside a flow run: nothing is known to be shared


def test_the_execution_record_names_the_runner_the_shards_and_the_batch():
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner

    from flows.runners import build_task_runner, execution_record

    assert execution_record(4, 64, ThreadPoolTaskRunner()) == {
        "task_runner": "thread", "shards": 4, "embed_batch": 64}
    assert execution_record(2, 8, DaskTaskRunner(address="tcp://10.0.0.5:8786")) == {
        "task_runner": "dask", "shards": 2, "embed_batch": 8,
        "dask_address": "tcp://10.0.0.5:8786"}
    local = build_task_runner(RunnerSettings("dask", None, 3))  # what --task-runner dask starts
    assert execution_record(1, 256, local) == {
        "task_runner": "dask", "shards": 1, "embed_batch": 256, "dask_workers": 3}


def _batch(vectors, model="m", fingerprint="f", embedded=0, from_cache=0):
    return pipeline.EmbeddedTexts(model, fingerprint, np.asarray(vectors, dtype=np.float32),
                                  embedded, from_cache)


def test_join_batches_maps_each_text_to_its_vector_and_refuses_a_foreign_model():
    texts = ["x", "y", "z"]
    batches = [_batch([[1.0, 0.0], [0.0, 1.0]]), _batch([[0.6, 0.8]])]
    joined = pipeline.join_batches(texts, batches, "m", "f")
    assert {t: v.tolist() for t, v in joined.items()} == {
        "x": [1.0, 0.0], "y": [0.0, 1.0], "z": [np.float32(0.6).item(), np.float32(0.8).item()]}
    with pytest.raises(InputError, match="batch 1 was embedded with m .*every worker"):
        pipeline.join_batches(texts, [batches[0], _batch([[0.6, 0.8]], fingerprint="g")], "m", "f")
    with pytest.raises(InputError, match="2 vectors for 3 texts"):
        pipeline.join_batches(texts, batches[:1], "m", "f")


# --------------------------------------------------------------------------- runner settings


def test_the_runner_comes_from_the_flags_else_the_environment():
    assert runner_settings(environ={}) == RunnerSettings("thread")
    assert runner_settings(environ={"SEARCHEVAL_TASK_RUNNER": "dask"}) == \
        RunnerSettings("dask", None, 2)
    env = {"SEARCHEVAL_TASK_RUNNER": "dask", "SEARCHEVAL_DASK_ADDRESS": "tcp://10.0.0.5:8786",
           "SEARCHEVAL_DASK_WORKERS": "4"}
    assert runner_settings(environ=env) == RunnerSettings("dask", "tcp://10.0.0.5:8786", 4)
    assert runner_settings("thread", environ=env) == RunnerSettings("thread")  # the flag wins
    # an address alone means dask, a flag's address overrides the environment's runner
    assert runner_settings(environ={"SEARCHEVAL_DASK_ADDRESS": "tcp://h:8786"}).kind == "dask"
    assert runner_settings(address="tcp://h:1", environ={"SEARCHEVAL_TASK_RUNNER": "thread"}) \
        == RunnerSettings("dask", "tcp://h:1", 2)


@pytest.mark.parametrize("kwargs, env, where", [
    ({}, {"SEARCHEVAL_TASK_RUNNER": "ray"}, "field 'SEARCHEVAL_TASK_RUNNER'"),
    ({"kind": "thread", "address": "tcp://h:8786"}, {}, "field '--dask-address'"),
    ({"address": "tcp://h 8786"}, {}, "field '--dask-address'"),
    ({}, {"SEARCHEVAL_TASK_RUNNER": "dask", "SEARCHEVAL_DASK_WORKERS": "two"},
     "field 'SEARCHEVAL_DASK_WORKERS'"),
    ({"kind": "dask", "workers": 0}, {}, "field 'SEARCHEVAL_DASK_WORKERS'"),
])
def test_bad_runner_settings_are_refused_naming_the_setting(kwargs, env, where):
    with pytest.raises(InputError) as error:
        runner_settings(**kwargs, environ=env)
    assert str(error.value).startswith(where)


def test_a_bad_runner_flag_exits_2_before_anything_runs(tmp_path):
    # (no capsys: the first flow import sets up Prefect's console logging on the stderr of the
    # moment, and capsys closes its stream when the test ends; the message is checked above)
    code = main(["run", "--fixtures", str(ROOT / "fixtures"), "--no-baseline", "--output",
                 str(tmp_path / "out"), "--task-runner", "thread", "--dask-address", "tcp://h:1"])
    assert code == 2
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- the flow on Dask


def _run(output: Path, *extra: str) -> dict:
    code = main(["run", "--fixtures", str(ROOT / "fixtures"), "--no-baseline",
                 "--output", str(output), *extra])
    assert code == 0
    return json.loads((output / "metrics.json").read_text())


def _per_query(url: str, run_id: str) -> dict:
    with database.connect(url) as conn:
        rows = store.run_query_results(conn, run_id)
    return {(r["configuration"], r["query_id"], r["metric"]): r["value"] for r in rows}


@pytest.mark.slow
def test_a_local_dask_cluster_with_shards_and_small_batches_gives_identical_results(
        flow_env, monkeypatch, tmp_path):
    def no_local_model(self, texts):
        raise AssertionError("the flow process embedded texts: the batches did not run on Dask")

    # The cold run goes first, on Dask: the workers (processes of their own, not patched) embed
    # every text; the default run then finds them all in the cache. Vectors of the same text
    # differ in the last bits with the model's batch composition (padding), so the cache, which
    # keeps the first vector of a text for every later run, is what makes runs comparable.
    lines: list[str] = []  # the progress lines of the flow's process (issue 29: "0 texts")

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    keep = Keep(level=logging.INFO)
    progress_log = logging.getLogger("searcheval.progress")
    progress_log.addHandler(keep)
    level = progress_log.level
    progress_log.setLevel(logging.INFO)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(CachedEmbedder, "_encode", no_local_model)
            dask = _run(tmp_path / "dask", "--task-runner", "dask", "--shards", "2",
                        "--embed-batch", "8")
    finally:
        progress_log.removeHandler(keep)
        progress_log.setLevel(level)
    thread = _run(tmp_path / "thread")

    # the workers' own progress calls stay in their processes: the flow counted each batch and
    # shard as it finished, 18 documents + 15 queries embedded, 15 queries x 3 configurations
    assert any(line.startswith("embedding: 33 texts in ") for line in lines), lines
    assert any(line.startswith("searching: 45 queries in ") for line in lines), lines
    assert dask["what_ran"]["execution"] == {"task_runner": "dask", "shards": 2,
                                             "embed_batch": 8, "dask_workers": 2}
    assert thread["what_ran"]["execution"]["task_runner"] == "thread"

    assert dask["embeddings"] == {"model": "all-MiniLM-L6-v2", "documents": 18,
                                  "embedded": 18 + 15, "from_cache": 0}
    assert thread["embeddings"] == {"model": "all-MiniLM-L6-v2", "documents": 18,
                                    "embedded": 0, "from_cache": 18 + 15}
    for name in ("bm25", "dense", "fused"):
        assert dask["configurations"][name]["means"] == thread["configurations"][name]["means"]
        assert dask["configurations"][name]["by_category"] == \
            thread["configurations"][name]["by_category"]
        assert (tmp_path / "dask" / "runs" / f"{name}.trec").read_bytes() == \
            (tmp_path / "thread" / "runs" / f"{name}.trec").read_bytes()
    assert dask["coverage"] == thread["coverage"]
    assert (tmp_path / "dask" / "per_query.csv").read_bytes() == \
        (tmp_path / "thread" / "per_query.csv").read_bytes()
    per_query = _per_query(flow_env, dask["run_id"])
    assert len(per_query) > 3 * 15 and per_query == _per_query(flow_env, thread["run_id"])

    # the workers reached the test API: their task runs are recorded there, Completed
    expected = {f"embed-{i}" for i in range(1, 6)}  # ceil((18 + 15) / 8) = 5 batches
    expected |= {f"run-{c}-{s}of2" for c in ("bm25", "dense", "fused") for s in (1, 2)}
    _, runs = task_runs_of(dask["flow_run_id"], tuple(expected), whole_names=True)
    tasks = {name: run.state.type.value for name, run in runs.items()}
    assert {name: tasks.get(name) for name in expected} == dict.fromkeys(expected, "COMPLETED")


# --------------------------------------------------------------------------- http limits on Dask


@pytest.fixture(scope="module")
def dask_cluster():
    """A LocalCluster of 2 worker processes (one thread each) for this module, as
    `--task-runner dask` starts one, and a client of the test's own that records which worker
    ran which task (distributed's task stream). Both are closed when the module ends."""
    from distributed import Client

    from flows.runners import local_cluster

    cluster = local_cluster(n_workers=2, threads_per_worker=1, processes=True,
                            dashboard_address=":0")
    try:
        with Client(cluster) as client:
            client.get_task_stream()  # starts the scheduler's recording
            yield cluster, client
    finally:
        cluster.close()


@pytest.fixture
def service(example_service):
    example_service.set_knobs()
    yield example_service
    example_service.set_knobs()


def _http_file(tmp_path: Path, url: str, **params) -> Path:
    import yaml

    document = yaml.safe_load((ROOT / "examples" / "configurations" / "native.yaml").read_text())
    document["configurations"]["native"]["params"].update(base_url=url, retries=0, **params)
    path = tmp_path / "configurations.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _shards_on_dask(client, run) -> list[dict]:
    """The tasks the cluster ran during `run()`: worker and compute interval of each."""
    from distributed import get_task_stream

    with get_task_stream(client) as stream:
        run()
    tasks = []
    for record in stream.data:
        [compute] = [s for s in record["startstops"] if s["action"] == "compute"]
        tasks.append({"worker": record["worker"], "start": compute["start"],
                      "stop": compute["stop"]})
    return sorted(tasks, key=lambda t: t["start"])


def _ran_together(tasks: list[dict]) -> bool:
    """Two tasks on two different workers whose compute intervals overlap."""
    return any(a["worker"] != b["worker"] and a["start"] < b["stop"] and b["start"] < a["stop"]
               for i, a in enumerate(tasks) for b in tasks[i + 1:])


def _two_shards_on_the_cluster(tmp_path, cluster, client, service, path):
    """A run of the http configuration in `path` in two shards on the cluster: the shards' task
    records and the service's counts, once every query was answered (15, none failed)."""
    metrics: dict = {}

    def run():
        metrics.update(_run(tmp_path / "out", "--configurations-file", str(path),
                            "--task-runner", "dask", "--dask-address", cluster.scheduler_address,
                            "--shards", "2"))

    tasks = _shards_on_dask(client, run)
    stats = service.stats()
    assert metrics["failures"]["configurations"]["native"]["failed"] == 0
    assert stats["requests"] == 15 and stats["failed"] == 0
    return tasks, stats


@pytest.mark.slow
def test_an_http_concurrency_limit_holds_across_the_workers_of_a_cluster(
        flow_env, dask_cluster, service, tmp_path):
    cluster, client = dask_cluster
    # each answer takes 150 ms, so requests overlap: the service counts the most in flight
    service.set_knobs(delay_ms=150)
    tasks, stats = _two_shards_on_the_cluster(
        tmp_path, cluster, client, service, _http_file(tmp_path, service.url, concurrency=3))
    # two shards, one per worker process, running at the same time: a limit of 3 per process
    # would let up to 6 requests be in flight; the limit of the configuration holds, and is used
    assert len(tasks) == 2 and _ran_together(tasks), tasks
    assert stats["max_in_flight"] == 3


@pytest.mark.slow
def test_an_http_rate_limit_holds_across_the_workers_of_a_cluster(
        flow_env, dask_cluster, service, tmp_path):
    cluster, client = dask_cluster
    rate = 10.0
    service.set_knobs(delay_ms=50)
    tasks, stats = _two_shards_on_the_cluster(
        tmp_path, cluster, client, service,
        _http_file(tmp_path, service.url, concurrency=3, rate_limit=rate))
    assert len(tasks) == 2 and _ran_together(tasks), tasks
    # 15 requests at most 10 per second: in any second at most 10 + 1 start (the points of one
    # grid 0.1 s apart, one at each end of the window), as from a single process; a rate of 10
    # per worker would start them all within about 0.7 s
    arrived = sorted(r["received_s"] for r in stats["recent"])
    most = max(sum(1 for t in arrived if start <= t <= start + 1.0) for start in arrived)
    assert most <= rate + 1, arrived
    assert arrived[-1] - arrived[0] >= (len(arrived) - 1) / rate - 0.05, arrived
