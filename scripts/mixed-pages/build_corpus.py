"""Build corpus/ from recorded responses in public repositories (git snapshots under /work/.mirror).

Each selection names: kind, split, repo, commit, path, how to extract the body, licence.
Bodies are written exactly as recorded (the response text) where the recording holds the page
as the whole response; where the page is a sub-array of a recorded response (search `items`,
a Jira issue's `changelog.histories`) or is embedded in source code, the array is re-serialized
as compact JSON (key order and values unchanged).  manifest.json records all of it.
"""
import json, os, subprocess, sys, hashlib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parse_pygithub, parse_betamax

MIRROR = "/work/.mirror"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus")

SRC = {
    "PyGithub/PyGithub": ("5cdf6ab395c52efb652d0bc1f28fdf2e452b1b41", "LGPL-3.0 (COPYING.LESSER, with GPL-3.0 COPYING)"),
    "sigmavirus24/github3.py": ("9eeac0ddb241bf3099a6c904411e3aa23b62fd0d", "BSD-3-Clause"),
    "hub4j/github-api": ("79e0fc61d1c8ff61176bd11974b4a19bfe561293", "MIT"),
    "octokit/octokit.rb": ("ea3413c3174571e87c83d358fc893cc7613091fa", "MIT"),
    "abelstuker/multi-git-graph": ("a755d47971278a9ff97502fe4d3e15640455ab26", "none stated (no LICENSE file in the repository)"),
    "ActionableAgile/jira-to-analytics": ("d1f622226ded4974d8947fc125e8a796b41a5d11", "GPL-2.0"),
}
PG = "tests/ReplayData/"
G3 = "tests/cassettes/"
H4 = "src/test/resources/org/kohsuke/github/"
OR = "spec/cassettes/"

# (kind, split, repo, path, extractor, arg)
SEL = [
  # ---- tuning: hub4j/github-api, PyGithub (+ one Jira page, one timeline)
  ("events", "tuning", "hub4j/github-api", H4 + "AppTest/wiremock/testEventApi/__files/2-events.json", "file", None),
  ("events", "tuning", "hub4j/github-api", H4 + "AppTest/wiremock/testEventApi/__files/4-events.json", "file", None),
  ("events", "tuning", "hub4j/github-api", H4 + "AppTest/wiremock/testEventApi/__files/6-events.json", "file", None),
  ("events", "tuning", "hub4j/github-api", H4 + "AppTest/wiremock/testEventApi/__files/8-events.json", "file", None),
  ("events", "tuning", "hub4j/github-api", H4 + "AppTest/wiremock/testUserPublicEventApi/__files/3-user_9881659_events_public.json", "file", None),
  ("events", "tuning", "hub4j/github-api", H4 + "AppTest/wiremock/testUserPublicEventApi/__files/4-user_9881659_events_public.json", "file", None),
  ("events", "tuning", "PyGithub/PyGithub", PG + "AuthenticatedUser.testGetEvents.txt", "pygithub", 0),
  ("events", "tuning", "PyGithub/PyGithub", PG + "NamedUser.testGetReceivedEvents.txt", "pygithub", 0),
  ("events", "tuning", "PyGithub/PyGithub", PG + "Repository.testGetEvents.txt", "pygithub", 0),
  ("timeline", "tuning", "PyGithub/PyGithub", PG + "Issue.testGetTimeline.txt", "pygithub", 0),
  ("issue-events", "tuning", "hub4j/github-api", H4 + "GHIssueEventTest/wiremock/testRepositoryEvents/__files/3-r_h_g_issues_events.json", "file", None),
  ("issue-events", "tuning", "hub4j/github-api", H4 + "GHIssueEventTest/wiremock/testRepositoryEvents/__files/12-repositories_206888201_issues_events.json", "file", None),
  ("issue-events", "tuning", "hub4j/github-api", H4 + "GHIssueEventAttributeTest/wiremock/testEventSpecificAttributes/__files/4-r_c_p_issues_1_events.json", "file", None),
  ("issue-events", "tuning", "PyGithub/PyGithub", PG + "PullRequest.testGetIssueEvents.txt", "pygithub", 0),
  ("issue-events", "tuning", "PyGithub/PyGithub", PG + "Repository.testGetIssuesEvents.txt", "pygithub", 0),
  ("notifications", "tuning", "hub4j/github-api", H4 + "AppTest/wiremock/notifications/__files/2-notifications.json", "file", None),
  ("notifications", "tuning", "hub4j/github-api", H4 + "AppTest/wiremock/notifications/__files/10-notifications.json", "file", None),
  ("search", "tuning", "PyGithub/PyGithub", PG + "Search.testSearchIssues.txt", "pygithub-items", 0),
  ("jira-changelog", "tuning", "ActionableAgile/jira-to-analytics", "test/data/json/jira-issues-request.ts", "jira-ts", "UT-28"),
  # ---- validation: github3.py (+ the other timeline, GitLab, Jira)
  ("events", "validation", "sigmavirus24/github3.py", G3 + "GitHub_all_events.json", "betamax", 0),
  ("events", "validation", "sigmavirus24/github3.py", G3 + "Repository_events.json", "betamax", 1),
  ("events", "validation", "sigmavirus24/github3.py", G3 + "Repository_network_events.json", "betamax", 1),
  ("events", "validation", "sigmavirus24/github3.py", G3 + "Repository_network_events.json", "betamax", 3),
  ("events", "validation", "sigmavirus24/github3.py", G3 + "User_events.json", "betamax", 1),
  ("events", "validation", "sigmavirus24/github3.py", G3 + "User_events.json", "betamax", 2),
  ("events", "validation", "sigmavirus24/github3.py", G3 + "User_received_events.json", "betamax", 1),
  ("events", "validation", "sigmavirus24/github3.py", G3 + "User_organization_events.json", "betamax", 1),
  ("timeline", "validation", "PyGithub/PyGithub", PG + "PullRequest.testGetIssueTimeline.txt", "pygithub", 0),
  ("issue-events", "validation", "sigmavirus24/github3.py", G3 + "Repository_issue_events.json", "betamax", 1),
  ("issue-events", "validation", "sigmavirus24/github3.py", G3 + "Issue_events.json", "betamax", 2),
  ("notifications", "validation", "sigmavirus24/github3.py", G3 + "GitHub_all_notifications.json", "betamax", 0),
  ("search", "validation", "sigmavirus24/github3.py", G3 + "GitHub_search_issues.json", "betamax-items", 0),
  ("gitlab-events", "validation", "abelstuker/multi-git-graph", "src/gitlab_contributions.rs", "rust-comment", None),
  ("jira-changelog", "validation", "ActionableAgile/jira-to-analytics", "test/data/json/jira-issues-request.ts", "jira-ts", "UT-37"),
  # ---- octokit.rb (an octokit project; kept apart, not in tuning/validation)
  ("events", "octokit-rb", "octokit/octokit.rb", OR + "Octokit_Client_Events/_user_events/returns_all_user_events.json", "betamax", 0),
  ("events", "octokit-rb", "octokit/octokit.rb", OR + "Octokit_Client_Events/_public_events/returns_all_public_events.json", "betamax", 0),
  ("events", "octokit-rb", "octokit/octokit.rb", OR + "Octokit_Client_Events/_repository_events/returns_events_for_a_repository.json", "betamax", 0),
  ("issue-events", "octokit-rb", "octokit/octokit.rb", OR + "Octokit_Client_Events/_repo_issue_events/lists_issue_events_for_a_repository.json", "betamax", 0),
]

