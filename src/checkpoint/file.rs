//! The `file` checkpoint store: at-least-once.
//!
//! Written atomically: the JSON goes to `<path>.tmp`, is fsynced, renamed over `<path>`, and
//! the directory is fsynced, so after a crash the file holds either the old or the new
//! checkpoint, never a torn one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use std::sync::Arc;

use super::{on_blocking_pool, Checkpoint, CheckpointError, CheckpointStore};

/// A checkpoint kept in one local JSON file.
#[derive(Debug, Clone)]
pub struct FileCheckpointStore {
    path: PathBuf,
}

impl FileCheckpointStore {
    /// A store at `path`; the parent directory is created on the first write.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }
}

#[async_trait::async_trait]
impl CheckpointStore for FileCheckpointStore {
    async fn load(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        let this = self.clone();
        on_blocking_pool("reading the checkpoint file", move || this.read()).await
    }

    async fn store(&mut self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        let (this, checkpoint) = (self.clone(), checkpoint.clone());
        on_blocking_pool("writing the checkpoint file", move || {
            this.write(&checkpoint)
        })
        .await
    }

    async fn clear(&mut self) -> Result<(), CheckpointError> {
        let this = self.clone();
        on_blocking_pool("removing the checkpoint file", move || this.remove()).await
    }
}

impl FileCheckpointStore {
    /// The stored checkpoint, read now (blocking); `Ok(None)` when the file does not exist.
    ///
    /// Errors: [`CheckpointError::FileRead`] (the file cannot be read),
    /// [`CheckpointError::FileInvalid`] (it is not a checkpoint's JSON).
    pub fn read(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        match fs::read(&self.path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| CheckpointError::FileInvalid {
                        path: self.path.clone(),
                        source: Arc::new(e),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CheckpointError::FileRead {
                path: self.path.clone(),
                source: Arc::new(e),
            }),
        }
    }

    /// Writes `checkpoint` atomically (blocking): temporary file, fsync, rename, directory
    /// fsync. Errors: [`CheckpointError::FileWrite`] naming the step that failed.
    fn write(&self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        let io_err = |step: &'static str, e: std::io::Error| CheckpointError::FileWrite {
            step,
            path: self.path.clone(),
            source: Arc::new(e),
        };
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&dir).map_err(|e| io_err("create the directory of the", e))?;
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let body = serde_json::to_vec(checkpoint).map_err(|e| CheckpointError::Serialise {
            source: Arc::new(e),
        })?;
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .map_err(|e| io_err("open the temporary", e))?;
            f.write_all(&body).map_err(|e| io_err("write the", e))?;
            f.write_all(b"\n").map_err(|e| io_err("write the", e))?;
            f.sync_all().map_err(|e| io_err("fsync the", e))?;
        }
        fs::rename(&tmp, &self.path).map_err(|e| io_err("rename into place the", e))?;
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err("fsync the directory of the", e))?;
        Ok(())
    }

    /// Removes the file (a missing one is fine) and fsyncs its directory (blocking).
    fn remove(&self) -> Result<(), CheckpointError> {
        let io_err = |step: &'static str, e: std::io::Error| CheckpointError::FileWrite {
            step,
            path: self.path.clone(),
            source: Arc::new(e),
        };
        match fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err("remove the", e)),
        }
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err("fsync the directory of the", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::{Lsn, SourcePosition};

    #[tokio::test]
    async fn round_trip_and_replace() {
        let dir = std::env::temp_dir().join(format!("outboxd-ckpt-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("c.json");
        let mut store = FileCheckpointStore::new(&path);
        assert!(store.load().await.unwrap().is_none());
        for lsn in [1_u64, 0x16_B374_D848] {
            let c = Checkpoint {
                connector: "c".into(),
                position: SourcePosition::Lsn(Lsn(lsn)),
                skip: 0,
                updated_at_ms: 7,
                cutover: None,
            };
            store.store(&c).await.unwrap();
            assert_eq!(store.load().await.unwrap(), Some(c));
        }
        assert!(!dir.join("sub").join("c.json.tmp").exists());
        fs::write(&path, b"{not json").unwrap();
        let err = store.load().await.unwrap_err();
        assert!(err.to_string().contains("not a valid outboxd checkpoint"));
        store.clear().await.unwrap();
        assert!(store.load().await.unwrap().is_none());
        store.clear().await.unwrap();
        let _ = fs::remove_dir_all(&dir);
    }
}
