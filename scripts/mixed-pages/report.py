"""Tables for study.md and SOURCES.md from results/pages.json and corpus/manifest.json."""
import json, os
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
P = json.load(open(os.path.join(ROOT, "results", "pages.json")))
M = {m["file"]: m for m in json.load(open(os.path.join(ROOT, "corpus", "manifest.json")))}
KINDS = ["events", "timeline", "issue-events", "notifications", "search", "gitlab-events", "jira-changelog", "other-mixed"]


def pct(a, b):
    return f"{100 * a / b:.0f}%" if b else "-"


def agg(rows):
    s = lambda k: sum(r[k] for r in rows)
    T = s("compact")
    out = dict(pages=len(rows), rows=s("rows"), T=T, keys=s("keys"), vals=s("values"), rep=s("repeated_all"),
               rep_x=s("repeated_all") - s("repeated_first"), urls=s("urls"), api=s("urls_api"),
               der=s("urls_derivable"), irr=sum(sum(r["irregular"].values()) for r in rows),
               dev=sum(r["devboy"]["final"] for r in rows),
               passes=sum(r["devboy"]["mode"] == "passes" for r in rows))
    for e in ("a", "b", "c", "ac", "d"):
        out[e] = sum((r["enc"][e] or {"tokens": r["compact"]})["tokens"] for r in rows)
        out[e + "_exact"] = all((r["enc"][e] or {"exact": True})["exact"] for r in rows)
    return out


