//! `outboxd run`: every connector of the given config files, until SIGINT/SIGTERM.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::ConfigArgs;
use crate::config;
use tokio::sync::watch;

use crate::group::{self, GroupPlan};
use crate::health::Health;
use crate::supervisor::Supervisor;

/// Longest the process waits for its connectors after SIGINT/SIGTERM: their own shutdown
/// grace (`crate::pipeline::SHUTDOWN_GRACE`, 10 s) plus time for a final checkpoint write.
pub const STOP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(15);

/// Runs the connectors; exits 0 after a clean shutdown, 1 when any connector stopped on a
/// definite failure, stopped without its final checkpoint, or had not stopped
/// [`STOP_DEADLINE`] after the signal.
pub async fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    // Connectors the REST API created are read with the files, at start and on SIGHUP.
    let mut all = args.clone();
    all.config = crate::rest::config_files(&args.config, args.rest_connectors.as_deref());
    let cfg = all.load().context("loading the configuration")?;
    config::log_ignored_keys(&cfg);
    let plan = GroupPlan::for_config(&cfg, args.group.as_deref())?;
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .context("installing the Prometheus recorder")?;
    crate::metrics::describe();
    let health = Health::default();
    if let Some(listen) = args.metrics_listen.or(cfg.metrics.listen) {
        let listener = crate::http::bind(listen).await?;
        let (p, h) = (prometheus.clone(), health.clone());
        tokio::spawn(async move {
            if let Err(e) = crate::http::serve(listener, p, h).await {
                tracing::error!("{e:#}");
            }
        });
    }

    // A group member's task ends with whether it failed; a process without a group runs its
    // connectors under a supervisor, which SIGHUP makes re-read the configuration.
    // The REST listener's settings, checked before any connector starts.
    let rest_listener = match &args.rest_listen {
        Some(listen) => Some(rest_listener(listen, &args)?),
        None => None,
    };
    // `topic.tracking.enable=false`: no topic is noted (as Connect's tasks note none then).
    let tracking = crate::rest::listener::Tracking::read(&worker_file(&args)?)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if !tracking.enabled {
        health.topics().turn_off();
    }
    // The process-wide Kafka settings: `GET /`'s cluster for a process started with no
    // connector, and the cluster of a group member started without connector files.
    let process_kafka = args
        .kafka_bootstrap
        .clone()
        .or_else(|| cfg.kafka.bootstrap_servers.clone())
        .map(|bootstrap_servers| crate::config::KafkaConfig {
            bootstrap_servers,
            client: cfg.kafka.client.clone(),
            producer: Default::default(),
            producer_secrets: Default::default(),
            max_record_bytes: 1 << 20,
            topic_creation: None,
        });
    let (shutdown, shutdown_rx) = watch::channel(false);
    let mut member = tokio::task::JoinSet::new();
    let plan_is_group = plan.is_some();
    // With the REST API the process serves until a signal, whatever its connectors do.
    let keep_serving = args.rest_listen.is_some() && !plan_is_group;
    let supervisor = match plan {
        Some(plan) => {
            // Every connector reaches the group's cluster with these settings (`GroupPlan`
            // checks it).
            let Some(kafka) = cfg
                .connectors
                .first()
                .map(|c| c.kafka.clone())
                .or(process_kafka)
            else {
                anyhow::bail!(
                    "group {}: no Kafka cluster to coordinate the group through; name it with \
                     --kafka-bootstrap (or a connector file)",
                    plan.name
                );
            };
            tracing::info!(group = %plan.name, connectors = ?cfg.connectors.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), "running as a member of group {}: connectors (those of its files and those of the group's config topic) start when the group assigns them", plan.name);
            if let Some(dir) = &args.rest_connectors {
                tracing::warn!(group = %plan.name, "--rest-connectors {}: a group member keeps the connectors created through the REST API in the group's config topic (outboxd.configs.{}), not there; the directory's files are read as --config files of this member", dir.display(), plan.name);
            }
            let view = group::view::GroupView::new(&plan.name, &group::member_id());
            let worker_id = rest_listener.as_ref().map(|l| l.addr.to_string());
            let load_args = args.clone();
            let setup = group::MemberSetup {
                kafka: kafka.clone(),
                view: view.clone(),
                load: Box::new(move |name, config, without_secrets| {
                    load_one(&load_args, name, config, true, without_secrets)
                }),
                worker_id,
                seeds: seeds(&args.config, &cfg),
            };
            if let Some(settings) = rest_listener {
                let connectors = crate::rest::Connectors::Group(view);
                serve_rest(settings, &args, connectors, &health, Some(kafka)).await?;
            }
            member.spawn(group::run_member(
                cfg,
                plan,
                setup,
                health.clone(),
                shutdown_rx,
            ));
            None
        }
        None if cfg.connectors.is_empty() && args.rest_listen.is_none() => {
            anyhow::bail!(
                "no connector to run: the --config files and the --rest-connectors directory \
                 define none; give a connector file with --config, or serve the REST API \
                 (--rest-listen) to create connectors through it"
            );
        }
        None => {
            let reload_args = args.clone();
            let loader: crate::supervisor::Loader = Box::new(move || {
                let mut a = reload_args.clone();
                a.config = crate::rest::config_files(
                    &reload_args.config,
                    reload_args.rest_connectors.as_deref(),
                );
                a.load()
            });
            if let Some(dir) = &args.rest_connectors {
                // The topics the connectors used (`GET /connectors/{name}/topics`), kept
                // beside the connectors the REST API created.
                let path = dir.join(".active-topics.json");
                let (keeper, kept) = match crate::active_topics::FileKeeper::open(path.clone()) {
                    Ok(k) => k,
                    Err(e) => {
                        tracing::error!("{e}: the connectors' topics are listed from their next records on, and the file is replaced then (GET /connectors/NAME/topics)");
                        (
                            crate::active_topics::FileKeeper::empty(path),
                            Default::default(),
                        )
                    }
                };
                health.topics().keep_with(std::sync::Arc::new(keeper), kept);
            }
            let supervisor = match &args.rest_connectors {
                // Kept beside the connectors the REST API created.
                Some(dir) => Supervisor::keep_targets_in(
                    health.clone(),
                    loader,
                    dir.join(".target-states.json"),
                ),
                None => Supervisor::new(health.clone(), loader),
            };
            // `GET /`'s cluster: a connector's, else the process-wide settings' (a process
            // started with no connector, which the REST API fills).
            let kafka = cfg
                .connectors
                .first()
                .map(|c| c.kafka.clone())
                .or(process_kafka);
            supervisor
                .start_all(cfg)
                .await
                .context("starting the connectors")?;
            if let Some(settings) = rest_listener {
                let connectors = crate::rest::Connectors::Local(supervisor.clone());
                serve_rest(settings, &args, connectors, &health, kafka).await?;
            }
            Some(supervisor)
        }
    };
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("listening for SIGHUP")?;
    match &supervisor {
        Some(s) => {
            let s = s.clone();
            tokio::spawn(async move {
                while hangup.recv().await.is_some() {
                    reload(&s).await;
                }
            });
        }
        None => {
            tokio::spawn(async move {
                while hangup.recv().await.is_some() {
                    tracing::warn!(
                        "SIGHUP received: a group member does not reload its connector files \
                         (its connectors are the group's), so nothing changed; to apply a \
                         changed configuration, restart the members one by one with SIGTERM \
                         (each drains and another member takes its connectors over)"
                    );
                }
            });
        }
    }
    let signal = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    };
    // A connector that stops on a definite failure stops alone (it logged why); the process
    // ends when all have stopped, or on a signal after draining them.
    let mut signal = std::pin::pin!(signal);
    let mut failed = false;
    let mut changes = supervisor.as_ref().map(|s| s.changes());
    // Set at the signal: when the process exits even if a connector has not stopped.
    let mut stop_deadline: Option<tokio::time::Instant> = None;
    loop {
        let done = match &supervisor {
            Some(s) => (!keep_serving || stop_deadline.is_some()) && s.live() == 0 && !s.busy(),
            None => member.is_empty(),
        };
        if done {
            break;
        }
        let overdue = async {
            match stop_deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let changed = async {
            match &mut changes {
                Some(c) => {
                    let _ = c.changed().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = &mut signal, if stop_deadline.is_none() => {
                r.context("waiting for signals")?;
                tracing::info!("signal received: draining and writing final checkpoints");
                stop_deadline = Some(tokio::time::Instant::now() + STOP_DEADLINE);
                shutdown.send_replace(true);
                if let Some(s) = &supervisor {
                    s.shutdown();
                }
            }
            Some(joined) = member.join_next() => {
                failed |= !matches!(joined, Ok(false));
            }
            _ = changed => {}
            _ = overdue => {
                // A connector stuck in a blocking Kafka call (a checkpoint write or a
                // metadata request while the brokers are unreachable) must not hold the
                // process past common stop timeouts. Its position is safe: nothing past
                // its last stored checkpoint is lost, only delivered again.
                tracing::error!(
                    connectors = supervisor.as_ref().map_or(member.len(), |s| s.live()),
                    "connectors did not stop within {STOP_DEADLINE:?} of the signal (Kafka \
                     unreachable?); exiting without their final checkpoints: what they read \
                     since the last one is delivered again after restart"
                );
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    if let Some(s) = &supervisor {
        // Connectors failed now (a failure since fixed by a restart or reload is not one).
        let now_failed: Vec<String> = s
            .list()
            .into_iter()
            .filter(|(_, l)| l.failed)
            .map(|(n, _)| n)
            .collect();
        if !now_failed.is_empty() {
            tracing::error!(connectors = ?now_failed, "exiting 1: these connectors had failed (see their errors above)");
            failed = true;
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Applies a SIGHUP: the configuration files are read again and applied connector by
/// connector; one that does not load changes nothing (and says why).
async fn reload(supervisor: &std::sync::Arc<Supervisor>) {
    tracing::info!("SIGHUP received: reading the configuration again");
    match supervisor.reload().await {
        Ok(applied) if applied.is_empty() => {
            tracing::info!("configuration reloaded: no connector changed")
        }
        Ok(applied) => tracing::info!(
            started = ?applied.started,
            changed = ?applied.changed,
            removed = ?applied.removed,
            "configuration reloaded: changed connectors restarted from their checkpoints, \
             the others kept streaming"
        ),
        Err(e) => tracing::error!(
            "SIGHUP: the configuration was not applied, every connector runs as before: {e}"
        ),
    }
}

/// Binds `listen` and serves Kafka Connect's REST API for `supervisor`'s connectors.
///
/// Errors when the address cannot be bound.
async fn serve_rest(
    settings: crate::rest::listener::Listener,
    args: &ConfigArgs,
    connectors: crate::rest::Connectors,
    health: &Health,
    kafka: Option<crate::config::KafkaConfig>,
) -> anyhow::Result<()> {
    let listen = settings.addr;
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {listen} for the REST API: {e}; set --rest-listen / \
             OUTBOXD_REST_LISTEN to a free address"
        )
    })?;
    let validate_args = args.clone();
    let rest = crate::rest::Rest {
        connectors,
        health: health.clone(),
        worker_id: listen.to_string(),
        files: args.config.clone(),
        store: args.rest_connectors.clone(),
        kafka_cluster_id: tokio::sync::Mutex::new(None),
        kafka,
        edits: tokio::sync::Mutex::new(()),
        tracking: settings.tracking,
        validate: Box::new(move |name, config| validate(&validate_args, name, config)),
    };
    tokio::spawn(async move {
        let served = crate::rest::serve(
            listener,
            settings.tls,
            settings.users,
            std::sync::Arc::new(rest),
        );
        if let Err(e) = served.await {
            tracing::error!("REST API: {e:#}");
        }
    });
    Ok(())
}

/// The connectors of `cfg` defined in Debezium connector JSON files among `files`, as
/// Connect's configuration maps (with `name`, values as strings), which seed a group's
/// config topic.
fn seeds(
    files: &[std::path::PathBuf],
    cfg: &crate::config::Config,
) -> std::collections::BTreeMap<String, serde_json::Map<String, serde_json::Value>> {
    let json: Vec<std::path::PathBuf> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "json"))
        .cloned()
        .collect();
    cfg.connectors
        .iter()
        .filter_map(|c| {
            let (_, map) = crate::rest::config::find(&json, &c.name)?;
            Some((c.name.clone(), map))
        })
        .collect()
}

/// Loads connector `name` with `config` (Connect's map) alone, with the process's worker
/// file and environment, as `run` would: `Err` with the refusal's message.
fn validate(
    args: &ConfigArgs,
    name: &str,
    config: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    load_one(args, name, config, args.group.is_some(), false).map(|_| ())
}

/// Loads connector `name` with `config` (Connect's map) alone, with the process's worker
/// file and environment, as `run` would: the connector, or `Err` with the refusal's message.
/// `in_group`: refused with a file checkpoint store, as a group refuses it in a file.
/// `without_secrets`: the source's secrets are not resolved (to show it, not to run it).
fn load_one(
    args: &ConfigArgs,
    name: &str,
    config: &serde_json::Map<String, serde_json::Value>,
    in_group: bool,
    without_secrets: bool,
) -> Result<crate::config::ConnectorConfig, String> {
    // A file of its own per request (concurrent validations), readable by its owner only
    // (it may hold a password), in a directory of the process's.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("outboxd-validate-{}", std::process::id()));
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let path = dir.join(format!("{safe}-{n}.json"));
    let doc = serde_json::json!({"name": name, "config": config});
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| e.to_string())?;
    std::io::Write::write_all(&mut file, doc.to_string().as_bytes()).map_err(|e| e.to_string())?;
    drop(file);
    let mut a = args.clone();
    a.config = vec![path.clone()];
    let loaded = if without_secrets {
        a.load_for_checkpoint()
    } else {
        a.load()
    };
    // The request's connector, not the file it was handed over in, is what the words name.
    let result = loaded.map_err(|e| {
        format!("{e:#}").replace(&path.display().to_string(), &format!("connector {name}"))
    });
    let _ = std::fs::remove_file(&path);
    let c = result?
        .connectors
        .into_iter()
        .next()
        .ok_or_else(|| format!("no connector {name} in its configuration"))?;
    if in_group {
        if let crate::config::CheckpointConfig::File { .. } = c.checkpoint {
            return Err(format!(
                "connector {name} keeps its checkpoint in a file, which the other members of \
                 the group cannot read: use the Kafka checkpoint store (the default) to run it \
                 in a group"
            ));
        }
    }
    Ok(c)
}

/// The keys of the worker file (`--kafka-config`), none without one.
///
/// Errors when the file cannot be read.
fn worker_file(args: &ConfigArgs) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let env = |k: &str| std::env::var(k).ok();
    Ok(match &args.kafka_config {
        Some(path) => crate::config::kafka::worker_properties(path, &env)
            .map_err(|(k, m)| anyhow::anyhow!("worker file {}: {k}: {m}", path.display()))?,
        None => Default::default(),
    })
}

/// The REST listener's settings from `--rest-listen`, the worker file and the JAAS file.
///
/// Errors as [`crate::rest::listener::read`] does, or when the worker file cannot be read.
fn rest_listener(
    listen: &str,
    args: &ConfigArgs,
) -> anyhow::Result<crate::rest::listener::Listener> {
    let worker = worker_file(args)?;
    let kafka_opts = std::env::var("KAFKA_OPTS").ok();
    crate::rest::listener::read(
        listen,
        &worker,
        args.rest_jaas.as_deref(),
        kafka_opts.as_deref(),
    )
    .map_err(|e| anyhow::anyhow!("REST API: {e}"))
}
