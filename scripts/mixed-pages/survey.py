"""Survey JSON files: report arrays of objects that look like mixed pages (events, timelines, notifications)."""
import json, sys, os

def classify(rows):
    ks = [set(r) for r in rows]
    if all({"type", "actor", "repo", "payload"} <= k for k in ks): return "events"
    if all("subject" in k and "reason" in k for k in ks): return "notifications"
    if any("event" in k for k in ks) and len({tuple(r) for r in rows}) > 1: return "timeline?"
    if all("event" in k and "actor" in k for k in ks): return "issue-events"
    if all("action_name" in k for k in ks): return "gitlab-events"
    if all("items" in k and "author" in k for k in ks): return "jira-changelog"
    return None

if __name__ == "__main__":
  for root in sys.argv[1:]:
    for dp, dn, fn in os.walk(root):
        for f in fn:
            if not f.endswith(".json"): continue
            p = os.path.join(dp, f)
            try: v = json.load(open(p, encoding="utf-8"))
            except Exception: continue
            if isinstance(v, dict):
                for key in ("items", "values", "histories"):
                    if isinstance(v.get(key), list): v = v[key]; break
            if not (isinstance(v, list) and v and all(isinstance(r, dict) for r in v)): continue
            c = classify(v)
            if c: print(c, len(v), len({tuple(r) for r in v}), p)
