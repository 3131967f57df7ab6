//! Grafana's provisioning and dashboards: the compose Prometheus, and only
//! metrics and labels that hindsight defines.

use super::*;

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
