"""The database layer against a real embedded Postgres + pgvector: migrations, catalog snapshot,
document vectors and dense search, evaluation history, connection errors."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from searcheval import store
from searcheval.errors import DatabaseError, InputError
from searcheval.store import database
from searcheval.store.database import Migration
from searcheval.types import Resource

pytestmark = pytest.mark.slow

EVIL = "'); DROP TABLE x; --"
DIM = 384
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


def resource(rid: str, name: str = "", **kw) -> Resource:
    return Resource(id=rid, name=name or f"name of {rid}", description=f"about {rid}", **kw)


def unit_vectors(n: int, seed: int, dim: int = DIM) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def table_names(conn) -> set[str]:
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {r[0] for r in rows}


# --------------------------------------------------------------------------- the embedded server


def test_a_thread_asking_for_the_embedded_server_while_another_opens_it_waits_for_it(
        monkeypatch):
    """A flow run's first tasks open the database from two threads at once (the model's cache
    lookup and the judgments). pgserver registers a server's handle before it has looked at the
    running server, and the second thread used to find that handle half-made (an AssertionError,
    retried by the task a second later: a warm `make run` lost a second to it). The server runs
    already, as on a warm run; the first thread's look at it is slowed to half a second."""
    directory = tempfile.mkdtemp(prefix="se-pg-race-", dir="/tmp")
    pgdata = Path(directory).resolve()
    pgserver = database._import_pgserver()
    instances = pgserver.PostgresServer._instances
    try:
        database.start_embedded(directory, keep_running=False)
        instances.pop(pgdata)  # as in a new process: the server runs, this one has no handle
        look = pgserver.PostgresServer.ensure_postgres_running

        def slow_look(self):
            time.sleep(0.5)
            look(self)

        monkeypatch.setattr(pgserver.PostgresServer, "ensure_postgres_running", slow_look)
        results, errors = [], []

        def start():
            try:
                results.append(database.start_embedded(directory, keep_running=False))
            except BaseException as exc:  # noqa: BLE001 - reported below with its traceback
                errors.append("".join(traceback.format_exception(exc)))

        first = threading.Thread(target=start)
        first.start()
        deadline = time.monotonic() + 30
        while pgdata not in instances and time.monotonic() < deadline:
            time.sleep(0.005)
        halfway = pgdata in instances and not results  # registered, not looked at yet
        second = threading.Thread(target=start)
        second.start()
        for thread in (first, second):
            thread.join(timeout=60)
        assert halfway  # the second thread did ask while the first was opening the server
        assert errors == []
        assert len(results) == 2 and results[0].get_uri() == results[1].get_uri()
        with database.connect(results[0].get_uri()) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        database.stop_embedded(directory)
        instances.pop(pgdata, None)
        shutil.rmtree(directory, ignore_errors=True)
        Path(directory + ".lock").unlink(missing_ok=True)


# --------------------------------------------------------------------------- migrations


def test_migrations_apply_once_and_are_recorded(new_database):
    with database.connect(new_database("migrate")) as conn:
        shipped = database.migrations()
        assert database.migrate(conn) == [m.name for m in shipped]  # 001_initial, 002_traces
        assert database.migrate(conn) == []
        assert database.applied_migrations(conn) == [m.version for m in shipped]
        assert {"schema_migrations", "resources", "embeddings", "doc_vectors", "eval_runs",
                "eval_metrics", "eval_query_results"} <= table_names(conn)
        assert "traces" not in table_names(conn)
        # the connection was opened before the vector type existed: migrate registered it
        store.save_catalog(conn, "c", [resource("a")])
        store.save_doc_vectors(conn, "c", "m", ["a"], unit_vectors(1, seed=0))
        assert [d for d, _ in store.dense_search(conn, "c", "m", unit_vectors(1, seed=0)[0], 1)
                ] == ["a"]


