//! The deployment files agree with each other and with the code:
//! docker-compose.yml, ops/Dockerfile, ops/nats.conf, ops/prometheus.yml and
//! the Grafana provisioning and dashboards under ops/grafana.
//!
//! Static checks read the files only. Two checks start the local nats-server
//! (`/usr/sbin/nats-server`, as `ops/setup.sh` installs it) with ops/nats.conf;
//! they print a note and pass when it is absent. Each server gets its own port
//! and store directory, so the tests run in parallel.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use regex::Regex;
use serde_yaml::Value;

/// Infrastructure services: each has a healthcheck.
const INFRA: &[&str] = &["nats", "postgres", "qdrant", "prometheus", "grafana"];
/// hindsight services: the hindsight image, one `hindsight run <stage>` each.
const HINDSIGHT: &[&str] = &[
    "filter", "extract", "embed", "persist", "gateway", "janitor",
];
/// What every hindsight service needs healthy before it starts.
const HINDSIGHT_NEEDS: &[&str] = &["nats", "postgres", "qdrant"];
/// The port each hindsight service serves HTTP and /metrics on, in its container.
const HTTP_PORT: u16 = 8080;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
}

fn yaml(rel: &str) -> Value {
    let mut value: Value =
        serde_yaml::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel} is not YAML: {e}"));
    value
        .apply_merge()
        .unwrap_or_else(|e| panic!("{rel}: merge keys: {e}"));
    value
}

fn compose() -> Value {
    yaml("docker-compose.yml")
}

fn services(compose: &Value) -> BTreeMap<String, Value> {
    compose["services"]
        .as_mapping()
        .expect("docker-compose.yml has services")
        .iter()
        .map(|(k, v)| (k.as_str().expect("a service name").to_string(), v.clone()))
        .collect()
}

fn str_of<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value:?}"))
}

/// A string list (`["a", "b"]`) or a single string split on whitespace.
fn words(value: &Value, what: &str) -> Vec<String> {
    match value {
        Value::Sequence(items) => items.iter().map(|v| str_of(v, what).to_string()).collect(),
        Value::String(s) => s.split_whitespace().map(str::to_string).collect(),
        other => panic!("{what} is neither a list nor a string: {other:?}"),
    }
}

/// A service's environment as a map, from either compose form.
fn environment(service: &Value) -> BTreeMap<String, String> {
    match &service["environment"] {
        Value::Null => BTreeMap::new(),
        Value::Mapping(m) => m
            .iter()
            .map(|(k, v)| {
                let value = match v {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => serde_yaml::to_string(other)
                        .expect("a scalar")
                        .trim()
                        .to_string(),
                };
                (str_of(k, "a variable").to_string(), value)
            })
            .collect(),
        Value::Sequence(items) => items
            .iter()
            .map(|v| {
                let s = str_of(v, "an environment entry");
                let (k, v) = s.split_once('=').unwrap_or((s, ""));
                (k.to_string(), v.to_string())
            })
            .collect(),
        other => panic!("environment is neither a map nor a list: {other:?}"),
    }
}

/// Compose's `${NAME:-default}` as the default, `${NAME}` as empty.
fn with_defaults(value: &str) -> String {
    let re = Regex::new(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-?]([^}]*))?\}").expect("regex");
    re.replace_all(value, |c: &regex::Captures| {
        c.get(2).map_or(String::new(), |m| m.as_str().to_string())
    })
    .into_owned()
}

/// A volume entry as (source, target): short syntax `src:dst[:mode]` or the long one.
fn mounts(service: &Value) -> Vec<(Option<String>, String)> {
    let Some(list) = service["volumes"].as_sequence() else {
        return Vec::new();
    };
    list.iter()
        .map(|v| match v {
            Value::String(s) => {
                let parts: Vec<&str> = s.split(':').collect();
                match parts.as_slice() {
                    [target] => (None, target.to_string()),
                    [source, target, ..] => (Some(source.to_string()), target.to_string()),
                    [] => panic!("empty volume entry"),
                }
            }
            Value::Mapping(_) => (
                v["source"].as_str().map(str::to_string),
                str_of(&v["target"], "a volume target").to_string(),
            ),
            other => panic!("a volume entry is neither a string nor a map: {other:?}"),
        })
        .collect()
}

fn is_host_path(source: &str) -> bool {
    source.starts_with('.') || source.starts_with('/') || source.starts_with('~')
}

/// The ports a service listens on inside its container: the container side of
/// `ports`, `expose`, and for hindsight services the port of HINDSIGHT_HTTP_ADDR.
fn container_ports(service: &Value) -> BTreeSet<u16> {
    let mut ports = BTreeSet::new();
    for key in ["ports", "expose"] {
        for p in service[key].as_sequence().into_iter().flatten() {
            let spec = match p {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Mapping(_) => p["target"].as_u64().expect("a port target").to_string(),
                other => panic!("a port entry is neither a string nor a map: {other:?}"),
            };
            let container = spec.rsplit(':').next().expect("a port");
            let container = container.split('/').next().expect("a port");
            ports.insert(container.parse().unwrap_or_else(|_| panic!("port {spec}")));
        }
    }
    if let Some(addr) = environment(service).get("HINDSIGHT_HTTP_ADDR") {
        let port = addr.rsplit(':').next().expect("a port");
        ports.insert(port.parse().expect("HINDSIGHT_HTTP_ADDR ends with a port"));
    }
    ports
}

