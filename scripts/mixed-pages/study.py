"""Where the tokens of each corpus page go (o200k_base), what devboy does now, and what three
exact encodings would cost.  Writes results/pages.json and prints a summary.

Usage: .venv/bin/python scripts/study.py [--devboy /tmp/nu3/cargo/bin/devboy]
"""
import json, os, re, subprocess, sys, glob
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tok import ntok
import pagecodecs as E

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
DEVBOY = os.environ.get("DEVBOY", "/tmp/nu3/cargo/bin/devboy")
cj = E.cj


# ------------------------------------------------------------------ lenses
def values_only(v):
    if isinstance(v, dict):
        return [values_only(x) for x in v.values()]
    if isinstance(v, list):
        return [values_only(x) for x in v]
    return v


def repeated_subobjects(rows):
    """Maximal objects below row level that occur >= 2 times in the page.
    Returns (tokens of all their occurrences, tokens of the first occurrences, #distinct, #occurrences)."""
    count = {}

    def cnt(v):
        if isinstance(v, dict):
            if v:
                k = cj(v); count[k] = count.get(k, 0) + 1
            for x in v.values(): cnt(x)
        elif isinstance(v, list):
            for x in v: cnt(x)
    for r in rows:
        for x in r.values(): cnt(x)
    occ = {}

    def walk(v):
        if isinstance(v, dict) and v:
            k = cj(v)
            if count[k] >= 2:
                occ[k] = occ.get(k, 0) + 1
                return
            for x in v.values(): walk(x)
        elif isinstance(v, list):
            for x in v: walk(x)
    for r in rows:
        for x in r.values(): walk(x)
    tok = {k: ntok(k) for k in occ}
    all_t = sum(tok[k] * n for k, n in occ.items())
    first_t = sum(tok.values())
    return all_t, first_t, len(occ), sum(occ.values())


def field_repeats(rows):
    """Per top-level object field (actor, repo, org, user, ...): occurrences, distinct values."""
    out = {}
    for r in rows:
        for k, v in r.items():
            if isinstance(v, dict) and v:
                o = out.setdefault(k, [0, set()])
                o[0] += 1; o[1].add(cj(v))
    return {k: (n, len(s)) for k, (n, s) in out.items() if n >= 2}


URL = re.compile(r"^https?://")


def scalars_of(d):
    return {k: v for k, v in d.items() if isinstance(v, (str, int)) and not isinstance(v, bool)}


def url_lens(rows):
    """Tokens of URL string values (as JSON strings, with their quotes), of api.github.com ones,
    and of those derivable from other fields: the URL with the values of the fields of its own
    object, of its ancestors and of the row's direct sub-objects put back as {field} gives a
    template that at least one other URL at the same key in the page shares."""
    found = []  # (key, template, tokens)

    def walk(v, ctx, key):
        if isinstance(v, dict):
            ctx2 = ctx + [scalars_of(v)]
            for k, x in v.items():
                walk(x, ctx2, k)
        elif isinstance(v, list):
            for x in v:
                walk(x, ctx, key)
        elif isinstance(v, str) and URL.match(v):
            t = v
            subs = []
            for level in ctx:
                for k, s in level.items():
                    s = str(s)
                    if len(s) >= 2 and not URL.match(s):
                        subs.append((len(s), k, s))
            for _, k, s in sorted(subs, reverse=True):
                if s in t:
                    t = t.replace(s, "{" + k + "}")
            found.append((key, t, ntok(cj(v)), v.startswith("https://api.github.com/")))
    for r in rows:
        base = [scalars_of(x) for x in r.values() if isinstance(x, dict)]
        walk(r, base, None)
    tcount = {}
    for k, t, _, _ in found:
        tcount[(k, t)] = tcount.get((k, t), 0) + 1
    all_t = sum(n for _, _, n, _ in found)
    api_t = sum(n for _, _, n, a in found if a)
    der_t = sum(n for k, t, n, _ in found if tcount[(k, t)] >= 2 and "{" in t)
    return all_t, api_t, der_t, len(found)


def irregular_columns(rows):
    """Top-level object columns whose flattened shape differs between rows; tokens of their values."""
    shapes = {}
    for r in rows:
        for k, v in r.items():
            s = tuple(p for p, _ in E.leaves(v)) if isinstance(v, dict) and v else type(v).__name__
            shapes.setdefault(k, set()).add(s)
    irr = [k for k, s in shapes.items() if len(s) > 1 and any(isinstance(x, tuple) for x in s)]
    toks = {k: sum(ntok(cj(r[k])) for r in rows if k in r) for k in irr}
    return toks


def kind_of(r, kind):
    if "type" in r and "payload" in r:
        return r["type"]
    if "event" in r:
        return r["event"]
    if kind == "timeline":
        return "comment/commit:" + ",".join(list(r)[:2])
    if "action_name" in r:
        return r["action_name"]
    return "-"


