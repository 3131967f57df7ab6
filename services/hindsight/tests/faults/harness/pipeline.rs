//! The four stages as `hindsight run STAGE` processes: started, killed,
//! restarted and supervised.

use super::*;

/// A stage process that stopped without being asked to, and was restarted.
#[derive(Debug, Clone)]
pub struct Exit {
    pub stage: &'static str,
    pub status: String,
}

struct Proc {
    child: Child,
    port: u16,
    last_spawn: Instant,
}

/// The four stages as `hindsight run STAGE` processes.
pub struct Pipeline {
    env: Vec<(String, String)>,
    logs: PathBuf,
    procs: BTreeMap<&'static str, Proc>,
    /// Processes that exited by themselves (the supervisor restarted them).
    pub exits: Vec<Exit>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Whether the process on `port` answers `/readyz` with 200.
async fn ready(port: u16) -> bool {
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(b"GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, std::io::Error>(buf)
    };
    match tokio::time::timeout(Duration::from_secs(2), attempt).await {
        Ok(Ok(buf)) => buf.starts_with(b"HTTP/1.0 200") || buf.starts_with(b"HTTP/1.1 200"),
        _ => false,
    }
}

impl Pipeline {
    /// The environment of the deployment `d`, embedding through `embed_base_url`
    /// (the fake's deterministic vectors), plus `extra`.
    pub fn new(d: &Deployment, suite: &str, embed_base_url: &str, extra: &[(&str, &str)]) -> Self {
        let dimension = hindsight_tests::fake_llm::EMBED_DIMENSION.to_string();
        let mut env: Vec<(String, String)> = d
            .env()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .chain(
                [
                    ("HINDSIGHT_EMBED_BASE_URL", embed_base_url),
                    ("HINDSIGHT_EMBED_MODEL", EMBED_MODEL),
                    ("HINDSIGHT_EMBED_DIMENSION", dimension.as_str()),
                    ("HINDSIGHT_LLM_BASE_URL", ""),
                    ("HINDSIGHT_LOG", "info"),
                ]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
            )
            .collect();
        for (k, v) in extra {
            env.retain(|(key, _)| key != k);
            env.push((k.to_string(), v.to_string()));
        }
        let logs = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("faults")
            .join(suite);
        let _ = std::fs::remove_dir_all(&logs);
        std::fs::create_dir_all(&logs).expect("log directory");
        Self {
            env,
            logs,
            procs: BTreeMap::new(),
            exits: Vec::new(),
        }
    }

    fn spawn(&mut self, stage: &'static str) {
        // A fresh port each time: the old one may linger in TIME_WAIT.
        let port = free_port();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.logs.join(format!("{stage}.log")))
            .expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_hindsight"))
            .args(["run", stage])
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("HINDSIGHT_HTTP_ADDR", format!("127.0.0.1:{port}"))
            .env("HOSTNAME", format!("faults-{stage}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .expect("hindsight runs");
        self.procs.insert(
            stage,
            Proc {
                child,
                port,
                last_spawn: Instant::now(),
            },
        );
    }

    /// The last lines of a stage's log, for failure messages.
    pub fn log_tail(&self, stage: &str) -> String {
        let text =
            std::fs::read_to_string(self.logs.join(format!("{stage}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Starts every stage and waits until each consumes.
    pub async fn start(&mut self) {
        for stage in STAGES {
            self.spawn(stage);
        }
        for stage in STAGES {
            self.wait_ready(stage, Duration::from_secs(60)).await;
        }
    }

    /// Waits until `stage` answers ready; how long that took.
    pub async fn wait_ready(&mut self, stage: &'static str, timeout: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let proc = self.procs.get_mut(stage).expect("stage started");
            if ready(proc.port).await {
                return started.elapsed();
            }
            if let Ok(Some(status)) = proc.child.try_wait() {
                panic!(
                    "{stage} exited ({status}) before it was ready:\n{}",
                    self.log_tail(stage)
                );
            }
            assert!(
                started.elapsed() < timeout,
                "{stage} not ready within {timeout:?}:\n{}",
                self.log_tail(stage)
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// `kill -9` the stage's process, start it again and wait until it
    /// consumes; returns the time from the kill to ready.
    pub async fn kill9_and_restart(&mut self, stage: &'static str) -> Duration {
        let started = Instant::now();
        let proc = self.procs.get_mut(stage).expect("stage started");
        if let Ok(Some(status)) = proc.child.try_wait() {
            panic!(
                "{stage} had exited by itself ({status}):\n{}",
                self.log_tail(stage)
            );
        }
        proc.child.start_kill().expect("SIGKILL sent");
        let status = proc
            .child
            .wait()
            .await
            .expect("the killed process is reaped");
        assert!(!status.success(), "{stage} was killed: {status}");
        self.spawn(stage);
        self.wait_ready(stage, Duration::from_secs(60)).await;
        started.elapsed()
    }

    /// Restarts processes that exited by themselves, at most once a second per
    /// stage (compose's `restart: unless-stopped`); returns how many it restarted.
    pub fn supervise(&mut self) -> usize {
        let mut exited = Vec::new();
        for (stage, proc) in &mut self.procs {
            if proc.last_spawn.elapsed() < Duration::from_secs(1) {
                continue;
            }
            if let Ok(Some(status)) = proc.child.try_wait() {
                exited.push((*stage, status.to_string()));
            }
        }
        for (stage, status) in &exited {
            eprintln!(
                "faults: {stage} exited by itself ({status}); restarting it. Its log ends:\n{}",
                self.log_tail(stage)
            );
            self.exits.push(Exit {
                stage,
                status: status.clone(),
            });
            self.spawn(stage);
        }
        exited.len()
    }

    /// Sleeps for `d`, supervising meanwhile.
    pub async fn supervised_sleep(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.supervise();
            tokio::time::sleep(Duration::from_millis(100).min(until - Instant::now())).await;
        }
    }

    /// SIGTERM to every process, then waits for each (SIGKILL after 30 s).
    /// Returns the stages that did not exit cleanly.
    pub async fn stop(mut self) -> Vec<String> {
        let mut unclean = Vec::new();
        for proc in self.procs.values() {
            if let Some(pid) = proc.child.id() {
                let _ = Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status()
                    .await;
            }
        }
        for (stage, proc) in &mut self.procs {
            match tokio::time::timeout(Duration::from_secs(30), proc.child.wait()).await {
                Ok(Ok(status)) if status.success() => {}
                Ok(Ok(status)) => unclean.push(format!("{stage}: {status}")),
                _ => {
                    let _ = proc.child.start_kill();
                    let _ = proc.child.wait().await;
                    unclean.push(format!("{stage}: did not stop within 30 s of SIGTERM"));
                }
            }
        }
        unclean
    }
}
