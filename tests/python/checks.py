"""What the Python SDK test clients share: explicit checks (never bare
`assert`, which `python -O` strips) and the one way a run ends — a JSON
summary on stdout, exit 1 when a check failed or the session did not run
to the end."""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any, Awaitable, Callable

import anyio


class Checks:
    """Collects check outcomes instead of stopping at the first failure."""

    def __init__(self) -> None:
        self.passed: list[str] = []
        self.failed: list[str] = []

    def check(self, condition: bool, what: str, detail: Any = None) -> bool:
        if condition:
            self.passed.append(what)
        else:
            message = what if detail is None else f"{what}: {detail!r}"
            self.failed.append(message)
            print(f"CHECK FAILED: {message}", file=sys.stderr)
        return condition

    def equal(self, actual: Any, expected: Any, what: str) -> bool:
        return self.check(actual == expected, what, {"actual": actual, "expected": expected})


def leaf_errors(error: BaseException) -> list[str]:
    """The innermost exceptions of a (possibly nested) exception group, as text."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_errors(inner)]
    return [f"{type(error).__name__}: {error}"]


def finish(
    run: Callable[[Any, Checks, dict[str, Any]], Awaitable[None]],
    args: Any,
    summary: dict[str, Any],
) -> int:
    """Runs `run(args, checks, summary)`, prints the summary with the
    checks' outcome and returns the exit code."""
    checks = Checks()
    try:
        anyio.run(run, args, checks, summary)
    except BaseException as error:  # noqa: BLE001 - any escape is a failed run, reported in the summary
        traceback.print_exc(file=sys.stderr)
        checks.check(False, "session ran to the end", "; ".join(leaf_errors(error)))
    summary["passed"] = len(checks.passed)
    summary["failed"] = checks.failed
    summary["ok"] = not checks.failed and len(checks.passed) > 0
    print(json.dumps(summary, default=str))
    return 0 if summary["ok"] else 1
