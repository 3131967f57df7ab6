//! An MCP client over streamable HTTP, as an agent's SDK speaks it: a session
//! opened with `initialize`, tool calls, and the session ended with DELETE.

use serde_json::{Value, json};

/// The last JSON-RPC message of a streamable-HTTP reply (SSE `data:` lines, or plain JSON).
pub fn rpc_message(body: &str) -> Value {
    body.lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:"))
        .find_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .or_else(|| serde_json::from_str(body).ok())
        .unwrap_or(Value::Null)
}

pub struct McpSession {
    client: reqwest::Client,
    url: String,
    key: String,
    id: Option<String>,
}

impl McpSession {
    /// Opens a session at `base_url/mcp` with `key`; panics unless it is accepted.
    pub async fn open(client: &reqwest::Client, base_url: &str, key: &str) -> Self {
        let mut s = Self {
            client: client.clone(),
            url: format!("{base_url}/mcp"),
            key: key.into(),
            id: None,
        };
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}});
        let (status, body) = s.post(init).await;
        assert_eq!(status, 200, "{body}");
        s.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        s
    }

    async fn post(&mut self, body: Value) -> (u16, String) {
        let mut req = self
            .client
            .post(&self.url)
            .header("authorization", format!("Bearer {}", self.key))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(id) = &self.id {
            req = req.header("mcp-session-id", id);
        }
        let resp = req.send().await.expect("the gateway answers");
        if let Some(id) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            self.id = Some(id.to_string());
        }
        let status = resp.status().as_u16();
        (status, resp.text().await.expect("body"))
    }

    /// Calls `tool` with `arguments`: the HTTP status and the JSON-RPC reply.
    pub async fn call(&mut self, tool: &str, arguments: Value) -> (u16, Value) {
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments}});
        let (status, body) = self.post(call).await;
        (status, rpc_message(&body))
    }

    /// Ends the session, so the server lets go of what it holds.
    pub async fn close(self) {
        if let Some(id) = self.id {
            let _ = self
                .client
                .delete(&self.url)
                .header("authorization", format!("Bearer {}", self.key))
                .header("mcp-session-id", id)
                .send()
                .await;
        }
    }
}
