//! Pictures sized for a model's context (shared by the rooms that report runs): each picture a
//! run left is shown inline at most `--max-inline-image-edge` pixels on its longest edge, and a
//! result's pictures together stay within `--max-inline-image-bytes` of base64. The original
//! is never changed: it stays at its `resource_link`, byte for byte.
//!
//! Steps for each picture, in order:
//! 1. read its header only (no decode): one within the edge whose base64 fits what is left goes
//!    inline as it is, byte for byte (an animated GIF stays animated);
//! 2. otherwise decode it, under [`decode_limits`] (width, height, memory) and at most
//!    [`MAX_DECODES`] at once in the whole server, on a blocking thread: a decompression bomb or
//!    a malformed file gives a short reason and the link only, never a panic or unbounded memory;
//! 3. scale it down (aspect kept, never up) with a box filter, and encode it: PNG for a PNG or
//!    GIF source and a WebP with transparency (plots, diagrams: sharp edges, few colours), JPEG
//!    at quality [`JPEG_QUALITY`] for a JPEG or opaque WebP source (photos), and JPEG for any
//!    picture whose PNG would not fit what is left of the budget;
//! 4. a picture that still does not fit is a link with the reason.
//!
//! Decoding and scaling one result's pictures stops after [`SCALING_PER_RESULT`]: a picture
//! costs the server seconds of CPU for a small file (a 16384 px square of one colour is 260 KB),
//! and a run may leave dozens; past that time the rest that need scaling are links.

use std::io::Cursor;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use image::{DynamicImage, ImageError, ImageFormat, ImageReader, Limits};
use tokio::sync::Semaphore;

use pyrun_run::artifacts::{Artifact, ArtifactStore};

/// Pictures decoded at once in the whole server: each may hold up to [`MAX_DECODE_BYTES`].
pub const MAX_DECODES: usize = 2;
/// The most memory one decode may allocate.
pub const MAX_DECODE_BYTES: u64 = 256 << 20;
/// The widest or tallest picture decoded, in pixels.
pub const MAX_DECODE_EDGE: u32 = 16_384;
/// The time one result may spend decoding and scaling pictures; a picture started within it
/// finishes.
pub const SCALING_PER_RESULT: Duration = Duration::from_secs(5);
/// The quality of JPEG re-encodings.
pub const JPEG_QUALITY: u8 = 85;

static DECODES: Semaphore = Semaphore::const_new(MAX_DECODES);

/// The limits every decode runs under.
pub fn decode_limits() -> Limits {
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_DECODE_EDGE);
    limits.max_image_height = Some(MAX_DECODE_EDGE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    limits
}

/// How a result may show pictures.
#[derive(Debug, Clone, Copy)]
pub struct Fit {
    /// The longest edge shown, in pixels.
    pub max_edge: u32,
    /// Base64 bytes of all pictures of one result.
    pub budget: u64,
}

/// A picture as a result shows it.
#[derive(Debug)]
pub struct Inline {
    /// Base64 of the bytes shown.
    pub data: String,
    pub mime_type: &'static str,
    /// Set when the picture was scaled or re-encoded: `1568x784 PNG, from 6000x3000`.
    pub resized: Option<String>,
}

/// Each picture inline, or the reason it is not; their base64 together within `fit.budget`.
pub async fn inline_images(
    store: &Arc<ArtifactStore>,
    owner: &str,
    run_id: &str,
    images: &[Artifact],
    fit: Fit,
) -> Vec<(String, Result<Inline, String>)> {
    let mut left = fit.budget;
    let mut scaling = Duration::ZERO;
    let mut shown = Vec::with_capacity(images.len());
    for image in images {
        let outcome = if left == 0 {
            Err(over_budget(fit.budget))
        } else {
            let Ok(_permit) = DECODES.acquire().await else {
                break;
            };
            let (store, owner, run_id) = (Arc::clone(store), owner.to_owned(), run_id.to_owned());
            let image_ = image.clone();
            let budget_left = left;
            let may_decode = scaling < SCALING_PER_RESULT;
            let started = Instant::now();
            let outcome = tokio::task::spawn_blocking(move || {
                let file = store
                    .read(&owner, &run_id, &image_.name)
                    .map_err(|e| tracing::warn!(%e, "an artifact could not be opened"))
                    .ok()?;
                read_all(file.file, file.size).ok().map(|bytes| {
                    fit_within(
                        &bytes,
                        image_.mime_type,
                        fit.max_edge,
                        (budget_left, fit.budget),
                        may_decode,
                    )
                })
            })
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(%e, "fitting a picture failed");
                None
            })
            .unwrap_or_else(|| Err("could not be read".to_owned()));
            scaling += started.elapsed();
            outcome
        };
        if let Ok(inline) = &outcome {
            left = left.saturating_sub(inline.data.len() as u64);
        }
        shown.push((image.name.clone(), outcome));
    }
    shown
}

