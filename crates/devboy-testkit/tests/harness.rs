//! Proves the harness itself: the pinned peers are installed, the scripted
//! model speaks the Messages API, and the real Claude Code CLI driven by it
//! calls a real MCP server and shows the model the result.

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::process::Command;

use devboy_testkit::peers;
use devboy_testkit::scripted_model::{
    RequestKind, COMPACTION_SUMMARY, COMPACTION_SUMMARY_TEXT, SIDE_TEXT,
};
use devboy_testkit::{ClaudeCode, Script, ScriptedModel, Turn};
use serde_json::{json, Value};

/// One HTTP/1.1 exchange with `Connection: close`: (status, head, body).
fn http(addr: SocketAddr, method: &str, path: &str, body: &Value) -> (u16, String, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_owned(), body.to_owned())
}

/// Parses a server-sent event stream into (event, data) pairs.
fn sse(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut name = String::new();
            let mut data = Value::Null;
            for line in e.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_owned();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(d).unwrap();
                }
            }
            assert_eq!(data["type"], json!(name), "event name matches data type");
            (name, data)
        })
        .collect()
}

fn main_request(messages: Value, stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 1000,
        "stream": stream,
        "tools": [{"name": "mcp__x__echo", "input_schema": {"type": "object"}}],
        "messages": messages,
    })
}

#[test]
fn peers_are_installed_and_python_sdk_is_2x() {
    for bin in [
        "mcp-server-everything",
        "mcp-server-filesystem",
        "mcp-server-memory",
        "claude",
    ] {
        assert!(peers::node_bin(bin).is_absolute());
    }
    for bin in ["mcp-server-time", "mcp-server-git"] {
        assert!(peers::venv_bin(bin).is_file());
    }
    let out = Command::new(peers::python())
        .args([
            "-c",
            "import importlib.metadata as m, mcp; print(m.version('mcp'))",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let version = String::from_utf8(out.stdout).unwrap();
    assert!(version.starts_with("2."), "mcp SDK version {version}");
    let claude = Command::new(peers::claude_bin())
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&claude.stdout).contains("Claude Code"));
}

#[test]
#[should_panic(expected = "test peer no-such-peer not installed: run tests/peers/install.sh")]
fn missing_peer_panics_with_install_hint() {
    peers::node_bin("no-such-peer");
}

#[test]
fn scripted_model_streams_tool_use_then_text_and_records() {
    let model = ScriptedModel::start(
        Script::new()
            .tool_use(
                "mcp__x__echo",
                json!({"message": "héllo wörld, a long enough input to be split"}),
            )
            .text("second turn")
            .final_text("all done"),
    )
    .unwrap();
    let addr = model.addr();

    // A side request (no tools) does not advance the script.
    let (status, _, body) = http(
        addr,
        "POST",
        "/v1/messages?beta=true",
        &json!({"model": "claude-haiku", "max_tokens": 5, "messages": [{"role": "user", "content": "title?"}]}),
    );
    assert_eq!(status, 200);
    let side: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(side["content"][0]["text"], json!(SIDE_TEXT));
    assert_eq!(model.turns_remaining(), 2);

    // Main request 1, streamed: a tool_use block delivered as input_json_delta.
    let (status, head, body) = http(
        addr,
        "POST",
        "/v1/messages?beta=true",
        &main_request(json!([{"role": "user", "content": "go"}]), true),
    );
    assert_eq!(status, 200);
    assert!(head.contains("text/event-stream"), "{head}");
    let events = sse(&body);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    assert_eq!(
        names
            .iter()
            .filter(|n| **n == "content_block_start")
            .count(),
        1
    );
    assert_eq!(
        names.iter().filter(|n| **n == "content_block_stop").count(),
        1
    );
    let start = &events
        .iter()
        .find(|(n, _)| n == "content_block_start")
        .unwrap()
        .1;
    assert_eq!(start["content_block"]["type"], "tool_use");
    assert_eq!(start["content_block"]["name"], "mcp__x__echo");
    assert_eq!(start["content_block"]["input"], json!({}));
    let tool_use_id = start["content_block"]["id"].as_str().unwrap().to_owned();
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| d)
        .collect();
    assert!(deltas.len() > 1, "input is streamed in several pieces");
    let partial: String = deltas
        .iter()
        .map(|d| {
            assert_eq!(d["delta"]["type"], "input_json_delta");
            d["delta"]["partial_json"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        json!({"message": "héllo wörld, a long enough input to be split"})
    );
    let delta = &events.iter().find(|(n, _)| n == "message_delta").unwrap().1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");

    // Main request 2, not streamed, carries the tool result: a text answer.
    let history = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": tool_use_id, "name": "mcp__x__echo", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": [{"type": "text", "text": "Echo: hi"}]}]},
    ]);
    let (status, _, body) = http(
        addr,
        "POST",
        "/v1/messages",
        &main_request(history.clone(), false),
    );
    assert_eq!(status, 200);
    let msg: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        msg["content"],
        json!([{"type": "text", "text": "second turn"}])
    );
    assert_eq!(msg["stop_reason"], "end_turn");

    // Script exhausted: the final text, streamed as text deltas.
    let (_, _, body) = http(addr, "POST", "/v1/messages", &main_request(history, true));
    let text: String = sse(&body)
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "all done");

    // Auxiliary endpoints.
    let (status, _, body) = http(
        addr,
        "POST",
        "/v1/messages/count_tokens?beta=true",
        &json!({"model": "m", "messages": [{"role": "user", "content": "count me please"}]}),
    );
    assert_eq!(status, 200);
    assert!(
        serde_json::from_str::<Value>(&body).unwrap()["input_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(http(addr, "HEAD", "/api/hello", &Value::Null).0, 200);
    assert_eq!(http(addr, "POST", "/v1/other", &json!({})).0, 404);

    // What the model saw.
    let kinds: Vec<RequestKind> = model.recorded().iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [
            RequestKind::Side,
            RequestKind::Main,
            RequestKind::Main,
            RequestKind::Main,
            RequestKind::CountTokens,
            RequestKind::Other,
            RequestKind::Other,
        ]
    );
    assert_eq!(model.requests().len(), 4);
    assert_eq!(model.main_requests().len(), 3);
    assert_eq!(model.side_requests().len(), 1);
    assert_eq!(model.tools_offered(), ["mcp__x__echo"]);
    let results = model.tool_results();
    assert_eq!(results.len(), 1, "repeated history is reported once");
    assert_eq!(results[0].tool_use_id, tool_use_id);
    assert_eq!(results[0].tool_name.as_deref(), Some("mcp__x__echo"));
    assert_eq!(results[0].text(), "Echo: hi");
    assert!(!results[0].is_error);
}

