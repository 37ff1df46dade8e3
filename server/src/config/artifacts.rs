//! What a run's artifacts may cost: the pictures shown inline in a result, and the disk the
//! artifact store may fill.

/// Largest `--max-inline-image-bytes`: 64 MiB of base64.
const MAX_INLINE_IMAGE_BYTES: u64 = 64 << 20;

/// The files runs leave in `PYRUN_OUTPUT_DIR`.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Artifacts")]
pub struct ArtifactArgs {
    /// Pictures (PNG, JPEG, GIF, WebP) a run leaves are shown inline in its result up to this
    /// many bytes of base64 in all, scaled down first when larger than
    /// --max-inline-image-edge; the others are links (0: links only).
    #[arg(long, env = "PYRUN_MAX_INLINE_IMAGE_BYTES", default_value_t = 1_500_000, value_parser = super::grammar::bytes(0, MAX_INLINE_IMAGE_BYTES))]
    pub max_inline_image_bytes: u64,

    /// The longest edge, in pixels, of a picture shown inline (64 to 8000): a larger one is
    /// scaled down (aspect kept) and re-encoded; its original stays at its link.
    #[arg(long, env = "PYRUN_MAX_INLINE_IMAGE_EDGE", default_value_t = 1568, value_parser = super::grammar::count(64, 8000))]
    pub max_inline_image_edge: u64,

    /// Disk the kept artifacts of all runs may use, in MiB.
    #[arg(long, env = "PYRUN_MAX_ARTIFACT_STORAGE_MB", default_value_t = 1024, value_parser = super::grammar::mebibytes(1, 1 << 20))]
    pub max_artifact_storage_mb: u64,

    /// Disk one caller's kept artifacts may use, in MiB: when a new run's files would pass this
    /// or the whole storage, that caller's oldest runs' files are dropped first, never another
    /// caller's.
    #[arg(long, env = "PYRUN_MAX_ARTIFACT_STORAGE_PER_CALLER_MB", default_value_t = 512, value_parser = super::grammar::mebibytes(1, 1 << 20))]
    pub max_artifact_storage_per_caller_mb: u64,
}

/// The artifact settings, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactConfig {
    pub max_inline_image_bytes: u64,
    pub max_inline_image_edge: u32,
    pub max_storage_bytes: u64,
    pub max_storage_bytes_per_caller: u64,
}

impl ArtifactArgs {
    pub(super) fn resolve(&self) -> ArtifactConfig {
        ArtifactConfig {
            max_inline_image_bytes: self.max_inline_image_bytes,
            max_inline_image_edge: u32::try_from(self.max_inline_image_edge).unwrap_or(u32::MAX),
            max_storage_bytes: self.max_artifact_storage_mb << 20,
            max_storage_bytes_per_caller: self.max_artifact_storage_per_caller_mb << 20,
        }
    }
}