def test_upgrade_applies_only_the_new_migration_and_keeps_rows(new_database, monkeypatch):
    with database.connect(new_database("upgrade")) as conn:
        database.migrate(conn)
        store.save_catalog(conn, "kept", [resource("a"), resource("b")])
        shipped = database.migrations()
        upgrade = Migration(99, "099_test_upgrade.sql",
                            "ALTER TABLE resources ADD COLUMN note text DEFAULT 'new';")
        monkeypatch.setattr(database, "migrations", lambda: shipped + [upgrade])
        assert database.migrate(conn) == ["099_test_upgrade.sql"]
        assert database.applied_migrations(conn) == [m.version for m in shipped] + [99]
        rows = conn.execute("SELECT id, note FROM resources WHERE catalog = 'kept' ORDER BY id"
                            ).fetchall()
        assert rows == [("a", "new"), ("b", "new")]


def test_two_concurrent_migrations_apply_once(new_database):
    url = new_database("concurrent")
    results: list = []
    barrier = threading.Barrier(2)

    def run():
        with database.connect(url) as conn:
            barrier.wait()
            results.append(database.migrate(conn))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [[], [m.name for m in database.migrations()]]


def test_a_failing_migration_leaves_nothing_applied(new_database, monkeypatch):
    with database.connect(new_database("failing")) as conn:
        broken = Migration(2, "002_broken.sql", "CREATE TABLE half (id int); SELECT 1/0;")
        monkeypatch.setattr(database, "migrations", lambda: [
            Migration(1, "001_ok.sql", "CREATE TABLE first_step (id int);"), broken])
        with pytest.raises(psycopg.errors.DivisionByZero):
            database.migrate(conn)
        assert "first_step" not in table_names(conn)
        assert "half" not in table_names(conn)


# --------------------------------------------------------------------------- catalog


def test_save_catalog_counts_by_content_hash(conn):
    first = [resource("a"), resource("b"), resource("c")]
    assert store.save_catalog(conn, "counts", first) == {
        "added": 3, "changed": 0, "removed": 0, "unchanged": 0}
    second = [
        resource("a"),                                    # unchanged
        resource("b", name="renamed b"),                  # changed
        resource("d"),                                    # added; "c" removed
    ]
    assert store.save_catalog(conn, "counts", second) == {
        "added": 1, "changed": 1, "removed": 1, "unchanged": 1}
    assert store.load_catalog_hashes(conn, "counts") == {r.id: r.content_hash for r in second}
    assert store.save_catalog(conn, "counts", second) == {
        "added": 0, "changed": 0, "removed": 0, "unchanged": 3}


def test_settlement_changes_are_stored_though_the_hash_does_not_change(conn):
    before = resource("s", settled_30d=5, success_rate=0.5, price_usd=0.01, network="base",
                      asset="USDC", tags=("x", "y"), updated_at=T0)
    store.save_catalog(conn, "settle", [before])
    after = dataclasses.replace(before, settled_30d=9, success_rate=0.75)
    assert store.save_catalog(conn, "settle", [after]) == {
        "added": 0, "changed": 0, "removed": 0, "unchanged": 1}
    assert store.load_resources(conn, "settle") == [after]


def test_catalogs_are_separate(conn):
    store.save_catalog(conn, "left", [resource("same")])
    store.save_catalog(conn, "right", [resource("same", name="other")])
    store.save_catalog(conn, "left", [])
    assert store.load_catalog_hashes(conn, "left") == {}
    assert list(store.load_catalog_hashes(conn, "right")) == ["same"]


def test_a_failed_catalog_write_leaves_the_previous_catalog(conn):
    good = [resource("g1"), resource("g2")]
    store.save_catalog(conn, "atomic", good)
    bad = [resource("g1", name="changed"), resource("g3", name="nul \x00 byte")]
    with pytest.raises(psycopg.DataError):
        store.save_catalog(conn, "atomic", bad)
    assert store.load_resources(conn, "atomic") == good


def test_duplicate_ids_are_refused_naming_the_element(conn):
    with pytest.raises(InputError) as err:
        store.save_catalog(conn, "dupes", [resource("a"), resource("a")])
    assert err.value.field == "resources[1].id"
    assert store.load_catalog_hashes(conn, "dupes") == {}


