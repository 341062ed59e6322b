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

/// Binds `listen` and serves the endpoints until the process exits.
///
/// Errors when the address cannot be bound (say which and suggest another `metrics.listen`).
pub async fn serve(
    listen: SocketAddr,
    prometheus: PrometheusHandle,
    health: Health,
) -> anyhow::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/health", get(health_handler))
        .route("/ready", get(ready_handler))
        .with_state(AppState { prometheus, health });
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {listen} for /metrics: {e}; set metrics.listen to a free address"
        )
    })?;
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
