"""Lay out ``ACCURACY_DATA`` (never committed) from public sources, for `make accuracy`.

Run by hand, once, with local copies of the sources (nothing is downloaded here)::

    python bench/accuracy_data.py lists GIT_DIR COMMIT OUT_DIR
        # every provider list of Joe12387/open-source-vpn-ip-lists (CC0) at COMMIT
        # -> OUT_DIR/open-source-vpn-ip-lists/<provider>.txt
    python bench/accuracy_data.py file GIT_DIR COMMIT PATH OUT_DIR NAME
        # one file of a repository at COMMIT -> OUT_DIR/NAME (tn3w/ProtonVPN-IPs' protonvpn_ips.txt,
        # tn3w/TunnelBear-IPs' tunnelbear_ips.txt: Apache-2.0)

Each command records what it wrote in ``OUT_DIR/SOURCES.json`` (source and date), which the report prints.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def _record(out: Path, name: str, path: str, source: str, date: str) -> None:
    about = out / "SOURCES.json"
    known: dict[str, Any] = json.loads(about.read_text()) if about.exists() else {}
    known[name] = {"path": path, "source": source, "date": date}
    about.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True).stdout


def lists(git_dir: str, commit: str, out: Path) -> None:
    target = out / "open-source-vpn-ip-lists"
    target.mkdir(parents=True, exist_ok=True)
    for name in _git(git_dir, "ls-tree", "--name-only", commit).split():
        if name.endswith(".txt"):
            (target / name).write_text(_git(git_dir, "show", f"{commit}:{name}"))
    date = _git(git_dir, "show", "-s", "--format=%cI", commit).strip()[:10]
    source = f"Joe12387/open-source-vpn-ip-lists@{commit[:7]} (CC0 1.0)"
    _record(out, "provider feeds (lists)", "open-source-vpn-ip-lists/", source, date)


def file(git_dir: str, commit: str, path: str, out: Path, name: str) -> None:
    target = out / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_git(git_dir, "show", f"{commit}:{path}"))
    date = _git(git_dir, "show", "-s", "--format=%cI", commit).strip()[:10]
    repo = Path(git_dir).resolve().parent.name.replace("+", "/")  # a mirror's directory: owner+name/repo
    _record(out, name, name, f"{repo}@{commit[:7]} {path}", date)


def main(argv: list[str]) -> int:
    if len(argv) == 6 and argv[0] == "file":
        file(argv[1], argv[2], argv[3], Path(argv[4]), argv[5])
    elif len(argv) == 4 and argv[0] == "lists":
        lists(argv[1], argv[2], Path(argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