def test_hostile_text_is_stored_and_searched_verbatim(conn):
    evil = Resource(id=EVIL, name=EVIL, description=EVIL, tags=(EVIL, "ok"), network=EVIL)
    other = resource("plain")
    assert store.save_catalog(conn, EVIL, [evil, other])["added"] == 2
    assert store.load_resources(conn, EVIL) == [evil, other]
    assert store.load_catalog_hashes(conn, EVIL) == {EVIL: evil.content_hash,
                                                     "plain": other.content_hash}
    vectors = unit_vectors(2, seed=1)
    store.save_doc_vectors(conn, EVIL, EVIL, [EVIL, "plain"], vectors)
    for exact in (False, True):
        hits = store.dense_search(conn, EVIL, EVIL, vectors[0], 1, exact=exact)
        assert [d for d, _ in hits] == [EVIL]
        assert hits[0][1] == pytest.approx(1.0, abs=1e-6)
    assert "x" not in table_names(conn) and "resources" in table_names(conn)


# --------------------------------------------------------------------------- document vectors


def test_doc_vectors_are_replaced_and_follow_the_catalog(conn):
    store.save_catalog(conn, "vec", [resource("a"), resource("b"), resource("c")])
    v = unit_vectors(3, seed=2)
    assert store.save_doc_vectors(conn, "vec", "m", ["a", "b", "c"], v) == 3
    assert {d for d, _ in store.dense_search(conn, "vec", "m", v[0], 10)} == {"a", "b", "c"}
    # replace: "b" dropped, "a" gets a new vector
    store.save_doc_vectors(conn, "vec", "m", ["a", "c"], np.stack([v[1], v[2]]))
    hits = store.dense_search(conn, "vec", "m", v[1], 10)
    assert [d for d, _ in hits][0] == "a" and {d for d, _ in hits} == {"a", "c"}
    # a resource removed from the catalog is removed from search
    store.save_catalog(conn, "vec", [resource("a"), resource("b")])
    assert [d for d, _ in store.dense_search(conn, "vec", "m", v[2], 10)] == ["a"]


def test_doc_vectors_given_as_rows_are_stored_as_the_matrix_is(conn):
    # the nightly hands the embedding batches' rows over without stacking them into one matrix
    ids = [f"r{i}" for i in range(6)]
    store.save_catalog(conn, "rows", [resource(i) for i in ids])
    v = unit_vectors(6, seed=6)
    assert store.save_doc_vectors(conn, "rows", "m", ids, list(v)) == 6
    for i, doc in enumerate(ids):
        hits = store.dense_search(conn, "rows", "m", v[i], 1, exact=True)
        assert hits[0][0] == doc and hits[0][1] == pytest.approx(1.0, abs=1e-6)
    refused = {"a float64 row": [v[0], v[1].astype(np.float64)],
               "rows of two lengths": [v[0], v[1][:-1]],
               "a non-finite component": [v[0], np.full(DIM, np.nan, dtype=np.float32)],
               "one row short": [v[0]]}
    for case, rows in refused.items():
        with pytest.raises(InputError) as err:
            store.save_doc_vectors(conn, "rows", "m", ids[:2], rows)
        assert err.value.field in ("vectors", "vectors[1]"), case
    assert store.count_doc_vectors(conn, "rows", "m", DIM) == 6  # nothing written by a refusal


def test_doc_vectors_must_name_stored_resources(conn):
    store.save_catalog(conn, "fk", [resource("a")])
    with pytest.raises(InputError) as err:
        store.save_doc_vectors(conn, "fk", "m", ["a", "ghost"], unit_vectors(2, seed=3))
    assert err.value.field == "ids" and "ghost" in str(err.value)
    assert store.count_doc_vectors(conn, "fk", "m", DIM) == 0


def test_similarity_is_cosine_and_ordered(conn):
    ids = [f"d{i}" for i in range(20)]
    store.save_catalog(conn, "cos", [resource(i) for i in ids])
    docs = unit_vectors(20, seed=4)
    store.save_doc_vectors(conn, "cos", "m", ids, docs)
    q = unit_vectors(1, seed=5)[0]
    expected = sorted(zip(ids, (docs @ q).tolist()), key=lambda p: -p[1])[:5]
    for exact in (False, True):
        hits = store.dense_search(conn, "cos", "m", q, 5, exact=exact)
        assert [d for d, _ in hits] == [d for d, _ in expected]
        assert [s for _, s in hits] == pytest.approx([s for _, s in expected], abs=1e-6)


