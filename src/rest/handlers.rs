//! The routes of Kafka Connect's REST API (see the module docs of [`crate::rest`]).

// A refused request is the error response itself (axum's handler idiom); its size is no
// concern at a few requests a minute.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use serde_json::{json, Value};

use super::config::{self, ConfigMap};
use super::listener::Users;
use super::{Connectors, Rest};
use crate::group::view::GroupView;
use crate::health::{ConnectorHealth, ConnectorState};
use crate::supervisor::{Listed, OpError, Target};

pub(super) type S = State<Arc<Rest>>;

/// Serves the API on `listener` until the process exits: over TLS when `tls` is given, and
/// to the `users` only (HTTP Basic) when they are.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    users: Option<Users>,
    rest: Arc<Rest>,
) -> anyhow::Result<()> {
    let app = Router::new()
        .route("/", get(root))
        .route("/connectors", get(list).post(create))
        .route("/connectors/{name}", get(info).delete(delete))
        .route("/connectors/{name}/config", get(get_config).put(put_config))
        .route("/connectors/{name}/status", get(status))
        .route("/connectors/{name}/tasks", get(tasks))
        .route("/connectors/{name}/tasks/{task}/status", get(task_status))
        .route("/connectors/{name}/topics", get(topics))
        .route("/connectors/{name}/topics/reset", put(reset_topics))
        .route("/connectors/{name}/pause", put(pause))
        .route("/connectors/{name}/resume", put(resume))
        .route("/connectors/{name}/stop", put(stop))
        .route("/connectors/{name}/restart", axum::routing::post(restart))
        .route(
            "/connectors/{name}/tasks/{task}/restart",
            axum::routing::post(restart_task),
        )
        .route(
            "/connectors/{name}/offsets",
            get(super::offsets::get)
                .patch(super::offsets::alter)
                .delete(super::offsets::reset),
        )
        .route("/admin/loggers", get(super::loggers::list))
        .route(
            "/admin/loggers/{name}",
            get(super::loggers::get).put(super::loggers::put),
        )
        .route("/connector-plugins", get(plugins))
        .route("/connector-plugins/{class}/config/validate", put(validate))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "HTTP 404 Not Found") })
        .layer(axum::middleware::map_response(connect_error_body))
        .with_state(rest);
    // Routed after a trailing `/` is dropped, as Connect (Jersey) takes `/connectors/`.
    let app = Router::new()
        .fallback_service(app)
        .layer(axum::middleware::map_request(trim_trailing_slash));
    let app = match users {
        Some(users) => app.layer(axum::middleware::from_fn_with_state(users, authenticate)),
        None => app,
    };
    let listen = listener.local_addr()?;
    tracing::info!(%listen, tls = tls.is_some(), "serving Kafka Connect's REST API");
    let Some(tls) = tls else {
        axum::serve(listener, app).await?;
        return Ok(());
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("REST API: accepting a connection: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let stream = match acceptor.accept(tcp).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%peer, "REST API: TLS handshake failed: {e}");
                    return;
                }
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, "REST API connection: {e}");
            }
        });
    }
}

/// The request with its path's trailing `/` dropped (`/connectors/` → `/connectors`):
/// Connect's Jersey routes both alike.
async fn trim_trailing_slash(mut request: axum::extract::Request) -> axum::extract::Request {
    let uri = request.uri();
    let path = uri.path();
    if path.len() > 1 && path.ends_with('/') {
        let trimmed = path.trim_end_matches('/');
        let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
        let with_query = match uri.query() {
            Some(q) => format!("{trimmed}?{q}"),
            None => trimmed.to_string(),
        };
        let mut parts = uri.clone().into_parts();
        if let Ok(pq) = with_query.parse() {
            parts.path_and_query = Some(pq);
            if let Ok(uri) = axum::http::Uri::from_parts(parts) {
                *request.uri_mut() = uri;
            }
        }
    }
    request
}

