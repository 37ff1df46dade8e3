//! Middleware on `/mcp`: each request carries a [`ShareHold`] where a `resources/read` parks its
//! share of the read budget, and the response body keeps it until hyper has taken the last of
//! the body (written it, or dropped it with a client that went away). Without it a client that
//! reads answers slowly would let the budget admit more reads while earlier answers still sit in
//! memory.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http_body::Frame;

use crate::mcp::ShareHold;

pub async fn hold_read_shares(mut request: Request, next: Next) -> Response {
    let hold = ShareHold::default();
    request.extensions_mut().insert(hold.clone());
    next.run(request)
        .await
        .map(|body| Body::new(HeldBody { body, _hold: hold }))
}

/// A body that keeps the request's read shares until it is dropped.
struct HeldBody {
    body: Body,
    _hold: ShareHold,
}

impl HttpBody for HeldBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
