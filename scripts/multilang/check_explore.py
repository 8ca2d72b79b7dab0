#!/usr/bin/env python3
"""Run `devboy explore` on each row of a question set and check the answer.

Usage:
    check_explore.py DATASET [--devboy BIN] [--repos DIR] [--trees DIR]
                     [--budget-chars N] [--only ID] [--show]

Each row's tree is exported once (`git archive base_commit`) from
REPOS/<owner>+<name> into TREES/<instance_id>. Per question it reports the
answer's size against the budget, gold-file recall, each `expect_symbols`
entry as `code` (its definition and body shown), `sig` (only its signature
line, as in a skeleton) or `MISSING`, and any test, example or benchmark
file shown, and source files whose shown part is test code (a Rust
`#[cfg(test)] mod tests`).

An expect_symbols entry is `name`, `Owner.name`, `Owner::name` or
`path/to/file::name`; the owner is the Go receiver type, the Rust
`impl`/`trait` type, the JS/TS class, or the object a function is assigned
to (`Layer.prototype.x` -> Layer). Definitions are found with per-language
regular expressions, so a definition inside a Rust `macro_rules!` body
(axum's `impl_service!`) counts as one although devboy does not index it.
Stdlib only.
"""
import argparse
import json
import os
import re
import subprocess
import sys

TESTISH = re.compile(
    r"(^|/)(tests?|__tests__|testdata|test_helpers|examples?|benches|benchmarks?|fixtures)(/|$)"
    r"|_test\.go$|\.(test|spec)\.[jt]sx?$|(^|/)test_[^/]*$|_bench[^/]*$"
)
# Test code inside a file that is not a test file (a Rust `mod tests`, a
# `#[test]` function).
TEST_CODE = re.compile(
    r"#\[(?:[\w:]+::)?test\b|#\[cfg\(test\)\]|^\s*\d*\s*func Test\w*\(t \*testing\.T\)"
    r"|^\s*\d*\s*(?:describe|it)\(['\"`]", re.M)