def devboy_encode(compact):
    p = subprocess.run([DEVBOY, "encode"], input=compact.encode(), capture_output=True, timeout=600)
    err = p.stderr.decode().strip().splitlines()[-1] if p.stderr else ""
    m = re.search(r"(\d+) → (\d+) o200k", err)
    if m:
        return dict(mode="encodes", raw=int(m.group(1)), final=int(m.group(2)), note=err)
    m = re.search(r"nothing cheaper than the body \((\d+)", err)
    if m:
        return dict(mode="passes", raw=int(m.group(1)), final=int(m.group(1)), note=err)
    return dict(mode="?", note=err)


def devboy_roundtrip(compact):
    p = subprocess.run([DEVBOY, "encode"], input=compact.encode(), capture_output=True, timeout=600)
    q = subprocess.run([DEVBOY, "decode"], input=p.stdout, capture_output=True, timeout=600)
    return q.stdout.decode().strip() == compact


def study(path, kind):
    rows = json.load(open(path, encoding="utf-8"))
    compact = cj(rows)
    T = ntok(compact)
    keysets = []
    for r in rows:
        if list(r) not in keysets:
            keysets.append(list(r))
    rec = dict(rows=len(rows), keysets=keysets, compact=T)
    rec["keys"] = T - ntok(cj(values_only(rows)))
    vals = []

    def scal(v):
        if isinstance(v, dict):
            for x in v.values(): scal(x)
        elif isinstance(v, list):
            for x in v: scal(x)
        else:
            vals.append(v)
    scal(rows)
    # each scalar tokenized alone, as written in JSON (strings with their quotes)
    rec["values"] = sum(ntok(cj(v)) for v in vals)
    a, f, nd, no = repeated_subobjects(rows)
    rec["repeated_all"], rec["repeated_first"], rec["repeated_distinct"], rec["repeated_occ"] = a, f, nd, no
    rec["field_repeats"] = field_repeats(rows)
    ua, uapi, uder, un = url_lens(rows)
    rec["urls"], rec["urls_api"], rec["urls_derivable"], rec["url_count"] = ua, uapi, uder, un
    rec["irregular"] = irregular_columns(rows)
    kinds = {}
    for r in rows:
        k = kind_of(r, kind)
        kinds[k] = kinds.get(k, 0) + 1
    rec["kinds"] = kinds
    kt = {}
    for r in rows:
        k = kind_of(r, kind)
        kt[k] = kt.get(k, 0) + ntok(cj(r))
    rec["kind_tokens"] = kt
    det = {}
    for col in rec["irregular"]:
        vals = [r[col] for r in rows if col in r]
        pseudo = [{col: v} for v in vals]
        tv = ntok(cj(vals))
        # objects below the column value (the value itself is the "row" here)
        ra, rf, _, _ = repeated_subobjects([v for v in vals if isinstance(v, dict)])
        ua_, uapi_, uder_, _ = url_lens(pseudo)
        det[col] = dict(tokens=tv, keys=tv - ntok(cj(values_only(vals))), repeated_all=ra,
                        repeated_first=rf, urls=ua_, urls_derivable=uder_)
    rec["irregular_detail"] = det
    rec["devboy"] = devboy_encode(compact)
    if rec["devboy"]["mode"] == "encodes":
        rec["devboy"]["roundtrip"] = devboy_roundtrip(compact)
    enc = {}
    for name, fn, dec, fac in (("a", E.encode_a, E.decode_a, False), ("b", E.encode_b, E.decode_b, False),
                               ("c", E.encode_b, E.decode_b, True), ("ac", E.encode_a, E.decode_a, True),
                               ("d", E.encode_d, E.decode_d, True)):
        text = fn(rows, factor=fac)
        if text is None:
            enc[name] = None; continue
        ok = E.check(rows, text, dec)
        enc[name] = dict(tokens=ntok(text), exact=ok)
        if name == "a":
            enc[name]["groups"] = text.count("\n\n") + 1
        if name in ("b", "c"):
            enc[name]["exception_rows"] = sum(1 for ln in text.split("\n") if ln.startswith("!"))
    rec["enc"] = enc
    return rec


def main():
    man = json.load(open(os.path.join(ROOT, "corpus", "manifest.json")))
    out = []
    for m in man:
        rec = study(os.path.join(ROOT, "corpus", m["file"]), m["kind"])
        rec.update(file=m["file"], kind=m["kind"], split=m["split"], repo=m["repo"])
        out.append(rec)
        e = rec["enc"]
        print(f"{m['file']:38} T={rec['compact']:7} keys={rec['keys']/rec['compact']:.0%} "
              f"rep={rec['repeated_all']/rec['compact']:.0%} url={rec['urls']/rec['compact']:.0%} "
              f"irr={sum(rec['irregular'].values())/rec['compact']:.0%} devboy={rec['devboy'].get('final')}({rec['devboy']['mode']}{'' if rec['devboy'].get('roundtrip', True) else ' RT-FAIL'}) "
              + " ".join(f"{k}={v['tokens']}{'' if v['exact'] else '!'}" for k, v in e.items() if v), flush=True)
    os.makedirs(os.path.join(ROOT, "results"), exist_ok=True)
    json.dump(out, open(os.path.join(ROOT, "results", "pages.json"), "w"), indent=1, default=list)


if __name__ == "__main__":
    main()
