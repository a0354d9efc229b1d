"""`searcheval benchmark wands` without running a nightly: what it refuses, how it measures the
memory of a process tree, and how it turns figures into goals."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from searcheval.bench.run import STAGE_NAMES
from searcheval.bench.wands import TreeMemory, report, run_measured
from searcheval.cli import main


def test_the_cli_refuses_impossible_sizes_and_a_model_without_a_model(capsys):
    assert main(["benchmark", "wands", "--products", "2", "--queries", "2", "--labels", "5"]) == 2
    assert "expected at most --products x --queries labels" in capsys.readouterr().err
    assert main(["benchmark", "wands", "--no-model", "--configurations", "bm25,dense"]) == 2
    assert "--no-model runs bm25 only" in capsys.readouterr().err
    assert main(["benchmark", "wands", "--warm-runs", "0"]) == 2


def test_the_peak_memory_counts_the_children_of_the_tree(tmp_path):
    # a parent holding ~20 MB starts a child holding ~150 MB: the tree's peak holds both
    child = "import time; b = bytearray(150 * 2**20); b[::4096] = b'x' * len(b[::4096]); " \
            "time.sleep(1.5)"
    parent = ("import subprocess, sys; a = bytearray(20 * 2**20); a[::4096] = b'y' * "
              f"len(a[::4096]); subprocess.run([sys.executable, '-c', {child!r}])")
    done = run_measured([sys.executable, "-c", parent], tmp_path, {}, tmp_path)
    assert done["peak_rss"] > 170 * 2**20, done["peak_rss"]
    assert 0 < done["peak_pss"] <= done["peak_rss"]
    assert 1.4 < done["wall_s"] < 30


def test_the_cpu_of_the_tree_is_its_own_and_the_rest_is_the_machine_s(tmp_path):
    # a child spins until it has used 1.2 s of CPU (its own clock, not the wall's): the pass
    # counts at least the 1.0 s sampled before its last 0.2 s, and no more than it could use
    spin = ("import time\nwhile time.process_time() < 1.2:\n    pass\ntime.sleep(0.5)")
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {spin!r}])"
    done = run_measured([sys.executable, "-c", parent], tmp_path, {}, tmp_path)
    cpu = done["cpu"]
    assert 1.0 <= cpu["own_s"] <= 2 * done["wall_s"], (cpu, done["wall_s"])
    # the spinning child is neither the measured process nor a Postgres
    assert cpu["rest_s"] >= 1.0 and cpu["postgres_s"] == 0.0
    assert cpu["own_s"] == pytest.approx(cpu["process_s"] + cpu["postgres_s"] + cpu["rest_s"])
    assert cpu["others_s"] >= 0 and cpu["stolen_s"] >= 0


def test_a_zombie_and_a_gone_process_hold_no_memory():
    """A process that has exited but is not reaped yet (its status has no VmRSS line) and one
    reaped (no /proc entry) both count 0, not an error that would end the sampler."""
    from searcheval.bench import wands

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # exited, not reaped: a zombie
        with open(f"/proc/{child.pid}/stat", "rb") as fh:
            if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                break
        time.sleep(0.05)
    assert wands._rss(child.pid) == 0
    child.wait()
    assert wands._rss(child.pid) == 0 and wands._pss(child.pid) == 0


def test_rss_comes_from_the_counters_and_pss_is_walked_only_now_and_then(monkeypatch):
    """RSS every sample from /proc/PID/status (what smaps_rollup's walk adds up, to a few
    pages); PSS, a walk of every mapping, at the first sample and then not again within a
    second while no new peak comes."""
    from searcheval.bench import wands

    holder = subprocess.Popen([sys.executable, "-c",
                               "import sys, time; b = bytearray(100 * 2**20); "
                               "b[::4096] = b'x' * len(b[::4096]); print(flush=True); "
                               "time.sleep(5)"], stdout=subprocess.PIPE)
    try:
        holder.stdout.readline()  # its 100 MB are touched
        walked = {}
        with open(f"/proc/{holder.pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                walked[line.split(b":")[0]] = int(line.split()[1]) * 1024 if b"kB" in line else 0
        counted = wands._rss(holder.pid)
        assert counted > 100 * 2**20
        assert abs(counted - walked[b"Rss"]) < 2 * 2**20, (counted, walked[b"Rss"])

        reads = []
        real = wands._pss
        monkeypatch.setattr(wands, "_pss", lambda pid: reads.append(pid) or real(pid))
        memory = TreeMemory(holder.pid)
        for _ in range(10):  # well within a second, the memory steady
            memory.sample()
        assert reads == [holder.pid]
        assert 90 * 2**20 < memory.peak_pss <= memory.peak_rss
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_a_process_alone_is_measured_alone():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"])
    try:
        memory = TreeMemory(sleeper.pid)
        memory.sample()
        assert 1 * 2**20 < memory.peak_rss < 150 * 2**20
    finally:
        sleeper.wait()


def test_a_server_that_left_the_tree_is_counted_once_named():
    """The embedded Postgres a cold run starts daemonizes (its parent becomes pid 1): the tree
    walk misses it, the `servers` lookup at each sample does not. A detached process holding
    ~100 MB, named by the lookup, adds ~100 MB to the peak."""
    holder = subprocess.Popen([sys.executable, "-c",
                               "import time; b = bytearray(100 * 2**20); "
                               "b[::4096] = b'x' * len(b[::4096]); time.sleep(3)"],
                              start_new_session=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    try:
        import time

        time.sleep(1)  # the holder has touched its 100 MB
        alone = TreeMemory(sleeper.pid)
        alone.sample()
        named = TreeMemory(sleeper.pid, servers=lambda: (holder.pid,))
        named.sample()
        assert alone.peak_rss < 50 * 2**20, alone.peak_rss
        assert named.peak_rss > alone.peak_rss + 90 * 2**20, (named.peak_rss, alone.peak_rss)
    finally:
        sleeper.wait()
        holder.wait()


def _run(wall, validate, peak, embedded=0, embedding_s=None, model_s=None, cpu=None):
    stages = {"start": 0.1, "validate": validate, "flow_steps": wall - 0.1 - validate}
    return {"wall_s": wall, "peak_rss": peak, "peak_pss": peak // 2, "stages": stages,
            "embeddings": {"embedded": embedded}, "embedding_s": embedding_s,
            "model_s": model_s, "cpu": cpu}


def test_the_goals_follow_the_figures():
    lines: list[str] = []
    figures = {"texts": 100, "server_stopped": True,
               "raw": {"encode_s": 10.0, "wall_s": 14.0, "peak_rss": 2**29},
               "cold": _run(90.0, 4.0, 2**30, 100, 10.5),
               "warm": [_run(20.0, 0.0, 2**30), _run(70.0, 0.0, 2**30), _run(30.0, 0.0, 2**30)]}
    report(figures, warm_runs=3, embeds=True, stage_names=STAGE_NAMES, out=lines.append)
    assert figures["warm_s"] == 30.0 and figures["validate_s"] == 4.0
    assert figures["embed_ratio"] == 1.05
    assert figures["goal_met"], lines
    text = "\n".join(lines)
    assert "goal: cold embedding within 1.1x of raw sentence-transformers: 10.5 s against " \
           "10.0 s, 1.05x (100 texts): met" in text
    figures["cold"] = _run(90.0, 5.5, 3 * 2**30, 100, 12.0)
    lines.clear()
    report(figures, warm_runs=3, embeds=True, stage_names=STAGE_NAMES, out=lines.append)
    assert not figures["goal_met"]
    text = "\n".join(lines)
    assert "the validation step under 5 s: 5.50 s" in text and "MISSED" in text
    assert "peak memory under 2 GiB: 3072 MiB" in text
    assert "1.20x (100 texts): MISSED" in text


def test_the_report_splits_the_embedding_and_shows_what_the_machine_did_meanwhile():
    lines: list[str] = []
    cpu = {"own_s": 170.0, "process_s": 150.0, "postgres_s": 4.0, "rest_s": 16.0,
           "others_s": 12.5, "stolen_s": 3.0}
    figures = {"texts": 100, "server_stopped": True,
               "raw": {"encode_s": 80.0, "wall_s": 88.0, "peak_rss": 2**29,
                       "cpu": {"own_s": 160.0, "process_s": 160.0, "postgres_s": 0.0,
                               "rest_s": 0.0, "others_s": 1.5, "stolen_s": 0.0}},
               "cold": {**_run(120.0, 4.0, 2**30, 100, 86.0, 82.0, cpu),
                        # four batches of 20, 21, 22 and 22.5 s, 0.5 s apart each
                        "embed_batches": [(0.0, 20.0), (20.5, 41.5), (42.0, 64.0),
                                          (64.5, 87.0)]},
               "warm": [_run(20.0, 0.0, 2**30, cpu={"own_s": 25.0, "process_s": 20.0,
                                                     "postgres_s": 2.0, "rest_s": 3.0,
                                                     "others_s": 0.5, "stolen_s": 0.0})]}
    report(figures, warm_runs=1, embeds=True, stage_names=STAGE_NAMES, out=lines.append)
    text = "\n".join(lines)
    # 86 / 80 = 1.075 for the goal; 82 / 80 = 1.025 in the model; 86 - 82 = 4.0 s around it
    assert "86.0 s against 80.0 s, 1.07x (100 texts): met" in text
    assert "of its 86.0 s: 82.0 s in the model (1.02x raw), 4.0 s around it" in text
    assert figures["model_ratio"] == 82.0 / 80.0
    # median of 20, 21, 22, 22.5: 21.5; halves (20 + 21) / 2 and (22 + 22.5) / 2; 3 x 0.5 s
    assert ("4 batches (task runs, seconds): the first 20.0, median 21.5, the last 22.5; the "
            "first half 20.5 on average, the second 22.2; 1.5 s between them in all") in text
    assert ("| raw sentence-transformers        |     88.0 |    160.0 |      0.0 |      0.0 |"
            "      1.5 |      0.0 |") in lines
    assert ("| searcheval run, cold             |    120.0 |    150.0 |      4.0 |     16.0 |"
            "     12.5 |      3.0 |") in lines
    assert ("| searcheval run, warm 1           |     20.0 |     20.0 |      2.0 |      3.0 |"
            "      0.5 |      0.0 |") in lines
