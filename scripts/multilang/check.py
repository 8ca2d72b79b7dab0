#!/usr/bin/env python3
"""Validate scripts/multilang/find_files.jsonl against local bare mirrors.

For every row: the repository directory exists under --repos, base_commit and
fix_commit resolve, base_commit is the first parent of fix_commit, and every
gold file exists at base_commit and is modified by fix_commit.

    python3 scripts/multilang/check.py [--repos /work/data/repos] [DATASET]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def git(gitdir, *args):
    r = subprocess.run(["git", "--git-dir", gitdir, *args], capture_output=True, text=True)
    return r.returncode, r.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", nargs="?", default=os.path.join(HERE, "find_files.jsonl"))
    ap.add_argument("--repos", default="/work/data/repos")
    a = ap.parse_args()
    required = {"instance_id", "repo", "base_commit", "problem_statement", "gold_files", "source", "language"}
    bad = 0
    seen = set()
    for n, line in enumerate(open(a.dataset), 1):
        row = json.loads(line)
        iid = row.get("instance_id", f"line {n}")
        errs = []
        missing = required - row.keys()
        if missing:
            errs.append(f"missing keys {sorted(missing)}")
        if iid in seen:
            errs.append("duplicate instance_id")
        seen.add(iid)
        path = os.path.join(a.repos, row["repo"].replace("/", "+"))
        # a bare mirror, or a checkout with .git inside
        gitdir = path if os.path.isdir(os.path.join(path, "objects")) else os.path.join(path, ".git")
        if not os.path.isdir(gitdir):
            errs.append(f"no repository at {path}")
        else:
            base, fix = row["base_commit"], row["source"]["fix_commit"]
            for c in (base, fix):
                if git(gitdir, "cat-file", "-e", c + "^{commit}")[0]:
                    errs.append(f"commit {c} not found")
            rc, parent = git(gitdir, "rev-parse", fix + "^")
            if rc == 0 and parent != base:
                errs.append(f"base_commit is not the parent of fix_commit ({parent})")
            _, changed = git(gitdir, "diff", "--name-only", base, fix)
            changed = set(changed.splitlines())
            if not row["gold_files"]:
                errs.append("empty gold_files")
            for f in row["gold_files"]:
                if git(gitdir, "cat-file", "-e", f"{base}:{f}")[0]:
                    errs.append(f"gold file absent at base: {f}")
                if f not in changed:
                    errs.append(f"gold file not changed by fix: {f}")
        if not row.get("problem_statement", "").strip():
            errs.append("empty problem_statement")
        status = "ok" if not errs else "FAIL " + "; ".join(errs)
        print(f"{iid}: {status}")
        bad += bool(errs)
    print(f"{len(seen)} rows, {bad} failing")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
