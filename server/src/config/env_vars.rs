// Every environment variable that changes what pyrun-mcp-server does. Not a module: included by
// `config/mod.rs` (as `config::ENV_VARS`) and by the test harness, which starts the binary
// without linking the server crate. A unit test in `config/mod.rs` reads the config modules and
// main.rs and fails when a variable they read is missing here.
//
// Left out on purpose: PATH (where the default interpreter is found; harnesses keep it).

/// The variables a test harness removes before it starts a server, so that no setting of the
/// developer's shell (`PYRUN_SANDBOX=off`, a token, a folder...) changes what the test tries.
pub const ENV_VARS: &[&str] = &[
    // Core settings (`Cli`, `RunArgs`).
    "MCP_TRANSPORT",
    "PYTHON_PROJECTS_DIR",
    "PYTHON_TIMEOUT",
    "PYTHON_BIN",
    "PYRUN_MAX_OUTPUT_BYTES",
    "PYRUN_MAX_RESULT_OUTPUT_BYTES",
    "PYRUN_MAX_STDIN_BYTES",
    "PYRUN_MAX_CONCURRENT",
    "PYRUN_PASS_ENV",
    "PYRUN_ALLOW_BROAD_PROJECTS_DIR",
    // Background runs (`BackgroundArgs`).
    "PYRUN_BACKGROUND_TIMEOUT",
    "PYRUN_MAX_BACKGROUND_CONCURRENT",
    "PYRUN_MAX_BACKGROUND_RUNS",
    "PYRUN_MAX_BACKGROUND_RUNS_PER_CALLER",
    "PYRUN_RUN_RETENTION",
    "PYRUN_DETACH_AFTER",
    // Sandbox (`SandboxArgs`).
    "PYRUN_SANDBOX",
    "PYRUN_ALLOW_NETWORK",
    "PYRUN_READ_ONLY_PROJECTS",
    "PYRUN_WRITE_SCOPE",
    "PYRUN_ALLOW_PROTECTED_WRITES",
    "PYRUN_MAX_MEMORY_MB",
    "PYRUN_MAX_CPU_SECS",
    "PYRUN_MAX_FILE_SIZE_MB",
    "PYRUN_MAX_OPEN_FILES",
    "PYRUN_MAX_PROCESSES",
    // HTTP transport (`HttpArgs`).
    "MCP_BIND",
    "MCP_AUTH_TOKEN",
    "MCP_ALLOWED_HOSTS",
    "MCP_ALLOW_UNAUTHENTICATED",
    "MCP_MAX_SESSIONS",
    "MCP_MAX_SESSIONS_PER_CALLER",
    "MCP_SESSION_IDLE_TIMEOUT",
    "MCP_MAX_BODY_BYTES",
    "MCP_BODY_TIMEOUT",
    "MCP_MAX_CONNECTIONS",
    "MCP_MAX_UNAUTHENTICATED_PER_ADDRESS",
    // Tunnel (`TunnelArgs`).
    "MCP_TUNNEL",
    "NGROK_AUTHTOKEN",
    "MCP_TUNNEL_DOMAIN",
    "MCP_URL_FILE",
    "NGROK_SERVER_ADDR",
    // OAuth (`OAuthArgs`).
    "MCP_OAUTH",
    "MCP_PUBLIC_URL",
    "MCP_OAUTH_OWNER_PASSWORD",
    // Lasting state (`StateArgs`, `AuditArgs`).
    "PYRUN_STATE_DIR",
    "PYRUN_AUDIT_LOG",
    // OAuth, tests only and hidden (`OAuthTestArgs`): trust a CA for client metadata documents.
    "PYRUN_OAUTH_TEST_METADATA_CA",
    // Artifacts (`ArtifactArgs`).
    "PYRUN_MAX_INLINE_IMAGE_BYTES",
    "PYRUN_MAX_INLINE_IMAGE_EDGE",
    "PYRUN_MAX_ARTIFACT_STORAGE_MB",
    "PYRUN_MAX_ARTIFACT_STORAGE_PER_CALLER_MB",
    // Inline code (`InlineArgs`).
    "PYRUN_ALLOW_INLINE_CODE",
    "PYRUN_MAX_CODE_BYTES",
    // Package installs (`InstallArgs`).
    "PYRUN_ALLOW_INSTALL",
    "PYRUN_PACKAGE_INDEX",
    "PYRUN_ALLOW_SDIST",
    "PYRUN_UV",
    "PYRUN_INSTALL_TIMEOUT",
    "PYRUN_MAX_INSTALL_MB",
    // Project environments (`PythonEnvArgs`).
    "PYRUN_ALLOW_PYTHON",
    // Python sessions (`SessionArgs`).
    "PYRUN_MAX_PYTHON_SESSIONS",
    "PYRUN_MAX_PYTHON_SESSIONS_PER_CALLER",
    "PYRUN_PYTHON_SESSION_IDLE_TIMEOUT",
    // Warm runs (`WarmArgs`).
    "PYRUN_WARM",
    "PYRUN_WARM_MAX",
    "PYRUN_WARM_IDLE",
    "PYRUN_PRELOAD",
    // The RunPod backend (`RunPodArgs`); the key is read apart, never as a flag.
    "PYRUN_RUNPOD_ENDPOINT",
    "PYRUN_RUNPOD_API_URL",
    "PYRUN_RUNPOD_POLL",
    "RUNPOD_API_KEY",
    // Read in main.rs: the log filter and plain output.
    "PYRUN_LOG",
    "NO_COLOR",
    // Read by tokio's runtime builder: the number of worker threads.
    "TOKIO_WORKER_THREADS",
];
