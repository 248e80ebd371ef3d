"""The static pass of `neuronkit port`: parse each file with libcst, collect the findings and the rewritten
text (the original files are only read). A script is followed into the local modules it imports
(`project.py`), and every file of the project is rewritten knowing what the whole project does."""

from __future__ import annotations

import ast
import difflib
import os
import warnings
from dataclasses import dataclass, field, replace
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


@dataclass(frozen=True)
class NotScanned:
    """A file that could not be read as Python, so was not scanned: where and why (`reason`), whether Python
    itself compiles it (`valid`: libcst could not parse it, or it is not UTF-8 text), and the file whose import
    statement reached it (`imported_by`; None for a file named, or found under a folder named)."""

    path: Path
    line: int
    col: int
    reason: str
    valid: bool = False
    imported_by: Path | None = None

    @property
    def breaks_script(self) -> bool:
        """The script imports it and Python cannot compile it: the script raises SyntaxError importing it."""
        return self.imported_by is not None and not self.valid

    def problem(self) -> str:
        """`path:line:col: reason`."""
        return f"{self.path}:{self.line}:{self.col}: {self.reason}"

    def __str__(self) -> str:
        text = f"{self.problem()}, not scanned"
        if self.breaks_script:
            return text + f" (imported by {self.imported_by}: the import raises SyntaxError, so the script cannot run as is)"
        if self.imported_by is not None:
            return text + f" (imported by {self.imported_by}: what it does on CUDA is not known)"
        return text


@dataclass
class Project:
    """What `neuronkit port SCRIPT [DIR...]` works on: the script (None when only directories were named),
    every file scanned (the script first, then the local modules it imports), the folders its imports resolve
    from, and the files that could not be read as Python (`not_scanned`: the others are scanned all the same)."""

    script: Path | None
    scans: list[FileScan]
    roots: list[Path] = field(default_factory=list)
    facts: ProjectFacts = ProjectFacts()
    not_scanned: list[NotScanned] = field(default_factory=list)


def _parse(text: str, path: str | os.PathLike) -> cst.Module:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise NeuronkitInputError(_syntax_problem(text, exc, Path(path)).problem()) from None


def _python_error(source: str | bytes) -> tuple[int | None, int, str] | None:
    """(line, column, message) of the error Python itself reports compiling `source` ("invalid syntax",
    "'(' was never closed"; bytes are decoded as Python decodes a file, by its coding declaration), else None."""
    try:
        with warnings.catch_warnings():  # a SyntaxWarning (an invalid escape) is Python's business, not ours
            warnings.simplefilter("ignore")
            compile(source, "<port>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as err:
        return err.lineno, max(err.offset or 1, 1), err.msg
    except ValueError as err:  # null bytes, before Python 3.12
        return None, 1, str(err)
    return None


def _syntax_problem(text: str, exc: cst.ParserSyntaxError, path: Path) -> NotScanned:
    """Where and why a file libcst cannot parse is not Python, as Python itself says (its line, column and
    message); libcst's own when Python compiles the file."""
    error = _python_error(text)
    if error is None:
        return NotScanned(path, exc.raw_line, exc.raw_column + 1,
                          f"Python compiles it but libcst cannot parse it ({exc.message.splitlines()[0]})", valid=True)
    line, col, message = error
    if line is None:
        line, col = exc.raw_line, exc.raw_column + 1
    return NotScanned(path, line, col, f"not valid Python ({message})")


def _load(path: Path) -> tuple[str, cst.Module] | NotScanned:
    """A file's text and module, or why it cannot be scanned."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        data = path.read_bytes()
        line = data.count(b"\n", 0, exc.start) + 1  # where the first byte that is not UTF-8 is
        col = exc.start - data.rfind(b"\n", 0, exc.start)
        error = _python_error(data)  # Python reads a file by its coding declaration
        if error is None:
            return NotScanned(path, line, col, "not UTF-8 text (neuronkit reads UTF-8 source only)", valid=True)
        where = (error[0], error[1]) if error[0] is not None else (line, col)
        return NotScanned(path, *where, f"not valid Python ({error[2]})")
    try:
        return text, cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        return _syntax_problem(text, exc, path)


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
    Every file is rewritten knowing what the whole project does (e.g. whether it starts several processes).
    A file that cannot be read as Python is listed in `not_scanned` and the others are scanned; the script
    itself not parsing is bad input (NeuronkitInputError, one line naming it)."""
    files = python_files(paths)
    loaded: dict[Path, tuple[str, cst.Module] | NotScanned] = {}  # each file read and parsed once

    def entry(path: Path) -> tuple[str, cst.Module] | NotScanned:
        key = path.resolve()
        if key not in loaded:
            loaded[key] = _load(path)
        return loaded[key]

    def load(path: Path) -> cst.Module | None:
        found = entry(path)
        return None if isinstance(found, NotScanned) else found[1]

    first = Path(paths[0])
    script = first if first.is_file() else None
    roots: list[Path] = []
    importers: dict[Path, Path] = {}
    if script is not None:
        if isinstance(problem := entry(script), NotScanned):
            raise NeuronkitInputError(problem.problem())
        roots = import_roots(script, [Path(p) for p in paths[1:] if Path(p).is_dir()])
        named = [f for f in files[1:] if not any(Path(p).is_dir() and f.is_relative_to(Path(p)) for p in paths[1:])]
        reached = follow_imports(script, roots, load)
        importers = {path.resolve(): importer for path, importer in reached if importer is not None}
        files = list(dict.fromkeys([*(path for path, _ in reached), *named]))
    parsed: list[tuple[Path, str, MetadataWrapper]] = []
    not_scanned: list[NotScanned] = []
    for path in files:
        found = entry(path)
        if isinstance(found, NotScanned):
            not_scanned.append(replace(found, path=path, imported_by=importers.get(path.resolve())))
        else:
            parsed.append((path, found[0], MetadataWrapper(found[1])))
    facts = facts_from(set().union(*(called_names(wrapper) for _, _, wrapper in parsed)) if parsed else set())
    return Project(script, [_rewrite(wrapper, text, path, facts) for path, text, wrapper in parsed], roots, facts,
                   not_scanned)


def scan_paths(paths: list[str | os.PathLike]) -> list[FileScan]:
    """Scan what `paths` name (see `scan_project`): the scans only; `scan_project(paths).not_scanned` lists the
    files that could not be read as Python."""
    return scan_project(paths).scans