#[test]
fn scripted_model_keeps_connections_alive_and_plays_parallel_calls() {
    let model = ScriptedModel::start(Script::new().turn(Turn::ParallelToolUse(vec![
        ("a".into(), json!({"n": 1})),
        ("b".into(), json!({"n": 2})),
    ])))
    .unwrap();
    let mut stream = std::net::TcpStream::connect(model.addr()).unwrap();
    let body = main_request(json!([{"role": "user", "content": "go"}]), false).to_string();
    for _ in 0..2 {
        write!(
            stream,
            "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
    }
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    assert_eq!(raw.matches("HTTP/1.1 200 OK").count(), 2, "{raw}");
    let first_body = raw.split("\r\n\r\n").nth(1).unwrap();
    let first_len: usize = raw
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    let first: Value = serde_json::from_str(&first_body[..first_len]).unwrap();
    let names: Vec<&str> = first["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(model.main_requests().len(), 2);
}

#[test]
fn claude_mcp_list_shows_real_server_connected() {
    let claude = ClaudeCode::new().unwrap();
    claude
        .mcp_add_peer("ev", &peers::server_everything())
        .unwrap();
    let list = claude.mcp_list().unwrap();
    let line = list
        .lines()
        .find(|l| l.starts_with("ev:"))
        .unwrap_or_else(|| panic!("server ev not listed:\n{list}"));
    assert!(line.contains("Connected"), "{list}");
}

#[test]
fn claude_calls_real_mcp_tool_and_model_sees_result() {
    let model = ScriptedModel::start(
        Script::new()
            .tool_use("mcp__ev__echo", json!({"message": "ping-4711"}))
            .final_text("echo received"),
    )
    .unwrap();
    let claude = ClaudeCode::new().unwrap().model(&model);
    claude
        .mcp_add_peer("ev", &peers::server_everything())
        .unwrap();

    let out = claude
        .run_print("Echo ping-4711 please.", &["mcp__ev__echo"])
        .unwrap();
    out.assert_success();
    assert!(out.stdout.contains("echo received"), "{out}");

    assert_eq!(model.turns_remaining(), 0);
    assert!(
        model.tools_offered().iter().any(|t| t == "mcp__ev__echo"),
        "MCP tools are offered up front: {:?}",
        model.tools_offered()
    );
    let results = model.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    let result = &results[0];
    assert_eq!(result.tool_name.as_deref(), Some("mcp__ev__echo"));
    assert!(!result.is_error, "{result:?}");
    // The echo tool has no structuredContent: the text block reaches the model.
    assert_eq!(
        result.content,
        json!([{"type": "text", "text": "Echo: ping-4711"}])
    );

    // Claude Code's own transcript of the session is readable.
    let logs = claude.session_logs();
    assert!(
        !logs.is_empty(),
        "no session logs under {}",
        claude.home().display()
    );
    let transcript: String = logs
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(transcript.contains("Echo: ping-4711"));
}

/// What Claude Code was measured to do (docs/invariants.md): when a result carries `structuredContent`, Claude Code sends
/// the serialized `structuredContent` to the model instead of the text
/// blocks. server-filesystem's `read_text_file` returns both.
#[test]
fn claude_forwards_structured_content_instead_of_text() {
    let claude = ClaudeCode::new().unwrap();
    let file = claude.project().join("notes.txt");
    std::fs::write(&file, "alpha beta gamma").unwrap();
    let model = ScriptedModel::start(Script::new().tool_use(
        "mcp__fs__read_text_file",
        json!({"path": file.to_str().unwrap()}),
    ))
    .unwrap();
    let claude = claude.model(&model);
    claude
        .mcp_add_peer("fs", &peers::server_filesystem(claude.project()))
        .unwrap();

    let out = claude
        .run_print("Read notes.txt.", &["mcp__fs__read_text_file"])
        .unwrap();
    out.assert_success();

    let results = model.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].is_error, "{:?}", results[0]);
    // A single string holding the serialized structuredContent, not the
    // server's text block ("alpha beta gamma").
    let content = results[0]
        .content
        .as_str()
        .unwrap_or_else(|| panic!("expected a string, got {}", results[0].content));
    assert_eq!(
        serde_json::from_str::<Value>(content).unwrap(),
        json!({"content": "alpha beta gamma"})
    );
}

