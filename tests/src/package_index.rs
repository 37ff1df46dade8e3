//! A PEP 503 simple index for install tests, hermetic: [`PackageIndex::start`] builds two tiny
//! pure-Python wheels (`pyrunalpha`, which depends on `pyrunbeta`) and an sdist (`pyrunsdist`)
//! with the test interpreter, and serves them from a loopback server of its own that counts (and
//! records) every request, so a test can prove that a refused install asked for nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::python::python;

/// Builds the distributions in `dir/files` with the test interpreter's `zipfile`/`tarfile`.
const BUILD_DISTS: &str = r#"
import base64, hashlib, io, os, sys, tarfile, zipfile
out = os.path.join(sys.argv[1], "files")
os.makedirs(out, exist_ok=True)

def wheel(name, version, requires, body):
    files = {
        f"{name}/__init__.py": body,
        f"{name}-{version}.dist-info/METADATA":
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{name}-{version}.dist-info/WHEEL":
            "Wheel-Version: 1.0\nGenerator: pyrun-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = f"{name}-{version}.dist-info/RECORD"
    lines = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        lines.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    lines.append(f"{record},,")
    files[record] = "\n".join(lines) + "\n"
    path = os.path.join(out, f"{name}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)

wheel("pyrunbeta", "1.0", [], "VALUE = 'beta'\n")
wheel("pyrunalpha", "1.0", ["pyrunbeta>=1.0"],
      "from pyrunbeta import VALUE as BETA\nVALUE = 'alpha+' + BETA\n")

sdist = os.path.join(out, "pyrunsdist-1.0.tar.gz")
with tarfile.open(sdist, "w:gz") as t:
    for p, text in {
        "pyrunsdist-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: pyrunsdist\nVersion: 1.0\n",
        "pyrunsdist-1.0/setup.py": "from setuptools import setup\nsetup(name='pyrunsdist', version='1.0')\n",
    }.items():
        data = text.encode()
        info = tarfile.TarInfo(p)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
"#;

/// A PEP 503 simple index on `127.0.0.1:0`: `/simple/<name>/` lists that name's files,
/// `/files/<file>` serves one. Counts every connection and records every path asked for.
pub struct PackageIndex {
    port: u16,
    requests: Arc<AtomicUsize>,
    paths: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl PackageIndex {
    /// Builds the distributions in a temporary folder (removed on drop) and serves them; the
    /// serving thread ends with the test process.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new(python())
            .args(["-c", BUILD_DISTS])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "building the test's distributions failed");
        let files = dir.path().join("files");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let (count, seen) = (Arc::clone(&requests), Arc::clone(&paths));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let files = files.clone();
                let seen = Arc::clone(&seen);
                std::thread::spawn(move || serve(stream, &files, &seen));
            }
        });
        Self {
            port,
            requests,
            paths,
            _dir: dir,
        }
    }

    /// The index's simple API, `http://127.0.0.1:PORT/simple/` (for `--index-url`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/simple/", self.port)
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// How many connections it accepted so far (0: nobody asked it anything).
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Every path asked for so far, in order.
    pub fn paths(&self) -> Vec<String> {
        self.paths.lock().unwrap().clone()
    }

    /// Builds more distributions into the served folder: `script` runs under the test
    /// interpreter with that folder as `sys.argv[1]` (served from the next request on).
    pub fn add(&self, script: &str) {
        let status = std::process::Command::new(python())
            .args(["-c", script])
            .arg(self._dir.path().join("files"))
            .status()
            .unwrap();
        assert!(
            status.success(),
            "building the test's extra distributions failed"
        );
    }

    /// Whether anyone asked for an sdist (a `.tar.gz`).
    pub fn served_an_sdist(&self) -> bool {
        let paths = self.paths.lock().unwrap();
        paths.iter().any(|p| p.ends_with(".tar.gz"))
    }
}

/// Answers the requests of one connection (keep-alive), each by the simple API's rules.
fn serve(stream: TcpStream, files: &Path, seen: &Mutex<Vec<String>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                break;
            }
        }
        let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
        seen.lock().unwrap().push(path.clone());
        let (status, kind, body) = answer(&path, files);
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        // A HEAD (uv asks before range requests) gets the head only.
        let body: &[u8] = if line.starts_with("HEAD ") {
            &[]
        } else {
            &body
        };
        if stream.write_all(head.as_bytes()).is_err() || stream.write_all(body).is_err() {
            return;
        }
    }
}

fn answer(path: &str, files: &Path) -> (&'static str, &'static str, Vec<u8>) {
    let path = path.split(['?', '#']).next().unwrap_or("");
    if let Some(name) = path
        .strip_prefix("/simple/")
        .map(|rest| rest.trim_end_matches('/'))
    {
        let mut links = String::new();
        for entry in std::fs::read_dir(files).unwrap().flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if !name.is_empty() && file.starts_with(&format!("{name}-")) {
                let bytes = std::fs::read(entry.path()).unwrap();
                let digest = sha256_hex(&bytes);
                links.push_str(&format!(
                    "<a href=\"/files/{file}#sha256={digest}\">{file}</a>\n"
                ));
            }
        }
        if links.is_empty() {
            return ("404 Not Found", "text/plain", b"not found".to_vec());
        }
        let page = format!("<!DOCTYPE html><html><body>\n{links}</body></html>\n");
        return ("200 OK", "text/html", page.into_bytes());
    }
    if let Some(file) = path.strip_prefix("/files/") {
        if let Ok(bytes) = std::fs::read(files.join(file)) {
            return ("200 OK", "application/octet-stream", bytes);
        }
    }
    ("404 Not Found", "text/plain", b"not found".to_vec())
}

/// SHA-256 of `bytes` in hex, by the test interpreter (no hash crate in the test's deps).
fn sha256_hex(bytes: &[u8]) -> String {
    let mut child = std::process::Command::new(python())
        .args([
            "-c",
            "import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child.wait().unwrap();
    out.trim().to_owned()
}
