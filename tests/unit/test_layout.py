"""The package's shape: no import circle, the library never imports Prefect or the project's
flows/ and tasks/, `import searcheval` stays light, every package says what lives in it, and only
`searcheval` is installed into site-packages."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "searcheval"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(path: Path) -> set[str]:
    """Every searcheval module `path` imports, at module level or inside a function (a lazy import
    is still a dependency). `from pkg import sub` names the submodule when `sub` is one."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return {name for name in found if name in MODULES}


def test_no_import_circle():
    graph = {name: imports_of(path) - {name} for name, path in MODULES.items()}
    # a package's __init__ re-exporting its own modules is not a circle: drop edges from a
    # module to the package that contains it (Python imports the parent first anyway)
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not name.startswith(d + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert len(graph) > 40  # the walk saw the whole package


def package_of(module: str) -> str:
    """`searcheval.io.mapped` -> `io`; a top-level module (`searcheval.types`) is its own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_two_packages_import_each_other():
    # the package-level graph: an edge io -> store for any module of io importing one of store
    # (lazily too); a circle of packages is refused as a circle of modules is
    edges: dict[str, dict[str, str]] = {}
    for name, path in MODULES.items():
        for dep in imports_of(path):
            a, b = package_of(name), package_of(dep)
            if a and b and a != b and b in PACKAGES:
                edges.setdefault(a, {}).setdefault(b, f"{name} imports {dep}")
    pairs = sorted(f"{a} <-> {b}: {edges[a][b]}; {edges[b][a]}"
                   for a in edges for b in edges[a] if a < b and a in edges.get(b, {}))
    assert pairs == []
    assert {"store", "judging", "evaluation", "cli"} <= set(edges)  # the walk saw the packages

    # and no longer circle of packages either
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(edges.get(node, {})):
            if state.get(dep) == 1:
                pytest.fail("package circle: " + " -> ".join(path[path.index(dep):] + [node, dep]))
            if dep not in state:
                visit(dep, path + [node])
        state[node] = 2

    for package in sorted(edges):
        if package not in state:
            visit(package, [])


PACKAGES = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def test_the_library_never_imports_prefect_nor_the_projects_flows_and_tasks():
    offenders = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{name}: {m}" for m in modules
                          if m.split(".")[0] in ("prefect", "prefect_dask", "flows", "tasks")]
    assert offenders == []


def test_import_searcheval_is_light():
    code = ("import sys, time; t = time.perf_counter(); import searcheval; "
            "elapsed = time.perf_counter() - t; "
            "heavy = [m for m in ('prefect', 'torch', 'great_expectations', 'psycopg', 'pandas', "
            "'sentence_transformers', 'numpy') if m in sys.modules]; print(elapsed, heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split(maxsplit=1)
    assert out[1].strip() == "[]"
    assert float(out[0]) < 0.3


def test_the_public_api_resolves():
    import searcheval

    for name in searcheval.__all__:
        assert getattr(searcheval, name) is not None, name
    with pytest.raises(AttributeError):
        searcheval.no_such_thing  # noqa: B018


def test_every_package_says_what_lives_there():
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, init


@pytest.mark.slow
def test_the_wheel_installs_only_searcheval(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("searcheval-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"searcheval"}
    assert "searcheval/store/migrations/001_initial.sql" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "searcheval = searcheval.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