fn has_healthcheck(service: &Value) -> bool {
    let check = &service["healthcheck"];
    !check.is_null()
        && check["disable"].as_bool() != Some(true)
        && !words(&check["test"], "healthcheck.test").is_empty()
}

#[test]
fn compose_has_every_service_and_no_other() {
    let services = services(&compose());
    let names: BTreeSet<&str> = services.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = INFRA.iter().chain(HINDSIGHT).copied().collect();
    assert_eq!(
        names, expected,
        "docker-compose.yml's services; a new one must be added to INFRA or HINDSIGHT here \
         (and, for a hindsight service, to ops/prometheus.yml)"
    );
}

#[test]
fn infrastructure_is_healthchecked_and_hindsight_waits_for_it() {
    let services = services(&compose());
    for name in INFRA {
        let service = &services[*name];
        assert!(has_healthcheck(service), "{name} has no healthcheck");
        assert_eq!(
            service["restart"].as_str(),
            Some("unless-stopped"),
            "{name} restarts unless stopped"
        );
        assert!(service["image"].is_string(), "{name} names its image");
    }
    for name in HINDSIGHT {
        let service = &services[*name];
        assert_eq!(
            service["restart"].as_str(),
            Some("unless-stopped"),
            "{name} restarts unless stopped"
        );
        assert_eq!(
            service["image"].as_str(),
            Some("hindsight:latest"),
            "{name} runs the hindsight image"
        );
        assert_eq!(
            service["build"]["dockerfile"].as_str(),
            Some("ops/Dockerfile"),
            "{name} builds from ops/Dockerfile"
        );
        for needed in HINDSIGHT_NEEDS {
            assert_eq!(
                service["depends_on"][*needed]["condition"].as_str(),
                Some("service_healthy"),
                "{name} waits for {needed} to be healthy"
            );
        }
        let env = environment(service);
        for var in [
            "HINDSIGHT_NATS_URL",
            "HINDSIGHT_DATABASE_URL",
            "HINDSIGHT_HTTP_ADDR",
            "QDRANT_URL",
        ] {
            assert!(env.contains_key(var), "{name} sets {var}");
        }
        assert_eq!(
            env["HINDSIGHT_HTTP_ADDR"],
            format!("0.0.0.0:{HTTP_PORT}"),
            "{name} serves HTTP and /metrics on container port {HTTP_PORT}"
        );
    }
    // Whatever waits for a service to be healthy waits for one that has a healthcheck.
    for (name, service) in &services {
        let Some(deps) = service["depends_on"].as_mapping() else {
            assert!(
                service["depends_on"].is_null(),
                "{name}: depends_on is a map with conditions"
            );
            continue;
        };
        for (dep, how) in deps {
            let dep = str_of(dep, "a dependency");
            let Some(target) = services.get(dep) else {
                panic!("{name} depends on {dep}, which is not a service");
            };
            if how["condition"].as_str() == Some("service_healthy") {
                assert!(
                    has_healthcheck(target),
                    "{name} waits for {dep} to be healthy, but {dep} has no healthcheck"
                );
            }
        }
    }
}

#[test]
fn every_named_volume_is_declared_and_every_declared_one_used() {
    let compose = compose();
    let declared: BTreeSet<String> = compose["volumes"]
        .as_mapping()
        .expect("top-level volumes")
        .keys()
        .map(|k| str_of(k, "a volume name").to_string())
        .collect();
    let mut used = BTreeSet::new();
    for (name, service) in services(&compose) {
        for (source, target) in mounts(&service) {
            assert!(
                target.starts_with('/'),
                "{name}: mount target {target} is absolute"
            );
            match source {
                Some(s) if !is_host_path(&s) => {
                    used.insert(s);
                }
                _ => {}
            }
        }
    }
    assert_eq!(
        used, declared,
        "named volumes used by services vs declared at the top level"
    );
}

#[test]
fn every_bind_mounted_path_and_build_file_exists() {
    let root = repo();
    let compose = compose();
    let mut checked = 0;
    for (name, service) in services(&compose) {
        for (source, target) in mounts(&service) {
            let Some(source) = source.filter(|s| is_host_path(s)) else {
                continue;
            };
            assert!(
                source.starts_with("./"),
                "{name}: bind mount {source} is relative to the repository (./…)"
            );
            let path = root.join(&source);
            assert!(
                path.exists(),
                "{name}: bind-mounted {source} (at {target}) does not exist"
            );
            checked += 1;
        }
        if let Some(dockerfile) = service["build"]["dockerfile"].as_str() {
            let context = service["build"]["context"].as_str().unwrap_or(".");
            let path = root.join(context).join(dockerfile);
            assert!(path.is_file(), "{name}: {} is missing", path.display());
        }
    }
    assert!(checked >= 4, "only {checked} bind mounts found");
}