#[test]
fn claude_reports_unpermitted_tool_as_error_result() {
    let model =
        ScriptedModel::start(Script::new().tool_use("mcp__ev__echo", json!({"message": "x"})))
            .unwrap();
    let claude = ClaudeCode::new().unwrap().model(&model);
    claude
        .mcp_add_peer("ev", &peers::server_everything())
        .unwrap();
    let out = claude.run_print("Echo x.", &[]).unwrap();
    out.assert_success();
    let results = model.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].is_error);
    assert!(results[0].text().contains("permission"), "{:?}", results[0]);
}

#[test]
fn project_mcp_json_is_trusted_without_prompt_and_peer_env_is_passed() {
    let claude = ClaudeCode::new().unwrap();
    let memory_file = claude.scratch_dir().join("memory.jsonl");
    let memory = peers::server_memory(&memory_file);
    claude.mcp_add_peer("mem", &memory).unwrap();
    let fs = peers::server_filesystem(claude.project());
    claude
        .write_project_mcp_json(&json!({
            "pfs": {"type": "stdio", "command": fs.program_str(), "args": fs.args},
        }))
        .unwrap();
    let list = claude.mcp_list().unwrap();
    for name in ["mem:", "pfs:"] {
        let line = list
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} not listed:\n{list}"));
        assert!(line.contains("Connected"), "{list}");
    }
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(claude.home().join(".claude.json")).unwrap())
            .unwrap();
    assert_eq!(
        config["mcpServers"]["mem"]["env"]["MEMORY_FILE_PATH"],
        json!(memory_file.to_str().unwrap())
    );
}

/// One `claude` process plays several user turns, `/compact` among them:
/// the compaction request is answered with the scripted summary without
/// taking a turn of the script, and the next turn starts from that summary.
#[test]
fn claude_session_plays_several_turns_and_compacts_in_one_process() {
    let model = ScriptedModel::start(
        Script::new()
            .text("first answer")
            .text("second answer")
            .final_text("spare answer"),
    )
    .unwrap();
    let claude = ClaudeCode::new().unwrap().model(&model);
    let mut session = claude.start_session(&[]).unwrap();
    let first = session.turn("Say one thing.").unwrap();
    assert_eq!(first["result"], json!("first answer"), "{first}");
    let compact = session.turn("/compact").unwrap();
    assert_eq!(compact["subtype"], json!("success"), "{compact}");
    let second = session.turn("Say another thing.").unwrap();
    assert_eq!(second["result"], json!("second answer"), "{second}");
    let events = session.events().to_vec();
    session.finish().unwrap().assert_success();

    // One process, one conversation: every event carries the same session id.
    let ids: std::collections::HashSet<&str> = events
        .iter()
        .filter_map(|e| e["session_id"].as_str())
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(events
        .iter()
        .any(|e| e["subtype"] == json!("compact_boundary")));

    assert_eq!(model.turns_remaining(), 0);
    let compactions = model.compaction_requests();
    assert_eq!(compactions.len(), 1, "one summarization request");
    assert!(compactions[0].to_string().contains("first answer"));
    let answer = model
        .recorded()
        .into_iter()
        .find(|r| r.kind == RequestKind::Compaction)
        .and_then(|r| r.answer)
        .expect("the compaction request was answered");
    assert_eq!(answer["content"][0]["text"], json!(COMPACTION_SUMMARY));
    // The turn after /compact starts from the summary, not the history.
    let last = model.last_main_request().unwrap().to_string();
    assert!(last.contains(COMPACTION_SUMMARY_TEXT), "{last}");
    assert!(!last.contains("first answer"), "{last}");
}