/// The framework's own refusals in Connect's error shape: a method a path does not take
/// (405, as Jersey words it) and a body over the size limit (413), which axum answers with
/// an empty or plain-text body.
async fn connect_error_body(response: Response) -> Response {
    let status = response.status();
    let json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    match status {
        _ if json => response,
        StatusCode::METHOD_NOT_ALLOWED => error(status, "HTTP 405 Method Not Allowed"),
        StatusCode::PAYLOAD_TOO_LARGE => error(
            status,
            "Request body too large: a connector configuration is at most 2 MiB",
        ),
        // What the router's extractors refused (a path that is not UTF-8, a body cut
        // short): their plain-text reason in Connect's shape.
        StatusCode::BAD_REQUEST
        | StatusCode::UNSUPPORTED_MEDIA_TYPE
        | StatusCode::UNPROCESSABLE_ENTITY => {
            let reason = axum::body::to_bytes(response.into_body(), 64 * 1024)
                .await
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            error(status, reason)
        }
        _ => response,
    }
}

/// HTTP Basic authentication (Connect's `BasicAuthSecurityRestExtension`): 401 with Connect's
/// words unless the request's credentials are a user's.
async fn authenticate(
    State(users): State<Users>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let given = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if users.admits(given) {
        next.run(request).await
    } else {
        (StatusCode::UNAUTHORIZED, "User cannot access the resource.").into_response()
    }
}

/// Connect's error body: `{"error_code": <status>, "message": ...}`.
pub(super) fn error(code: StatusCode, message: impl Into<String>) -> Response {
    (
        code,
        Json(json!({"error_code": code.as_u16(), "message": message.into()})),
    )
        .into_response()
}

fn not_found(name: &str) -> Response {
    error(StatusCode::NOT_FOUND, format!("Connector {name} not found"))
}

pub(super) fn op_error(e: OpError) -> Response {
    match e {
        OpError::NotFound(name) => not_found(&name),
        OpError::Config(m) => error(StatusCode::BAD_REQUEST, m),
        OpError::Closing | OpError::NotYet(_) => error(StatusCode::CONFLICT, e.to_string()),
        OpError::Store(m) => error(StatusCode::INTERNAL_SERVER_ERROR, m),
    }
}

/// `GET /`: the version, as Connect's `ServerInfo`.
async fn root(State(rest): S) -> Response {
    let mut cluster = rest.kafka_cluster_id.lock().await;
    if cluster.is_none() {
        if let Some(kafka) = rest.kafka.clone() {
            *cluster = tokio::task::spawn_blocking(move || {
                use rdkafka::consumer::Consumer;
                let consumer: rdkafka::consumer::BaseConsumer =
                    crate::sink::client::config(&kafka).create().ok()?;
                consumer
                    .client()
                    .fetch_cluster_id(std::time::Duration::from_secs(5))
            })
            .await
            .ok()
            .flatten();
        }
    }
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": "outboxd",
        "kafka_cluster_id": cluster.clone(),
    }))
    .into_response()
}

/// The query's values of `key` (`?expand=status&expand=info`).
pub(super) fn query_values(query: &Option<String>, key: &str) -> Vec<String> {
    query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
        .collect()
}