/// Runs the hindsight binary with `args` and `--help`: clap parses and checks
/// every argument before it prints the help, without connecting to anything.
fn cli_accepts(args: &[String]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hindsight"))
        .args(args)
        .arg("--help")
        .env_remove("HINDSIGHT_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run the hindsight binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn every_service_command_is_one_the_cli_accepts() {
    let services = services(&compose());
    for name in HINDSIGHT {
        let command = words(&services[*name]["command"], "command");
        assert!(!command.is_empty(), "{name} has a command");
        let (ok, text) = cli_accepts(&command);
        assert!(
            ok,
            "{name}: `hindsight {}` is refused:\n{text}",
            command.join(" ")
        );
    }
    // The image's default command too.
    let cmd = dockerfile_final_stage_instruction("CMD");
    let (ok, text) = cli_accepts(&cmd);
    assert!(ok, "the image's CMD {cmd:?} is refused:\n{text}");
    // The check itself catches a command the CLI does not know.
    let (ok, _) = cli_accepts(&["run".to_string(), "no-such-stage".to_string()]);
    assert!(!ok, "`hindsight run no-such-stage --help` must fail");
}

/// The JSON-form arguments of `instruction` in the Dockerfile's last stage.
fn dockerfile_final_stage_instruction(instruction: &str) -> Vec<String> {
    let text = read("ops/Dockerfile").replace("\\\n", " ");
    let last_stage = text
        .lines()
        .rev()
        .take_while(|l| !l.trim_start().to_uppercase().starts_with("FROM "))
        .collect::<Vec<_>>();
    let prefix = format!("{instruction} ");
    let line = last_stage
        .iter()
        .find(|l| l.trim_start().to_uppercase().starts_with(&prefix))
        .unwrap_or_else(|| panic!("the final stage of ops/Dockerfile has no {instruction}"));
    let args = line.trim_start()[prefix.len()..].trim();
    serde_json::from_str(args)
        .unwrap_or_else(|e| panic!("{instruction} {args} is not in JSON (exec) form: {e}"))
}

#[test]
fn the_image_runs_the_hindsight_binary() {
    let entrypoint = dockerfile_final_stage_instruction("ENTRYPOINT");
    let program = entrypoint.first().expect("an ENTRYPOINT program");
    assert!(
        program == "hindsight" || program.ends_with("/hindsight"),
        "the image's ENTRYPOINT is {entrypoint:?}, not the hindsight binary"
    );
    let dockerfile = read("ops/Dockerfile");
    assert!(
        dockerfile.contains("target/release/hindsight "),
        "the build stage copies target/release/hindsight"
    );
}

#[test]
fn prometheus_scrapes_every_hindsight_service_on_its_port() {
    let services = services(&compose());
    let config = yaml("ops/prometheus.yml");
    assert_eq!(
        config["global"]["scrape_interval"].as_str(),
        Some("15s"),
        "scrape interval"
    );
    let mut scraped = BTreeSet::new();
    let jobs = config["scrape_configs"]
        .as_sequence()
        .expect("scrape_configs");
    let mut job_names = BTreeSet::new();
    for job in jobs {
        let job_name = str_of(&job["job_name"], "job_name");
        assert!(job_names.insert(job_name), "job {job_name} is named twice");
        let path = job["metrics_path"].as_str().unwrap_or("/metrics");
        for group in job["static_configs"].as_sequence().expect("static_configs") {
            for target in group["targets"].as_sequence().expect("targets") {
                let target = str_of(target, "a target");
                let (host, port) = target
                    .rsplit_once(':')
                    .unwrap_or_else(|| panic!("target {target} has host:port"));
                let port: u16 = port.parse().expect("a port number");
                let Some(service) = services.get(host) else {
                    panic!("job {job_name}: target {target} is not a compose service");
                };
                let ports = container_ports(service);
                assert!(
                    ports.contains(&port),
                    "job {job_name}: {host} listens on {ports:?} in its container, not {port}"
                );
                if HINDSIGHT.contains(&host) {
                    assert_eq!(path, "/metrics", "job {job_name}: metrics path");
                    scraped.insert(host.to_string());
                }
            }
        }
    }
    let hindsight: BTreeSet<String> = HINDSIGHT.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        scraped, hindsight,
        "hindsight services scraped by Prometheus"
    );
}