def test_hnsw_index_is_used_and_exact_search_avoids_it(conn):
    ids = [f"p{i}" for i in range(30)]
    store.save_catalog(conn, "plan", [resource(i) for i in ids])
    store.save_doc_vectors(conn, "plan", "m", ids, unit_vectors(30, seed=6))
    q = unit_vectors(1, seed=7)[0]
    assert "Index Scan using doc_vectors_hnsw_384" in store.dense_search_plan(conn, "plan", "m",
                                                                              q, 10)
    assert "hnsw" not in store.dense_search_plan(conn, "plan", "m", q, 10, exact=True)


def test_small_catalog_beside_a_big_one_falls_back_to_exact(conn):
    rng = np.random.default_rng(8)
    q = unit_vectors(1, seed=9)[0]
    crowd = q + 0.05 * rng.normal(size=(200, DIM)).astype(np.float32)  # all near q
    crowd /= np.linalg.norm(crowd, axis=1, keepdims=True)
    big_ids = [f"b{i}" for i in range(200)]
    store.save_catalog(conn, "big", [resource(i) for i in big_ids])
    store.save_doc_vectors(conn, "big", "m", big_ids, crowd)
    store.save_catalog(conn, "small", [resource("s0"), resource("s1"), resource("s2")])
    far = unit_vectors(3, seed=10)
    store.save_doc_vectors(conn, "small", "m", ["s0", "s1", "s2"], far)
    # the index alone: its 40 candidates (ef_search) are all in "big", filtered away
    assert store.hnsw_search(conn, "small", "m", q, 3) == []
    exact = store.dense_search(conn, "small", "m", q, 3, exact=True)
    assert [d for d, _ in exact] == sorted(["s0", "s1", "s2"], key=lambda d: -far[int(d[1])] @ q)
    # the search notices the short answer and repeats it exactly
    assert store.dense_search(conn, "small", "m", q, 3) == exact


def test_other_dimensions_are_searched_exactly(conn):
    store.save_catalog(conn, "dim8", [resource("a"), resource("b")])
    v = unit_vectors(2, seed=11, dim=8)
    store.save_doc_vectors(conn, "dim8", "small-model", ["a", "b"], v)
    assert [d for d, _ in store.dense_search(conn, "dim8", "small-model", v[1], 2)] == ["b", "a"]


# --------------------------------------------------------------------------- evaluation history


def run_row(run_id: str, started: datetime, passed: bool = True) -> dict:
    return {"run_id": run_id, "flow_run_id": None, "started_at": started,
            "finished_at": started + timedelta(seconds=30), "source": "fixtures",
            "input_hashes": {"catalog": "ab" * 32}, "model": "all-MiniLM-L6-v2",
            "gate_passed": passed, "summary": {"queries": 2}}


def test_save_evaluation_and_read_history(conn):
    metrics = [
        {"configuration": "fused", "category": "all", "metric": "ndcg@10", "value": 0.75,
         "ci_low": 0.5, "ci_high": 0.875, "n": 2},
        {"configuration": "bm25", "category": "all", "metric": "ndcg@10", "value": 0.5},
    ]
    queries = [
        {"configuration": "fused", "query_id": "q1", "category": "paraphrase",
         "metric": "ndcg@10", "value": 1.0},
        {"configuration": "fused", "query_id": EVIL, "category": "adversarial",
         "metric": "ndcg@10", "value": 0.5},
    ]
    store.save_evaluation(conn, run_row("r-old", T0), metrics, queries)
    store.save_evaluation(conn, run_row("r-new", T0 + timedelta(days=1), passed=False), [], [])
    runs = store.last_runs(conn, 2)
    assert [r["run_id"] for r in runs] == ["r-new", "r-old"]
    assert runs[1]["input_hashes"] == {"catalog": "ab" * 32}
    assert runs[1]["summary"] == {"queries": 2} and runs[0]["gate_passed"] is False
    assert [r["run_id"] for r in store.last_runs(conn, 1)] == ["r-new"]
    assert store.run_metrics(conn, "r-old") == [
        {"run_id": "r-old", "configuration": "bm25", "category": "all", "metric": "ndcg@10",
         "value": 0.5, "ci_low": None, "ci_high": None, "n": None},
        {"run_id": "r-old", "configuration": "fused", "category": "all", "metric": "ndcg@10",
         "value": 0.75, "ci_low": 0.5, "ci_high": 0.875, "n": 2},
    ]
    assert [(r["query_id"], r["value"]) for r in store.run_query_results(conn, "r-old")] == [
        (EVIL, 0.5), ("q1", 1.0)]


