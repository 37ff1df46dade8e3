//! The session wire's frames: a 4-byte big-endian length, then that many bytes (UTF-8 JSON).
//! Pure, so the driver's counterpart (`python/_pyrun_session.py`) is mirrored and tested here.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Writes one frame holding `body`.
pub async fn write_frame<W: AsyncWrite + Unpin>(pipe: &mut W, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too long"))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(body);
    pipe.write_all(&frame).await?;
    pipe.flush().await
}

/// Reads one frame of at most `limit` bytes. EOF before a whole frame is `UnexpectedEof`; a
/// longer frame is `InvalidData` (the peer is not the driver, or broke the wire). Not
/// cancel-safe: a caller that stops polling it mid-frame must drop the pipe.
pub async fn read_frame<R: AsyncRead + Unpin>(pipe: &mut R, limit: usize) -> io::Result<Vec<u8>> {
    let mut head = [0u8; 4];
    pipe.read_exact(&mut head).await?;
    let len = usize::try_from(u32::from_be_bytes(head)).unwrap_or(usize::MAX);
    if len > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes, over the limit of {limit}"),
        ));
    }
    let mut body = vec![0; len];
    pipe.read_exact(&mut body).await?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_refuse_what_is_too_long_or_cut() {
        let mut wire = Vec::new();
        write_frame(&mut wire, b"{\"a\":1}").await.unwrap();
        write_frame(&mut wire, b"").await.unwrap();
        assert_eq!(&wire[..4], &[0, 0, 0, 7]);
        let mut reader = wire.as_slice();
        assert_eq!(read_frame(&mut reader, 100).await.unwrap(), b"{\"a\":1}");
        assert_eq!(read_frame(&mut reader, 100).await.unwrap(), b"");
        let eof = read_frame(&mut reader, 100).await.unwrap_err();
        assert_eq!(eof.kind(), io::ErrorKind::UnexpectedEof);

        let mut long = wire.as_slice();
        let err = read_frame(&mut long, 3).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let mut cut = &wire[..6];
        let err = read_frame(&mut cut, 100).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
