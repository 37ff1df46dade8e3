//! The rmcp `ClientHandler`: announces the client, forwards the server's progress and log
//! notifications to the terminal reporter and a run's live output to the live sink.

// Logging is deprecated in the 2026-07-28 protocol (SEP-2577); servers on earlier versions send it.
#![allow(deprecated)]

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, LoggingMessageNotificationParam,
    NotificationMetaObject, ProgressNotificationParam,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use serde_json::Value;

use crate::live::LiveSink;
use crate::reporter::Reporter;

#[derive(Debug, Clone)]
pub struct Notifier {
    reporter: Reporter,
    live: LiveSink,
}

impl Notifier {
    pub fn new(reporter: Reporter, live: LiveSink) -> Self {
        Self { reporter, live }
    }
}

impl ClientHandler for Notifier {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        // rmcp 3.11 moves the notification's extensions into the context before it takes the
        // `_meta` out of them, so the `_meta` is found among the extensions, not in `meta`.
        let meta = [
            params.meta.as_ref(),
            Some(&context.meta),
            context.extensions.get::<NotificationMetaObject>(),
        ]
        .into_iter()
        .flatten()
        .map(|meta| &meta.0 .0)
        .find(|meta| meta.contains_key(pyrun_api::live_output::CHUNK));
        if let Some(meta) = meta {
            self.live.offer(meta, &self.reporter);
        }
        self.reporter.progress(&progress_line(&params));
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let data = match &params.data {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let line = match &params.logger {
            Some(logger) => format!("[server {level}] {logger}: {data}"),
            None => format!("[server {level}] {data}"),
        };
        self.reporter.message(&line);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("pyrun-mcp-client", env!("CARGO_PKG_VERSION")),
        )
    }
}

fn progress_line(params: &ProgressNotificationParam) -> String {
    let (progress, message) = (params.progress, params.message.as_deref());
    match (message, params.total) {
        (Some(message), Some(total)) => format!("{message} ({progress}/{total})"),
        (Some(message), None) => message.to_owned(),
        (None, Some(total)) => format!("{progress}/{total}"),
        (None, None) => format!("{progress}"),
    }
}
