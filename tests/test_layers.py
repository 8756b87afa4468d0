"""The package's layers, read from its imports: no module imports a higher layer, and no import cycles.

The layers and what each owns are in docs/architecture.md.  Every import counts, also one inside a
function (a lazy import is still a dependency), in ``entropy_lens/`` and ``benchmarks/``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from workflow_tiny import REPO

ROOTS = ("entropy_lens", "benchmarks")
# Lowest first; a module may import its own layer and the layers before it.
LAYERS = (
    ("core", ("entropy_lens.core",)),
    ("store", ("entropy_lens.store",)),
    ("model", ("entropy_lens.model",)),
    ("prompts", ("entropy_lens.prompts",)),
    ("lens", ("entropy_lens.lens",)),
    ("answers", ("entropy_lens.answers",)),
    ("skipping", ("entropy_lens.skipping",)),
    ("analysis", ("entropy_lens.analysis",)),
    ("verdicts", ("entropy_lens.verdicts",)),
    ("workflow", ("entropy_lens.workflow",)),
    # The package root is the public API: it re-exports the model and lens layers, so it sits on top and
    # is matched by its own name only (as a prefix it would hold every module and hide a missing layer).
    ("faces", ("entropy_lens.cli", "entropy_lens.plots", "entropy_lens")),
    ("benchmarks", ("benchmarks",)),
)
PACKAGE = "entropy_lens"
# The top-level folders of entropy_lens that hold code: each must be a layer, or (cli/, plots/) a package of the faces
# (data/ holds no modules).
PACKAGE_FOLDERS = {
    "analysis",
    "answers",
    "cli",
    "core",
    "lens",
    "model",
    "plots",
    "prompts",
    "skipping",
    "store",
    "verdicts",
    "workflow",
}


def module_files(repo: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module under :data:`ROOTS`."""
    modules = {}
    for root in ROOTS:
        for path in sorted((repo / root).rglob("*.py")):
            parts = path.relative_to(repo).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Every dotted name ``module`` imports: ``import a.b`` gives ``a.b``, ``from a import b`` gives ``a.b``.

    Imports for type annotations only (``if TYPE_CHECKING:``) count too: they never run, but a reader
    still has to hold both modules in mind, and a circle through them is a circle in the design.
    """
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
                base = ".".join([*anchor, base] if base else anchor)
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of :data:`ROOTS` it imports (``from pkg import name`` resolves to the
    module ``pkg.name`` when there is one, else to ``pkg``).  Benchmarks run as scripts from their
    folder, so there ``import bench_lens`` names ``benchmarks.bench_lens``."""
    graph = {}
    for module, path in modules.items():
        targets = set()
        for name in imported_names(module, path):
            folder = module.rpartition(".")[0]
            if folder == "benchmarks" and f"{folder}.{name.partition('.')[0]}" in modules:
                name = f"{folder}.{name}"
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def layer_of(module: str) -> int:
    """Index in :data:`LAYERS` of the layer holding ``module`` (the longest matching prefix)."""
    best, index = "", None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module.startswith(prefix + ".") and prefix != PACKAGE
            if (module == prefix or inside) and len(prefix) > len(best):
                best, index = prefix, i
    if index is None:
        raise ValueError(f"module {module!r} is in no layer; add its package to LAYERS and docs/architecture.md")
    return index


def upward_imports(graph: Mapping[str, set[str]]) -> list[str]:
    """``importer -> imported`` for every import of a higher layer."""
    return [
        f"{src} ({LAYERS[layer_of(src)][0]}) -> {dst} ({LAYERS[layer_of(dst)][0]})"
        for src, targets in sorted(graph.items())
        for dst in sorted(targets)
        if layer_of(dst) > layer_of(src)
    ]


def reachable(graph: Mapping[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others (``start`` itself only via a cycle)."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The sets of modules that import each other, directly or through others, each sorted."""
    reach = {module: reachable(graph, module) for module in graph}
    cycles = {
        tuple(sorted(other for other in reach[module] if module in reach[other]))
        for module in graph
        if module in reach[module]
    }
    return sorted(list(cycle) for cycle in cycles)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(module_files(REPO))


def test_every_folder_of_the_package_is_a_layer():
    folders = {p.name for p in (REPO / "entropy_lens").iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert folders == PACKAGE_FOLDERS


def test_every_module_is_in_a_layer(graph):
    for module in graph:
        layer_of(module)


def test_no_module_imports_a_higher_layer(graph):
    assert upward_imports(graph) == []


def test_no_import_cycles(graph):
    assert import_cycles(graph) == []


def test_the_graph_reads_real_imports(graph):
    # Imports of each form: from-import of a module, from-import of a name, a lazy import in a function.
    assert "entropy_lens.store.schema" in graph["entropy_lens.lens.vision"]
    assert "entropy_lens.model.lens_model" in graph["entropy_lens.model.generation"]
    assert "entropy_lens.model.loading" in graph["entropy_lens.cli"]


def test_an_upward_import_and_a_cycle_are_caught(tmp_path):
    """The checks can fail: a store module importing the lens, and two benchmarks importing each other."""
    for folder in ("entropy_lens/store", "benchmarks"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "entropy_lens/__init__.py").write_text("")
    (tmp_path / "entropy_lens/lens").mkdir()
    (tmp_path / "entropy_lens/lens/__init__.py").write_text("")
    (tmp_path / "entropy_lens/lens/metrics.py").write_text("")
    (tmp_path / "entropy_lens/store/__init__.py").write_text("")
    (tmp_path / "entropy_lens/store/schema.py").write_text(
        "def f():\n    from entropy_lens.lens import metrics\n    return metrics\n"
    )
    (tmp_path / "entropy_lens/store/combine.py").write_text("from entropy_lens import load_model\n")  # via the API
    (tmp_path / "benchmarks/a.py").write_text("from b import g\n")  # a sibling script
    (tmp_path / "benchmarks/b.py").write_text("from benchmarks import a\n")
    bad = import_graph(module_files(tmp_path))
    assert upward_imports(bad) == [
        "entropy_lens.store.combine (store) -> entropy_lens (faces)",
        "entropy_lens.store.schema (store) -> entropy_lens.lens.metrics (lens)",
    ]
    assert import_cycles(bad) == [["benchmarks.a", "benchmarks.b"]]


def test_a_module_outside_every_layer_is_named():
    with pytest.raises(ValueError, match=r"module 'entropy_lens\.newpart\.x' is in no layer"):
        layer_of("entropy_lens.newpart.x")
    assert LAYERS[layer_of("entropy_lens")][0] == "faces" and LAYERS[layer_of("entropy_lens.core.checks")][0] == "core"


def test_the_public_api_resolves():
    import entropy_lens
    from entropy_lens.lens.decoding import LensSettings
    from entropy_lens.model.generation import GenerationSettings

    assert all(getattr(entropy_lens, name) is not None for name in entropy_lens.__all__)
    assert (entropy_lens.GenerationSettings, entropy_lens.LensSettings) == (GenerationSettings, LensSettings)


def test_every_import_in_the_docs_resolves():
    """Each ``from entropy_lens... import ...`` line of the README and docs/ runs."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    lines = {
        line.strip()
        for page in pages
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.strip().startswith(("from entropy_lens", "import entropy_lens"))
    }
    assert lines, "no import lines found in the docs"
    for line in sorted(lines):
        exec(line.split("  #")[0], {})  # a missing module or name raises here
