"""Extract response bodies from PyGithub tests/ReplayData/*.txt recordings.
Each exchange is: protocol, verb, host, port, url, req-headers, req-body, status, resp-headers, resp-body, blank."""
import json, sys

def exchanges(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i + 9 < len(lines):
        if lines[i] not in ("http", "https"):
            i += 1; continue
        proto, verb, host, port, url, rh, rb, status, resph, body = lines[i:i + 10]
        yield dict(verb=verb, host=host, url=url, status=status, body=body)
        i += 10

if __name__ == "__main__":
    for p in sys.argv[1:]:
        for k, ex in enumerate(exchanges(p)):
            try:
                v = json.loads(ex["body"])
            except Exception:
                continue
            if isinstance(v, dict) and "items" in v: v = v["items"]; tag = "items"
            else: tag = ""
            if isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
                ks = {tuple(r) for r in v}
                print(f"{p.split('/')[-1]}#{k} {ex['verb']} {ex['url'][:80]} rows={len(v)} keysets={len(ks)} {tag}")
