//! Kafka Connect's `/admin/loggers` (KIP-495; `scope=cluster` from KIP-976) over
//! [`crate::log_levels`]: `GET /admin/loggers`, `GET /admin/loggers/{name}`,
//! `PUT /admin/loggers/{name}` with `{"level": "DEBUG"}`. Answers, codes and messages as
//! Connect 4.1 gives them (compared side by side in `tests/connect_rest.rs`).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::handlers::{error, op_error, query_values, S};
use super::Connectors;
use crate::log_levels::{self, LevelError};

fn level_body(level: &str, at: Option<i64>) -> Value {
    json!({"level": level, "last_modified": at})
}

/// `GET /admin/loggers`: every logger with a level of its own → `{"level", "last_modified"}`.
pub(super) async fn list() -> Response {
    let out: Map<String, Value> = log_levels::list()
        .into_iter()
        .map(|(name, (level, at))| (name, level_body(&level, at)))
        .collect();
    Json(Value::Object(out)).into_response()
}

/// `GET /admin/loggers/{name}`: its level; 404 `Logger <name> not found.` as Connect.
pub(super) async fn get(Path(name): Path<String>) -> Response {
    match log_levels::get(&name) {
        Some((level, at)) => Json(level_body(&level, at)).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("Logger {name} not found.")),
    }
}

/// `PUT /admin/loggers/{name}?scope=worker|cluster` with `{"level": ...}`: `worker` (the
/// default; Connect takes any other value as it) sets it here and answers the loggers it
/// changed; `cluster` answers 204 and, in a group, writes it to the group's config topic
/// (`logger-cluster-<name>`, as Connect) for every member running then to apply; without a
/// group it is this process's level (Connect's standalone worker does the same).
pub(super) async fn put(
    State(rest): S,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let level = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("level").and_then(Value::as_str).map(str::to_string));
    let Some(level) = level else {
        return error(
            StatusCode::BAD_REQUEST,
            "Desired 'level' parameter was not specified in request.",
        );
    };
    let cluster = query_values(&query, "scope")
        .last()
        .is_some_and(|s| s.eq_ignore_ascii_case("cluster"));
    if cluster {
        if let Connectors::Group(g) = &rest.connectors {
            if let Err(e) = log_levels::check(&level) {
                return level_error(e);
            }
            return match g.set_logger_level(&name, &level).await {
                Ok(()) => StatusCode::NO_CONTENT.into_response(),
                Err(e) => op_error(e),
            };
        }
    }
    match log_levels::set(&name, &level) {
        Ok(changed) => {
            tracing::info!(logger = %name, %level, target = %log_levels::target_of(&name), "log level set (REST)");
            if cluster {
                StatusCode::NO_CONTENT.into_response()
            } else {
                Json(changed).into_response()
            }
        }
        Err(e) => level_error(e),
    }
}

fn level_error(e: LevelError) -> Response {
    let code = match e {
        LevelError::Invalid(_) => StatusCode::NOT_FOUND,
        LevelError::NotInstalled => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(code, e.to_string())
}
