//! The janitor's purge exports: one JSON object per line (a memory's columns
//! and its provenance) in `HINDSIGHT_DATA_DIR/exports/<run id>.jsonl`. A purge
//! appends to its run's file; an erase of a user rewrites files without the
//! user's rows. Both take the file's lock, and an append that waited for a
//! rewrite opens the rewritten file again (a rewrite replaces the file, so
//! it is never left half written), so neither loses the other's lines.

use std::{
    fs::{File, OpenOptions},
    io::Write,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use serde_json::Value;

/// Where the exports of a deployment are.
pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("exports")
}

/// Appends rows to an export and syncs it.
pub fn append(path: &Path, rows: &[Value]) -> std::io::Result<()> {
    let mut text = String::new();
    for row in rows {
        text.push_str(&row.to_string());
        text.push('\n');
    }
    append_text(path, &text)
}

/// Appends rows already written as JSON, one per line, and syncs the file.
pub fn append_lines(path: &Path, lines: &[String]) -> std::io::Result<()> {
    let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    append_text(path, &text)
}

fn append_text(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    loop {
        let mut file = OpenOptions::new().create(true).append(true).open(path)?;
        file.lock()?;
        // A rewrite replaced the file while this one waited for the lock:
        // the lines go to the file that is there now.
        if std::fs::metadata(path)?.ino() != file.metadata()?.ino() {
            continue;
        }
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        return Ok(());
    }
}

/// The export files, oldest name first.
pub fn files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// The rows of an export for which `take` holds, read without changing it.
/// A line that is not JSON is never taken.
pub fn matching(path: &Path, take: &dyn Fn(&Value) -> bool) -> std::io::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| take(v))
        .collect())
}

/// Rewrites an export without the rows for which `take` holds, and returns
/// them. The new file is written beside the old one, synced, and renamed over
/// it; a file without such rows is left untouched.
pub fn remove(path: &Path, take: &dyn Fn(&Value) -> bool) -> std::io::Result<Vec<Value>> {
    let file = File::open(path)?;
    file.lock()?;
    let text = std::fs::read_to_string(path)?;
    let mut kept = String::with_capacity(text.len());
    let mut taken = Vec::new();
    for line in text.lines() {
        match serde_json::from_str::<Value>(line) {
            Ok(v) if take(&v) => taken.push(v),
            _ => {
                kept.push_str(line);
                kept.push('\n');
            }
        }
    }
    if taken.is_empty() {
        return Ok(taken);
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".rewrite");
    let tmp = PathBuf::from(tmp);
    let mut out = File::create(&tmp)?;
    out.write_all(kept.as_bytes())?;
    out.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    // The lock goes with `file`, on the replaced file: appends waiting for it
    // see the new file and reopen.
    drop(file);
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("hindsight-exports-{}", uuid_like()));
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    fn uuid_like() -> String {
        format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        )
    }

    #[test]
    fn a_rewrite_takes_the_rows_and_keeps_every_other_line() {
        let d = dir();
        let path = d.join("run.jsonl");
        append(
            &path,
            &[
                json!({"user_id": "ann", "n": 1}),
                json!({"user_id": "bob", "n": 2}),
            ],
        )
        .expect("append");
        std::fs::write(
            &path,
            format!(
                "{}not json\n",
                std::fs::read_to_string(&path).expect("read")
            ),
        )
        .expect("write");
        let ann = |v: &Value| v["user_id"] == "ann";
        assert_eq!(matching(&path, &ann).expect("read").len(), 1);
        let taken = remove(&path, &ann).expect("rewrite");
        assert_eq!(taken, vec![json!({"user_id": "ann", "n": 1})]);
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(
            text,
            format!("{}\nnot json\n", json!({"user_id": "bob", "n": 2}))
        );
        assert!(remove(&path, &ann).expect("again").is_empty());
        append(&path, &[json!({"user_id": "cy"})]).expect("append after");
        assert_eq!(
            std::fs::read_to_string(&path)
                .expect("read")
                .lines()
                .count(),
            3
        );
        assert_eq!(files(&d).expect("files"), vec![path]);
        std::fs::remove_dir_all(&d).expect("clean");
    }
}
