//! Reading the files a person points us at (the cluster file, the pull secret, the SSH key,
//! an issuer's signing key): only regular files, and at most [`MAX_INPUT_FILE`] bytes.
//!
//! `/dev/zero` or `/dev/urandom` given as a pull secret once grew the process to 2 GB in
//! seconds, and a FIFO made it wait for ever: the file's type is checked before it is
//! opened (a FIFO is never opened, so the open cannot block), and the read stops one byte
//! past the cap whatever the file claims its size is.

use std::io::{self, Read};
use std::path::Path;

/// The largest input file read: 1 MiB. A pull secret is a few KiB (one entry per
/// registry), an SSH public key or a PEM key a few KiB, a cluster file a few dozen KiB.
pub const MAX_INPUT_FILE: u64 = 1024 * 1024;

/// Reads `path` whole, if it is a regular file (symlinks followed) of at most `max` bytes.
///
/// # Errors
/// The I/O error (`NotFound` for a missing file), or `InvalidInput` saying what the file
/// is instead (a device, a FIFO, a directory, …) or that it is larger than `max`.
pub fn read_regular(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "not a regular file ({}); give the path of a file",
                kind(&meta)
            ),
        ));
    }
    let too_big = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("larger than {max} bytes; is this the right file?"),
        )
    };
    if meta.len() > max {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_big());
    }
    Ok(bytes)
}

fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_directories_and_big_files_are_refused() {
        for p in ["/dev/zero", "/dev/urandom", "/tmp"] {
            let e = read_regular(Path::new(p), MAX_INPUT_FILE).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{p}: {e}");
            assert!(e.to_string().contains("not a regular file"), "{p}: {e}");
        }
        let dir = std::env::temp_dir().join(format!("hcp-files-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let e = read_regular(&fifo, MAX_INPUT_FILE).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let big = dir.join("big");
        std::fs::write(&big, vec![b'x'; 2000]).unwrap();
        assert!(
            read_regular(&big, 1000)
                .unwrap_err()
                .to_string()
                .contains("larger than 1000")
        );
        assert_eq!(read_regular(&big, 2000).unwrap().len(), 2000);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
