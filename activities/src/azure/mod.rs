//! Azure: clouds, credentials, ARM client, errors, long-running operations, models.