def git_show(repo, commit, path):
    d = os.path.join(MIRROR, repo.replace("/", "+"), "repo")
    return subprocess.run(["git", "-C", d, "show", f"{commit}:{path}"], check=True,
                          capture_output=True).stdout

def extract(repo, commit, path, how, arg):
    raw = git_show(repo, commit, path)
    if how == "file":
        return raw.decode("utf-8"), None
    if how.startswith("pygithub"):
        tmp = "/tmp/_pg.txt"; open(tmp, "wb").write(raw)
        ex = list(parse_pygithub.exchanges(tmp))[arg]
        url = ex["url"]
        if how.endswith("items"):
            return json.dumps(json.loads(ex["body"])["items"], ensure_ascii=False, separators=(",", ":")), url + " (items)"
        return ex["body"], url
    if how.startswith("betamax"):
        tmp = "/tmp/_bm.json"; open(tmp, "wb").write(raw)
        ex = list(parse_betamax.exchanges(tmp))[arg]
        url = ex["url"]
        if how.endswith("items"):
            return json.dumps(json.loads(ex["body"])["items"], ensure_ascii=False, separators=(",", ":")), url + " (items)"
        return ex["body"], url
    if how == "rust-comment":
        t = raw.decode("utf-8"); i = t.index("Response:") + len("Response:")
        s = t[i:].lstrip()
        v, end = json.JSONDecoder().raw_decode(s)
        return s[:end], "GET https://gitlab.soft.vub.ac.be/api/v4/users/USERNAME/events (pasted in a comment)"
    if how == "jira-ts":
        t = raw.decode("utf-8"); i = t.index("{")
        v, _ = json.JSONDecoder().raw_decode(t[i:])
        iss = next(x for x in v["issues"] if x["key"] == arg)
        return (json.dumps(iss["changelog"]["histories"], ensure_ascii=False, separators=(",", ":")),
                f"issue {arg} changelog.histories of a recorded /rest/api/latest/search?expand=changelog page")
    raise ValueError(how)

def main():
    manifest = []; counter = {}; seen = {}
    for split in ("tuning", "validation", "octokit-rb"):
        os.makedirs(os.path.join(OUT, split), exist_ok=True)
    for kind, split, repo, path, how, arg in SEL:
        commit, lic = SRC[repo]
        body, url = extract(repo, commit, path, how, arg)
        v = json.loads(body)
        assert isinstance(v, list) and v and all(isinstance(r, dict) for r in v), path
        compact = json.dumps(v, ensure_ascii=False, separators=(",", ":"))
        h = hashlib.sha256(compact.encode()).hexdigest()[:16]
        if h in seen:
            print("DUPLICATE of", seen[h], "skipped:", path, arg); continue
        counter[kind] = counter.get(kind, 0) + 1
        name = f"{kind}-{counter[kind]}.json"
        seen[h] = name
        rel = os.path.join(split, name)
        with open(os.path.join(OUT, rel), "w", encoding="utf-8") as f:
            f.write(body if body.endswith("\n") else body + "\n")
        manifest.append(dict(file=rel, kind=kind, split=split, repo=repo, commit=commit, path=path,
                             extract=how, exchange=arg, request=url, licence=lic, rows=len(v),
                             sha256_compact=h))
    json.dump(manifest, open(os.path.join(OUT, "manifest.json"), "w"), indent=1)
    print(len(manifest), "pages")

if __name__ == "__main__":
    main()
