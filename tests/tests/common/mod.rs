//! The integration tests' view of the test kit (`redlockd-testkit`): the
//! harness and call helpers at the top, program helpers under [`ctl`].

#![allow(unused_imports)] // each test binary uses a different part

pub(crate) use redlockd_testkit::harness::*;
pub(crate) use redlockd_testkit::{
    against_both_servers, bin, client, daemon, masters, process, proxy,
};

pub(crate) mod frames;

/// Running programs against the daemon: redlockctl, scratch files, waits.
pub(crate) mod ctl {
    pub(crate) use redlockd_testkit::ctl::*;
    pub(crate) use redlockd_testkit::proxy::{Mode, Proxy};
}