fn read_all(file: std::fs::File, size: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(size).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn over_budget(budget: u64) -> String {
    format!("over the {budget} bytes of base64 of pictures a result shows inline")
}

fn base64_len(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(3) * 4
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// One picture (`bytes`, sniffed as `mime`) as it is shown: itself when it fits, else scaled
/// and re-encoded, else the reason it is a link only. `left` of `budget` base64 bytes remain.
#[cfg(test)]
pub fn fit_picture(
    bytes: &[u8],
    mime: &'static str,
    max_edge: u32,
    left: u64,
    budget: u64,
) -> Result<Inline, String> {
    fit_within(bytes, mime, max_edge, (left, budget), true)
}

/// [`fit_picture`], decoding only when `may_decode`.
fn fit_within(
    bytes: &[u8],
    mime: &'static str,
    max_edge: u32,
    (left, budget): (u64, u64),
    may_decode: bool,
) -> Result<Inline, String> {
    let reader = || {
        ImageReader::new(Cursor::new(bytes))
            .with_guessed_format()
            .map_err(|_| "not a picture the server could read".to_owned())
    };
    let (width, height) = reader()?
        .into_dimensions()
        .map_err(|_| "not a picture the server could read (its header is malformed)".to_owned())?;
    if width.max(height) <= max_edge && base64_len(bytes.len()) <= left {
        return Ok(Inline {
            data: b64(bytes),
            mime_type: mime,
            resized: None,
        });
    }
    if !may_decode {
        return Err(format!(
            "{width}x{height} px needs scaling, and the server spent the {} s it scales one \
             result's pictures in",
            SCALING_PER_RESULT.as_secs()
        ));
    }
    let mut reader = reader()?;
    reader.limits(decode_limits());
    let decoded = reader.decode().map_err(|e| match e {
        ImageError::Limits(_) => format!(
            "{width}x{height} px is too large to decode (the server decodes pictures up to \
             {MAX_DECODE_EDGE} px a side and {} MiB)",
            MAX_DECODE_BYTES >> 20
        ),
        _ => "not a picture the server could decode (malformed or truncated)".to_owned(),
    })?;
    let scaled = if width.max(height) > max_edge {
        decoded.thumbnail(max_edge, max_edge)
    } else {
        decoded
    };
    let sharp = matches!(mime, "image/png" | "image/gif")
        || (mime == "image/webp" && scaled.color().has_alpha());
    let from = format!("from {width}x{height}");
    if sharp {
        let png = encode_png(&scaled)?;
        if base64_len(png.len()) <= left {
            return Ok(Inline {
                data: b64(&png),
                mime_type: "image/png",
                resized: Some(format!(
                    "{}x{} PNG, {from}",
                    scaled.width(),
                    scaled.height()
                )),
            });
        }
    }
    let jpeg = encode_jpeg(&scaled)?;
    if base64_len(jpeg.len()) <= left {
        return Ok(Inline {
            data: b64(&jpeg),
            mime_type: "image/jpeg",
            resized: Some(format!(
                "{}x{} JPEG, {from}",
                scaled.width(),
                scaled.height()
            )),
        });
    }
    Err(over_budget(budget))
}

fn encode_png(image: &DynamicImage) -> Result<Vec<u8>, String> {
    let mut out = Cursor::new(Vec::new());
    image
        .write_to(&mut out, ImageFormat::Png)
        .map_err(|_| "could not be re-encoded".to_owned())?;
    Ok(out.into_inner())
}

/// JPEG has no transparency: transparent pixels go on white, as a viewer shows them.
fn encode_jpeg(image: &DynamicImage) -> Result<Vec<u8>, String> {
    let rgb = if image.color().has_alpha() {
        let rgba = image.to_rgba8();
        let mut rgb = image::RgbImage::new(rgba.width(), rgba.height());
        for (to, from) in rgb.pixels_mut().zip(rgba.pixels()) {
            let [r, g, b, a] = from.0;
            let over_white = |c: u8| {
                let (c, a) = (u16::from(c), u16::from(a));
                u8::try_from((c * a + 255 * (255 - a)) / 255).unwrap_or(u8::MAX)
            };
            to.0 = [over_white(r), over_white(g), over_white(b)];
        }
        rgb
    } else {
        image.to_rgb8()
    };
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY)
        .encode_image(&rgb)
        .map_err(|_| "could not be re-encoded".to_owned())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let image = image::RgbImage::from_fn(width, height, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
        });
        let mut out = Cursor::new(Vec::new());
        DynamicImage::ImageRgb8(image)
            .write_to(&mut out, ImageFormat::Png)
            .unwrap();
        out.into_inner()
    }

    /// Noise: a PNG that compresses badly (a photo's worst case).
    fn noisy_png(width: u32, height: u32) -> Vec<u8> {
        let mut seed: u32 = 12345;
        let image = image::RgbImage::from_fn(width, height, |_, _| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let [a, b, c, _] = seed.to_be_bytes();
            image::Rgb([a, b, c])
        });
        let mut out = Cursor::new(Vec::new());
        DynamicImage::ImageRgb8(image)
            .write_to(&mut out, ImageFormat::Png)
            .unwrap();
        out.into_inner()
    }

    fn decoded(inline: &Inline) -> DynamicImage {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&inline.data)
            .unwrap();
        image::load_from_memory(&bytes).unwrap()
    }

    #[test]
    fn a_small_picture_goes_as_it_is_and_a_large_one_is_scaled_keeping_its_aspect() {
        let small = png(40, 20);
        let shown = fit_picture(&small, "image/png", 1568, 1_500_000, 1_500_000).unwrap();
        assert_eq!(shown.data, b64(&small));
        assert!(shown.resized.is_none());

        let large = png(3000, 1000);
        let shown = fit_picture(&large, "image/png", 1568, 1_500_000, 1_500_000).unwrap();
        let image = decoded(&shown);
        assert_eq!((image.width(), image.height()), (1568, 523));
        assert_eq!(shown.mime_type, "image/png");
        assert_eq!(
            shown.resized.as_deref(),
            Some("1568x523 PNG, from 3000x1000")
        );
    }

    #[test]
    fn a_png_that_would_not_fit_goes_as_jpeg_and_one_that_never_fits_is_a_link() {
        let large = noisy_png(2000, 2000);
        let png_len = base64_len(
            encode_png(
                &image::load_from_memory(&large)
                    .unwrap()
                    .thumbnail(1000, 1000),
            )
            .unwrap()
            .len(),
        );
        let shown = fit_picture(&large, "image/png", 1000, png_len - 1, 1_500_000).unwrap();
        assert_eq!(shown.mime_type, "image/jpeg");
        assert!((shown.data.len() as u64) < png_len);
        let reason = fit_picture(&large, "image/png", 1000, 100, 1_500_000).unwrap_err();
        assert!(reason.contains("1500000 bytes of base64"), "{reason}");
    }

    #[test]
    fn malformed_and_bomb_pictures_give_a_reason_not_a_panic() {
        let garbage = b"\x89PNG\r\n\x1a\nthis is not a png at all".to_vec();
        let reason = fit_picture(&garbage, "image/png", 1568, 1_500_000, 1_500_000).unwrap_err();
        assert!(reason.contains("could read"), "{reason}");
        let mut truncated = png(3000, 3000);
        truncated.truncate(truncated.len() / 2);
        let reason = fit_picture(&truncated, "image/png", 1568, 1_500_000, 1_500_000).unwrap_err();
        assert!(reason.contains("could decode"), "{reason}");
    }
}
