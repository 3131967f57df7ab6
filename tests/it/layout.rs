//! The shape of the code, checked: no import circles between the modules of a
//! crate, dependencies between the workspace's crates that run one way (no
//! library depends on a service; the store on neither the runtime nor a
//! transport), and no source file over [`MAX_LINES`].
//!
//! Modules are read from the source tree: a file is a module (`mod.rs` is its
//! folder's), and every path it names (`crate::a::b`, `super::c`, `self::d`)
//! is an edge to the deepest module that path reaches. An edge counts between
//! the two siblings under the modules' nearest common parent, so
//! `cmd::bench_recall` using `cmd::bench::Rng` while `cmd::bench` calls
//! `cmd::bench_recall` is a circle between `bench` and `bench_recall`.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// The longest a source file may grow: past it, it does several things, and
/// is split by what they are.
const MAX_LINES: usize = 600;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// Every `src/` folder of the workspace's crates, by crate directory.
fn crate_sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for group in ["shared", "services"] {
        let dir = root().join(group);
        if dir.join("src").is_dir() {
            out.push(dir.join("src"));
        }
        for entry in std::fs::read_dir(&dir).expect("a crate folder") {
            let src = entry.expect("an entry").path().join("src");
            if src.is_dir() {
                out.push(src);
            }
        }
    }
    out.sort();
    out
}

/// Every `.rs` file under `dir`, build output (`target/`) aside.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/cmd/bench.rs` is `["cmd", "bench"]`; `lib.rs`, `main.rs` are the root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("a file under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The paths a file names: `crate::…`, `super::…`, `self::…`, with the
/// items of `use` groups (`use crate::{a::b, c}`) spelled out.
fn named_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // Comments name paths too, in docs: only code counts.
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    for anchor in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(anchor).map(|i| i + from) {
            from = at + anchor.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let head = anchor.trim_end_matches("::").to_string();
            let mut supers = vec![head];
            let mut rest = &code[from..];
            while let Some(r) = rest.strip_prefix("super::") {
                supers.push("super".into());
                rest = r;
            }
            for path in expand(rest) {
                let mut full = supers.clone();
                full.extend(path);
                out.push(full);
            }
        }
    }
    out
}

/// `a::b::{c, d::e}` → `[a,b,c]`, `[a,b,d,e]`; stops at the first
/// character that cannot continue a path.
fn expand(text: &str) -> Vec<Vec<String>> {
    let mut prefix = Vec::new();
    let mut word = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else if c == ':' && chars.peek().is_some_and(|(_, n)| *n == ':') {
            chars.next();
            prefix.push(std::mem::take(&mut word));
        } else if c == '{' && word.is_empty() {
            // A group: split its top-level items.
            let mut depth = 1;
            let mut end = i + 1;
            for (j, d) in text[i + 1..].char_indices() {
                match d {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    end = i + 1 + j;
                    break;
                }
            }
            let mut out = Vec::new();
            let mut depth = 0;
            let mut item = String::new();
            for d in text[i + 1..end].chars().chain([',']) {
                match d {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        for tail in expand(item.trim()) {
                            let mut p = prefix.clone();
                            p.extend(tail);
                            out.push(p);
                        }
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(d);
            }
            return out;
        } else {
            break;
        }
    }
    if !word.is_empty() {
        prefix.push(word);
    }
    vec![prefix]
}

/// The module an anchored path lands in, among `modules`.
fn resolve(
    from: &[String],
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let mut at: Vec<String> = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("self") => from.to_vec(),
        // `super` in `a/b.rs` and in `a/b/mod.rs` (both module `a::b`) is `a`.
        Some("super") => from[..from.len().saturating_sub(1)].to_vec(),
        _ => return None,
    };
    let mut segments = path[1..].iter().peekable();
    while let Some(s) = segments.peek() {
        if *s == "super" {
            at.pop();
            segments.next();
        } else {
            break;
        }
    }
    let mut deepest = at.clone();
    for s in segments {
        at.push(s.clone());
        if modules.contains(&at) {
            deepest = at.clone();
        }
    }
    Some(deepest)
}

/// Edges between siblings, `(parent, from, to)`, of one crate.
fn sibling_edges(src: &Path) -> BTreeSet<(Vec<String>, String, String)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges = BTreeSet::new();
    for file in &files {
        let from = module_of(src, file);
        let text = std::fs::read_to_string(file).expect("a source file");
        // Unit tests name their parent (`use super::*`): not a dependency of the code.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        for path in named_paths(text) {
            let Some(to) = resolve(&from, &path, &modules) else {
                continue;
            };
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common < from.len() && common < to.len() {
                edges.insert((
                    from[..common].to_vec(),
                    from[common].clone(),
                    to[common].clone(),
                ));
            }
        }
    }
    edges
}