fn query_flag(query: &Option<String>, key: &str) -> bool {
    query_values(query, key)
        .last()
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// `GET /connectors` (`?expand=status`, `?expand=info`).
async fn list(State(rest): S, RawQuery(query): RawQuery) -> Response {
    let listed = rest.connectors.list();
    let expand = query_values(&query, "expand");
    if expand.is_empty() {
        return Json(listed.keys().collect::<Vec<_>>()).into_response();
    }
    let report = rest.health.report().connectors;
    let mut out = serde_json::Map::new();
    for (name, l) in &listed {
        let mut entry = serde_json::Map::new();
        if expand.iter().any(|e| e == "status") {
            entry.insert(
                "status".into(),
                status_body(&rest, name, l, report.get(name)),
            );
        }
        if expand.iter().any(|e| e == "info") {
            entry.insert("info".into(), info_body(&rest, name, l));
        }
        out.insert(name.clone(), Value::Object(entry));
    }
    Json(Value::Object(out)).into_response()
}

/// The configuration of `name` as written (secrets hidden), with `connector.class`.
pub(super) fn config_of(rest: &Rest, name: &str, l: &Listed) -> ConfigMap {
    let files = super::config_files(&rest.files, rest.store.as_deref());
    let shared = match &rest.connectors {
        Connectors::Group(g) => g.config_map(name),
        Connectors::Local(_) => None,
    };
    let mut map = shared
        .or_else(|| config::find(&files, name).map(|(_, m)| m))
        .unwrap_or_else(|| {
            let mut m = ConfigMap::new();
            m.insert("name".into(), Value::String(name.into()));
            m
        });
    if !map.contains_key("connector.class") {
        map.insert(
            "connector.class".into(),
            Value::String(config::connector_class(l.cfg.source.plugin()).into()),
        );
    }
    config::masked(&map)
}

/// Connect's `ConnectorInfo`: name, config, tasks, type.
fn info_body(rest: &Rest, name: &str, l: &Listed) -> Value {
    let tasks = if l.target == Target::Stopped {
        json!([])
    } else {
        json!([{"connector": name, "task": 0}])
    };
    json!({
        "name": name,
        "config": config_of(rest, name, l),
        "tasks": tasks,
        "type": "source",
    })
}

/// A task's or connector's state as Connect names it, and the failure trace of a failed one.
fn states(
    l: &Listed,
    h: Option<&ConnectorHealth>,
) -> (&'static str, Option<(&'static str, Option<String>)>) {
    match l.target {
        Target::Stopped => ("STOPPED", None),
        Target::Paused => ("PAUSED", Some(("PAUSED", None))),
        Target::Running => match h.map(|h| h.state) {
            Some(ConnectorState::Failed) => (
                "RUNNING",
                Some(("FAILED", h.and_then(|h| h.reason.clone()))),
            ),
            _ if l.failed && !l.running => (
                "RUNNING",
                Some((
                    "FAILED",
                    h.and_then(|h| h.reason.clone()).or_else(|| l.trace.clone()),
                )),
            ),
            // In a group: runs in the member `worker` names, or in none yet.
            Some(ConnectorState::Standby) | None if l.worker.is_some() => {
                ("RUNNING", Some(("RUNNING", None)))
            }
            Some(ConnectorState::Stopped | ConnectorState::Standby) | None => {
                ("UNASSIGNED", Some(("UNASSIGNED", None)))
            }
            _ => ("RUNNING", Some(("RUNNING", None))),
        },
    }
}

/// Connect's `ConnectorStateInfo`.
fn status_body(rest: &Rest, name: &str, l: &Listed, h: Option<&ConnectorHealth>) -> Value {
    let (connector, task) = states(l, h);
    let version = config::plugin_version(l.cfg.source.plugin());
    let tasks: Vec<Value> = task
        .into_iter()
        .map(|(state, trace)| task_body(rest, l, state, trace, version))
        .collect();
    json!({
        "name": name,
        "connector": {"state": connector, "worker_id": worker_of(rest, l), "version": version},
        "tasks": tasks,
        "type": "source",
    })
}

/// The worker running `l`: the member that does, in a group; else this process.
fn worker_of<'a>(rest: &'a Rest, l: &'a Listed) -> &'a str {
    l.worker.as_deref().unwrap_or(&rest.worker_id)
}

fn task_body(rest: &Rest, l: &Listed, state: &str, trace: Option<String>, version: &str) -> Value {
    let mut t =
        json!({"id": 0, "state": state, "worker_id": worker_of(rest, l), "version": version});
    if let Some(trace) = trace {
        t["trace"] = Value::String(trace);
    }
    t
}

pub(super) fn listed(rest: &Rest, name: &str) -> Result<Listed, Response> {
    rest.connectors
        .list()
        .remove(name)
        .ok_or_else(|| not_found(name))
}

/// `GET /connectors/{name}`.
async fn info(State(rest): S, Path(name): Path<String>) -> Response {
    match listed(&rest, &name) {
        Ok(l) => Json(info_body(&rest, &name, &l)).into_response(),
        Err(r) => r,
    }
}

/// `GET /connectors/{name}/config`.
async fn get_config(State(rest): S, Path(name): Path<String>) -> Response {
    match listed(&rest, &name) {
        Ok(l) => Json(config_of(&rest, &name, &l)).into_response(),
        Err(r) => r,
    }
}

/// `GET /connectors/{name}/status`.
async fn status(State(rest): S, Path(name): Path<String>) -> Response {
    match rest.connectors.list().remove(&name) {
        Some(l) => {
            let report = rest.health.report().connectors;
            Json(status_body(&rest, &name, &l, report.get(&name))).into_response()
        }
        None => error(
            StatusCode::NOT_FOUND,
            format!("No status found for connector {name}"),
        ),
    }
}