SRC_EXT = (".go", ".rs", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx")


def split_symbol(sym):
    if "/" in sym:  # path/to/file.ts::name: a definition in that file
        path, _, name = sym.rpartition("::")
        return path, name
    for sep in ("::", "."):
        if sep in sym.replace(".prototype.", "."):
            owner, _, name = sym.replace(".prototype.", ".").rpartition(sep)
            return owner, name
    return None, sym


def find_defs(root, name):
    """(path, line, owner) of every definition of `name` under root."""
    n = re.escape(name)
    go = re.compile(r"^func\s*(?:\(\s*\w*\s*\*?(\w+)[^)]*\))?\s*" + n + r"\s*[\[(]")
    rs = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+" + n + r"\b")
    js = [
        re.compile(r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*" + n + r"\s*[<(]"),
        re.compile(r"^\s*(?:export\s+)?(?:const|let|var)\s+" + n + r"\s*(?::[^=]*)?=\s*(?:async\s*)?(?:function|\(|<|\w+\s*=>)"),
        re.compile(r"^\s*([\w$.]+)\." + n + r"\s*=\s*(?:async\s+)?(?:function|\()"),
        re.compile(r"^\s*(?:(?:public|private|protected|static|async|get|set|readonly|override)\s+)*" + n + r"\s*(?:<[^>]*>)?\s*\([^;]*$"),
        re.compile(r"^\s*(?:(?:public|private|protected|static|readonly)\s+)*" + n + r"\s*(?::[^=]*)?=\s*(?:async\s*)?(?:\(|function|<)"),
        re.compile(r"^\s*(?:(?:public|private|protected|static|readonly)\s+)*" + n + r"\s*:\s*\($"),
    ]
    rs_owner = re.compile(r"^(\s*)(?:unsafe\s+)?(?:impl\b(?:<[^{]*?>)?\s+(?:[^{]*?\bfor\s+)?|(?:pub(?:\([^)]*\))?\s+)?trait\s+)(\w+)")
    js_class = re.compile(r"^(\s*)(?:[\w.]+\s*=\s*)?(?:export\s+)?(?:default\s+)?(?:abstract\s+)?class\s+(\w+)")
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in (".git", "node_modules", "target")]
        for f in files:
            if not f.endswith(SRC_EXT):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            try:
                lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
            except OSError:
                continue
            scopes = []  # (indent, owner) of enclosing impl/trait/class
            for i, line in enumerate(lines, 1):
                if f.endswith(".go"):
                    m = go.match(line)
                    if m:
                        out.append((rel, i, m.group(1)))
                    continue
                indent = len(line) - len(line.lstrip())
                if line.strip() and not line.lstrip().startswith(("//", "*", "/*", "#[")):
                    while scopes and indent <= scopes[-1][0] and not line.lstrip().startswith(("where", "{", ">", ")")):
                        if line.lstrip().startswith("}") and indent == scopes[-1][0]:
                            scopes.pop()
                            break
                        scopes.pop()
                sm = (rs_owner if f.endswith(".rs") else js_class).match(line)
                if sm:
                    scopes.append((len(sm.group(1)), sm.group(2)))
                    continue
                owner = scopes[-1][1] if scopes else None
                if f.endswith(".rs"):
                    if rs.match(line):
                        out.append((rel, i, owner))
                    continue
                if re.match(r"^\s*(if|for|while|switch|return|catch)\b", line):
                    continue
                for k, rx in enumerate(js):
                    m = rx.match(line)
                    if m:
                        o = m.group(1) if k == 2 else (owner if k >= 3 else None)
                        if o:
                            o = o.replace(".prototype", "")
                            o = o[5:] if o.startswith("this.") else o
                        if k >= 3 and not scopes:
                            break  # a bare call or object key, not a method
                        out.append((rel, i, o))
                        break
    return out


def test_ranges(path):
    """Line ranges (1-based) of a Rust file's `#[cfg(test)] mod … { … }`."""
    if not path.endswith(".rs"):
        return []
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    except OSError:
        return []
    out = []
    for i, line in enumerate(lines):
        if line.strip() == "#[cfg(test)]" and i + 1 < len(lines) and re.match(r"\s*(pub\s+)?mod \w+\s*\{", lines[i + 1]):
            indent = len(line) - len(line.lstrip())
            end = next((j for j in range(i + 2, len(lines))
                        if lines[j].startswith(" " * indent + "}") and len(lines[j]) - len(lines[j].lstrip()) == indent),
                       len(lines) - 1)
            out.append((i + 1, end + 1))
    return out


def test_code(text, root, sections):
    """Files whose shown part holds test code, though not test files: a
    Rust `#[cfg(test)] mod`, a `#[test]` attribute, a Go `func TestX`."""
    out = []
    for part in re.split(r"^(?=#### )", text, flags=re.M):
        m = re.match(r"#### (\S+) ", part)
        if not m or TESTISH.search(m.group(1)):
            continue
        path = m.group(1)
        render, shown = sections.get(path, ("", set()))
        ranges = test_ranges(os.path.join(root, path))
        in_mod = any(a <= n <= b for a, b in ranges for n in shown) or (render == "full" and ranges)
        if in_mod or TEST_CODE.search(part):
            out.append(path)
    return out


def parse_answer(text):
    """{path: (render, set of shown line numbers)} from the answer text."""
    sections = {}
    cur = None
    head = re.compile(r"^#### (\S+) — .*· (full|excerpt|skeleton)\b")
    numbered = re.compile(r"^\s*(\d+)  ")
    for line in text.split("\n"):
        m = head.match(line)
        if m:
            cur = m.group(1)
            sections[cur] = (m.group(2), set())
            continue
        if cur and sections[cur][0] != "full":
            m = numbered.match(line)
            if m:
                sections[cur][1].add(int(m.group(1)))
    return sections


def symbol_status(sym, defs, sections):
    owner, name = split_symbol(sym)
    cands = [d for d in defs if owner is None or (d[2] or "") == owner or d[0] == owner]
    if not cands:
        return "NODEF", []
    best = "MISSING"
    where = []
    for path, line, _ in cands:
        sec = sections.get(path)
        if not sec:
            continue
        render, shown = sec
        if render == "full" or (line in shown and (line + 1 in shown or line + 2 in shown) and render == "excerpt"):
            return "code", [f"{path}:{line}"]
        if line in shown:
            best = "sig"
            where.append(f"{path}:{line}")
    return best, where or [f"{p}:{l}" for p, l, _ in cands[:3]]


def export(repos, trees, row):
    dest = os.path.join(trees, row["instance_id"])
    if os.path.isdir(dest) and os.listdir(dest):
        return dest
    os.makedirs(dest, exist_ok=True)
    repo = os.path.join(repos, row["repo"].replace("/", "+"))
    if os.path.isdir(os.path.join(repo, "repo")):
        repo = os.path.join(repo, "repo")
    arch = subprocess.run(["git", "-C", repo, "archive", row["base_commit"]], stdout=subprocess.PIPE, check=True)
    subprocess.run(["tar", "-x", "-C", dest], input=arch.stdout, check=True)
    return dest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--devboy", default="target/release/devboy")
    ap.add_argument("--repos", default="/work/data/repos")
    ap.add_argument("--trees", default="/tmp/fw_trees")
    ap.add_argument("--budget-chars", type=int, default=16000)
    ap.add_argument("--only")
    ap.add_argument("--show", action="store_true", help="print each answer's text")
    ap.add_argument("--json", help="also write the per-question results here")
    a = ap.parse_args()
    results = []
    for line in open(a.dataset):
        if not line.strip():
            continue
        row = json.loads(line)
        if a.only and a.only not in row["instance_id"]:
            continue
        root = export(a.repos, a.trees, row)
        p = subprocess.run(
            [a.devboy, "explore", "--root", root, "--format", "json",
             "--budget-chars", str(a.budget_chars), row["problem_statement"]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode:
            print(f"{row['instance_id']}: explore failed: {p.stderr.strip()[:300]}")
            continue
        ans = json.loads(p.stdout)
        text = ans["text"]
        sections = parse_answer(text)
        shown = [f["path"] for f in ans.get("files", [])] or list(sections)
        gold = row.get("gold_files", [])
        recall = sum(g in shown for g in gold) / len(gold) if gold else 0.0
        syms = {s: symbol_status(s, find_defs(root, split_symbol(s)[1]), sections)
                for s in row.get("expect_symbols", [])}
        tests = [f for f in shown if TESTISH.search(f)]
        in_src = test_code(text, root, sections)
        over = len(text) - a.budget_chars
        header = len(text.split("\n#### ", 1)[0])
        flows = [l for l in text.split("\n")[:12] if l.startswith(("Flow:", "Entry", "Seeds"))]
        print(f"== {row['instance_id']} [{row.get('language', '?')}] {len(text)} chars"
              f"{' OVER by %d' % over if over > 0 else ''} · recall {recall:.2f}"
              f" · symbols {sum(v[0] == 'code' for v in syms.values())}/{len(syms)}"
              f" · header {header}")
        for l in flows:
            print("   ", l)
        for f in ans.get("files", []):
            mark = " GOLD" if f["path"] in gold else (" TEST" if f["path"] in tests else "")
            mark += " (shows test code)" if f["path"] in in_src else ""
            print(f"    {f['render']:8} {f['chars']:6}  {f['path']}{mark}")
        for g in gold:
            if g not in shown:
                print(f"    missing gold: {g}")
        for s, (st, where) in syms.items():
            print(f"    {st:7} {s}  {' '.join(where)}")
        if a.show:
            print(text)
        results.append({"instance_id": row["instance_id"], "chars": len(text), "recall": recall,
                        "files": ans.get("files", []), "symbols": {s: v[0] for s, v in syms.items()},
                        "tests": tests, "test_code_in": in_src})
    if results:
        n = len(results)
        print(f"overall: {n} questions · recall {sum(r['recall'] for r in results) / n:.3f}"
              f" · symbols as code {sum(v == 'code' for r in results for v in r['symbols'].values())}"
              f"/{sum(len(r['symbols']) for r in results)}"
              f" · over budget {sum(r['chars'] > a.budget_chars for r in results)}"
              f" · with test/example files {sum(bool(r['tests']) for r in results)}"
              f" · with test code in source files {sum(bool(r['test_code_in']) for r in results)}")
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
