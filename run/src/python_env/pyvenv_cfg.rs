//! `pyvenv.cfg`, read as CPython reads it (`key = value` lines, keys without case, the rest
//! ignored), from bytes a script may have written: text only, a size cap, and only the keys
//! the checks need.

/// The largest `pyvenv.cfg` read (real ones hold a few hundred bytes).
pub const MAX_BYTES: u64 = 64 << 10;

/// What a `pyvenv.cfg` says that matters here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyvenvCfg {
    /// The folder of the base interpreter (`home`), as written: an absolute path.
    pub home: String,
    /// `major.minor` of the Python that made it (`version` or `version_info`), when it says.
    pub version: Option<String>,
    /// That version as written (`3.12.1`), when it is a plain version: safe to show.
    pub version_text: Option<String>,
    /// The file name of the interpreter that made it (`python3.12` of `executable`), when it
    /// says: safe to show (no folder).
    pub interpreter_name: Option<String>,
    /// `include-system-site-packages = true`: the base interpreter's packages are seen too.
    pub system_site_packages: bool,
}

/// Why a `pyvenv.cfg` cannot be used, in words a client may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CfgProblem {
    #[error("is not a regular file")]
    NotAFile,
    #[error("could not be read ({0})")]
    Unreadable(std::io::ErrorKind),
    #[error("is larger than 64 KiB")]
    TooLarge,
    #[error("is not UTF-8 text")]
    NotText,
    #[error("has no `home` line (the folder of its base interpreter)")]
    NoHome,
    #[error("names a `home` that is not an absolute path")]
    HomeNotAbsolute,
}

impl PyvenvCfg {
    /// Parses the file's bytes. The first `home` wins, as in CPython's `getpath`.
    pub fn parse(bytes: &[u8]) -> Result<Self, CfgProblem> {
        if bytes.len() as u64 > MAX_BYTES {
            return Err(CfgProblem::TooLarge);
        }
        let text = std::str::from_utf8(bytes).map_err(|_| CfgProblem::NotText)?;
        let (mut home, mut version, mut system) = (None, None, false);
        let (mut version_text, mut interpreter_name) = (None, None);
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = value.trim();
            match key.trim().to_ascii_lowercase().as_str() {
                "home" if home.is_none() => home = Some(value.to_owned()),
                "version" | "version_info" if version.is_none() => {
                    version = major_minor(value);
                    version_text = plain(value.trim_end_matches(".final.0"));
                }
                "executable" if interpreter_name.is_none() => {
                    interpreter_name = value.rsplit(['/', '\\']).next().and_then(plain);
                }
                "include-system-site-packages" => system = value.eq_ignore_ascii_case("true"),
                _ => {}
            }
        }
        let home = home.filter(|h| !h.is_empty()).ok_or(CfgProblem::NoHome)?;
        if !std::path::Path::new(&home).is_absolute() {
            return Err(CfgProblem::HomeNotAbsolute);
        }
        Ok(Self {
            home,
            version,
            version_text,
            interpreter_name,
            system_site_packages: system,
        })
    }
}

/// `text` when it is a short word of letters, digits, `.`, `_` and `-` (a version, a file name):
/// what a file a script may have written can put in a message.
fn plain(text: &str) -> Option<String> {
    let ok = !text.is_empty()
        && text.len() <= 40
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    ok.then(|| text.to_owned())
}

/// `3.11` of `3.11.2` (or of virtualenv's `3.11.7.final.0`); `None` for anything else.
pub fn major_minor(version: &str) -> Option<String> {
    let mut parts = version.trim().split('.');
    let (major, minor) = (parts.next()?, parts.next()?);
    let digits = |s: &str| !s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit());
    (digits(major) && digits(minor)).then(|| format!("{major}.{minor}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_venvs_cfg_is_read_as_cpython_reads_it() {
        let cfg = PyvenvCfg::parse(
            b"home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n\
              executable = /usr/bin/python3.11\ncommand = /usr/bin/python3 -m venv /p/.venv\n",
        )
        .unwrap();
        assert_eq!(
            cfg,
            PyvenvCfg {
                home: "/usr/bin".into(),
                version: Some("3.11".into()),
                version_text: Some("3.11.2".into()),
                interpreter_name: Some("python3.11".into()),
                system_site_packages: false,
            }
        );
        // uv and virtualenv spell the version differently; keys have no case; first home wins.
        let cfg =
            PyvenvCfg::parse(b"HOME=/opt/py/bin\nhome = /elsewhere\nversion_info = 3.12.1.final.0\ninclude-system-site-packages = True\n")
                .unwrap();
        assert_eq!(cfg.home, "/opt/py/bin");
        assert_eq!(cfg.version.as_deref(), Some("3.12"));
        assert_eq!(cfg.version_text.as_deref(), Some("3.12.1"));
        assert_eq!(cfg.interpreter_name, None);
        // What cannot be shown plainly is not kept.
        let odd =
            PyvenvCfg::parse(b"home = /b\nversion = 3.12 <b>\nexecutable = /x/py thon\n").unwrap();
        assert_eq!((odd.version_text, odd.interpreter_name), (None, None));
        assert!(cfg.system_site_packages);
    }

    #[test]
    fn broken_files_say_what_is_wrong() {
        assert_eq!(PyvenvCfg::parse(b""), Err(CfgProblem::NoHome));
        assert_eq!(
            PyvenvCfg::parse(b"garbage\n\x01\x02 nothing here"),
            Err(CfgProblem::NoHome)
        );
        assert_eq!(PyvenvCfg::parse(b"home =\n"), Err(CfgProblem::NoHome));
        assert_eq!(PyvenvCfg::parse(b"\xff\xfe"), Err(CfgProblem::NotText));
        assert_eq!(
            PyvenvCfg::parse(b"home = bin\n"),
            Err(CfgProblem::HomeNotAbsolute)
        );
        let big = vec![b'#'; MAX_BYTES as usize + 1];
        assert_eq!(PyvenvCfg::parse(&big), Err(CfgProblem::TooLarge));
        assert_eq!(major_minor("3.11.2").as_deref(), Some("3.11"));
        assert_eq!(major_minor("three"), None);
        assert_eq!(major_minor("3"), None);
    }
}