/// `GET /connectors/{name}/tasks/{task}/status`.
async fn task_status(State(rest): S, Path((name, task)): Path<(String, String)>) -> Response {
    let l = match listed(&rest, &name) {
        Ok(l) => l,
        Err(r) => return r,
    };
    let report = rest.health.report().connectors;
    match (states(&l, report.get(&name)).1, task.as_str()) {
        (Some((state, trace)), "0") => Json(task_body(
            &rest,
            &l,
            state,
            trace,
            config::plugin_version(l.cfg.source.plugin()),
        ))
        .into_response(),
        _ => error(
            StatusCode::NOT_FOUND,
            format!("No status found for task {name}-{task}"),
        ),
    }
}

/// `GET /connectors/{name}/tasks`: the one task and its configuration.
async fn tasks(State(rest): S, Path(name): Path<String>) -> Response {
    match listed(&rest, &name) {
        Ok(l) if l.target == Target::Stopped => Json(json!([])).into_response(),
        Ok(l) => Json(json!([{
            "id": {"connector": name, "task": 0},
            "config": config_of(&rest, &name, &l),
        }]))
        .into_response(),
        Err(r) => r,
    }
}

/// `GET /connectors/{name}/topics`: `{"<name>": {"topics": [...]}}`, the topics the connector
/// used since it was created or its topics were reset (KIP-558); as Connect, 200 with none
/// for a connector that does not exist, 403 with `topic.tracking.enable=false`.
async fn topics(State(rest): S, Path(name): Path<String>) -> Response {
    if !rest.tracking.enabled {
        return error(StatusCode::FORBIDDEN, "Topic tracking is disabled.");
    }
    let used = rest.health.topics().list(&name);
    Json(json!({ name: {"topics": used} })).into_response()
}

/// `PUT /connectors/{name}/topics/reset`: 202, the connector's topics forgotten (listed again
/// from its next record on); 403 with `topic.tracking.enable=false` or
/// `topic.tracking.allow.reset=false`; 500 when where they are kept could not be changed.
async fn reset_topics(State(rest): S, Path(name): Path<String>) -> Response {
    if !rest.tracking.enabled {
        return error(StatusCode::FORBIDDEN, "Topic tracking is disabled.");
    }
    if !rest.tracking.allow_reset {
        return error(StatusCode::FORBIDDEN, "Topic tracking reset is disabled.");
    }
    // Carried out to the end even when the client goes (a reset of many topics writes a
    // tombstone for each): the answer waits for it only a while, as Connect answers 202
    // without waiting for its status topic.
    let topics = rest.health.topics().clone();
    let connector = name.clone();
    let reset = tokio::spawn(async move { topics.reset(&connector).await });
    match tokio::time::timeout(RESET_WAIT, reset).await {
        Ok(Ok(Err(e))) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Could not reset the topics of connector {name}: {e}"),
        ),
        Ok(_) => StatusCode::ACCEPTED.into_response(),
        Err(_) => {
            tracing::info!(connector = %name, "topic tracking: the reset goes on in the background");
            StatusCode::ACCEPTED.into_response()
        }
    }
}

/// How long a topic-tracking reset's answer waits for its end (it goes on after).
const RESET_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs a target-state change in the background (Connect answers before it is done).
async fn target(rest: Arc<Rest>, name: String, to: Target, code: StatusCode) -> Response {
    if !rest.connectors.list().contains_key(&name) {
        return error(StatusCode::NOT_FOUND, format!("Unknown connector {name}"));
    }
    tokio::spawn(async move {
        // After an offsets change in progress (it checked that the connector is STOPPED).
        let _edit = rest.edits.lock().await;
        let r = rest.connectors.set_target(&name, to).await;
        if let Err(e) = r {
            tracing::warn!(connector = %name, "REST {to:?}: {e}");
        }
    });
    code.into_response()
}

/// `PUT /connectors/{name}/pause`: 202.
async fn pause(State(rest): S, Path(name): Path<String>) -> Response {
    target(rest, name, Target::Paused, StatusCode::ACCEPTED).await
}

/// `PUT /connectors/{name}/resume`: 202.
async fn resume(State(rest): S, Path(name): Path<String>) -> Response {
    target(rest, name, Target::Running, StatusCode::ACCEPTED).await
}

/// `PUT /connectors/{name}/stop`: 204.
async fn stop(State(rest): S, Path(name): Path<String>) -> Response {
    target(rest, name, Target::Stopped, StatusCode::NO_CONTENT).await
}

