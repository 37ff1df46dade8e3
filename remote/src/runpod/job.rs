//! One RunPod job, driven as a background run: submitted, followed through `/stream` (its chunks
//! go to the run's live output as they come), cancelled when the run is, and ended with the
//! worker's `end` chunk — or with RunPod's own words when the job failed or was lost.
//!
//! The worker's chunks: `{"stdout": text}`, `{"stderr": text}`, and last `{"end": {exit_code,
//! timed_out, stdout_truncated, stderr_truncated, artifacts: [{name, data}], skipped_artifacts}}`.
//! Artifacts are written to a fresh folder and kept through the artifact store's own checks,
//! exactly as a local run's output folder is.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use pyrun_run::artifacts::Collected;
use pyrun_run::background::{RemoteRun, RunEnd};
use pyrun_run::live_output::{LiveOutput, Stream};
use pyrun_run::runner::{ArtifactTarget, RunOutcome};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::api::{JobAnswer, RunPodApi};

/// How long a submit in flight when the run is cancelled may still take to name its job.
const SUBMIT_SETTLE: Duration = Duration::from_secs(10);
/// The pause between two stream calls that brought nothing.
const POLL_EVERY: Duration = Duration::from_millis(250);
/// How long after its own limit a job that never ends is given up on (queueing included).
const GIVE_UP_AFTER: Duration = Duration::from_secs(600);

pub(super) struct Job {
    pub(super) api: RunPodApi,
    pub(super) body: Vec<u8>,
    pub(super) timeout: Duration,
    /// A line for the run's stderr before the worker's own (files left behind).
    pub(super) note: Option<String>,
}

impl RemoteRun for Job {
    fn drive(
        self: Box<Self>,
        live: Arc<LiveOutput>,
        cancel: CancellationToken,
        artifacts: ArtifactTarget,
    ) -> Pin<Box<dyn Future<Output = RunEnd> + Send>> {
        Box::pin(self.run(live, cancel, artifacts))
    }
}

/// What the worker's `end` chunk says.
#[derive(Debug, Default, serde::Deserialize)]
struct End {
    exit_code: Option<i32>,
    /// The signal the script died of, when it was not killed for its time limit.
    #[serde(default)]
    signal: Option<i32>,
    #[serde(default)]
    timed_out: bool,
    #[serde(default)]
    stdout_truncated: bool,
    #[serde(default)]
    stderr_truncated: bool,
    #[serde(default)]
    artifacts: Vec<ReturnedFile>,
}

#[derive(Debug, serde::Deserialize)]
struct ReturnedFile {
    name: String,
    data: String,
}