#[test]
fn grafana_is_provisioned_with_the_compose_prometheus_and_dashboards() {
    let services = services(&compose());
    let grafana = &services["grafana"];
    let mounts = mounts(grafana);
    let mounted_at = |source: &str| -> String {
        mounts
            .iter()
            .find(|(s, _)| s.as_deref() == Some(source))
            .unwrap_or_else(|| panic!("grafana mounts {source}"))
            .1
            .clone()
    };
    assert_eq!(
        mounted_at("./ops/grafana/provisioning"),
        "/etc/grafana/provisioning"
    );
    let dashboards_dir = mounted_at("./ops/grafana/dashboards");

    let sources = yaml("ops/grafana/provisioning/datasources/prometheus.yml");
    let sources = sources["datasources"].as_sequence().expect("datasources");
    assert_eq!(sources.len(), 1, "one datasource");
    let source = &sources[0];
    assert_eq!(source["uid"].as_str(), Some("prometheus"));
    assert_eq!(source["type"].as_str(), Some("prometheus"));
    let url = str_of(&source["url"], "the datasource url");
    let host_port = url.strip_prefix("http://").expect("an http:// url");
    let (host, port) = host_port.split_once(':').expect("host:port");
    let port: u16 = port.trim_end_matches('/').parse().expect("a port");
    assert!(
        container_ports(&services[host]).contains(&port),
        "the datasource {url} is a compose service's port"
    );

    let providers = yaml("ops/grafana/provisioning/dashboards/hindsight.yml");
    let providers = providers["providers"].as_sequence().expect("providers");
    assert_eq!(providers.len(), 1, "one dashboard provider");
    assert_eq!(providers[0]["type"].as_str(), Some("file"));
    assert_eq!(
        providers[0]["options"]["path"].as_str(),
        Some(dashboards_dir.as_str()),
        "the provider loads the directory the dashboards are mounted at"
    );

    let mut uids = BTreeSet::new();
    for (file, dashboard) in dashboards() {
        let uid = dashboard["uid"].as_str().expect("a uid").to_string();
        assert!(uids.insert(uid.clone()), "{file}: uid {uid} is used twice");
        assert!(dashboard["title"].is_string(), "{file}: title");
        let version = dashboard["schemaVersion"].as_u64().expect("schemaVersion");
        assert!(
            (36..=41).contains(&version),
            "{file}: schemaVersion {version}"
        );
        let panels = dashboard["panels"].as_array().expect("panels");
        assert!(!panels.is_empty(), "{file} has panels");
        let mut ids = BTreeSet::new();
        let mut cells: BTreeMap<(u64, u64), String> = BTreeMap::new();
        for panel in panels {
            let title = panel["title"].as_str().unwrap_or("?");
            let id = panel["id"].as_u64().expect("a panel id");
            assert!(ids.insert(id), "{file}: panel id {id} is used twice");
            let kind = str_of_json(&panel["type"]);
            assert!(
                [
                    "row",
                    "timeseries",
                    "stat",
                    "table",
                    "bargauge",
                    "gauge",
                    "text"
                ]
                .contains(&kind),
                "{file}: panel {title} has type {kind}"
            );
            let pos = &panel["gridPos"];
            let (x, y, w, h) = (
                pos["x"].as_u64().expect("x"),
                pos["y"].as_u64().expect("y"),
                pos["w"].as_u64().expect("w"),
                pos["h"].as_u64().expect("h"),
            );
            assert!(
                w > 0 && h > 0 && x + w <= 24,
                "{file}: panel {title} lies outside the 24-column grid"
            );
            for cx in x..x + w {
                for cy in y..y + h {
                    if let Some(other) = cells.insert((cx, cy), title.to_string()) {
                        panic!("{file}: panels {other} and {title} overlap");
                    }
                }
            }
            if kind == "row" {
                continue;
            }
            assert_eq!(
                panel["datasource"]["uid"].as_str(),
                Some("prometheus"),
                "{file}: panel {title} uses the provisioned datasource"
            );
            let targets = panel["targets"].as_array().expect("targets");
            assert!(!targets.is_empty(), "{file}: panel {title} has a query");
            for target in targets {
                assert!(
                    target["expr"]
                        .as_str()
                        .is_some_and(|e| !e.trim().is_empty()),
                    "{file}: panel {title} has an expression"
                );
                if let Some(uid) = target["datasource"]["uid"].as_str() {
                    assert_eq!(uid, "prometheus", "{file}: panel {title}");
                }
            }
        }
    }
    for expected in [
        "hindsight-pipeline",
        "hindsight-memory",
        "hindsight-recall",
        "hindsight-janitor",
    ] {
        assert!(uids.contains(expected), "dashboard {expected} is missing");
    }
}

fn str_of_json(value: &serde_json::Value) -> &str {
    value.as_str().unwrap_or("?")
}

fn dashboards() -> Vec<(String, serde_json::Value)> {
    let dir = repo().join("ops/grafana/dashboards");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("ops/grafana/dashboards") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let name = path
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path).expect("a dashboard");
            let json =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"));
            out.push((name, json));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "janitor.json",
        "memory.json",
        "pipeline.json",
        "recall.json",
    ] {
        assert!(names.contains(&expected), "{expected} is missing");
    }
    out
}

/// One PromQL query of a dashboard: a panel target or a template variable.
struct Query {
    file: String,
    panel: String,
    expr: String,
    legend: String,
}