/// `POST /connectors/{name}/restart` (`includeTasks`, `onlyFailed`): 204 without either,
/// else 202 with the status, `RESTARTING` where a restart was asked for.
async fn restart(State(rest): S, Path(name): Path<String>, RawQuery(query): RawQuery) -> Response {
    let l = match listed(&rest, &name) {
        Ok(l) => l,
        Err(r) => return r,
    };
    let include_tasks = query_flag(&query, "includeTasks");
    let only_failed = query_flag(&query, "onlyFailed");
    let report = rest.health.report().connectors;
    let mut body = status_body(&rest, &name, &l, report.get(&name));
    let restarts = l.target != Target::Stopped && (!only_failed || l.failed);
    if restarts {
        // With onlyFailed, Connect restarts the failed task alone: the connector runs on.
        if !only_failed {
            body["connector"]["state"] = json!("RESTARTING");
        }
        if let Some(t) = body["tasks"].get_mut(0) {
            t["state"] = json!("RESTARTING");
        }
    }
    let r2 = rest.clone();
    let n2 = name.clone();
    tokio::spawn(async move {
        let _edit = r2.edits.lock().await;
        if let Err(e) = r2.connectors.restart(&n2, only_failed).await {
            tracing::warn!(connector = %n2, "REST restart: {e}");
        }
    });
    if include_tasks || only_failed {
        (StatusCode::ACCEPTED, Json(body)).into_response()
    } else {
        StatusCode::NO_CONTENT.into_response()
    }
}

/// `POST /connectors/{name}/tasks/0/restart`: the connector's one task is the connector.
async fn restart_task(State(rest): S, Path((name, task)): Path<(String, String)>) -> Response {
    if let Err(r) = listed(&rest, &name) {
        return r;
    }
    if task != "0" {
        return error(
            StatusCode::NOT_FOUND,
            format!("Task {name}-{task} not found"),
        );
    }
    let _edit = rest.edits.lock().await;
    match rest.connectors.restart(&name, false).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => op_error(e),
    }
}

/// `GET /connector-plugins`.
async fn plugins(RawQuery(query): RawQuery) -> Response {
    let mut out: Vec<Value> = config::PLUGINS
        .iter()
        .map(|(class, version)| json!({"class": class, "type": "source", "version": version}))
        .collect();
    let connectors_only = query_values(&query, "connectorsOnly")
        .last()
        .is_none_or(|v| !v.eq_ignore_ascii_case("false"));
    if !connectors_only {
        out.push(json!({
            "class": "io.debezium.transforms.outbox.EventRouter",
            "type": "transformation",
            "version": config::PLUGINS[2].1,
        }));
    }
    Json(out).into_response()
}

/// Parses a request body as a JSON object.
fn object(body: &Bytes) -> Result<serde_json::Map<String, Value>, Response> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(error(
            StatusCode::BAD_REQUEST,
            "the request body must be a JSON object",
        )),
        Err(e) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Cannot deserialize the request body: {e}"),
        )),
    }
}

/// Connector `name`'s configuration `cfg` as kept: its `name` set (400 with Connect's words
/// when it names another connector), numbers and booleans as strings (Connect takes a
/// configuration as `Map<String, String>`, so it keeps and shows `"database.port": 3306` as
/// `"3306"`).
fn named(mut cfg: ConfigMap, name: &str) -> Result<ConfigMap, Response> {
    match cfg.get("name").and_then(Value::as_str) {
        Some(n) if n != name => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!(
                    "Connector name configuration ({n}) doesn't match connector name in the \
                     URL ({name})"
                ),
            ))
        }
        _ => {}
    }
    cfg.insert("name".into(), Value::String(name.to_string()));
    for v in cfg.values_mut() {
        if v.is_number() || v.is_boolean() {
            *v = Value::String(v.to_string());
        }
    }
    Ok(cfg)
}

/// `POST /connectors` (`{"name", "config"}`): 201 with the connector's info.
async fn create(State(rest): S, body: Bytes) -> Response {
    let doc = match object(&body) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let Some(Value::Object(cfg)) = doc.get("config").cloned() else {
        return error(
            StatusCode::BAD_REQUEST,
            "Connector config is missing (the body is {\"name\": ..., \"config\": {...}})",
        );
    };
    let name = match doc.get("name").and_then(Value::as_str).map(str::to_string) {
        Some(n) => n,
        None => match cfg.get("name").and_then(Value::as_str) {
            Some(n) => n.to_string(),
            None => return error(StatusCode::BAD_REQUEST, "Connector name is missing"),
        },
    };
    let cfg = match named(cfg, &name) {
        Ok(c) => c,
        Err(r) => return r,
    };
    match apply(&rest, &name, cfg, true).await {
        Ok(_) => created(&rest, &name),
        Err(r) => r,
    }
}

