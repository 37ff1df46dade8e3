//! One log line per HTTP request: method, path, status, duration. Never headers or query strings.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

/// Middleware: log the request once its response head is ready (streams log when they start).
pub async fn log_request(request: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    tracing::info!(
        target: "pyrun_mcp::http",
        %method,
        %path,
        status = response.status().as_u16(),
        ms = format_args!("{:.1}", start.elapsed().as_secs_f64() * 1000.0),
        "request"
    );
    response
}
