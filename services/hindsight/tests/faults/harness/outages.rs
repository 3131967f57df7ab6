//! Outages of the machine's PostgreSQL and NATS.

use super::*;

/// Restarts the machine's PostgreSQL cluster (as its operator would); returns
/// how long it refused connections, from the restart command to the first
/// successful query.
pub async fn restart_postgres(d: &Deployment) -> Duration {
    let version = std::fs::read_dir("/etc/postgresql")
        .expect("/etc/postgresql")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .max_by_key(|v| v.parse::<u32>().unwrap_or(0))
        .expect("a PostgreSQL cluster");
    let started = Instant::now();
    let status = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status()
        .await
        .expect("pg_ctlcluster runs");
    assert!(status.success(), "pg_ctlcluster restart: {status}");
    while sqlx::query("SELECT 1")
        .execute(&d.ctx.store.pool)
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "PostgreSQL back within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

/// Whether the machine's PostgreSQL and NATS are the local ones these
/// outages act on.
pub fn local_servers(d: &Deployment) -> (bool, bool) {
    let c = d.config();
    let pg = Path::new("/etc/postgresql").is_dir()
        && Path::new("/usr/bin/pg_ctlcluster").exists()
        && (c.database_url.contains("@127.0.0.1") || c.database_url.contains("@localhost"));
    let nats = Path::new("/usr/sbin/nats-server").exists()
        && (c.nats_url.contains("127.0.0.1:4222") || c.nats_url.contains("localhost:4222"));
    (pg, nats)
}

fn nats_reachable() -> bool {
    std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], 4222).into(), Duration::from_millis(200))
        .is_ok()
}

/// Stops the machine's nats-server (SIGTERM, waiting for it to exit).
pub async fn stop_nats() {
    let status = Command::new("start-stop-daemon")
        .args([
            "--stop",
            "--retry",
            "TERM/15/KILL/5",
            "--exec",
            "/usr/sbin/nats-server",
        ])
        .status()
        .await
        .expect("start-stop-daemon runs");
    assert!(status.success(), "nats-server stopped: {status}");
}

/// Starts nats-server exactly as ops/setup.sh does, and waits until it listens.
pub async fn start_nats() {
    let status = Command::new("start-stop-daemon")
        .args([
            "--start",
            "--oknodo",
            "--background",
            "--exec",
            "/usr/sbin/nats-server",
            "--",
            "-a",
            "127.0.0.1",
            "-p",
            "4222",
            "-js",
            "-sd",
            "/var/lib/nats-server",
            "-l",
            "/var/log/nats-server.log",
        ])
        .status()
        .await
        .expect("start-stop-daemon runs");
    assert!(status.success(), "nats-server started: {status}");
    let started = Instant::now();
    while !nats_reachable() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "nats-server listening within 30 s (see /var/log/nats-server.log)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