impl Job {
    async fn run(
        mut self,
        live: Arc<LiveOutput>,
        cancel: CancellationToken,
        artifacts: ArtifactTarget,
    ) -> RunEnd {
        let started = Instant::now();
        if let Some(note) = &self.note {
            live.append(Stream::Stderr, note.as_bytes());
        }
        let submit = self.api.submit(std::mem::take(&mut self.body));
        tokio::pin!(submit);
        let submitted = tokio::select! {
            answer = &mut submit => answer,
            () = cancel.cancelled() => {
                // The request may have been taken already: its job is cancelled once its id
                // is known, rather than left to run (and be billed) on the engine.
                if let Ok(Ok(answer)) = tokio::time::timeout(SUBMIT_SETTLE, &mut submit).await {
                    if let Err(e) = self.api.cancel(&answer.id).await {
                        tracing::warn!(job_id = %answer.id, %e, "RunPod job not cancelled");
                    }
                }
                return RunEnd::Finished(ended(started, &live, End::default(), None, Ending::Cancelled));
            }
        };
        let id = match submitted {
            // The SDK's local server runs a job as soon as it is asked for; RunPod's cloud
            // queues it first.
            Ok(answer) if answer.status == "IN_PROGRESS" => {
                live.mark_started();
                answer.id
            }
            Ok(answer) => answer.id,
            Err(e) => return RunEnd::Failed(format!("RunPod did not take the job: {e}")),
        };
        tracing::info!(job_id = %id, "RunPod job submitted");
        let give_up = started + self.timeout + GIVE_UP_AFTER;
        let wait = self.timeout + Duration::from_secs(5);
        loop {
            let answer = tokio::select! {
                answer = self.api.stream(&id, wait) => answer,
                () = cancel.cancelled() => {
                    if let Err(e) = self.api.cancel(&id).await {
                        tracing::warn!(job_id = %id, %e, "RunPod job not cancelled");
                    }
                    return RunEnd::Finished(ended(started, &live, End::default(), None, Ending::Cancelled));
                }
            };
            let mut answer = match answer {
                Ok(answer) => answer,
                Err(e) => return RunEnd::Failed(format!("RunPod lost the job: {e}")),
            };
            let news = answer.status == "IN_PROGRESS"
                || answer.stream.as_ref().is_some_and(|s| !s.is_empty());
            if news && !live.has_started() {
                live.mark_started();
            }
            let got = answer.stream.as_ref().map_or(0, Vec::len);
            if let Some(end) = take_chunks(&live, answer.stream.take().unwrap_or_default()) {
                let kept = keep(end_files(&end), artifacts).await;
                return RunEnd::Finished(ended(started, &live, end, Some(kept), Ending::Normal));
            }
            if answer.is_final() {
                return self
                    .final_answer(&id, answer, started, &live, artifacts)
                    .await;
            }
            if Instant::now() >= give_up {
                let _ = self.api.cancel(&id).await;
                return RunEnd::Finished(ended(
                    started,
                    &live,
                    End::default(),
                    None,
                    Ending::TimedOut,
                ));
            }
            if got == 0 {
                tokio::select! {
                    () = tokio::time::sleep(POLL_EVERY) => {}
                    () = cancel.cancelled() => {}
                }
            }
        }
    }

    /// A job RunPod says has ended without the worker's end chunk in the stream: its status
    /// tells how (an aggregated output may still hold the end chunk).
    async fn final_answer(
        &self,
        id: &str,
        streamed: JobAnswer,
        started: Instant,
        live: &LiveOutput,
        artifacts: ArtifactTarget,
    ) -> RunEnd {
        let answer = match streamed.status.as_str() {
            "FAILED" => streamed,
            _ => self.api.status(id).await.unwrap_or(streamed),
        };
        if let Some(end) = answer.output.as_ref().and_then(find_end) {
            let kept = keep(end_files(&end), artifacts).await;
            return RunEnd::Finished(ended(started, live, end, Some(kept), Ending::Normal));
        }
        match answer.status.as_str() {
            "CANCELLED" => RunEnd::Finished(ended(
                started,
                live,
                End::default(),
                None,
                Ending::Cancelled,
            )),
            "TIMED_OUT" => {
                RunEnd::Finished(ended(started, live, End::default(), None, Ending::TimedOut))
            }
            _ => RunEnd::Failed(format!(
                "the RunPod job failed: {}",
                plain_words(&answer.error_words())
            )),
        }
    }
}

enum Ending {
    Normal,
    Cancelled,
    TimedOut,
}

fn ended(
    started: Instant,
    live: &LiveOutput,
    end: End,
    artifacts: Option<Collected>,
    how: Ending,
) -> RunOutcome {
    RunOutcome {
        stdout: String::new(),
        stderr: String::new(),
        exit_code: end.exit_code,
        signal: end.signal,
        timed_out: end.timed_out || matches!(how, Ending::TimedOut),
        cancelled: matches!(how, Ending::Cancelled),
        stdout_truncated: end.stdout_truncated || live.truncated(Stream::Stdout),
        stderr_truncated: end.stderr_truncated || live.truncated(Stream::Stderr),
        duration: started.elapsed(),
        artifacts: Some(artifacts.unwrap_or_default()),
        python: None,
        quarantined: Vec::new(),
        warm: false,
    }
}

