"""The static pass of `neuronkit port`: parse each file with libcst, collect the findings and the rewritten
text (the original files are only read). A script is followed into the local modules it imports
(`project.py`), and every file of the project is rewritten knowing what the whole project does."""

from __future__ import annotations

import ast
import difflib
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from neuronkit.errors import NeuronkitInputError
from neuronkit.port.matchers import Finding, PortMatcher, ProjectFacts, called_names, facts_from
from neuronkit.port.project import follow_imports, import_roots


@dataclass(frozen=True)
class FileScan:
    """One file: its findings (in source order), its text and the text with the rewrite fixes applied."""

    path: Path
    findings: tuple[Finding, ...]
    original: str
    rewritten: str
    line_map: tuple[int, ...] = ()  # the original's line of each line of `rewritten`
    added_lines: frozenset[int] = frozenset()  # lines of `rewritten` with no original (the native helpers)

    def diff(self) -> str:
        """A unified diff of the rewrite fixes (empty when there are none)."""
        return "".join(difflib.unified_diff(self.original.splitlines(keepends=True),
                                            self.rewritten.splitlines(keepends=True),
                                            fromfile=str(self.path), tofile=f"{self.path} (rewritten)"))

    def original_line(self, rewritten_line: int | None) -> int | None:
        """The original file's line for a line of the rewritten copy (errors and fallbacks are reported there;
        a line of the native helpers reports the line they were inserted after)."""
        if rewritten_line is None or not 1 <= rewritten_line <= len(self.line_map):
            return rewritten_line
        return self.line_map[rewritten_line - 1]


@dataclass
class Project:
    """What `neuronkit port SCRIPT [DIR...]` works on: the script (None when only directories were named),
    every file scanned (the script first, then the local modules it imports), and the folders its imports
    resolve from."""

    script: Path | None
    scans: list[FileScan]
    roots: list[Path] = field(default_factory=list)
    facts: ProjectFacts = ProjectFacts()


def _parse(text: str, path: str | os.PathLike) -> cst.Module:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        line, col, reason = _syntax_problem(text, exc)
        raise NeuronkitInputError(f"{path}:{line}:{col}: {reason}") from None


def _syntax_problem(text: str, exc: cst.ParserSyntaxError) -> tuple[int, int, str]:
    """Where and why a file libcst cannot parse is not Python, as Python itself says (its line, column and
    message: "invalid syntax", "'(' was never closed"); libcst's own when Python compiles the file."""
    try:
        with warnings.catch_warnings():  # a SyntaxWarning (an invalid escape) is Python's business, not ours
            warnings.simplefilter("ignore")
            compile(text, "<port>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError) as err:  # ValueError: null bytes, before Python 3.12
        message = err.msg if isinstance(err, SyntaxError) else str(err)
        if isinstance(err, SyntaxError) and err.lineno is not None:
            return err.lineno, max(err.offset or 1, 1), f"not valid Python ({message})"
        return exc.raw_line, exc.raw_column + 1, f"not valid Python ({message})"
    return exc.raw_line, exc.raw_column + 1, \
        f"Python compiles it but libcst cannot parse it ({exc.message.splitlines()[0]})"


def _rewrite(wrapper: MetadataWrapper, text: str, path: str | os.PathLike, facts: ProjectFacts) -> FileScan:
    matcher = PortMatcher(str(path), facts)
    rewritten = wrapper.visit(matcher)
    findings = tuple(sorted(matcher.findings, key=lambda f: (f.line, f.col, f.rule.id)))
    return FileScan(Path(path), findings, text, rewritten.code, tuple(matcher.line_map), frozenset(matcher.added_lines))


def scan_source(text: str, path: str | os.PathLike = "<string>", facts: ProjectFacts | None = None) -> FileScan:
    """Scan one module's source text (what the project does: `facts`, else what this module does). Raises
    NeuronkitInputError naming the file and line when it does not parse."""
    wrapper = MetadataWrapper(_parse(text, path))
    return _rewrite(wrapper, text, path, facts if facts is not None else facts_from(called_names(wrapper)))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise NeuronkitInputError(f"{path}: not UTF-8 text") from None


def python_files(paths: list[str | os.PathLike]) -> list[Path]:
    """The files to scan: each named file, and every `*.py` under each named directory (sorted). Raises
    NeuronkitInputError for a path that does not exist or a file that is not Python source."""
    if not paths:
        raise NeuronkitInputError("name at least one script, file or directory to scan")
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.py") if p.is_file()))
        elif path.is_file():
            if path.suffix not in (".py", ""):
                raise NeuronkitInputError(f"{path}: not a Python script (expected a .py file)")
            files.append(path)
        else:
            raise NeuronkitInputError(f"{path}: no such file or directory")
    return files


def scan_project(paths: list[str | os.PathLike]) -> Project:
    """`SCRIPT [DIR|FILE...]`: the script, the local modules it imports (found under its folder and the named
    folders) and the named files; or, when the first path is a directory, every `*.py` under the paths named.
    Every file is rewritten knowing what the whole project does (e.g. whether it starts several processes)."""
    files = python_files(paths)
    sources: dict[Path, tuple[str, cst.Module]] = {}  # each file read and parsed once

    def load(path: Path) -> cst.Module:
        key = path.resolve()
        if key not in sources:
            text = _read(path)
            sources[key] = (text, _parse(text, path))
        return sources[key][1]

    first = Path(paths[0])
    script = first if first.is_file() else None
    roots: list[Path] = []
    if script is not None:
        roots = import_roots(script, [Path(p) for p in paths[1:] if Path(p).is_dir()])
        named = [f for f in files[1:] if not any(Path(p).is_dir() and f.is_relative_to(Path(p)) for p in paths[1:])]
        files = list(dict.fromkeys([*follow_imports(script, roots, load), *named]))
    parsed = []
    for path in files:
        module = load(path)
        parsed.append((path, sources[path.resolve()][0], MetadataWrapper(module)))
    facts = facts_from(set().union(*(called_names(wrapper) for _, _, wrapper in parsed)) if parsed else set())
    return Project(script, [_rewrite(wrapper, text, path, facts) for path, text, wrapper in parsed], roots, facts)


def scan_paths(paths: list[str | os.PathLike]) -> list[FileScan]:
    """Scan what `paths` name (see `scan_project`)."""
    return scan_project(paths).scans
