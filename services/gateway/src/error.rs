//! What went wrong, once for every surface: HTTP maps it to a status, MCP to
//! advice, NATS to `{"error": {"kind", "message"}}`.

use hindsight_recall::{RecallError, working};
use hindsight_store::StoreError;

/// What went wrong, in words a caller (or an agent) can act on.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Unavailable(format!("memory store unavailable: {e}"))
    }
}

impl From<RecallError> for ApiError {
    fn from(e: RecallError) -> Self {
        match e {
            RecallError::Request(r) => ApiError::BadRequest(r.to_string()),
            RecallError::Store(s) => s.into(),
        }
    }
}

impl From<working::WorkingError> for ApiError {
    fn from(e: working::WorkingError) -> Self {
        match e {
            working::WorkingError::TooLarge => ApiError::BadRequest(e.to_string()),
            _ => ApiError::Unavailable(e.to_string()),
        }
    }
}

impl From<hindsight_erase::EraseError> for ApiError {
    fn from(e: hindsight_erase::EraseError) -> Self {
        use hindsight_erase::EraseError as E;
        match e {
            E::InvalidUser(_) | E::InvalidTenant(_) => ApiError::BadRequest(e.to_string()),
            // The job is left running; asking again resumes it.
            _ => ApiError::Unavailable(e.to_string()),
        }
    }
}

impl ApiError {
    /// Its name on the wire (NATS replies).
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::NotFound(_) => "not_found",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Internal(_) => "internal",
        }
    }

    /// The error a wire name and message stand for (an unknown name is internal).
    pub fn from_kind(kind: Option<&str>, message: String) -> Self {
        match kind {
            Some("bad_request") => ApiError::BadRequest(message),
            Some("not_found") => ApiError::NotFound(message),
            Some("unavailable") => ApiError::Unavailable(message),
            _ => ApiError::Internal(message),
        }
    }
}