/// `PUT /connectors/{name}/config`: 201 when created, 200 when changed, with its info.
async fn put_config(State(rest): S, Path(name): Path<String>, body: Bytes) -> Response {
    let cfg = match object(&body).and_then(|c| named(c, &name)) {
        Ok(c) => c,
        Err(r) => return r,
    };
    match apply(&rest, &name, cfg, false).await {
        Ok(true) => created(&rest, &name),
        Ok(false) => Json(info_now(&rest, &name)).into_response(),
        Err(r) => r,
    }
}

/// 201 with the connector's info and its `Location`, as Connect answers a creation.
fn created(rest: &Rest, name: &str) -> Response {
    let location = format!("http://{}/connectors/{name}", rest.worker_id);
    (
        StatusCode::CREATED,
        [(axum::http::header::LOCATION, location)],
        Json(info_now(rest, name)),
    )
        .into_response()
}

fn info_now(rest: &Rest, name: &str) -> Value {
    match rest.connectors.list().remove(name) {
        Some(l) => info_body(rest, name, &l),
        None => json!({"name": name}),
    }
}

/// How a changed `--config` file is applied: SIGHUP, or a restart for a group member (which
/// does not reload its files).
fn apply_files(rest: &Rest) -> &'static str {
    match rest.connectors {
        Connectors::Local(_) => "send outboxd SIGHUP (or restart it)",
        Connectors::Group(_) => {
            "restart the group's members one by one (a group member does not reload its files \
             on SIGHUP)"
        }
    }
}

/// The `--config` file that defines `name`, if one does (not the REST API's directory).
fn defined_in_file(rest: &Rest, name: &str) -> Option<std::path::PathBuf> {
    config::find(&rest.files, name).map(|(f, _)| f)
}

/// Writes `name`'s configuration to the REST directory and applies it (as a SIGHUP
/// applies files); a configuration that does not load is put back and refused (400).
/// Returns whether the connector was created.
async fn apply(
    rest: &Rest,
    name: &str,
    mut cfg: ConfigMap,
    create_only: bool,
) -> Result<bool, Response> {
    config::check_name(name).map_err(|m| error(StatusCode::BAD_REQUEST, m))?;
    let _edit = rest.edits.lock().await;
    let exists = rest.connectors.list().contains_key(name);
    if create_only && exists {
        return Err(error(
            StatusCode::CONFLICT,
            format!("Connector {name} already exists"),
        ));
    }
    if let Some(file) = defined_in_file(rest, name) {
        return Err(error(
            StatusCode::CONFLICT,
            format!(
                "connector {name} is defined in {}; change it there and {} (the REST API \
                 changes only the connectors it created)",
                file.display(),
                apply_files(rest)
            ),
        ));
    }
    let supervisor = match &rest.connectors {
        Connectors::Group(g) => return apply_in_group(rest, g, name, cfg, create_only).await,
        Connectors::Local(s) => s.clone(),
    };
    let Some(dir) = &rest.store else {
        return Err(error(
            StatusCode::CONFLICT,
            "outboxd was started without --rest-connectors DIR: a connector created through \
             the REST API would not survive a restart, so none is; start it with \
             --rest-connectors (or OUTBOXD_REST_CONNECTORS)",
        ));
    };
    let kept = config::read(&config::stored_path(dir, name), name);
    config::unhide(&mut cfg, kept.as_ref()).map_err(|m| error(StatusCode::BAD_REQUEST, m))?;
    let before = config::store(dir, name, &cfg).map_err(|e| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "cannot write {}: {e}",
                config::stored_path(dir, name).display()
            ),
        )
    })?;
    match supervisor.reload().await {
        Ok(applied) => {
            tracing::info!(connector = %name, started = ?applied.started, changed = ?applied.changed, removed = ?applied.removed, "connector configuration applied (REST)");
            // What `run` says of a file's unused keys at start, said now.
            if let Some(l) = rest.connectors.list().get(name) {
                for (key, why) in &l.cfg.ignored_keys {
                    tracing::warn!(connector = %name, key = %key, "Debezium setting `{key}`: {why}");
                }
            }
            Ok(!exists)
        }
        Err(e) => {
            if let Err(io) = config::restore(dir, name, before) {
                tracing::error!(connector = %name, "cannot put its previous configuration file back: {io}");
            }
            Err(op_error(e))
        }
    }
}

