"""A script's project: the local modules it imports, found as `python SCRIPT` would find them (the script's
folder first on sys.path) and under the folders the user names (as on PYTHONPATH). Third-party modules are
not followed: only files under those folders are the team's to port."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import libcst as cst

from neuronkit.port import cst_util


def import_roots(script: Path, folders: list[Path]) -> list[Path]:
    """Where the script's imports resolve from: its own folder, then each named folder (a package's parent, so
    `import pkg` finds it; any other folder itself)."""
    roots = [script.resolve().parent]
    for folder in folders:
        folder = folder.resolve()
        root = folder.parent if (folder / "__init__.py").is_file() else folder
        if root not in roots:
            roots.append(root)
    return roots


def _imported_modules(module: cst.Module, path: Path) -> list[tuple[Path | None, str]]:
    """(base, dotted module) for every module an import statement may load: absolute ones have no base,
    relative ones the package folder the dots lead to."""
    found: list[tuple[Path | None, str]] = []

    def walk(node: cst.CSTNode) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                name = cst_util.dotted(alias.name) or ""
                parts = name.split(".")
                found.extend((None, ".".join(parts[:i])) for i in range(1, len(parts) + 1))
        elif isinstance(node, cst.ImportFrom):
            base = None
            if node.relative:
                base = path.parent
                for _ in range(len(node.relative) - 1):
                    base = base.parent
            module_name = cst_util.dotted(node.module) or ""
            parts = module_name.split(".") if module_name else []
            found.extend((base, ".".join(parts[:i])) for i in range(1, len(parts) + 1))
            if not isinstance(node.names, cst.ImportStar):
                for alias in node.names:  # `from pkg import module`
                    found.append((base, ".".join([*parts, cst_util.dotted(alias.name) or ""])))
            return
        for child in node.children:
            walk(child)

    walk(module)
    return found


def _resolve(base: Path, dotted: str) -> Path | None:
    """The file `dotted` names under `base` (`a/b.py` or `a/b/__init__.py`), if any."""
    target = base.joinpath(*dotted.split(".")) if dotted else base
    for candidate in (target.with_suffix(".py") if dotted else None, target / "__init__.py"):
        if candidate is not None and candidate.is_file():
            return candidate.resolve()
    return None


def follow_imports(script: Path, roots: list[Path],
                   parse: Callable[[Path], cst.Module | None]) -> list[tuple[Path, Path | None]]:
    """The script and every local module it imports, directly or through another local module, in the order
    they are first reached, each with the file whose import first reached it (None for the script). Files are
    named as the user named the script (relative stays relative); `parse` is given each as named, and returns
    None for a file that cannot be parsed (its imports are not followed)."""
    start = script.resolve()
    shown = {start: script}
    importer: dict[Path, Path | None] = {start: None}
    order = [start]
    index = 0
    while index < len(order):
        path = order[index]
        index += 1
        module = parse(shown[path])
        if module is None:
            continue
        for base, dotted in _imported_modules(module, path):
            for root in ([base] if base is not None else roots):
                found = _resolve(root, dotted)
                if found is not None:
                    if found not in shown:
                        shown[found] = _shown(found, script)
                        importer[found] = shown[path]
                        order.append(found)
                    break
    return [(shown[p], importer[p]) for p in order]


def _shown(path: Path, script: Path) -> Path:
    """`path` as the user would write it: relative to where the script's path is relative to, if it can be."""
    if script.is_absolute():
        return path
    try:
        return path.relative_to(Path.cwd().resolve())
    except ValueError:
        return path