/// Appends the output chunks; returns the end chunk when it came.
fn take_chunks(live: &LiveOutput, stream: Vec<Value>) -> Option<End> {
    let mut end = None;
    for item in stream {
        let Some(output) = item.get("output") else {
            continue;
        };
        if let Some(text) = output.get("stdout").and_then(Value::as_str) {
            live.append(Stream::Stdout, text.as_bytes());
        }
        if let Some(text) = output.get("stderr").and_then(Value::as_str) {
            live.append(Stream::Stderr, text.as_bytes());
        }
        if let Some(found) = output.get("end") {
            end = Some(serde_json::from_value(found.clone()).unwrap_or_default());
        }
    }
    end
}

/// RunPod's (or the worker's) words for a failure as a result can show them: lines kept, other
/// control characters (terminal escapes) blanked, at most [`MAX_ERROR_CHARS`] characters.
fn plain_words(words: &str) -> String {
    let mut plain: String = words
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                ' '
            } else {
                c
            }
        })
        .take(MAX_ERROR_CHARS)
        .collect();
    if words.chars().nth(MAX_ERROR_CHARS).is_some() {
        plain.push_str(" [cut]");
    }
    plain
}

/// The longest failure text kept (a traceback's worth).
const MAX_ERROR_CHARS: usize = 4000;

/// The end chunk in a job's final output (RunPod aggregates a generator's outputs as a list).
fn find_end(output: &Value) -> Option<End> {
    let items = match output {
        Value::Array(items) => items.iter().collect::<Vec<_>>(),
        other => vec![other],
    };
    items
        .into_iter()
        .rev()
        .find_map(|item| item.get("end"))
        .map(|end| serde_json::from_value(end.clone()).unwrap_or_default())
}

/// The returned files, at most as many as the artifact store would look at: a worker that
/// returns millions of empty files must not make the server write them all first.
fn end_files(end: &End) -> Vec<(String, Vec<u8>)> {
    end.artifacts
        .iter()
        .take(pyrun_run::artifacts::MAX_ENTRIES)
        .filter_map(|file| {
            let data = base64::engine::general_purpose::STANDARD
                .decode(&file.data)
                .ok()?;
            Some((file.name.clone(), data))
        })
        .collect()
}

/// Writes the returned files into a fresh folder and keeps them through the store's checks.
async fn keep(files: Vec<(String, Vec<u8>)>, target: ArtifactTarget) -> Collected {
    if files.is_empty() {
        return Collected::default();
    }
    let work = move || {
        let Ok(dir) = tempfile::tempdir() else {
            return Collected::default();
        };
        for (name, data) in files {
            let Some(path) = inside(dir.path(), &name) else {
                continue;
            };
            if let Some(parent) = path.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            let _ = std::fs::write(path, data);
        }
        let expires = std::time::SystemTime::now() + target.retention;
        target
            .store
            .keep(&target.run_id, &target.owner, dir.path(), expires)
    };
    tokio::task::spawn_blocking(work).await.unwrap_or_default()
}

