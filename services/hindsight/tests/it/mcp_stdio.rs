//! `hindsight mcp` driven as an MCP client would: spawned, spoken to over
//! stdin/stdout with JSON-RPC (initialize, tools/list, tools/call for every
//! tool, and a bad argument), next to the whole system running in this
//! test's sandbox.

use std::{process::Stdio, time::Duration};

use hindsight_tests::{
    Deployment, model_dir,
    stack::{Stack, drained},
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
};

struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Client {
    fn spawn(d: &Deployment, tenant: &str, user: &str) -> Self {
        let config = d.config();
        let mut child = Command::new(env!("CARGO_BIN_EXE_hindsight"))
            .args(["mcp", "--tenant", tenant, "--user", user])
            .env("HINDSIGHT_NAMESPACE", config.namespace.as_str())
            .env("HINDSIGHT_DATABASE_URL", &config.database_url)
            .env("HINDSIGHT_NATS_URL", &config.nats_url)
            .env("HINDSIGHT_DATA_DIR", &config.data_dir)
            .env("HINDSIGHT_EMBED_MODEL_DIR", model_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("hindsight mcp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    async fn send(&mut self, msg: Value) {
        let mut line = msg.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    /// Sends a request and returns its response; every stdout line must be JSON-RPC.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.stdout.next_line())
                .await
                .expect("an answer within 60 s")
                .expect("read")
                .expect("the server is still running");
            let msg: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout holds only protocol messages ({e}): {line}"));
            assert_eq!(msg["jsonrpc"], "2.0", "{msg}");
            if msg["id"] == json!(id) {
                return msg;
            }
        }
    }

    async fn call(&mut self, tool: &str, args: Value) -> (bool, String) {
        let resp = self
            .request("tools/call", json!({"name": tool, "arguments": args}))
            .await;
        if let Some(err) = resp.get("error") {
            return (true, err.to_string());
        }
        let result = &resp["result"];
        let text = result["content"]
            .as_array()
            .map(|c| {
                c.iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        (result["isError"].as_bool().unwrap_or(false), text)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_can_use_every_tool_over_stdio() {
    let d = Deployment::new("test", |_| {}).await;
    let index = hindsight_index::open(&d.config().index, &d.config().data_dir).expect("index");
    let stack = Stack::start(&d, index).await;
    let mut c = Client::spawn(&d, "acme", "li");

    let init = c
        .request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "hindsight-test", "version": "0"}}),
        )
        .await;
    assert_eq!(init["result"]["serverInfo"]["name"], "hindsight", "{init}");
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    let tools = c.request("tools/list", json!({})).await;
    let list = tools["result"]["tools"].as_array().expect("tools").clone();
    let names: Vec<&str> = list.iter().filter_map(|t| t["name"].as_str()).collect();
    for expected in [
        "memory_write",
        "memory_search",
        "memory_update",
        "memory_forget",
        "memory_summarize",
        "memory_debug",
    ] {
        assert!(names.contains(&expected), "{names:?}");
    }
    let search = list
        .iter()
        .find(|t| t["name"] == "memory_search")
        .expect("search");
    assert!(
        search["description"]
            .as_str()
            .unwrap_or("")
            .contains("Do not use")
    );
    assert_eq!(
        search["inputSchema"]["properties"]["top_k"]["maximum"], 50,
        "{search}"
    );

    let (failed, text) = c
        .call(
            "memory_write",
            json!({"session_id": "s1", "turn_id": "m1", "content": "I'm allergic to peanuts and I live in Lisbon.",
                   "working_memory": {"ticket": "T-42"}}),
        )
        .await;
    assert!(!failed, "{text}");
    assert!(text.contains("T-42"), "{text}");
    drained(&d, 1).await;

    let (failed, text) = c.call("memory_debug", json!({})).await;
    assert!(!failed && text.contains("\"total\""), "{text}");

    let (failed, text) = c
        .call(
            "memory_search",
            json!({"query": "what is the user allergic to?", "session_id": "s1"}),
        )
        .await;
    assert!(!failed, "{text}");
    assert!(text.contains("peanuts") && text.contains("T-42"), "{text}");
    assert!(
        !text.contains("degraded"),
        "the running gateway answered: {text}"
    );

    let (failed, text) = c
        .call(
            "memory_search",
            json!({"query": "peanuts", "format": "json"}),
        )
        .await;
    assert!(!failed, "{text}");
    let answer: Value = serde_json::from_str(&text).expect("json format");
    let id = answer["memories"][0]["id"]
        .as_str()
        .expect("an id")
        .to_string();

    let (failed, text) = c
        .call("memory_update", json!({"id": id, "importance": 0.95}))
        .await;
    assert!(!failed && text.contains("0.95"), "{text}");
    let (failed, text) = c
        .call("memory_summarize", json!({"session_id": "s1"}))
        .await;
    assert!(!failed && text.contains("peanuts"), "{text}");
    let (failed, text) = c
        .call("memory_forget", json!({"id": id, "decay_factor": 1.0}))
        .await;
    assert!(!failed && text.contains("archived"), "{text}");

    // Bad arguments come back as errors an agent can act on.
    let (failed, text) = c
        .call("memory_search", json!({"query": "peanuts", "top_k": 500}))
        .await;
    assert!(failed, "{text}");
    assert!(text.contains("top_k"), "{text}");
    let (failed, text) = c
        .call(
            "memory_forget",
            json!({"id": "not-an-id", "decay_factor": 0.5}),
        )
        .await;
    assert!(failed && text.contains("not a memory id"), "{text}");

    // Another tenant's process sees nothing of this one.
    let mut other = Client::spawn(&d, "other-tenant", "li");
    other
        .request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "hindsight-test", "version": "0"}}),
        )
        .await;
    other
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let (_, text) = other
        .call(
            "memory_search",
            json!({"query": "Lisbon", "format": "json"}),
        )
        .await;
    assert!(!text.contains("Lisbon"), "{text}");

    // Without a gateway running, search still answers, from keyword search, and says so.
    stack.stop().await;
    let (failed, text) = c
        .call(
            "memory_search",
            json!({"query": "Lisbon peanuts", "include": ["archived"]}),
        )
        .await;
    assert!(!failed, "{text}");
    assert!(text.contains("keyword search"), "{text}");

    drop(c.stdin);
    let _ = tokio::time::timeout(Duration::from_secs(10), c.child.wait()).await;
    d.remove().await;
}
