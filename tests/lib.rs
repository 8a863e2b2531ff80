//! redlockd's integration tests live in the `[[test]]` targets of this
//! package; this library is empty.
