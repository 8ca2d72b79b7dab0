"""devboy as the client in the MCP conformance suite's client scenarios.

The suite starts a server of its own for each scenario and runs this
script with that server's URL as the last argument (and the scenario's
name in MCP_CONFORMANCE_SCENARIO):

    conformance client --command "python tests/conformance/client.py" --scenario NAME

The script wraps that URL as devboy's only upstream, under its own names
(`prefix = ""`; for an authorization scenario with the `oauth` settings a
user would give, after `devboy login` with a $BROWSER that follows the
redirect), starts `devboy mcp` on it ($DEVBOY_BIN) in a fresh config,
cache and runtime directory, and drives devboy over stdio with the Python
SDK the way an agent would: it lists the tools and calls each one the
server offers, with arguments made from its input schema, answering what
devboy passes on of the server's requests (an elicitation is accepted with
the defaults its schema gives; a call devboy answers with "run `devboy
login`", as a server wanting a wider scope makes it, is followed by that
login and the call again, as a user would). So what the suite sees is devboy's client
side: its initialize, its HTTP requests and streams, its calls.

Exits 0 when every call was answered (an error *result* counts as an
answer), 1 otherwise; diagnostics go to stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, types
from mcp.client.stdio import StdioServerParameters

# Each request must be answered well within the suite's own 30 s limit.
STEP_TIMEOUT_S = 20
# The client ID metadata document the suite's CIMD scenario accepts.
CIMD_URL = "https://conformance-test.local/client-metadata.json"


def say(*parts: Any) -> None:
    print("conformance client:", *parts, file=sys.stderr, flush=True)
    log = os.environ.get("DEVBOY_CONFORMANCE_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            print(*parts, file=f)


def example(schema: dict[str, Any], index: int = 0) -> Any:
    """A value that fits `schema` (its default or first example when it
    gives one), for calling a tool the script knows nothing else about."""
    if "default" in schema:
        return schema["default"]
    if schema.get("examples"):
        return schema["examples"][0]
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind in ("number", "integer"):
        return index + 1
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return arguments(schema)
    if kind == "null":
        return None
    return f"value {index + 1}"


def arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for every required property of an object schema."""
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    return {name: example(properties.get(name) or {}, i) for i, name in enumerate(required)}


async def elicit(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accepts with the defaults the requested schema gives (what a client
    that applies defaults sends when the user changes nothing)."""
    schema = getattr(params, "requested_schema", None) or {}
    content = {
        name: prop["default"]
        for name, prop in (schema.get("properties") or {}).items()
        if isinstance(prop, dict) and "default" in prop
    }
    say("elicitation accepted with", json.dumps(content))
    return types.ElicitResult(action="accept", content=content)


def oauth_settings(scenario: str, home: Path) -> dict[str, Any]:
    """The `oauth` table a user would write for the scenario's server: the
    client the suite registered for it (MCP_CONFORMANCE_CONTEXT), or the
    client ID metadata document the suite serves for devboy. A private key
    goes into a file of its own, as a user keeps one."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    settings: dict[str, Any] = {}
    if "client_id" in context:
        settings["clientId"] = context["client_id"]
    if "client_secret" in context:
        settings["clientSecret"] = context["client_secret"]
    if scenario == "auth/basic-cimd":
        settings["clientMetadataUrl"] = CIMD_URL
    if scenario.startswith("auth/client-credentials-"):
        # A machine client: devboy gets its tokens itself, no login.
        settings["grant"] = "client_credentials"
    if "private_key_pem" in context:
        key = home / "machine-key.pem"
        key.write_text(context["private_key_pem"])
        key.chmod(0o600)
        settings["privateKeyFile"] = str(key)
    if "idp_token_endpoint" in context:
        # Cross-app access: the user's ID token from the enterprise's
        # identity provider, printed by a command as a login tool would.
        token = home / "id-token"
        token.write_text(context["idp_id_token"])
        token.chmod(0o600)
        settings["grant"] = "cross_app"
        settings["idpTokenEndpoint"] = context["idp_token_endpoint"]
        settings["idpClientId"] = context["idp_client_id"]
        settings["idTokenCommand"] = f"cat '{token}'"
    return settings


def login(devboy: str, config: Path, env: dict[str, str]) -> None:
    """`devboy login` as the README says, with $BROWSER a stand-in that
    follows the authorization server's redirect."""
    browser = f"{sys.executable} {Path(__file__).with_name('browser.py')}"
    done = subprocess.run(
        [devboy, "login", "conformance", "--config", str(config)],
        env={**env, "BROWSER": browser},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
    )
    say("devboy login:", done.returncode, done.stderr.strip().replace("\n", " | ")[-600:])


async def run(url: str, scenario: str) -> bool:
    devboy = os.environ.get("DEVBOY_BIN", "devboy")
    with tempfile.TemporaryDirectory(prefix="devboy-conformance-") as tmp:
        home = Path(tmp)
        config = home / "devboy.json"
        server: dict[str, Any] = {"type": "http", "url": url, "prefix": ""}
        oauth = oauth_settings(scenario, home)
        if oauth:
            server["oauth"] = oauth
        config.write_text(json.dumps({"mcpServers": {"conformance": server}}))
        env = dict(os.environ)
        env.update(
            DEVBOY_CONFIG_DIR=str(home),
            DEVBOY_CACHE_DIR=str(home / "cache"),
            DEVBOY_RUNTIME_DIR=str(home / "run"),
            DEVBOY_TELEMETRY_DIR=str(home / "telemetry"),
        )
        if scenario.startswith("auth/") and oauth.get("grant") in (None, "authorization_code"):
            login(devboy, config, env)
        params = StdioServerParameters(
            command=devboy,
            args=["mcp", "--config", str(config), "--list-grace-ms", "15000"],
            env=env,
        )
        async with Client(
            params,
            mode="legacy",
            read_timeout_seconds=STEP_TIMEOUT_S,
            elicitation_callback=elicit,
        ) as client:
            tools = (await client.list_tools()).tools
            upstream = [t for t in tools if not t.name.startswith("devboy_")]
            say(scenario, "lists", [t.name for t in upstream])
            ok = True
            for tool in upstream:
                args = arguments(tool.input_schema or {})
                try:
                    result = await client.call_tool(tool.name, args)
                except Exception as error:  # an unanswered call is the failure
                    say(f"{tool.name}({json.dumps(args)}) failed: {error!r}")
                    ok = False
                    continue
                text = " ".join(getattr(b, "text", "") for b in result.content)[:300]
                say(f"{tool.name}({json.dumps(args)}) ->", "error:" if result.is_error else "", text)
                if result.is_error and "run `devboy login" in text and scenario.startswith("auth/"):
                    # What devboy tells a user whose server wants a wider
                    # login (403 insufficient_scope): log in, call again.
                    login(devboy, config, env)
                    result = await client.call_tool(tool.name, args)
                    text = " ".join(getattr(b, "text", "") for b in result.content)[:300]
                    say(f"after the login, {tool.name} ->", "error:" if result.is_error else "", text)
            return ok


def main() -> int:
    if len(sys.argv) < 2:
        say("usage: client.py SERVER_URL (MCP_CONFORMANCE_SCENARIO names the scenario)")
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "?")
    try:
        return 0 if anyio.run(run, sys.argv[-1], scenario) else 1
    except Exception as error:
        say("failed:", repr(error))
        return 1


if __name__ == "__main__":
    sys.exit(main())
