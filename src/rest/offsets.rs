//! KIP-875's offsets endpoints (Kafka Connect 3.6+): `GET`, `PATCH` and `DELETE
//! /connectors/{name}/offsets`, with outboxd's checkpoint shown and set in Debezium's offset
//! format, as the cutover commands read and write it.
//!
//! * An outboxd connector has one source partition, Debezium's for its connector:
//!   `{"server": <topic.prefix>}` (MySQL/MariaDB and PostgreSQL alike). `GET` gives the
//!   checkpoint as the offset Debezium would commit there (`[]` without a checkpoint).
//! * `PATCH` (body `{"offsets": [{"partition": ..., "offset": ...}]}`) maps a Debezium offset
//!   onto the checkpoint (reading the transaction it is in from the source, as `checkpoint
//!   import-debezium` does, without its read-back of the routed topics) and stores it; an
//!   `offset` of `null` removes the checkpoint. A partition other than the connector's is
//!   refused (Connect would store it where no task reads it).
//! * `DELETE` removes the checkpoint: the next start begins where a connector without one
//!   begins (`checkpoint reset`).
//!
//! Both changes need the connector STOPPED (`PUT /connectors/{name}/stop`), as in Connect:
//! 400 with Connect's words otherwise. Status codes and messages follow Connect 4.1's
//! `ConnectorsResource` and `AbstractHerder`.

// A refused request is the error response itself, as in `handlers`.
#![allow(clippy::result_large_err)]

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::handlers::{config_of, error, listed, op_error, S};
use super::{Connectors, Rest};
use crate::checkpoint::{now_ms, Checkpoint};
use crate::config::ConnectorConfig;
use crate::cutover::{source, CutoverError};
use crate::health::ConnectorState;
use crate::supervisor::{Listed, Target};

/// Connect's answer to a `PATCH` of a source connector that manages no offsets itself.
const ALTERED: &str = "The Connect framework-managed offsets for this connector have been altered successfully. However, if this connector manages offsets externally, they will need to be manually altered in the system that the connector uses.";

/// Connect's answer to a `DELETE` of the same.
const RESET: &str = "The Connect framework-managed offsets for this connector have been reset successfully. However, if this connector manages offsets externally, they will need to be manually reset in the system that the connector uses.";

/// The connector's one source partition, Debezium's: `{"server": <topic.prefix>}`.
fn partition(c: &ConnectorConfig) -> Value {
    json!({"server": c.debezium_server()})
}

/// Whether the connector's configuration asks for MariaDB `ANNOTATE_ROWS` events
/// (Debezium's `include.query`): its offsets count them among a transaction's events.
fn include_query(rest: &Rest, name: &str, l: &Listed) -> bool {
    config_of(rest, name, l)
        .get("include.query")
        .is_some_and(|v| match v {
            Value::String(s) => s.trim().eq_ignore_ascii_case("true"),
            Value::Bool(b) => *b,
            _ => false,
        })
}

/// `GET /connectors/{name}/offsets`: the stored checkpoint as the Debezium offset its source
/// connector would commit, under its partition; `{"offsets": []}` without a checkpoint.
pub(super) async fn get(State(rest): S, Path(name): Path<String>) -> Response {
    let l = match listed(&rest, &name) {
        Ok(l) => l,
        Err(r) => return r,
    };
    let cp = match crate::connector::open_store(&l.cfg).load().await {
        Ok(cp) => cp,
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("reading the checkpoint of {name}: {e}"),
            )
        }
    };
    let Some(cp) = cp else {
        return Json(json!({"offsets": []})).into_response();
    };
    match source::export(&l.cfg, &cp, include_query(&rest, &name, &l), true).await {
        Ok(offset) => Json(json!({"offsets": [{
            "partition": partition(&l.cfg),
            "offset": offset,
        }]}))
        .into_response(),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "checkpoint {} of {name} as a Debezium offset: {e}",
                cp.position
            ),
        ),
    }
}

