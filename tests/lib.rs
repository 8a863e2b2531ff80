//! redlockd's integration tests are the files of `tests/tests/`, each a test
//! binary Cargo finds by itself (shared helpers in `tests/tests/common/`);
//! this library is empty.
