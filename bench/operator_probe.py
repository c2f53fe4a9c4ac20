"""Plant one bug class everywhere it can occur, and see which copies the scenarios miss.

    .venv/bin/python bench/operator_probe.py kelpie_agent/agent/_loop.py ... [--ops boundary]
    .venv/bin/kelpie-dst mutate --spec tests/quality/.probe/operators.toml --seeds 1 --jobs 1

Hand-written mutants (tests/quality/mutants.toml) are the bugs someone thought of; a probe
plants a *class* of bug mechanically at every site in the files named, the way mutmut or
cosmic-ray do, so the survivors show which comparisons no oracle judges at their edge. The
script only writes a spec (gitignored, under tests/quality/.probe/); `kelpie-dst mutate` runs it
like any other, against the default scenario set or the `--scenario`s named.

Operators (``--ops``, comma-separated):

- ``boundary``: ``<`` for ``<=`` and back, ``>`` for ``>=`` and back (an off-by-one at a limit);
- ``equality``: ``==`` for ``!=`` and back (mostly caught at once; a survivor is a dead check);
- ``constant``: an integer literal ``n`` compared against or sliced with becomes ``n + 1``;
- ``delete``: a one-line statement that only has an effect (a call, an awaited call, an
  assignment to an attribute or an item, a ``del``) becomes ``pass`` (a forgotten commit,
  invalidation, notification or state update). Calls that only log are left alone.

A generated mutant is named ``FILE-LINE-OP`` (``loop-212-lte``) and its ``find`` is the source
line, with the lines before it added until it occurs once in the file. Many survivors are
equivalent (the compared values can never be equal); reading them is the point of the probe.
Sites inside ``assert`` statements, ``__repr__`` and type-checking blocks are skipped.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "quality" / ".probe" / "operators.toml"

_BOUNDARY = {ast.Lt: ("<", "<=", "lte"), ast.LtE: ("<=", "<", "lt"),
             ast.Gt: (">", ">=", "gte"), ast.GtE: (">=", ">", "gt")}  # fmt: skip
_EQUALITY = {ast.Eq: ("==", "!=", "ne"), ast.NotEq: ("!=", "==", "eq")}


def _skipped(tree: ast.AST) -> set[int]:
    """Lines inside asserts, reprs and ``if TYPE_CHECKING`` blocks."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        dead = isinstance(node, ast.Assert)
        dead |= isinstance(node, ast.FunctionDef) and node.name in {"__repr__", "__str__"}
        dead |= isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        if dead and isinstance(node, ast.stmt) and node.end_lineno is not None:
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def _sites(text: str, ops: set[str]) -> list[tuple[int, int, int, str, str]]:
    """(line, start col, end col, replacement, tag) of every operator site on one line."""
    tree = ast.parse(text)
    skip = _skipped(tree)
    lines = text.splitlines()
    table = {**(_BOUNDARY if "boundary" in ops else {}), **(_EQUALITY if "equality" in ops else {})}
    found = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Compare) and node.lineno == node.end_lineno:
            left = node.left
            for op, right in zip(node.ops, node.comparators, strict=True):
                entry = table.get(type(op))
                if entry is not None and left.end_col_offset is not None:
                    line = lines[node.lineno - 1]
                    gap = line[left.end_col_offset : right.col_offset]
                    at = gap.find(entry[0])
                    if at >= 0 and gap.count(entry[0]) == 1:
                        start = left.end_col_offset + at
                        found.append(
                            (node.lineno, start, start + len(entry[0]), entry[1], entry[2])
                        )
                if "constant" in ops and _int(right):
                    found.append(_bump(right))
                left = right
        if "constant" in ops and isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper):
                if bound is not None and _int(bound):
                    found.append(_bump(bound))
    if "delete" in ops:
        found.extend(_deletions(tree, skip))
    return sorted(set(found))


_QUIET = {"debug", "info", "warning", "error", "exception", "log", "say", "observe"}