/// The connector, when it is STOPPED (Connect's precondition for changing offsets): 404 for
/// an unknown one, 400 with Connect's words for one in another state.
fn stopped(l: &Listed, name: &str) -> Result<Listed, Response> {
    if l.target != Target::Stopped || l.running {
        return Err(not_stopped(name));
    }
    Ok(l.clone())
}

/// Connect's 400 for an offsets change of a connector that is not STOPPED.
fn not_stopped(name: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        format!(
            "Connectors must be in the STOPPED state before their offsets can be modified. This \
             can be done for the specified connector by issuing a 'PUT' request to the \
             '/connectors/{name}/stop' endpoint"
        ),
    )
}

/// [`stopped`], and in a group also stopped in this member: the one the group coordinator
/// assigned it to, which has drained it (its final checkpoint written), after this member
/// has read the group's config topic to its end (a resume sent to another member just
/// before counts). Any other member answers 409 naming the member to send it to: only the
/// owner knows that no run of it is still writing checkpoints.
async fn stopped_here(
    rest: &Rest,
    name: &str,
) -> Result<(Listed, Option<tokio::sync::OwnedMutexGuard<()>>), Response> {
    if let Connectors::Group(g) = &rest.connectors {
        // Held to the end of the change: a resume read meanwhile waits for it.
        let held = g.offsets.clone().lock_owned().await;
        let targets = g.read_to_end().await.map_err(op_error)?;
        let l = listed(rest, name)?;
        if targets.get(name) != Some(&Target::Stopped) {
            // Not stopped as the group stands now, whatever this member last applied.
            return Err(not_stopped(name));
        }
        let drained = rest
            .health
            .report()
            .connectors
            .get(name)
            .is_some_and(|h| h.state == ConnectorState::Stopped);
        if !drained {
            let to = match &l.worker {
                Some(w) => format!("the member at {w}, which holds it"),
                None => "the member the group assigned it to".to_string(),
            };
            return Err(error(
                StatusCode::CONFLICT,
                format!(
                    "the offsets of connector {name} are changed by the group member that \
                     holds it, which knows it has stopped writing checkpoints: send this \
                     request to {to} (if that is this member, it is still draining the \
                     connector: try again in a few seconds)"
                ),
            ));
        }
        let l = Listed {
            target: Target::Stopped,
            running: false,
            ..l
        };
        return Ok((l, Some(held)));
    }
    let l = listed(rest, name)?;
    stopped(&l, name).map(|l| (l, None))
}

/// The request body's entries (`{"offsets": [...]}`): refused (400, Connect's words) when
/// there are none. Checked first, as Connect does, before the connector is looked up.
fn requested(body: &Bytes) -> Result<Vec<Value>, Response> {
    let doc: Value = serde_json::from_slice(body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            format!("Cannot deserialize the request body: {e}"),
        )
    })?;
    match doc.get("offsets") {
        Some(Value::Array(a)) if !a.is_empty() => Ok(a.clone()),
        _ => Err(error(
            StatusCode::BAD_REQUEST,
            "Partitions / offsets need to be provided for an alter offsets request",
        )),
    }
}

/// The offset `entries` give for connector `c`'s partition (`None`: `null`, remove the
/// checkpoint; Connect keeps the last one given for a partition). Refused (400): an entry
/// for another partition.
fn offset_for(entries: &[Value], c: &ConnectorConfig) -> Result<Option<Value>, Response> {
    let ours = partition(c);
    let mut offset = None;
    for entry in entries {
        let given = entry.get("partition").cloned().unwrap_or(Value::Null);
        if given != ours {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!(
                    "connector {} reads one source partition, {ours} (Debezium's for its \
                     topic.prefix); the request names {given}: nothing was changed",
                    c.name
                ),
            ));
        }
        offset = Some(entry.get("offset").cloned().unwrap_or(Value::Null));
    }
    Ok(offset.filter(|o| !o.is_null()))
}

