//! Every `413 Payload Too Large` the server answers (its own body check, axum's, rmcp's) says
//! which limit the request passed and which setting raises it, so that a client can tell the
//! caller what to change instead of a bare status.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::client_message::ClientMessage;

/// The largest request body (`--max-body-bytes`).
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

/// Middleware: a `413` from anything inside gets the body that names the limit.
pub async fn name_the_limit(
    State(BodyLimit(limit)): State<BodyLimit>,
    request: Request,
    next: Next,
) -> Response {
    let response = next.run(request).await;
    if response.status() != StatusCode::PAYLOAD_TOO_LARGE {
        return response;
    }
    too_large(limit)
}

fn too_large(limit: usize) -> Response {
    let message = ClientMessage::new("Payload Too Large: the request body is more than the ")
        .number(limit)
        .then(" bytes this server accepts (--max-body-bytes, MCP_MAX_BODY_BYTES)")
        .hint("send a run's stdin in pieces with upload_stdin (stdin_upload), or ask the operator to raise --max-body-bytes");
    (StatusCode::PAYLOAD_TOO_LARGE, message.into_string()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::{Body, Bytes};
    use axum::extract::DefaultBodyLimit;
    use axum::middleware::from_fn_with_state;
    use axum::routing::post;
    use axum::Router;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_body_over_the_limit_is_told_which_setting_raises_it() {
        let router = Router::new()
            .route(
                "/",
                post(|body: Bytes| async move { body.len().to_string() }),
            )
            .layer(DefaultBodyLimit::max(8))
            .layer(from_fn_with_state(BodyLimit(8), name_the_limit));
        let send = |body: &'static str| {
            router
                .clone()
                .oneshot(Request::post("/").body(Body::from(body)).unwrap())
        };
        let small = send("1234").await.unwrap();
        assert_eq!(small.status(), StatusCode::OK);
        let big = send("123456789").await.unwrap();
        assert_eq!(big.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let text = axum::body::to_bytes(big.into_body(), 4096).await.unwrap();
        let text = String::from_utf8_lossy(&text);
        assert!(text.contains("more than the 8 bytes"), "{text}");
        assert!(text.contains("--max-body-bytes"), "{text}");
    }
}