fn queries(file: &str, dashboard: &serde_json::Value) -> Vec<Query> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        let title = panel["title"].as_str().unwrap_or("?");
        for target in panel["targets"].as_array().into_iter().flatten() {
            out.push(Query {
                file: file.to_string(),
                panel: title.to_string(),
                expr: target["expr"].as_str().unwrap_or("").to_string(),
                legend: target["legendFormat"].as_str().unwrap_or("").to_string(),
            });
        }
    }
    for var in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = var["name"].as_str().unwrap_or("?");
        let texts = [
            var["query"]["query"].as_str(),
            var["query"].as_str(),
            var["definition"].as_str(),
        ];
        for text in texts.into_iter().flatten() {
            out.push(Query {
                file: file.to_string(),
                panel: format!("variable {name}"),
                expr: text.to_string(),
                legend: String::new(),
            });
        }
    }
    out
}

/// Every .rs file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What the source says about one metric: its kind and labels when
/// `events::METRICS` declares it, nothing more when it is only recorded.
#[derive(Default)]
struct Defined {
    kind: Option<String>,
    labels: Option<BTreeSet<String>>,
}

/// The metrics hindsight defines, read from the source text: every
/// `hindsight_…` string literal of shared/src/events.rs (where the events and
/// `METRICS` declare them), with kind and labels from the `metric("name", Kind,
/// &["label", …], …)` entries of `METRICS`, and every name recorded with
/// `counter!`, `gauge!` or `histogram!` elsewhere in shared/ and services/.
fn defined_metrics() -> BTreeMap<String, Defined> {
    let root = repo();
    let literal = Regex::new(r#""(hindsight_[a-z0-9_]+)""#).expect("regex");
    let declared =
        Regex::new(r#"metric\(\s*"(hindsight_[a-z0-9_]+)"\s*,\s*(\w+)\s*,\s*&\[([^\]]*)\]"#)
            .expect("regex");
    let recorded =
        Regex::new(r#"(?:counter|gauge|histogram)!\(\s*"(hindsight_[a-z0-9_]+)""#).expect("regex");
    let events = read("shared/src/events.rs");
    let mut names: BTreeMap<String, Defined> = literal
        .captures_iter(&events)
        .map(|c| (c[1].to_string(), Defined::default()))
        .collect();
    for c in declared.captures_iter(&events) {
        let labels = c[3]
            .split(',')
            .map(|l| l.trim().trim_matches('"').to_string())
            .filter(|l| !l.is_empty())
            .collect();
        names.insert(
            c[1].to_string(),
            Defined {
                kind: Some(c[2].to_string()),
                labels: Some(labels),
            },
        );
    }
    let mut files = Vec::new();
    rust_files(&root.join("shared"), &mut files);
    rust_files(&root.join("services"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a source file");
        for c in recorded.captures_iter(&text) {
            names.entry(c[1].to_string()).or_default();
        }
    }
    names
}

/// Labels Prometheus adds to every series it scrapes (ops/prometheus.yml).
const TARGET_LABELS: &[&str] = &["job", "instance", "service"];

#[test]
fn dashboards_only_use_metrics_and_labels_hindsight_defines() {
    let defined = defined_metrics();
    assert!(
        defined.contains_key("hindsight_stage_received_total"),
        "the metric names were read: {:?}",
        defined.keys()
    );
    let name = Regex::new(r"hindsight_[a-z0-9_]+").expect("regex");
    let matcher = Regex::new(r"(hindsight_[a-z0-9_]+)\{([^}]*)\}").expect("regex");
    let matcher_label = Regex::new(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)").expect("regex");
    let grouping = Regex::new(r"\b(?:by|without)\s*\(([^)]*)\)").expect("regex");
    let legend_label = Regex::new(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}").expect("regex");
    let label_values =
        Regex::new(r"label_values\(\s*(hindsight_[a-z0-9_]+)\s*,\s*(\w+)\s*\)").expect("regex");
    let mut used = BTreeSet::new();
    let mut problems = Vec::new();
    let mut queries_read = 0;
    for (file, dashboard) in dashboards() {
        for q in queries(&file, &dashboard) {
            queries_read += 1;
            let at = format!("{}: {}: {}", q.file, q.panel, q.expr);
            // The metrics of this query, by base name, and the labels they carry.
            let mut metrics = BTreeSet::new();
            let mut bucketed = false;
            for m in name.find_iter(&q.expr) {
                let raw = m.as_str();
                let suffixed = ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
                    raw.strip_suffix(suffix)
                        .filter(|base| defined.contains_key(*base))
                        .map(|base| (base, *suffix))
                });
                let base = suffixed.map_or(raw, |(base, _)| base);
                let Some(def) = defined.get(base) else {
                    problems.push(format!("{at}: {raw} is not a hindsight metric"));
                    continue;
                };
                if let (Some(_), Some(kind)) = (suffixed, &def.kind)
                    && kind != "Histogram"
                {
                    problems.push(format!("{at}: {raw}: {base} is a {kind}, not a histogram"));
                }
                bucketed |= suffixed.is_some_and(|(_, s)| s == "_bucket");
                used.insert(base.to_string());
                metrics.insert(base.to_string());
            }
            let labels: Option<BTreeSet<String>> = metrics
                .iter()
                .map(|m| defined[m].labels.clone())
                .try_fold(BTreeSet::new(), |mut all, labels| {
                    all.extend(labels?);
                    Some(all)
                })
                .map(|mut all| {
                    all.extend(TARGET_LABELS.iter().map(|l| l.to_string()));
                    if bucketed {
                        all.insert("le".into());
                    }
                    all
                });
            // Label names are checked only where METRICS declares every metric's labels.
            let Some(labels) = labels.filter(|_| !metrics.is_empty()) else {
                continue;
            };
            for c in matcher.captures_iter(&q.expr) {
                let metric_labels = labels_of(&defined, &c[1]);
                for l in matcher_label.captures_iter(&c[2]) {
                    if metric_labels.as_ref().is_some_and(|ls| !ls.contains(&l[1])) {
                        problems.push(format!("{at}: {} has no label {}", &c[1], &l[1]));
                    }
                }
            }
            for c in grouping.captures_iter(&q.expr) {
                for l in c[1].split(',').map(str::trim).filter(|l| !l.is_empty()) {
                    if !labels.contains(l) {
                        problems.push(format!("{at}: grouping by {l}, which no metric has"));
                    }
                }
            }
            for c in legend_label.captures_iter(&q.legend) {
                if !labels.contains(&c[1]) {
                    problems.push(format!("{at}: legend {{{{{}}}}} is no label", &c[1]));
                }
            }
            for c in label_values.captures_iter(&q.expr) {
                if labels_of(&defined, &c[1]).is_some_and(|ls| !ls.contains(&c[2])) {
                    problems.push(format!("{at}: {} has no label {}", &c[1], &c[2]));
                }
            }
        }
    }
    assert!(queries_read > 40, "only {queries_read} queries read");
    assert!(
        problems.is_empty(),
        "the dashboards disagree with the metrics hindsight defines:\n{}",
        problems.join("\n")
    );
    let unshown: Vec<&String> = defined.keys().filter(|m| !used.contains(*m)).collect();
    if !unshown.is_empty() {
        println!("note: metrics on no dashboard: {unshown:?}");
    }
}

/// A metric's labels (with the target labels and, for a histogram's buckets, `le`).
fn labels_of(defined: &BTreeMap<String, Defined>, raw: &str) -> Option<BTreeSet<String>> {
    let (base, bucket) = match raw.strip_suffix("_bucket") {
        Some(base) if defined.contains_key(base) => (base, true),
        _ => (
            ["_sum", "_count"]
                .iter()
                .find_map(|s| raw.strip_suffix(s).filter(|b| defined.contains_key(*b)))
                .unwrap_or(raw),
            false,
        ),
    };
    let mut labels = defined.get(base)?.labels.clone()?;
    labels.extend(TARGET_LABELS.iter().map(|l| l.to_string()));
    if bucket {
        labels.insert("le".into());
    }
    Some(labels)
}

// ---------------------------------------------------------------- NATS

/// `$NAME` references in a NATS configuration (outside comments).
fn nats_variables(conf: &str) -> BTreeSet<String> {
    let re = Regex::new(r"\$([A-Za-z_][A-Za-z0-9_]*)").expect("regex");
    conf.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| {
            re.captures_iter(l)
                .map(|c| c[1].to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The nats service's environment with compose defaults applied.
fn nats_environment() -> BTreeMap<String, String> {
    let services = services(&compose());
    environment(&services["nats"])
        .into_iter()
        .map(|(k, v)| (k, with_defaults(&v)))
        .collect()
}

#[test]
fn nats_passwords_come_from_the_compose_environment_and_services_log_in() {
    let conf = read("ops/nats.conf");
    let vars = nats_variables(&conf);
    assert!(
        vars.contains("HINDSIGHT_NATS_PASSWORD"),
        "ops/nats.conf reads the service user's password from HINDSIGHT_NATS_PASSWORD"
    );
    let env = nats_environment();
    for var in &vars {
        assert!(
            env.get(var).is_some_and(|v| !v.is_empty()),
            "ops/nats.conf reads ${var}, which docker-compose.yml does not pass to nats \
             (with a default)"
        );
    }
    // The hindsight services log in as the service user with its password.
    let services = services(&compose());
    for name in HINDSIGHT {
        let url = with_defaults(&environment(&services[*name])["HINDSIGHT_NATS_URL"]);
        let rest = url.strip_prefix("nats://").expect("a nats:// url");
        let (credentials, host_port) = rest
            .split_once('@')
            .unwrap_or_else(|| panic!("{name}: HINDSIGHT_NATS_URL {url} carries no credentials"));
        assert_eq!(
            credentials,
            format!("hindsight:{}", env["HINDSIGHT_NATS_PASSWORD"]),
            "{name} logs in as the user `hindsight` with HINDSIGHT_NATS_PASSWORD"
        );
        let (host, port) = host_port.split_once(':').expect("host:port");
        assert_eq!(host, "nats");
        assert!(container_ports(&services["nats"]).contains(&port.parse().expect("a port")));
    }
}

fn nats_server_binary() -> Option<PathBuf> {
    let path = PathBuf::from("/usr/sbin/nats-server");
    if path.is_file() {
        return Some(path);
    }
    println!(
        "note: /usr/sbin/nats-server is absent; the check against a real NATS server is skipped"
    );
    None
}

#[test]
fn nats_conf_passes_the_servers_own_check() {
    let Some(server) = nats_server_binary() else {
        return;
    };
    let conf = repo().join("ops/nats.conf");
    let out = Command::new(&server)
        .arg("-c")
        .arg(&conf)
        .arg("-t")
        .env_clear()
        .envs(nats_environment())
        .output()
        .expect("run nats-server -t");
    assert!(
        out.status.success(),
        "nats-server -t refuses ops/nats.conf:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Without the passwords in its environment, the server refuses to start.
    let out = Command::new(&server)
        .arg("-c")
        .arg(&conf)
        .arg("-t")
        .env_clear()
        .output()
        .expect("run nats-server -t");
    assert!(
        !out.status.success(),
        "nats.conf must not start without its passwords"
    );
}

/// A nats-server running ops/nats.conf on a free loopback port, with its own
/// store directory; stopped and cleaned up on drop.
struct NatsServer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl NatsServer {
    const SERVICE_PASSWORD: &'static str = "service-secret";
    const ACME_PASSWORD: &'static str = "acme-secret";

    fn start(server: &Path, tag: &str) -> Self {
        let mut last_error = String::new();
        for attempt in 0..5 {
            let dir = std::env::temp_dir().join(format!(
                "hindsight-compose-{tag}-{}-{attempt}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("a temporary directory");
            let port = free_port();
            let conf = dir.join("nats.conf");
            std::fs::write(&conf, derived_nats_conf(port, &dir.join("jetstream")))
                .expect("write the derived nats.conf");
            let log = std::fs::File::create(dir.join("nats.log")).expect("a log file");
            let mut child = Command::new(server)
                .arg("-c")
                .arg(&conf)
                .env_clear()
                .env("HINDSIGHT_NATS_PASSWORD", Self::SERVICE_PASSWORD)
                .env("ACME_NATS_PASSWORD", Self::ACME_PASSWORD)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start nats-server");
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    last_error = format!(
                        "nats-server exited ({status}):\n{}",
                        std::fs::read_to_string(dir.join("nats.log")).unwrap_or_default()
                    );
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Self { child, dir, port };
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    last_error = "nats-server did not listen within 15 s".into();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
        panic!("could not start nats-server: {last_error}");
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// ops/nats.conf with only what a test server must change: the client port on
/// loopback, no monitoring port, a store directory of its own.
fn derived_nats_conf(port: u16, store_dir: &Path) -> String {
    let conf = read("ops/nats.conf");
    let mut replaced = BTreeSet::new();
    let mut out = String::from("host: 127.0.0.1\n");
    for line in conf.lines() {
        let key = line.trim_start().split([':', ' ']).next().unwrap_or("");
        let line = match key {
            "port" => format!("port: {port}"),
            "http_port" => "# http_port: not in tests".to_string(),
            "store_dir" => format!("  store_dir: \"{}\"", store_dir.display()),
            _ => line.to_string(),
        };
        if ["port", "http_port", "store_dir"].contains(&key) {
            assert!(replaced.insert(key), "ops/nats.conf sets {key} twice");
        }
        out.push_str(&line);
        out.push('\n');
    }
    assert_eq!(
        replaced.len(),
        3,
        "ops/nats.conf sets port, http_port and store_dir"
    );
    out
}

type Events = tokio::sync::mpsc::UnboundedReceiver<async_nats::Event>;

async fn connect_as(url: &str, user: &str, password: &str) -> (async_nats::Client, Events) {
    try_connect_as(url, user, password)
        .await
        .unwrap_or_else(|e| panic!("{user} cannot connect: {e}"))
}

async fn try_connect_as(
    url: &str,
    user: &str,
    password: &str,
) -> Result<(async_nats::Client, Events), async_nats::ConnectError> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let client = async_nats::ConnectOptions::with_user_and_password(user.into(), password.into())
        .connection_timeout(Duration::from_secs(5))
        .max_reconnects(Some(1))
        .event_callback(move |event| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(event);
            }
        })
        .connect(url)
        .await?;
    Ok((client, rx))
}

/// Waits for the server to report a permissions violation naming `subject`.
async fn expect_violation(events: &mut Events, subject: &str) {
    let wanted = format!("\"{subject}\"");
    let found = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(event) = events.recv().await {
            if let async_nats::Event::ServerError(async_nats::ServerError::Other(message)) = &event
                && message.contains("Permissions Violation")
                && message.contains(&wanted)
            {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "no permissions violation for {subject}");
}

#[tokio::test]
async fn nats_tenant_users_reach_only_their_own_subjects() {
    let Some(server) = nats_server_binary() else {
        return;
    };
    let nats = NatsServer::start(&server, "tenants");
    let url = nats.url();

    // The service user may do everything, JetStream included.
    let (service, mut service_events) =
        connect_as(&url, "hindsight", NatsServer::SERVICE_PASSWORD).await;
    let js = async_nats::jetstream::new(service.clone());
    let mut stream = js
        .create_stream(async_nats::jetstream::stream::Config {
            name: "TURNS_TEST".into(),
            subjects: vec!["hindsight.turns.>".into()],
            storage: async_nats::jetstream::stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .expect("the service user creates a stream");
    let mut recall = service
        .subscribe("hindsight.recall.*")
        .await
        .expect("the service user subscribes to recall");
    let responder = service.clone();
    tokio::spawn(async move {
        while let Some(msg) = recall.next().await {
            if let Some(reply) = msg.reply {
                let _ = responder
                    .publish(reply, msg.subject.to_string().into())
                    .await;
            }
        }
    });
    service.flush().await.expect("flush");

    // A tenant user: its own turns (core and JetStream publish) and recall.
    let (acme, mut acme_events) = connect_as(&url, "acme", NatsServer::ACME_PASSWORD).await;
    acme.publish("hindsight.turns.acme", "core".into())
        .await
        .expect("publish");
    let acme_js = async_nats::jetstream::new(acme.clone());
    let ack = acme_js
        .publish("hindsight.turns.acme", "jetstream".into())
        .await
        .expect("publish")
        .await
        .expect("acme's JetStream publish is acknowledged");
    assert_eq!(ack.stream, "TURNS_TEST");
    let reply = tokio::time::timeout(
        Duration::from_secs(5),
        acme.request("hindsight.recall.acme", "{}".into()),
    )
    .await
    .expect("recall answered in time")
    .expect("acme may request its own recall");
    assert_eq!(&reply.payload[..], b"hindsight.recall.acme");

    // Another tenant's subjects, and what only the services may use, are refused.
    acme.publish("hindsight.turns.globex", "not mine".into())
        .await
        .expect("publish");
    acme.flush().await.expect("flush");
    expect_violation(&mut acme_events, "hindsight.turns.globex").await;
    acme.publish("hindsight.recall.globex", "{}".into())
        .await
        .expect("publish");
    acme.flush().await.expect("flush");
    expect_violation(&mut acme_events, "hindsight.recall.globex").await;
    acme.publish("hindsight.kept.acme", "skip the filter".into())
        .await
        .expect("publish");
    acme.flush().await.expect("flush");
    expect_violation(&mut acme_events, "hindsight.kept.acme").await;
    let _sub = acme
        .subscribe("hindsight.turns.>")
        .await
        .expect("subscribe is sent");
    acme.flush().await.expect("flush");
    expect_violation(&mut acme_events, "hindsight.turns.>").await;

    // Only acme's two turns were stored.
    let info = stream.info().await.expect("stream info");
    assert_eq!(info.state.messages, 2, "only acme's own turns are stored");
    let globex = stream
        .get_last_raw_message_by_subject("hindsight.turns.globex")
        .await;
    assert!(globex.is_err(), "nothing was stored for globex");

    // Unknown users, wrong passwords and anonymous clients are turned away.
    assert!(try_connect_as(&url, "acme", "wrong").await.is_err());
    assert!(try_connect_as(&url, "globex", "globex").await.is_err());
    let anonymous = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(5))
        .connect(url.as_str())
        .await;
    assert!(anonymous.is_err(), "an anonymous client is refused");

    // The service user saw no violation of its own.
    while let Ok(event) = service_events.try_recv() {
        assert!(
            !matches!(event, async_nats::Event::ServerError(_)),
            "the service user got {event}"
        );
    }
}

/// The hindsight services connect with `HINDSIGHT_NATS_URL`, which in
/// docker-compose.yml carries the service user's credentials.
#[tokio::test]
async fn the_bus_logs_in_with_the_credentials_in_its_url() {
    let Some(server) = nats_server_binary() else {
        return;
    };
    let nats = NatsServer::start(&server, "bus");
    let url = format!(
        "nats://hindsight:{}@127.0.0.1:{}",
        NatsServer::SERVICE_PASSWORD,
        nats.port
    );
    let config = hindsight_shared::Config::from_lookup(|key| {
        (key == "HINDSIGHT_NATS_URL").then(|| url.clone())
    })
    .expect("a configuration");
    let bus = tokio::time::timeout(
        Duration::from_secs(10),
        hindsight_shared::bus::Bus::connect(&config),
    )
    .await
    .expect("connected in time")
    .expect("connected");
    let flushed = tokio::time::timeout(Duration::from_secs(5), bus.client.flush()).await;
    assert!(
        matches!(flushed, Ok(Ok(()))),
        "the bus did not log in as the service user"
    );
}