/// A cutover step's failure as a response: a refusal is the request's fault (400), anything
/// that did not answer the server's (500). A refusal's advice names the commands
/// (`outboxd checkpoint reset`); its REST equivalent for connector `name` follows it.
fn cutover_error(name: &str, e: CutoverError) -> Response {
    let (code, mut message) = match &e {
        CutoverError::Refused { .. } => (StatusCode::BAD_REQUEST, e.to_string()),
        CutoverError::Unavailable { .. } => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    if message.contains("checkpoint reset") {
        message.push_str(&format!(
            ". Through this API: DELETE /connectors/{name}/offsets resets the checkpoint, then \
             PUT /connectors/{name}/resume starts it at the current position"
        ));
    }
    error(code, message)
}

/// `PATCH /connectors/{name}/offsets`: the connector's checkpoint set from a Debezium offset
/// (or removed for `null`), the connector STOPPED. 200 with Connect's message.
pub(super) async fn alter(State(rest): S, Path(name): Path<String>, body: Bytes) -> Response {
    let _one_at_a_time = rest.edits.lock().await;
    let entries = match requested(&body) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let (l, _held) = match stopped_here(&rest, &name).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    let offset = match offset_for(&entries, &l.cfg) {
        Ok(o) => o,
        Err(r) => return r,
    };
    let Some(offset) = offset else {
        return match clear(&l.cfg).await {
            Ok(()) => Json(json!({"message": ALTERED})).into_response(),
            Err(r) => r,
        };
    };
    let value = offset.to_string();
    let imported = match source::import(
        &l.cfg,
        value.as_bytes(),
        "the request",
        include_query(&rest, &name, &l),
    )
    .await
    {
        Ok(i) => i,
        Err(e) => return cutover_error(&name, e),
    };
    let cp = Checkpoint {
        connector: l.cfg.name.clone(),
        position: imported.position,
        skip: imported.skip,
        updated_at_ms: now_ms(),
        cutover: None,
    };
    if let Err(e) = crate::connector::ensure_store(&l.cfg).await {
        return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    }
    let mut store = crate::connector::open_store(&l.cfg);
    let previous = store.load().await.ok().flatten();
    if let Err(e) = store.store(&cp).await {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("storing the checkpoint of {name}: {e}"),
        );
    }
    tracing::info!(
        connector = %name,
        position = %cp.position,
        skip = cp.skip,
        previous = ?previous.map(|p| p.position.to_string()),
        "offsets altered through the REST API: the next start resumes from this checkpoint"
    );
    Json(json!({"message": ALTERED})).into_response()
}

/// `DELETE /connectors/{name}/offsets`: the connector's checkpoint removed, the connector
/// STOPPED. 200 with Connect's message.
pub(super) async fn reset(State(rest): S, Path(name): Path<String>) -> Response {
    let _one_at_a_time = rest.edits.lock().await;
    let (l, _held) = match stopped_here(&rest, &name).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    match clear(&l.cfg).await {
        Ok(()) => Json(json!({"message": RESET})).into_response(),
        Err(r) => r,
    }
}

/// Removes connector `c`'s checkpoint, saying (WARN) where its next start begins.
async fn clear(c: &ConnectorConfig) -> Result<(), Response> {
    let fail = |e: crate::checkpoint::CheckpointError| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("removing the checkpoint of {}: {e}", c.name),
        )
    };
    crate::connector::ensure_store(c).await.map_err(fail)?;
    let mut store = crate::connector::open_store(c);
    let previous = store.load().await.map_err(fail)?;
    store.clear().await.map_err(fail)?;
    tracing::warn!(
        connector = %c.name,
        previous = ?previous.map(|p| p.position.to_string()),
        "offsets reset through the REST API: checkpoint removed; the next start begins at {}",
        crate::source::Driver::of(c).fresh_start()
    );
    Ok(())
}