/// A returned name as a path under `dir`: plain relative parts only.
fn inside(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    let mut path = dir.to_path_buf();
    for part in name.split('/') {
        if part.is_empty() || part == "." || part == ".." || part.contains('\\') {
            return None;
        }
        path.push(part);
    }
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chunks_go_to_their_streams_and_the_end_chunk_is_found_in_a_stream_or_an_aggregate() {
        let live = LiveOutput::new(1024);
        let end = take_chunks(
            &live,
            vec![
                json!({"output": {"stdout": "a\n"}}),
                json!({"output": {"stderr": "e\n"}}),
                json!({"output": {"end": {"exit_code": 2, "artifacts": []}}}),
            ],
        )
        .expect("the end chunk");
        assert_eq!(end.exit_code, Some(2));
        assert_eq!(live.read(Stream::Stdout, 0, 100).text, "a\n");
        assert_eq!(live.read(Stream::Stderr, 0, 100).text, "e\n");
        let aggregate = json!([{"stdout": "a"}, {"end": {"exit_code": 0, "timed_out": true}}]);
        let found = find_end(&aggregate).expect("the end in RunPod's aggregate");
        assert!(found.timed_out);
        assert!(find_end(&json!({"stdout": "no end"})).is_none());
    }

    #[test]
    fn a_returned_file_name_stays_inside_the_folder() {
        let dir = Path::new("/x");
        assert_eq!(
            inside(dir, "a/b.png"),
            Some(Path::new("/x/a/b.png").to_owned())
        );
        for bad in ["../etc/passwd", "a/../../b", "/abs", "a//b", "a\\b", "."] {
            assert_eq!(inside(dir, bad), None, "{bad}");
        }
    }

    #[test]
    fn a_workers_failure_words_reach_the_result_without_escapes_and_cut_short() {
        let hostile = format!(
            "Traceback\n\u{1b}[2J\u{1b}]0;owned\u{7}\r{}",
            "x".repeat(1 << 20)
        );
        let plain = plain_words(&hostile);
        assert!(plain.starts_with("Traceback\n"), "{}", &plain[..40]);
        assert!(
            !plain.chars().any(|c| c.is_control() && c != '\n'),
            "{}",
            &plain[..40]
        );
        assert!(
            plain.len() < 5000 && plain.ends_with("[cut]"),
            "{}",
            plain.len()
        );
    }

    #[test]
    fn a_worker_returning_a_flood_of_files_has_at_most_the_stores_limit_written() {
        let files: Vec<Value> = (0..pyrun_run::artifacts::MAX_ENTRIES + 500)
            .map(|i| json!({"name": format!("f{i}"), "data": ""}))
            .collect();
        let end: End = serde_json::from_value(json!({"exit_code": 0, "artifacts": files})).unwrap();
        assert_eq!(end_files(&end).len(), pyrun_run::artifacts::MAX_ENTRIES);
    }

    /// A run cancelled while its submit is still in flight: once the engine names the job, the
    /// job is cancelled there, not left running.
    #[tokio::test]
    async fn a_run_cancelled_while_its_submit_is_in_flight_has_its_job_cancelled() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (seen, mut paths) = tokio::sync::mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut request = vec![0u8; 1 << 16];
                    let n = conn.read(&mut request).await.unwrap_or(0);
                    let text = String::from_utf8_lossy(&request[..n]).into_owned();
                    let path = text.split(' ').nth(1).unwrap_or_default().to_owned();
                    let _ = seen.send(path.clone());
                    if path == "/run" {
                        tokio::time::sleep(Duration::from_millis(800)).await;
                    }
                    let body = r#"{"id": "job-7", "status": "IN_QUEUE"}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(answer.as_bytes()).await;
                });
            }
        });
        let store = tempfile::tempdir().unwrap();
        let target = ArtifactTarget {
            store: Arc::new(
                pyrun_run::artifacts::ArtifactStore::new(
                    store.path().to_owned(),
                    pyrun_run::artifacts::ArtifactLimits::default(),
                )
                .unwrap(),
            ),
            run_id: "r1".into(),
            owner: "o".into(),
            retention: Duration::from_secs(60),
        };
        let job = Box::new(Job {
            api: RunPodApi::new(&base, "key", super::super::api::PollMethod::Get).unwrap(),
            body: b"{}".to_vec(),
            timeout: Duration::from_secs(60),
            note: None,
        });
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            stop.cancel();
        });
        let end = job
            .drive(Arc::new(LiveOutput::new(1024)), cancel, target)
            .await;
        assert!(
            matches!(&end, RunEnd::Finished(outcome) if outcome.cancelled),
            "the run ends cancelled"
        );
        let mut all = Vec::new();
        while let Ok(path) = paths.try_recv() {
            all.push(path);
        }
        assert_eq!(all, ["/run", "/cancel/job-7"], "the job was left running");
    }
}