/// [`apply`] for a group member: the configuration, checked as `run` would load it on this
/// member, is written to the group's config topic (every member reads it; the one the
/// coordinator assigns it to runs it).
async fn apply_in_group(
    rest: &Rest,
    g: &GroupView,
    name: &str,
    mut cfg: ConfigMap,
    create_only: bool,
) -> Result<bool, Response> {
    // (`apply` answered a creation of a listed connector already.)
    if let Some(member) = g.defined_in_files(name) {
        return Err(error(
            StatusCode::CONFLICT,
            format!(
                "connector {name} is defined in the connector files of group member {member}; \
                 change it there (the REST API changes only the connectors of the group's \
                 config topic)"
            ),
        ));
    }
    // Its coordination topic must be one Kafka can create (and not another's: Kafka takes
    // `.` and `_` for the same character in topic names).
    let topic = crate::group::topics::coordination_topic(&g.group, name);
    if topic.len() > 249 {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!(
                "connector name {name} is too long for group {}: its coordination topic {topic} \
                 would have {} characters, and Kafka allows 249; choose a shorter name",
                g.group,
                topic.len()
            ),
        ));
    }
    let folded = |n: &str| n.replace('.', "_");
    if let Some(other) = g
        .known_names()
        .into_iter()
        .find(|o| o != name && folded(o) == folded(name))
    {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!(
                "connector name {name} collides with connector {other} of the group: their \
                 coordination topics differ only in '.' and '_', which Kafka takes for the \
                 same; choose another name"
            ),
        ));
    }
    let kept = g.config_map(name);
    config::unhide(&mut cfg, kept.as_ref()).map_err(|m| error(StatusCode::BAD_REQUEST, m))?;
    (rest.validate)(name, &cfg).map_err(|m| error(StatusCode::BAD_REQUEST, m))?;
    match g.put(name, &cfg, create_only).await {
        Ok(None) => Err(error(
            StatusCode::CONFLICT,
            format!("Connector {name} already exists"),
        )),
        Ok(Some(created)) => {
            tracing::info!(connector = %name, group = %g.group, "connector configuration written to the group's config topic (REST)");
            Ok(created)
        }
        Err(e) => Err(op_error(e)),
    }
}

/// `DELETE /connectors/{name}`: 204.
async fn delete(State(rest): S, Path(name): Path<String>) -> Response {
    let _edit = rest.edits.lock().await;
    if let Err(r) = listed(&rest, &name) {
        return r;
    }
    if let Some(file) = defined_in_file(&rest, &name) {
        return error(
            StatusCode::CONFLICT,
            format!(
                "connector {name} is defined in {}, a --config file: the REST API removes only \
                 the connectors it created; to remove this one, take it out of the file (or the \
                 file out of --config) and {}",
                file.display(),
                apply_files(&rest)
            ),
        );
    }
    let supervisor = match &rest.connectors {
        Connectors::Local(s) => s.clone(),
        Connectors::Group(g) => {
            if let Some(member) = g.defined_in_files(&name) {
                return error(
                    StatusCode::CONFLICT,
                    format!(
                        "connector {name} is defined in the connector files of group member \
                     {member}: the REST API removes only the connectors of the group's config \
                     topic; take it out of the members' files and restart them one by one"
                    ),
                );
            }
            return match g.delete(&name).await {
                Ok(()) => StatusCode::NO_CONTENT.into_response(),
                Err(e) => op_error(e),
            };
        }
    };
    let Some(dir) = &rest.store else {
        return error(
            StatusCode::CONFLICT,
            "outboxd was started without --rest-connectors DIR",
        );
    };
    let path = config::stored_path(dir, &name);
    let before = std::fs::read(&path).ok();
    if let Err(e) = std::fs::remove_file(&path) {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot remove {}: {e}", path.display()),
        );
    }
    match supervisor.reload().await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => {
            let _ = config::restore(dir, &name, before);
            op_error(e)
        }
    }
}