def lens_table(split):
    lines = ["| kind | pages | rows | compact | keys | scalar values | repeated sub-objects (all / excess) | URLs (all / api.github.com / derivable) | irregular column(s) | devboy now |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k in KINDS:
        rs = [r for r in P if r["split"] == split and r["kind"] == k]
        if not rs: continue
        a = agg(rs); T = a["T"]
        lines.append(f"| {k} | {a['pages']} | {a['rows']} | {T:,} | {pct(a['keys'],T)} | {pct(a['vals'],T)} | {pct(a['rep'],T)} / {pct(a['rep_x'],T)} | "
                     f"{pct(a['urls'],T)} / {pct(a['api'],T)} / {pct(a['der'],T)} | {pct(a['irr'],T)} | "
                     f"{a['dev']:,} ({pct(a['dev']-T,T) if a['dev']!=T else '0%'}; {a['passes']} of {a['pages']} passed) |")
    a = agg([r for r in P if r["split"] == split]); T = a["T"]
    lines.append(f"| **all** | {a['pages']} | {a['rows']} | {T:,} | {pct(a['keys'],T)} | {pct(a['vals'],T)} | {pct(a['rep'],T)} / {pct(a['rep_x'],T)} | "
                 f"{pct(a['urls'],T)} / {pct(a['api'],T)} / {pct(a['der'],T)} | {pct(a['irr'],T)} | {a['dev']:,} ({pct(a['dev']-T,T)}; {a['passes']} of {a['pages']} passed) |")
    return "\n".join(lines)


def enc_table(split):
    lines = ["| kind | compact | devboy now | (a) grouped by kind + order col | (b) one table, irregular col as JSON | (c) = (b) + repeated objects factored | (a)+(c) | (d) = (c) + own-field URL templates |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    def row(name, rs):
        a = agg(rs); T = a["T"]
        f = lambda e: f"{a[e]:,} ({(a[e]-T)/T:+.0%})" + ("" if a[e + "_exact"] else " NOT EXACT")
        return f"| {name} | {T:,} | {a['dev']:,} ({(a['dev']-T)/T:+.0%}) | {f('a')} | {f('b')} | {f('c')} | {f('ac')} | {f('d')} |"
    for k in KINDS:
        rs = [r for r in P if r["split"] == split and r["kind"] == k]
        if rs: lines.append(row(k, rs))
    lines.append(row("**all**", [r for r in P if r["split"] == split]))
    return "\n".join(lines)


def page_table(split):
    lines = ["| file | rows | key sets | compact | keys | rep. objs | actor/repo/org/user: occ→distinct | URLs | derivable | irregular | devboy | (a) | (b) | (c) | (d) |",
             "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in P:
        if r["split"] != split: continue
        T = r["compact"]
        fr = ", ".join(f"{k} {n}→{d}" for k, (n, d) in r["field_repeats"].items()
                       if k in ("actor", "repo", "org", "user", "author", "repository", "subject", "assignee", "label", "committer"))
        dv = r["devboy"]
        lines.append(f"| {os.path.basename(r['file'])} | {r['rows']} | {len(r['keysets'])} | {T:,} | {pct(r['keys'],T)} | {pct(r['repeated_all'],T)} | {fr} | "
                     f"{pct(r['urls'],T)} | {pct(r['urls_derivable'],T)} | {pct(sum(r['irregular'].values()),T)} {'(' + ','.join(r['irregular']) + ')' if r['irregular'] else ''} | "
                     f"{dv['final']:,}{' passes' if dv['mode']=='passes' else ''} | " + " | ".join(f"{r['enc'][e]['tokens']:,}" for e in ("a", "b", "c", "d")) + " |")
    return "\n".join(lines)


def payload_table(split):
    lines = ["| kind | irregular column tokens | of which keys | repeated objects inside (all / excess) | URLs inside (all / derivable) |", "|---|---:|---:|---:|---:|"]
    for k in KINDS:
        rs = [r for r in P if r["split"] == split and r["kind"] == k and r["irregular_detail"]]
        if not rs: continue
        t = sum(d["tokens"] for r in rs for d in r["irregular_detail"].values())
        g = lambda f: sum(d[f] for r in rs for d in r["irregular_detail"].values())
        cols = sorted({c for r in rs for c in r["irregular_detail"]})
        lines.append(f"| {k} ({', '.join(cols)}) | {t:,} | {pct(g('keys'),t)} | {pct(g('repeated_all'),t)} / {pct(g('repeated_all')-g('repeated_first'),t)} | {pct(g('urls'),t)} / {pct(g('urls_derivable'),t)} |")
    return "\n".join(lines)


def timeline_kinds():
    lines = []
    for r in P:
        if r["kind"] != "timeline": continue
        T = r["compact"]
        lines.append(f"- `{os.path.basename(r['file'])}` ({r['split']}, {r['rows']} rows, {len(r['keysets'])} key sets): "
                     + ", ".join(f"{k} {r['kinds'][k]} rows / {pct(v,T)}" for k, v in sorted(r["kind_tokens"].items(), key=lambda x: -x[1])))
    return "\n".join(lines)


def sources_md():
    out = []
    for split in ("tuning", "validation", "octokit-rb"):
        out.append(f"\n## {split}\n")
        for r in P:
            if r["split"] != split: continue
            m = M[r["file"]]
            dv = r["devboy"]
            status = f"encodes: {dv['raw']:,} → {dv['final']:,} tokens" if dv["mode"] == "encodes" else f"passes (nothing cheaper than {dv['raw']:,} tokens)"
            ex = f", exchange #{m['exchange']}" if m["exchange"] is not None and m["extract"] != "jira-ts" else ""
            out.append(f"### `{r['file']}`\n")
            out.append(f"- source: `{m['repo']}` @ `{m['commit'][:12]}`, `{m['path']}`{ex} ({m['extract']})")
            if m.get("request"): out.append(f"- request: `{m['request']}`")
            out.append(f"- licence: {m['licence']}")
            out.append(f"- kind: {m['kind']}; rows: {r['rows']}; distinct top-level key sets: {len(r['keysets'])}")
            for ks in r["keysets"]:
                out.append(f"  - `{', '.join(ks)}`")
            out.append(f"- devboy encode (compact JSON in): {status}\n")
    return "\n".join(out)


if __name__ == "__main__":
    os.makedirs(os.path.join(ROOT, "results"), exist_ok=True)
    with open(os.path.join(ROOT, "results", "tables.md"), "w") as f:
        for split in ("tuning", "validation", "octokit-rb"):
            f.write(f"\n### Lenses — {split}\n\n{lens_table(split)}\n\n### Encodings — {split}\n\n{enc_table(split)}\n\n"
                    f"### Inside the irregular column — {split}\n\n{payload_table(split)}\n\n### Pages — {split}\n\n{page_table(split)}\n")
        f.write("\n### Timeline rows by kind\n\n" + timeline_kinds() + "\n")
    with open(os.path.join(ROOT, "results", "sources_body.md"), "w") as f:
        f.write(sources_md())
    print(open(os.path.join(ROOT, "results", "tables.md")).read())
