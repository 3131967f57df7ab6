//! ops/nats.conf: its variables come from compose, the server accepts it,
//! and each tenant's user reaches only its own subjects.

use super::*;

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
