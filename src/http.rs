//! The operator HTTP endpoint: Prometheus `/metrics`, `/health` and `/ready` (see
//! [`crate::health`] for what readiness means and the JSON both carry).

use std::net::SocketAddr;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::health::Health;

#[derive(Clone)]
struct AppState {
    prometheus: PrometheusHandle,
    health: Health,
}

/// Binds `listen` for [`serve`]: at startup, so that an address already in use stops
/// `run` (exit 1) instead of leaving it without `/metrics`, `/health` and `/ready` (a
/// Kubernetes probe would restart it for ever, and `outboxd status` ask whoever holds it).
///
/// Errors when the address cannot be bound, naming it and the setting to change.
pub async fn bind(listen: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(listen).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {listen} for /metrics, /health and /ready: {e}; set \
             --metrics-listen / OUTBOXD_METRICS_LISTEN / metrics.listen to a free address"
        )
    })
}

/// Serves the endpoints on `listener` (from [`bind`]) until the process exits.
pub async fn serve(
    listener: tokio::net::TcpListener,
    prometheus: PrometheusHandle,
    health: Health,
) -> anyhow::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/health", get(health_handler))
        .route("/ready", get(ready_handler))
        .with_state(AppState { prometheus, health });
    let listen = listener.local_addr()?;
    tracing::info!(%listen, "serving /metrics, /health, /ready");
    axum::serve(listener, app).await?;
    Ok(())
}

async fn metrics_handler(State(s): State<AppState>) -> impl IntoResponse {
    crate::metrics::refresh(&s.health);
    s.prometheus.run_upkeep();
    (
        [("content-type", "text/plain; version=0.0.4")],
        s.prometheus.render(),
    )
}

/// Liveness: 200 while the process serves, with every connector's [`crate::health::Report`].
async fn health_handler(State(s): State<AppState>) -> impl IntoResponse {
    (StatusCode::OK, Json(s.health.report()))
}

/// Readiness: 200 while every connector is ready, else 503; the same JSON as `/health`.
async fn ready_handler(State(s): State<AppState>) -> impl IntoResponse {
    let report = s.health.report();
    let code = if report.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(report))
}
