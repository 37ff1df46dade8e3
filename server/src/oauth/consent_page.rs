//! The consent page and the error page: plain HTML that works without JavaScript, every value
//! escaped, framed by nobody (`X-Frame-Options: DENY`, `frame-ancestors 'none'`), cached by
//! nobody, and leaking no referrer.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// What the owner is asked to approve.
#[derive(Debug)]
pub struct ConsentView<'a> {
    pub request_id: &'a str,
    pub csrf: &'a str,
    pub client_name: &'a str,
    pub client_host: &'a str,
    pub redirect_host: &'a str,
    pub scope: &'a str,
    /// Whether the owner secret is a password set for this (else the server's auth token).
    pub secret_is_password: bool,
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem;line-height:1.5;color:#222}\
h1{font-size:1.4rem}dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{font-weight:600}dd{margin:0;word-break:break-all}\
input[type=password]{width:100%;font-size:1.1rem;padding:.5rem;box-sizing:border-box}\
.buttons{display:flex;gap:1rem;margin-top:1rem}button{font-size:1.1rem;padding:.6rem 1.4rem;border-radius:.4rem;border:1px solid #888;cursor:pointer}\
#approve{background:#1a7f37;color:#fff;border-color:#1a7f37}.error{color:#b00020;font-weight:600}small{color:#555}";

/// The consent page. `error` is a fixed message (a wrong secret, a wait).
pub fn consent(view: &ConsentView<'_>, error: Option<&str>) -> String {
    let error = error.map_or_else(String::new, |message| {
        format!(
            "<p id=\"error\" class=\"error\" role=\"alert\">{}</p>",
            escape(message)
        )
    });
    let secret_label = if view.secret_is_password {
        "Owner password"
    } else {
        "Owner secret (the server's MCP_AUTH_TOKEN)"
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<title>Allow access to pyrun-mcp?</title><style>{STYLE}</style></head><body>\
<h1>Allow <span id=\"client-name\">{name}</span> to run your Python projects?</h1>\
<p>An application asks to use this pyrun-mcp server: it could list and run the Python files of the projects folder, inside the server's sandbox.</p>\
<dl><dt>Application</dt><dd id=\"client-name-detail\">{name}</dd>\
<dt>Client from</dt><dd id=\"client-host\">{client_host}</dd>\
<dt>Returns to</dt><dd id=\"redirect-host\">{redirect_host}</dd>\
<dt>Access</dt><dd id=\"scope\">{scope}: run and list the Python files</dd></dl>\
{error}\
<form method=\"post\" action=\"/oauth/authorize\">\
<input type=\"hidden\" name=\"request\" value=\"{request}\">\
<input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
<p><label for=\"secret\">{secret_label}</label><br>\
<input type=\"password\" name=\"secret\" id=\"secret\" autocomplete=\"current-password\" autocapitalize=\"none\" spellcheck=\"false\"></p>\
<div class=\"buttons\"><button type=\"submit\" name=\"decision\" value=\"approve\" id=\"approve\">Approve</button>\
<button type=\"submit\" name=\"decision\" value=\"deny\" id=\"deny\">Deny</button></div>\
</form><p><small>Only approve if you started this connection yourself. You can cut a client off later with <code>pyrun-mcp-server oauth revoke</code>.</small></p>\
</body></html>",
        name = escape(view.client_name),
        client_host = escape(view.client_host),
        redirect_host = escape(view.redirect_host),
        scope = escape(view.scope),
        request = escape(view.request_id),
        csrf = escape(view.csrf),
    )
}

/// The error page: shown instead of redirecting when the redirect target cannot be trusted.
pub fn error_page(message: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<title>pyrun-mcp: cannot authorize</title><style>{STYLE}</style></head><body>\
<h1>This request cannot be authorized</h1><p id=\"error\" class=\"error\" role=\"alert\">{}</p>\
<p>Start the connection again from the application.</p></body></html>",
        escape(message)
    )
}

/// An HTML response with the page headers. `form_action` is the origin the consent form's
/// redirect goes to (browsers apply `form-action` to the redirect after a form post too).
pub fn html(status: StatusCode, body: String, form_action: Option<&str>) -> Response {
    let mut response = (status, body).into_response();
    let csp = format!(
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'{}; frame-ancestors 'none'; base-uri 'none'",
        form_action.map_or_else(String::new, |origin| format!(" {origin}"))
    );
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Ok(csp) = HeaderValue::from_str(&csp) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// HTML-escapes text for element content and double-quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_inject_markup() {
        let view = ConsentView {
            request_id: "r\"><script>",
            csrf: "c",
            client_name: "<script>alert(1)</script>",
            client_host: "a.example",
            redirect_host: "b.example",
            scope: "mcp",
            secret_is_password: true,
        };
        let page = consent(&view, Some("<b>x</b>"));
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("name=\"secret\"") && page.contains("id=\"approve\""));
        assert!(!error_page("<img src=x>").contains("<img"));
    }

    #[test]
    fn pages_refuse_frames_and_caches() {
        let response = html(StatusCode::OK, String::new(), Some("https://claude.ai"));
        let h = response.headers();
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
        let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'") && csp.contains("https://claude.ai"));
        assert_eq!(h[header::CACHE_CONTROL], "no-store");
    }
}
