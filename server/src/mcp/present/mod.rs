//! What a result looks like: refusals and structured replies, long output cut, pictures fitted,
//! tables previewed, `hint:` lines, the blocks of a run's files, live output chunks.

pub(super) mod artifact_blocks;
pub(super) mod image_fit;
pub(super) mod live_chunks;
pub(super) mod output_cut;
pub(super) mod progress_frames;
pub(super) mod quarantine_note;
pub(super) mod reply;
pub(super) mod run_hint;
pub(super) mod table_preview;
