"""Every file and ``docs/*.md#anchor`` the repository names exists: Markdown links in the documents, and the paths
that code, comments and configuration name. Nothing points outside the repository."""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {
    ".git",
    ".venv",
    "node_modules",
    "__pycache__",
    "build",
    "dist",
    "data",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".hypothesis",
    ".work",
}
TEXT = {".py", ".md", ".toml", ".yaml", ".yml", ".txt", ".json", ".mjs", ".js", ".html", ".css", ".sh", ".cfg", ""}
TOP = ("ipintel", "tests", "scripts", "bench", "docs", "k8s", "schemas", ".ci")


def _walk(skip: Callable[[str], bool]) -> Iterator[Path]:
    """Every file and directory under ROOT, outside the directories ``skip`` names: those are not entered at all
    (``.venv`` and ``.git`` hold tens of thousands of entries, each of which the filters below would drop)."""
    for top, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not skip(d)]
        yield from (Path(top, name) for name in (*dirs, *names))


def _skipped(name: str) -> bool:
    return name in SKIP_DIRS or name.endswith(".egg-info")


def files() -> list[Path]:
    found = []
    for path in sorted(_walk(_skipped)):
        rel = path.relative_to(ROOT)
        if any(_skipped(part) for part in rel.parts) or not path.is_file():
            continue
        if (path.suffix in TEXT or path.name in ("Makefile", "Containerfile")) and path.name != ".gitignore":
            found.append(path)
    return found


FILES = files()
NAMES = {p.name for p in FILES} | {
    p.name for p in _walk(SKIP_DIRS.__contains__) if not any(s in p.parts for s in SKIP_DIRS)
}


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|<[^>]+>", "", heading).strip().lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


@cache
def anchors(document: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in document.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# A path from the top of the repository (``docs/API.md#errors``, ``tests/support/app.py``); not a pattern
# (``bench/bench_{name}.py``) nor a glob.
DOC_REF = re.compile(
    r"(?<![\w/.-])((?:{})/[\w./-]*[\w/])(?![{{*\w])(#[\w-]+)?".format("|".join(re.escape(t) for t in TOP))
)
README_SECTION = re.compile(r'README,? "([^"]+)"')
BARE_PY = re.compile(r"(?<![\w/.-])([A-Za-z_][\w-]*\.py)\b")


def problems_in(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    rel = path.relative_to(ROOT)
    out = []
    targets: list[tuple[str, Path]] = []
    if path.suffix == ".md":
        for m in MD_LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            targets.append((target, resolved))
            if not resolved.is_relative_to(ROOT):
                out.append(f"{rel}: {target} is outside the repository")
            elif not resolved.exists():
                out.append(f"{rel}: {target}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                out.append(f"{rel}: {target}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
    for m in DOC_REF.finditer(text):
        ref, anchor = m.group(1), (m.group(2) or "")[1:]
        if "." not in ref.rsplit("/", 1)[-1] and not ref.endswith("/") and not ref.startswith("scripts/"):
            continue  # a name with a slash (``"ipintel/etag"``), not a path: files have a suffix, scripts/ aside
        resolved = (ROOT / ref).resolve()
        if not resolved.exists() and not any(ROOT.glob(ref)):
            out.append(f"{rel}: {ref}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            out.append(f"{rel}: {ref}#{anchor}: no such heading")
    for m in README_SECTION.finditer(text):
        if slug(m.group(1)) not in anchors(ROOT / "README.md"):
            out.append(f"{rel}: README section {m.group(1)!r}: no such heading in README.md")
    for m in BARE_PY.finditer(text):
        if m.group(1) not in NAMES:
            out.append(f"{rel}: {m.group(1)}: no such file")
    return out


def test_every_named_file_and_anchor_exists() -> None:
    problems = [p for path in FILES for p in problems_in(path)]
    assert not problems, "\n".join(problems)