def _deletions(tree: ast.AST, skip: set[int]) -> list[tuple[int, int, int, str, str]]:
    """Statements that only have an effect, each on a line of its own."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or node.lineno != node.end_lineno:
            continue
        if node.lineno in skip or node.end_col_offset is None:
            continue
        if isinstance(node, ast.Expr):
            call = node.value.value if isinstance(node.value, ast.Await) else node.value
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _QUIET:
                continue
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if not all(isinstance(t, ast.Attribute | ast.Subscript) for t in targets):
                continue
        elif not isinstance(node, ast.Delete):
            continue
        found.append((node.lineno, node.col_offset, node.end_col_offset, "pass", "del"))
    return found


def _int(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and type(node.value) is int
        and node.lineno == node.end_lineno
    )


def _bump(node: ast.expr) -> tuple[int, int, int, str, str]:
    assert isinstance(node, ast.Constant) and isinstance(node.value, int)
    assert node.end_col_offset is not None
    return (node.lineno, node.col_offset, node.end_col_offset, str(node.value + 1), "plus1")


def _find(lines: list[str], index: int, text: str) -> str:
    """The source line, with lines before it added until it occurs once in the file."""
    start = index
    while True:
        find = "\n".join(lines[start : index + 1]) + "\n"
        if text.count(find) == 1 or start == 0:
            return find
        start -= 1


def _toml(value: str) -> str:
    return '"""\n' + value.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '"""'


def generate(files: list[str], ops: set[str]) -> list[str]:
    blocks = []
    names: set[str] = set()
    for file in files:
        text = (ROOT / file).read_text()
        lines = text.splitlines()
        stem = Path(file).stem.lstrip("_")
        for lineno, start, end, new, tag in _sites(text, ops):
            line = lines[lineno - 1]
            mutated = line[:start] + new + line[end:]
            find = _find(lines, lineno - 1, text)
            replace = find[: len(find) - len(line) - 1] + mutated + "\n"
            name = f"{stem}-{lineno}-{tag}"
            if name in names:  # a second site of the same kind on the line
                name = f"{name}-col{start}"
            names.add(name)
            blocks.append(
                f'[[mutant]]\nname = "{name}"\ncategory = "probe/{tag}"\n'
                f'breaks = "{file}:{lineno}: {line.strip()[:60].replace(chr(34), chr(39))}"\n'
                f'[[mutant.edit]]\nfile = "{file}"\nfind = {_toml(find)}\n'
                f"replace = {_toml(replace)}\n"
            )
    return blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="source files, relative to the repository")
    parser.add_argument("--ops", default="boundary", help="boundary,equality,constant,delete")
    parser.add_argument("--out", default=str(OUT), help=f"spec to write (default: {OUT})")
    args = parser.parse_args()
    ops = set(args.ops.split(","))
    unknown = ops - {"boundary", "equality", "constant", "delete"}
    if unknown:
        sys.exit(f"operator_probe: unknown operator(s) {', '.join(sorted(unknown))}")
    for file in args.files:
        if not (ROOT / file).is_file():
            sys.exit(f"operator_probe: no file {file!r} under {ROOT}")
    blocks = generate(args.files, ops)
    if not blocks:
        sys.exit("operator_probe: no site for these operators in these files")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    root = Path(os.path.relpath(ROOT, out.resolve().parent)).as_posix()
    header = f'root = "{root}"\n\n[defaults]\nseeds = 1\n'
    spec = ROOT / "tests" / "quality" / "mutants.toml"
    scenarios = tomllib.loads(spec.read_text())["defaults"]["scenarios"]
    header += "scenarios = [" + ", ".join(f'"{s}"' for s in scenarios) + "]\n\n"
    out.write_text(header + "\n".join(blocks))
    print(f"operator_probe: {len(blocks)} mutants written to {out}")


if __name__ == "__main__":
    main()