def test_a_failed_evaluation_write_leaves_nothing(conn):
    row = {"configuration": "fused", "query_id": "q1", "category": "all", "metric": "mrr",
           "value": 1.0}
    with pytest.raises(InputError) as err:
        store.save_evaluation(conn, run_row("r-dup", T0 - timedelta(days=9)),
                              [{"configuration": "fused", "category": "all", "metric": "mrr",
                                "value": 1.0}],
                              [row, dict(row)])  # the same (run, configuration, query, metric)
    assert err.value.field == "run_id"
    assert store.run_metrics(conn, "r-dup") == []
    assert "r-dup" not in [r["run_id"] for r in store.last_runs(conn, 100)]


def test_evaluation_rows_are_checked(conn):
    with pytest.raises(InputError) as err:
        store.save_evaluation(conn, run_row("r-bad", T0), [{"configuration": "fused",
                              "category": "all", "metric": "mrr", "value": "high"}], [])
    assert err.value.field == "metric_rows[0].value"
    with pytest.raises(InputError) as err:
        store.last_runs(conn, 0)
    assert err.value.field == "n"


# --------------------------------------------------------------------------- connecting


def test_connection_error_names_host_and_database_not_the_password():
    url = "postgresql://alice:s3cret-pw@127.0.0.1:1/evaldb"
    with pytest.raises(DatabaseError) as err:
        database.connect(url, attempts=2, backoff_s=0.01)
    message = str(err.value)
    assert "127.0.0.1:1" in message and "evaldb" in message and "2 attempt(s)" in message
    assert "s3cret-pw" not in "".join(traceback.format_exception(err.value))
    assert database.describe(url) == "alice@127.0.0.1:1/evaldb"
    assert "s3cret-pw" not in database.describe("host=db port=5 dbname=x password=s3cret-pw")


def test_connect_retries_operational_errors(database_url, monkeypatch):
    real = psycopg.connect
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) < 3:
            raise psycopg.OperationalError("the database system is starting up")
        return real(*args, **kwargs)

    monkeypatch.setattr(database.psycopg, "connect", flaky)
    with database.connect(database_url, attempts=3, backoff_s=0.01) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert len(calls) == 3


def test_resolve_url_prefers_argument_then_environment(monkeypatch):
    monkeypatch.setenv(database.ENV_URL, "postgresql://env-host/envdb")
    assert database.resolve_url("postgresql://arg-host/argdb") == "postgresql://arg-host/argdb"
    assert database.resolve_url() == "postgresql://env-host/envdb"


START_EMBEDDED = """
import sys
from searcheval.store import database
url = database.resolve_url()
with database.connect(url) as conn:
    database.migrate(conn)
    print(url)
"""


