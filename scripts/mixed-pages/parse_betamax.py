"""Extract response bodies from betamax/VCR JSON cassettes (github3.py tests/cassettes, octokit.rb spec/cassettes)."""
import base64, gzip, json, sys

def _text(b):
    if b.get("base64_string"):
        raw = base64.b64decode(b["base64_string"])
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    else:
        raw = (b.get("string") or "").encode("utf-8")
    return raw.decode("utf-8", errors="strict")

def exchanges(path):
    d = json.load(open(path, encoding="utf-8"))
    for it in d.get("http_interactions", []):
        try:
            text = _text(it["response"]["body"])
        except Exception:
            continue
        yield dict(verb=it["request"]["method"].upper(), url=it["request"]["uri"],
                   status=(it["response"].get("status") or {}).get("code"), body=text)

if __name__ == "__main__":
    for p in sys.argv[1:]:
        try: exs = list(exchanges(p))
        except Exception as e: print("ERR", p, e); continue
        for k, ex in enumerate(exs):
            try: v = json.loads(ex["body"])
            except Exception: continue
            tag = ""
            if isinstance(v, dict) and "items" in v: v = v["items"]; tag = "items"
            if isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
                ks = {tuple(r) for r in v}
                print(f"{p}#{k} {ex['verb']} {ex['url'][:90]} rows={len(v)} keysets={len(ks)} {tag}")
