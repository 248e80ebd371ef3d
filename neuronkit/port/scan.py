"""The static pass of `neuronkit port`: parse each file with libcst, collect the findings and the rewritten
text (the original files are only read)."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from neuronkit.errors import NeuronkitInputError
from neuronkit.port.matchers import Finding, PortMatcher


@dataclass(frozen=True)
class FileScan:
    """One file: its findings (in source order), its text and the text with the rewrite fixes applied."""

    path: Path
    findings: tuple[Finding, ...]
    original: str
    rewritten: str

    def diff(self) -> str:
        """A unified diff of the rewrite fixes (empty when there are none)."""
        return "".join(difflib.unified_diff(self.original.splitlines(keepends=True),
                                            self.rewritten.splitlines(keepends=True),
                                            fromfile=str(self.path), tofile=f"{self.path} (rewritten)"))


def scan_source(text: str, path: str | os.PathLike = "<string>") -> FileScan:
    """Scan one module's source text. Raises NeuronkitInputError naming the file and line when it does not parse."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise NeuronkitInputError(f"{path}:{exc.raw_line}:{exc.raw_column + 1}: not valid Python "
                                  f"({exc.message.splitlines()[0]})") from None
    matcher = PortMatcher(str(path))
    rewritten = MetadataWrapper(module).visit(matcher)
    findings = tuple(sorted(matcher.findings, key=lambda f: (f.line, f.col, f.rule.id)))
    return FileScan(Path(path), findings, text, rewritten.code)


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


def scan_paths(paths: list[str | os.PathLike]) -> list[FileScan]:
    """Scan every file `paths` name (see `python_files`)."""
    scans = []
    for path in python_files(paths):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise NeuronkitInputError(f"{path}: not UTF-8 text") from None
        scans.append(scan_source(text, path))
    return scans
