//! The rmcp `ClientHandler`: announces the client and forwards the server's progress and log
//! notifications to the terminal reporter.

// Logging is deprecated in the 2026-07-28 protocol (SEP-2577); servers on earlier versions send it.
#![allow(deprecated)]

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, LoggingMessageNotificationParam,
    ProgressNotificationParam,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use serde_json::Value;

use crate::reporter::Reporter;

#[derive(Debug, Clone)]
pub struct Notifier {
    reporter: Reporter,
}

impl Notifier {
    pub fn new(reporter: Reporter) -> Self {
        Self { reporter }
    }
}

impl ClientHandler for Notifier {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
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
