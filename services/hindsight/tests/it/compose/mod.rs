//! The deployment files agree with each other and with the code:
//! docker-compose.yml, ops/Dockerfile, ops/nats.conf, ops/prometheus.yml and
//! the Grafana provisioning and dashboards under ops/grafana.
//!
//! Static checks read the files only. Two checks start the local nats-server
//! (`/usr/sbin/nats-server`, as `ops/setup.sh` installs it) with ops/nats.conf;
//! they print a note and pass when it is absent. Each server gets its own port
//! and store directory, so the tests run in parallel.

mod grafana;
mod nats;

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