/// A circle in a directed graph, if any.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut c = path[at..].to_vec();
            c.push(node.to_string());
            return Some(c);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        if let Some(c) = visit(node, edges, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let mut circles = Vec::new();
    for src in crate_sources() {
        let mut by_parent: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> =
            BTreeMap::new();
        for (parent, from, to) in sibling_edges(&src) {
            by_parent
                .entry(parent)
                .or_default()
                .entry(from)
                .or_default()
                .insert(to);
        }
        for (parent, edges) in by_parent {
            if let Some(c) = circle(&edges) {
                let at = src
                    .strip_prefix(root())
                    .unwrap_or(&src)
                    .display()
                    .to_string();
                circles.push(format!("{at} {}: {}", parent.join("::"), c.join(" → ")));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_circle_finder_sees_a_circle_through_super() {
    let text = "use super::bench::{Rng, percentile};\nfn f() { crate::cmd::x::y(); }";
    let paths = named_paths(text);
    assert!(paths.contains(&vec!["super".into(), "bench".into(), "Rng".into()]));
    assert!(paths.contains(&vec!["crate".into(), "cmd".into(), "x".into(), "y".into()]));
    let edges: BTreeMap<String, BTreeSet<String>> = [
        (
            "bench".to_string(),
            BTreeSet::from(["bench_recall".to_string()]),
        ),
        (
            "bench_recall".to_string(),
            BTreeSet::from(["bench".to_string()]),
        ),
    ]
    .into();
    assert!(circle(&edges).is_some());
}

/// The workspace crates a manifest depends on (any section), by package name.
fn workspace_dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).expect("a manifest");
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("hindsight"))
        .filter_map(|l| l.split(['.', ' ', '=']).next())
        .map(str::to_string)
        .collect()
}

fn package_name(manifest: &Path) -> String {
    let text = std::fs::read_to_string(manifest).expect("a manifest");
    text.lines()
        .find_map(|l| l.strip_prefix("name = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("a package name")
        .to_string()
}

#[test]
fn libraries_never_depend_on_services_and_services_not_on_each_other() {
    let manifests = |group: &str| -> Vec<PathBuf> {
        let dir = root().join(group);
        let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("a crate folder")
            .map(|e| e.expect("an entry").path().join("Cargo.toml"))
            .filter(|m| m.is_file())
            .collect();
        if dir.join("Cargo.toml").is_file() {
            out.push(dir.join("Cargo.toml"));
        }
        out
    };
    let services: BTreeSet<String> = manifests("services")
        .iter()
        .map(|m| package_name(m))
        .collect();
    // The CLI composes the services (`hindsight up`): it alone may link them.
    let cli = "hindsight";
    let mut wrong = Vec::new();
    for manifest in manifests("shared").iter().chain(&manifests("services")) {
        let name = package_name(manifest);
        if name == cli {
            continue;
        }
        for dep in workspace_dependencies(manifest) {
            if services.contains(&dep) && dep != name {
                wrong.push(format!("{name} depends on the service {dep}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every dependency a manifest names, in any section, by name.
fn dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).expect("a manifest");
    let mut in_deps = false;
    let mut out = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]");
        } else if in_deps
            && !line.is_empty()
            && !line.starts_with('#')
            && let Some(name) = line.split(['.', ' ', '=']).next()
        {
            out.insert(name.to_string());
        }
    }
    out
}

/// The store is Postgres and nothing else: a tool, a test or a service that
/// reads memories links it without the runtime, NATS or an HTTP server.
#[test]
fn the_store_links_neither_the_runtime_nor_a_transport() {
    let store = dependencies(&root().join("shared/store/Cargo.toml"));
    assert!(store.contains("sqlx"), "{store:?}");
    let wrong: Vec<&str> = ["hindsight-shared", "async-nats", "axum", "metrics"]
        .into_iter()
        .filter(|d| store.contains(*d))
        .collect();
    assert!(wrong.is_empty(), "the store depends on {wrong:?}");
}

#[test]
fn no_source_file_is_over_600_lines() {
    let mut files = Vec::new();
    for group in ["shared", "services", "tests", "fuzz"] {
        rust_files(&root().join(group), &mut files);
    }
    assert!(files.len() > 100, "found only {} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f)
                .expect("a source file")
                .lines()
                .count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "split these by what they do:\n{}",
        long.join("\n")
    );
}