def test_embedded_server_starts_once_for_two_processes_in_a_long_directory():
    # a working directory whose socket path would be too long: pgserver puts the socket in a
    # short directory under the runtime dir instead. Not under pytest's tmp_path: pytest resets
    # /tmp/pytest-of-<user> to mode 0700, which locks the server's own user (pgserver) out.
    base = Path(tempfile.mkdtemp(prefix="se-long-", dir="/tmp"))
    cwd = base / ("d" * 90)
    cwd.mkdir()
    assert len(str(cwd / ".searcheval" / "pg" / ".s.PGSQL.5432")) > 108
    env = {k: v for k, v in os.environ.items() if k != database.ENV_URL}
    env["PYTHONPATH"] = str(Path(database.__file__).parents[2])
    procs = [subprocess.Popen([sys.executable, "-c", START_EMBEDDED], cwd=cwd, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    socket_dir = None
    try:
        outputs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [err for _, err in outputs]
        urls = {out.strip() for out, _ in outputs}
        assert len(urls) == 1
        url = urls.pop()
        socket_dir = Path(conninfo_to_dict(url)["host"])
        assert len(str(socket_dir)) < 80 and not socket_dir.is_relative_to(cwd)
        with database.connect(url) as conn:
            assert database.applied_migrations(conn) == [m.version for m in database.migrations()]
            # set on the new folder by whichever process made it, the other one waiting
            assert conn.execute("SHOW shared_buffers").fetchone()[0] == "32MB"
    finally:
        stopped = database.stop_embedded(cwd / ".searcheval" / "pg")
        shutil.rmtree(base, ignore_errors=True)
        if socket_dir is not None and socket_dir.is_dir() and not any(socket_dir.iterdir()):
            socket_dir.rmdir()  # pgserver's short socket directory, empty once stopped
    assert stopped


def test_the_embedded_servers_shared_buffers_follow_the_setting_and_keep_the_data(monkeypatch):
    base = Path(tempfile.mkdtemp(prefix="se-settings-", dir="/tmp"))
    pgdata = base / "pg"
    try:
        monkeypatch.setenv("SEARCHEVAL_PG_SHARED_BUFFERS", "48MB")
        server = database.start_embedded(pgdata, keep_running=False)
        with database.connect(server.get_uri()) as conn:
            assert conn.execute("SHOW shared_buffers").fetchone()[0] == "48MB"
            conn.execute("CREATE TABLE kept (x int)")
            conn.execute("INSERT INTO kept VALUES (7)")
        pid = server.get_postmaster_info().pid
        assert database.start_embedded(pgdata, keep_running=False).get_postmaster_info().pid \
            == pid  # the same settings: the running server, not restarted
        monkeypatch.delenv("SEARCHEVAL_PG_SHARED_BUFFERS")  # the default, 32MB: restarted once
        again = database.start_embedded(pgdata, keep_running=False)
        assert again.get_postmaster_info().pid != pid
        with database.connect(again.get_uri()) as conn:
            assert conn.execute("SHOW shared_buffers").fetchone()[0] == "32MB"
            assert conn.execute("SELECT x FROM kept").fetchall() == [(7,)]
        monkeypatch.setenv("SEARCHEVAL_PG_SHARED_BUFFERS", "lots")
        with pytest.raises(DatabaseError, match="SEARCHEVAL_PG_SHARED_BUFFERS='lots': expected "
                                                "a size such as 32MB"):
            database.start_embedded(pgdata, keep_running=False)
    finally:
        database.stop_embedded(pgdata)
        shutil.rmtree(base, ignore_errors=True)


def test_a_server_stopped_while_its_old_postmaster_still_exits_is_started_again():
    """`pg_ctl stop` returns once postmaster.pid is gone, maybe before the old postmaster has
    exited. A handle this process cached must not then pass for a running server (the fault
    tests met it: the restart returned the dead handle, and every connection found no socket)."""
    import psutil

    import pgserver

    base = Path(tempfile.mkdtemp(prefix="se-restart-", dir="/tmp"))
    pgdata = base / "pg"
    again = None
    exiting = subprocess.Popen(["sleep", "120"])  # stands for the old postmaster, still exiting
    try:
        server = database.start_embedded(pgdata, keep_running=False)
        old_pid = server.get_postmaster_info().pid
        pgserver.pg_ctl(["-w", "stop", "-m", "immediate"], pgdata=pgdata,
                        user="pgserver" if os.geteuid() == 0 else None)
        server.get_postmaster_info().process = psutil.Process(exiting.pid)
        again = database.start_embedded(pgdata, keep_running=False)
        assert again.get_postmaster_info().pid != old_pid
        with database.connect(again.get_uri()) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        if again is not None:
            again.cleanup()
        exiting.kill()
        exiting.wait()
        shutil.rmtree(base, ignore_errors=True)