/// `PUT /connector-plugins/{class}/config/validate`: the configuration loaded as `run` would
/// load it, in Connect's `ConfigInfos` shape; a refusal is an error on the key it names (else
/// on `connector.class`).
async fn validate(State(rest): S, Path(class): Path<String>, body: Bytes) -> Response {
    let mut cfg = match object(&body) {
        Ok(d) => d,
        Err(r) => return r,
    };
    // As Connect: a `connector.class` in the body must name the plugin of the path.
    let normalized = |n: &str| {
        n.strip_suffix("Connector")
            .filter(|s| !s.is_empty())
            .unwrap_or(n)
            .to_string()
    };
    if let Some(included) = cfg.get("connector.class").and_then(Value::as_str) {
        if !normalized(included).ends_with(&normalized(&class)) {
            return error(
                StatusCode::BAD_REQUEST,
                format!("Included connector type {included} does not match request type {class}"),
            );
        }
    }
    // Connect's aliases: the simple class name, or that without `Connector`.
    let class = crate::config::connector_class(&class)
        .map(str::to_string)
        .unwrap_or(class);
    if !config::PLUGINS.iter().any(|(c, _)| *c == class) {
        return error(
            StatusCode::NOT_FOUND,
            format!(
                "Failed to find any class that implements Connector and which name matches {class}"
            ),
        );
    }
    cfg.entry("connector.class")
        .or_insert_with(|| Value::String(class.clone()));
    let name = cfg
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("validate")
        .to_string();
    let problem = (rest.validate)(&name, &cfg).err();
    let mut errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(p) = &problem {
        let key = cfg
            .keys()
            .filter(|k| p.contains(k.as_str()))
            .max_by_key(|k| k.len())
            .cloned()
            .unwrap_or_else(|| "connector.class".into());
        errors.entry(key).or_default().push(p.clone());
    }
    let shown = config::masked(&cfg);
    let configs: Vec<Value> = shown
        .iter()
        .enumerate()
        .map(|(i, (k, v))| {
            json!({
                "definition": {
                    "name": k, "type": "STRING", "required": false, "default_value": null,
                    "importance": "MEDIUM", "documentation": "", "group": "Common",
                    "width": "NONE", "display_name": k, "dependents": [], "order": i,
                },
                "value": {
                    "name": k, "value": v, "recommended_values": [],
                    "errors": errors.get(k).cloned().unwrap_or_default(), "visible": true,
                },
            })
        })
        .collect();
    Json(json!({
        "name": class,
        "error_count": errors.values().map(Vec::len).sum::<usize>(),
        "groups": ["Common"],
        "configs": configs,
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::ConnectorHealth;

    fn listed(worker: Option<&str>, failed: bool, trace: Option<&str>) -> Listed {
        let text = r#"
[[connectors]]
name = "c"
tables = ["s.outbox"]
[connectors.source]
kind = "mariadb"
host = "h"
user = "u"
password = "p"
server_id = 7
"#;
        let cfg = crate::config::parse(
            text,
            std::path::Path::new("t.toml"),
            Some("k:9092"),
            &|_| None,
        )
        .unwrap()
        .connectors
        .remove(0);
        Listed {
            cfg,
            target: Target::Running,
            running: false,
            failed,
            worker: worker.map(str::to_string),
            trace: trace.map(str::to_string),
        }
    }

    fn standby() -> ConnectorHealth {
        ConnectorHealth {
            state: ConnectorState::Standby,
            ready: true,
            reason: None,
            since_ms: 0,
            kafka_unreachable_s: None,
        }
    }

    /// A group member's statuses of a connector another member runs: RUNNING there, FAILED
    /// with that member's trace, UNASSIGNED when nobody runs it.
    #[test]
    fn a_member_tells_the_state_of_a_connector_another_member_runs() {
        let h = standby();
        assert_eq!(
            states(&listed(Some("10.0.0.2:8083"), false, None), Some(&h)),
            ("RUNNING", Some(("RUNNING", None)))
        );
        assert_eq!(
            states(
                &listed(Some("10.0.0.2:8083"), true, Some("password refused")),
                Some(&h)
            ),
            (
                "RUNNING",
                Some(("FAILED", Some("password refused".to_string())))
            )
        );
        assert_eq!(
            states(&listed(None, false, None), Some(&h)),
            ("UNASSIGNED", Some(("UNASSIGNED", None)))
        );
        // Listed by a member that cannot run it (no health of its own there).
        assert_eq!(
            states(&listed(Some("10.0.0.2:8083"), false, None), None),
            ("RUNNING", Some(("RUNNING", None)))
        );
    }
}
