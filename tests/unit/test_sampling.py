"""`searcheval queries sample`: normalised, de-duplicated, personal data excluded, reproducible
byte for byte per seed, provenance in the file, and a file the nightly's loader reads."""

import json
from pathlib import Path

import pytest

from searcheval.cli import main
from searcheval.io.fixtures import load_queries, queries_sample
from searcheval.io.traces import TraceTable, parse_trace
from searcheval.production.clicks import text_query_id
from searcheval.production.sampling import sample_queries


def traces(spec):
    """spec: [(query text, segment, how many traces)]"""
    out, k = [], 0
    for text, segment, times in spec:
        for _ in range(times):
            out.append(parse_trace({"trace_id": f"t{k}", "ts": f"2026-03-01T00:00:{k % 60:02d}Z",
                                    "query": text, "segment": segment,
                                    "retrieved_ids": ["a"]}))
            k += 1
    return TraceTable.from_traces(out, "traces.jsonl")


SPEC = [("OCR  API", "web", 5), ("ocr api", "web", 3), ("pdf to text", "web", 4),
        ("mail bob@example.com", "web", 9), ("order 123456", "app", 9),
        ("call +1 (555) 010-9999", "app", 2), ("weather", "app", 6), ("geo ip", "app", 1),
        ("translate", "web", 2)]


def test_top_normalises_dedupes_and_excludes_personal_data():
    sample = sample_queries(traces(SPEC), n=3, method="top")
    # "OCR  API" and "ocr api" are one query of 5 + 3 = 8 traces; the e-mail, the order number
    # and the phone number (9, 9, 2 traces) never compete
    assert [(q["text"], q["traffic"]) for q in sample.queries] == \
        [("ocr api", 8), ("pdf to text", 4), ("weather", 6)]
    assert sample.queries[0]["id"] == text_query_id("OCR API")
    counts = sample.provenance["counts"]
    assert counts["excluded_by"] == {"email": 1, "phone": 1, "number": 1}
    assert (counts["traces"], counts["candidates"], counts["sampled"]) == (41, 5, 3)


def test_stratified_shares_follow_traffic():
    # web (after exclusion): ocr api 8, pdf to text 4, translate 2 = 14 traces; app: weather 6,
    # geo ip 1 = 7. n = 3: quotas 3 * 14/21 = 2.0 and 3 * 7/21 = 1.0
    sample = sample_queries(traces(SPEC), n=3, method="top", stratify="segment")
    assert sample.provenance["counts"]["shares"] == {"app": 1, "web": 2}
    assert {(q["text"], q["stratum"]) for q in sample.queries} == \
        {("ocr api", "web"), ("pdf to text", "web"), ("weather", "app")}


@pytest.mark.parametrize("method", ["random", "pps"])
def test_a_seed_gives_the_same_file_byte_for_byte(method, tmp_path):
    table = traces([(f"query {i}", "web", 1 + i % 7) for i in range(60)])
    a = sample_queries(table, n=10, method=method, seed=3).to_json()
    b = sample_queries(table, n=10, method=method, seed=3).to_json()
    c = sample_queries(table, n=10, method=method, seed=4).to_json()
    assert a == b and a != c


def test_pps_prefers_heavy_queries():
    # one query of 500 traces among 50 of 1: with n = 5 it is (nearly) always drawn
    table = traces([("heavy", "web", 500)] + [(f"light {i}", "web", 1) for i in range(50)])
    hits = sum("heavy" in [q["text"] for q in sample_queries(table, n=5, method="pps",
                                                             seed=s).queries]
               for s in range(20))
    assert hits == 20


def test_the_cli_writes_a_golden_file_the_loader_reads(tmp_path, capsys):
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps({"trace_id": f"t{i}", "ts": "2026-03-01T00:00:00Z",
                                        "query": f"Query {i % 4}", "segment": "web",
                                        "retrieved_ids": ["a"]}) + "\n" for i in range(20)))
    out = tmp_path / "golden_queries.json"
    args = ["queries", "sample", "--traces", str(path), "--method", "pps", "--n", "3",
            "--seed", "7", "--output", str(out)]
    assert main(args) == 0
    first = out.read_bytes()
    assert main(args) == 0 and out.read_bytes() == first
    queries = load_queries(out)
    assert len(queries) == 3 and all(q.category == "paraphrase" for q in queries)
    sample = queries_sample(out)
    assert (sample["method"], sample["seed"], sample["counts"]["traces"]) == ("pps", 7, 20)
    assert main(["queries", "sample", "--traces", str(path), "--n", "3", "--exclude",
                 "([bad"]) == 2
    assert "--exclude" in capsys.readouterr().err.splitlines()[-1]


def test_a_nightly_folder_with_a_sampled_file_records_the_sample_in_its_notes(tmp_path):
    import shutil

    from searcheval.io.fixtures import load_fixtures

    root = Path(__file__).resolve().parents[2] / "fixtures"
    folder = tmp_path / "prod"
    folder.mkdir()
    shutil.copy(root / "catalog.json", folder / "catalog.json")
    sample = sample_queries(traces(SPEC), n=2, method="top", seed=5)
    (folder / "golden_queries.json").write_text(sample.to_json())
    resource = json.loads((root / "catalog.json").read_text())[0]["id"]
    rows = "".join(f"{q['id']},{resource},2,2026-03-01T00:00:00Z,ann\n" for q in sample.queries)
    (folder / "judgments.csv").write_text("query_id,resource_id,grade,judged_at,judge\n" + rows)
    collection = load_fixtures(folder)
    assert [q.text for q in collection.queries] == ["ocr api", "weather"]
    assert json.loads(collection.provenance["queries_sample"])["seed"] == 5
    assert any(n.startswith("golden queries sampled from production traces (traces.jsonl): "
                            "method top, seed 5") for n in collection.notes)
