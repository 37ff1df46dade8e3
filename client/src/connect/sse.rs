//! Legacy HTTP+SSE client transport (rmcp dropped its own): a streaming GET on the SSE URL, wait for
//! the `endpoint` event, then POST each JSON-RPC message there with the same headers.

use std::future::Future;

use futures::stream::BoxStream;
use futures::StreamExt;
use http::HeaderMap;
use reqwest::Url;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use sse_stream::{Sse, SseStream};

use super::diagnose::{self, SseTransportError};
use crate::error::ClientError;

type EventStream = BoxStream<'static, Result<Sse, sse_stream::Error>>;

pub(crate) struct SseTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    events: EventStream,
}

impl SseTransport {
    /// Opens the event stream and waits for the server to name its message endpoint.
    pub(crate) async fn open(
        client: reqwest::Client,
        url: Url,
        headers: HeaderMap,
    ) -> Result<Self, ClientError> {
        let target = url.as_str();
        let token_sent = headers.contains_key(http::header::AUTHORIZATION);
        let response = client
            .get(url.clone())
            .headers(headers.clone())
            .header(http::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| diagnose::from_reqwest(target, &e))?;
        let content_type = diagnose::content_type(response.headers());
        if let Some(err) = diagnose::from_status(
            target,
            response.status(),
            content_type.as_deref(),
            token_sent,
        ) {
            return Err(err);
        }
        if !content_type
            .as_deref()
            .is_some_and(|ct| ct.starts_with("text/event-stream"))
        {
            return Err(ClientError::NotMcp {
                url: target.into(),
                what: format!(
                    "content type `{}` instead of an event stream",
                    content_type.unwrap_or_default()
                ),
            });
        }
        let mut events: EventStream = SseStream::from_bytes_stream(response.bytes_stream()).boxed();
        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    break endpoint_url(&url, event.data.as_deref().unwrap_or_default())?;
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    return Err(ClientError::Protocol(format!(
                        "bad event stream from {url}: {e}"
                    )))
                }
                None => {
                    return Err(ClientError::Protocol(format!(
                        "{url} closed the event stream before sending its `endpoint` event"
                    )))
                }
            }
        };
        Ok(Self {
            client,
            endpoint,
            headers,
            events,
        })
    }
}

/// The endpoint may be relative; it must stay on the same origin, since we send our token there.
fn endpoint_url(base: &Url, data: &str) -> Result<Url, ClientError> {
    let endpoint = base
        .join(data.trim())
        .map_err(|e| ClientError::Protocol(format!("bad `endpoint` event `{data}`: {e}")))?;
    if endpoint.origin() != base.origin() {
        return Err(ClientError::Protocol(format!(
            "the server's message endpoint `{endpoint}` is on another origin than {base}; refusing \
             to send requests (and the token) there"
        )));
    }
    Ok(endpoint)
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseTransportError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .json(&item);
        let endpoint = self.endpoint.to_string();
        async move {
            let response = request
                .send()
                .await
                .map_err(|source| SseTransportError::Http {
                    endpoint: endpoint.clone(),
                    source,
                })?;
            let status = response.status();
            if status.is_success() {
                return Ok(());
            }
            Err(SseTransportError::Status {
                endpoint,
                status: status.as_u16(),
                content_type: diagnose::content_type(response.headers()),
            })
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.events.next().await? {
                Ok(event) if matches!(event.event.as_deref(), None | Some("message")) => {
                    let Some(data) = event.data else { continue };
                    match serde_json::from_str(&data) {
                        Ok(message) => return Some(message),
                        Err(e) => {
                            tracing::warn!("ignoring an SSE message that is not JSON-RPC: {e}")
                        }
                    }
                }
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!("event stream broken: {e}");
                    return None;
                }
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        // Dropping the GET ends the server's session.
        self.events = futures::stream::empty().boxed();
        std::future::ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_endpoints_resolve_against_the_sse_url() {
        let base = Url::parse("https://abc.example/prefix/sse").unwrap_or_else(|e| panic!("{e}"));
        let endpoint = endpoint_url(&base, "/prefix/messages?sessionId=42").map(|u| u.to_string());
        assert_eq!(
            endpoint.ok().as_deref(),
            Some("https://abc.example/prefix/messages?sessionId=42")
        );
        let endpoint = endpoint_url(&base, "messages?sessionId=1").map(|u| u.to_string());
        assert_eq!(
            endpoint.ok().as_deref(),
            Some("https://abc.example/prefix/messages?sessionId=1")
        );
    }

    #[test]
    fn an_endpoint_on_another_origin_is_refused() {
        let base = Url::parse("https://abc.example/sse").unwrap_or_else(|e| panic!("{e}"));
        assert!(endpoint_url(&base, "https://evil.example/messages").is_err());
        assert!(endpoint_url(&base, "http://abc.example/messages").is_err());
    }
}
