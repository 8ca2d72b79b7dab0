"""A stand-in browser for `devboy login` in the conformance runs: $BROWSER
runs it with the authorization URL. The suite's authorization server
consents at once and redirects to devboy's loopback callback; this follows
the redirects, as a browser would, and exits."""

import sys
import urllib.request

with urllib.request.urlopen(sys.argv[-1], timeout=30) as answer:
    print("browser: landed on", answer.geturl().split("?")[0], answer.status, file=sys.stderr)
