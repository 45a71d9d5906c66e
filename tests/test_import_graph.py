"""The package's imports point down the layers, imports inside functions included.

``test_layers`` imports each layer alone and sees what comes in at import time; an import
inside a function runs only when the function does, so it is invisible there. This test reads
every module's source (``ast``) and checks each ``import`` statement, wherever it stands, against
the layer order of the README, bottom to top:

``_version, columns, units, _checks, auto_stop`` → ``hardware/`` → ``architecture/`` →
``run`` → ``store/`` → ``model/`` → ``capture/`` → ``prediction/`` → ``skins/`` → the root: one
layer a folder (the root's few modules sit at the bottom).

``datasets`` (downloads of public measurements) uses nothing of the package and sits beside the
bottom. Imports under ``if TYPE_CHECKING:`` are type hints, never run, and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "gpuperf_magics"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

# Each top-level module or subpackage of the package → its layer (higher may import lower).
LAYERS: dict[str, int] = {
    "_version": 0, "columns": 0, "units": 0, "_checks": 0, "auto_stop": 0, "datasets": 0,
    "hardware": 1,
    "architecture": 2,
    "run": 3,
    "store": 4,
    "model": 5,
    "capture": 6,
    "prediction": 7,
    "skins": 8,
    "": 9,  # the package root: ``import gpuperf_magics`` / ``from gpuperf_magics import X``
}

# Upward edges that are allowed, each with its reason. (importing module, imported module).
ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    # A Run saves itself by handing itself to a store: the one call-time delegate the layers
    # allow (the store holds Runs, so the import cannot go the other way at import time).
    ("gpuperf_magics.run", "gpuperf_magics.store"): "Run.save",
    # The demo is a user's script shipped with the package (``gpuperf demo``): it goes through
    # the public face, ``gm.profile_training`` and ``gm.Store``, as the README does.
    ("gpuperf_magics.skins.demo", "gpuperf_magics"): "the demo shows the public API",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, type_hints: bool = False) -> list[tuple[int, str]]:
    """``(line, module)`` of every run-time import of the package, at any depth (and of the
    imports under ``if TYPE_CHECKING:`` with ``type_hints``)."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_hints:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names
                         if a.name.split(".")[0] == PACKAGE)
        elif (isinstance(node, ast.ImportFrom) and node.module and not node.level
              and node.module.split(".")[0] == PACKAGE):
            for alias in node.names:  # ``from pkg import submodule`` imports the submodule
                sub = f"{node.module}.{alias.name}"
                found.append((node.lineno, sub if _exists(sub) else node.module))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _exists(module: str) -> bool:
    path = ROOT.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _layer(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    assert top in LAYERS, f"{module} has no layer: add it to LAYERS (and to the README)"
    return LAYERS[top]


def _edges(type_hints: bool = False) -> list[tuple[str, int, str]]:
    edges = []
    for path in sorted(ROOT.rglob("*.py")):
        name = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, target in _imports(tree, type_hints):
            edges.append((name, line, target))
    return edges


def test_every_module_has_a_layer() -> None:
    for path in ROOT.rglob("*.py"):
        _layer(_module_name(path))


def test_no_import_points_up_a_layer() -> None:
    upward = [f"{src}:{line} imports {dst}" for src, line, dst in _edges()
              if _layer(dst) > _layer(src) and (src, dst) not in ALLOWED_UPWARD]
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_allowed_upward_edges_still_exist() -> None:
    """An allow-list entry whose import is gone is stale: remove it, so that the list says
    what is true."""
    present = {(src, dst) for src, _, dst in _edges()}
    stale = [f"{a} -> {b}" for a, b in ALLOWED_UPWARD if (a, b) not in present]
    if stale:
        pytest.fail("allow-list entries with no import left: " + ", ".join(stale))


def test_no_private_name_crosses_modules() -> None:
    """A module imports another's public names only (a private one is the other module's
    business and may change without notice); the package's own ``_version`` and ``_checks``
    modules are public to the package."""
    crossing = []
    for path in sorted(ROOT.rglob("*.py")):
        name = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module
                    and node.module.split(".")[0] == PACKAGE):
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                same_package = node.module.rsplit(".", 1)[0] == name.rsplit(".", 1)[0]
                if private and not same_package and node.module.split(".")[1:2] in (
                        ["prediction"], ["skins"]):
                    crossing.append(f"{name}:{node.lineno} imports {node.module}.{alias.name}")
    assert not crossing, "\n".join(crossing)



def _readme_layers() -> dict[str, int]:
    """The README's layer picture (its ``## Layers`` block): layer number → the folders and
    modules on that line, as ``LAYERS`` names them."""
    text = (ROOT.parent / "README.md").read_text(encoding="utf-8")
    block = text.split("\n## Layers", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    layers: dict[str, int] = {}
    for line in block.splitlines()[1:]:  # the first line is the header
        number, *words = line.split()
        for word in words:
            if not (word.endswith("/") or word.endswith(".py")):
                break
            name = word.removesuffix("/").removesuffix(".py")
            layers["" if name == "__init__" else name] = int(number)
    return layers


def test_the_readme_draws_these_layers() -> None:
    """The README's picture and ``LAYERS`` say the same thing, folder by folder."""
    assert _readme_layers() == LAYERS


# The one import circle allowed: a Run saves itself by handing itself to a store (``Run.save``),
# and the store reads and writes Runs. Any other circle fails, type-hint imports included.
ALLOWED_CIRCLE = ("gpuperf_magics.run", "gpuperf_magics.store")


def _allowed(circle: tuple[str, ...]) -> bool:
    """The run and store modules only, the Run among them."""
    return ALLOWED_CIRCLE[0] in circle and all(
        m == ALLOWED_CIRCLE[0] or m == ALLOWED_CIRCLE[1] or m.startswith(ALLOWED_CIRCLE[1] + ".")
        for m in circle)


def _circles() -> list[tuple[str, ...]]:
    """The strongly connected components of the module graph with more than one module
    (Tarjan's algorithm, iterative so that a deep graph cannot overflow the stack)."""
    graph: dict[str, set[str]] = {}
    for src, _, dst in _edges(type_hints=True):
        graph.setdefault(src, set()).add(dst)
        graph.setdefault(dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component)))
    return found


def test_no_import_circle() -> None:
    """No two modules import each other, directly or through others (imports inside
    functions and under ``TYPE_CHECKING`` included): a reader can take the modules in an
    order. A type a module only needs for its hints is a Protocol of its own."""
    circles = [c for c in _circles() if not _allowed(c)]
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)
