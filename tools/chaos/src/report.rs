//! The figures of a run printed: one JSON line (written by hand: numbers
//! and short labels) and a readable summary.

use crate::figures::Figures;
use std::fmt::Write as _;
use std::time::Duration;

/// Nearest-rank percentile of a sorted sample.
fn pct(sorted: &[Duration], p: usize) -> Option<Duration> {
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("null".to_owned(), |d| {
        format!("{:.1}", d.as_secs_f64() * 1e3)
    })
}

impl Figures {
    /// The machine-readable line.
    pub(crate) fn json(&self) -> String {
        let map = |m: &mut String, name: &str, entries: Vec<(String, usize)>| {
            let body: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("\"{k}\":{v}"))
                .collect();
            let _ = write!(m, ",\"{name}\":{{{}}}", body.join(","));
        };
        let mut out = format!(
            "{{\"schedule\":\"{}\",\"seed\":{},\"quarantine\":{},\"duration_s\":{:.1},\
             \"grants\":{},\"contended_grants\":{},\"uncontended_grants\":{},\
             \"healthy_grants\":{},\"healthy_s\":{:.1},\"min_grants\":{},\"violations\":{}",
            self.schedule,
            self.seed,
            self.quarantine,
            self.duration.as_secs_f64(),
            self.grants,
            self.contended,
            self.uncontended,
            self.healthy_grants,
            self.healthy_time.as_secs_f64(),
            self.min_grants,
            self.violation_count()
        );
        let faults = self
            .faults
            .iter()
            .map(|(k, v)| (k.name().to_owned(), *v))
            .collect();
        map(&mut out, "faults", faults);
        let checks = self
            .violations
            .iter()
            .map(|(k, v)| (k.name().to_owned(), *v))
            .collect();
        map(&mut out, "violations_by_check", checks);
        let _ = write!(
            out,
            ",\"availability_pct\":{},\"uncontended_tried\":{},\"uncontended_granted\":{},\
             \"misses_fault_began_mid_call\":{},\"misses_after_restart_return\":{}",
            self.availability_pct()
                .map_or("null".to_owned(), |p| format!("{p:.3}")),
            self.availability.0,
            self.availability.1,
            self.misses_fault_began,
            self.misses_after_restart
        );
        map(
            &mut out,
            "unavailable_by",
            self.unavailable_by.clone().into_iter().collect(),
        );
        let t = &self.three_unavailable;
        let _ = write!(
            out,
            ",\"three_faulted_unavailable\":{},\"three_faulted_p50_ms\":{},\
             \"three_faulted_p99_ms\":{},\"three_faulted_max_ms\":{},\"three_faulted_other\":{},\
             \"recovery_ms\":{},\"paused\":{},\"paused_writes_refused\":{},\
             \"paused_writes_applied\":{},\"overran\":{},\"not_held_under_faults\":{},\
             \"tightest_expiry_handoff_ms\":{},\"session_grants\":{},\"sessions_drained\":{}}}",
            t.len(),
            ms(pct(t, 50)),
            ms(pct(t, 99)),
            ms(t.last().copied()),
            self.three_other,
            ms(self.recovery),
            self.findings.paused,
            self.findings.paused_writes_refused,
            self.findings.paused_writes_applied,
            self.findings.overran,
            self.findings.not_held_under_faults,
            ms(self.findings.tightest_expiry),
            self.session_grants,
            self.sessions_drained
        );
        out.pop();
        let _ = write!(
            out,
            ",\"multi_resource_grants\":{}}}",
            self.multi_resource_grants
        );
        out.pop();
        let fz = &self.frozen;
        let _ = write!(
            out,
            ",\"frozen\":{{\"freezes_holding\":{},\"handoffs_during_freeze\":{},\
             \"resumed_told_gone\":{},\"resumed_told_lost\":{},\"writes\":{},\
             \"lock_delays_checked\":{},\"long_ttl_freezes\":{}}}}}",
            fz.freezes_holding,
            fz.handoffs,
            fz.resumed_told_gone,
            fz.resumed_told_lost,
            fz.writes,
            fz.delays_checked,
            fz.long_ttl
        );
        let b = &self.bursts;
        let codes: Vec<String> = b
            .codes
            .iter()
            .map(|(k, v)| format!("\"{k}\":{v}"))
            .collect();
        out.pop();
        let _ = write!(
            out,
            ",\"bursts\":{{\"bursts\":{},\"calls\":{},\"granted\":{},\"codes\":{{{}}},\
             \"unavailable_masters_healthy\":{},\"unavailable_masters_faulted\":{},\"failed\":{}}}}}",
            b.bursts,
            b.calls,
            b.granted,
            codes.join(","),
            b.unavailable_healthy,
            b.unavailable_faulted,
            b.failed.len()
        );
        let kinds = &self.findings.kinds;
        let permits = |limit: u32| kinds.most_permits.get(&limit).copied().unwrap_or(0);
        out.pop();
        let _ = write!(
            out,
            ",\"rw\":{{\"shared_grants\":{},\"exclusive_grants\":{},\"shared_overlaps\":{}}}}}",
            self.by_kind.get("shared").copied().unwrap_or(0),
            self.mode_exclusive,
            kinds.shared_overlaps
        );
        out.pop();
        let _ = write!(
            out,
            ",\"semaphore\":{{\"limit\":2,\"grants\":{},\"most_at_once\":{}}}}}",
            self.by_kind.get("permit2").copied().unwrap_or(0),
            permits(2)
        );
        let m = &self.mix;
        let left = &m.leftovers;
        out.pop();
        let _ = write!(
            out,
            ",\"mix\":{{\"on\":{},\"most_permits_limit3\":{},\"kinds_held_together\":{},\
             \"request_id_retries\":{},\"granted_on_retry\":{},\"hold_retries\":{},\
             \"hold_retries_granted\":{},\"deadline_probes\":{},\"cancelled_probes\":{},\
             \"left_locked_majority_healthy\":{},\"left_locked_other\":{},\
             \"unknown_transport\":{},\"unknown_other\":{},\"unknown_during_replica_fault\":{},\
             \"shared_aborted\":{},\"shared_aborted_while_free\":{},\"longest_refused_free_ms\":{},\
             \"release_unavailable\":{},\"release_unavailable_masters_answering\":{},\
             \"holds_released_early\":{},\"delays_left_to_expire\":{},\"campaigns\":{},\"campaigns_withdrawn\":{},\
             \"stale_resigns\":{},\"stale_resigns_found_leader\":{},\"observed_changes\":{},\
             \"proclaims\":{},\"proclaims_accepted\":{}}}}}",
            self.mixed,
            permits(3),
            kinds.pairs_held_together,
            m.retries,
            m.retried_grants,
            m.hold_retries,
            m.hold_retries_granted,
            left.probed.0,
            left.probed.1,
            left.majority_healthy,
            left.other_leftovers,
            self.unknown.0,
            self.unknown.1,
            self.unknown_replica_fault,
            self.refusals.shared_aborted.0,
            self.refusals.shared_aborted.1,
            self.refusals.longest_refused_free_ms,
            self.refusals.release_unavailable.0,
            self.refusals.release_unavailable.1,
            kinds.holds_released_early,
            kinds.delays_left_to_expire,
            m.campaigns,
            m.campaigns_withdrawn,
            m.stale_resigns.0,
            m.stale_resigns.1,
            m.observed_changes,
            m.proclaims.0,
            m.proclaims.1
        );
        out.pop();
        map(
            &mut out,
            "grants_by_kind",
            self.by_kind.clone().into_iter().collect(),
        );
        map(
            &mut out,
            "failed_by_code",
            self.failed_by_code.clone().into_iter().collect(),
        );
        out.push('}');
        out
    }

    /// The readable summary.
    pub(crate) fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "chaos: schedule {} seed {} quarantine {} for {:.0} s",
            self.schedule,
            self.seed,
            if self.quarantine { "on" } else { "off" },
            self.duration.as_secs_f64()
        );
        let _ = writeln!(
            s,
            "  grants            {} ({} contended, {} uncontended); {} in healthy phases \
             ({:.0} s, at least {} needed)",
            self.grants,
            self.contended,
            self.uncontended,
            self.healthy_grants,
            self.healthy_time.as_secs_f64(),
            self.min_grants
        );
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, v)| format!("{} {v}", k.name()))
            .collect();
        let _ = writeln!(s, "  faults            {}", faults.join(", "));
        for (check, n) in &self.violations {
            let _ = writeln!(s, "  {:<40} {n}", check.name());
        }
        let (tried, granted) = self.availability;
        let _ = writeln!(
            s,
            "  availability      {} ({granted} of {tried} uncontended acquisitions with <= 2 \
             masters faulted){}; misses as a fault began {}, after a restarted master \
             returned {}",
            self.availability_pct()
                .map_or("-".to_owned(), |p| format!("{p:.3}%")),
            if self.unavailable_by.is_empty() {
                String::new()
            } else {
                format!("; failures: {:?}", self.unavailable_by)
            },
            self.misses_fault_began,
            self.misses_after_restart
        );
        let t = &self.three_unavailable;
        let _ = writeln!(
            s,
            "  three faulted     {} UNAVAILABLE in p50 {} / p99 {} / max {} ms, {} other; \
             recovered {} ms after the masters returned",
            t.len(),
            ms(pct(t, 50)),
            ms(pct(t, 99)),
            ms(t.last().copied()),
            self.three_other,
            ms(self.recovery)
        );
        let _ = writeln!(
            s,
            "  paused holders    {} (fenced writes refused {}, applied {}); overran {}; \
             was_held=false under faults {}; tightest expiry hand-off {} ms; \
             contended failures {:?}",
            self.findings.paused,
            self.findings.paused_writes_refused,
            self.findings.paused_writes_applied,
            self.findings.overran,
            self.findings.not_held_under_faults,
            ms(self.findings.tightest_expiry),
            self.contended_failures
        );
        let fz = &self.frozen;
        let _ = writeln!(
            s,
            "  frozen clients    {} freezes holding a lock: passed on during {}, resumed \
             client found it gone {} (told lost {}); {} writes by those clients; {} \
             lock_delays judged; {} of the freezes with a lease of max_ttl",
            fz.freezes_holding,
            fz.handoffs,
            fz.resumed_told_gone,
            fz.resumed_told_lost,
            fz.writes,
            fz.delays_checked,
            fz.long_ttl
        );
        let kinds = &self.findings.kinds;
        let _ = writeln!(
            s,
            "  kinds             grants {:?}; {} pairs of shared grants and {} pairs of other \
             kinds held together; most permits at once {:?} (by limit)",
            self.by_kind, kinds.shared_overlaps, kinds.pairs_held_together, kinds.most_permits
        );
        let m = &self.mix;
        let _ = writeln!(
            s,
            "  mix               {}: {} Acquires retried with their request id ({} \
             acquisitions granted on a retry); {} Holds retried on a new connection ({} \
             granted); short deadlines probed {} (+{} CANCELLED), left locked on a majority \
             with all healthy {}, other leftovers {}; {} grants released inside their \
             hold_at_least; {} lock_delays of permits left to expire judged; elections: {} campaigns ({} withdrawn unelected), {} Resigns \
             sent again after their leadership ended ({} found it still held), {} changes \
             observed, {} Proclaims ({} accepted)",
            if self.mixed { "on" } else { "off" },
            m.retries,
            m.retried_grants,
            m.hold_retries,
            m.hold_retries_granted,
            m.leftovers.probed.0,
            m.leftovers.probed.1,
            m.leftovers.majority_healthy,
            m.leftovers.other_leftovers,
            kinds.holds_released_early,
            kinds.delays_left_to_expire,
            m.campaigns,
            m.campaigns_withdrawn,
            m.stale_resigns.0,
            m.stale_resigns.1,
            m.observed_changes,
            m.proclaims.0,
            m.proclaims.1
        );
        let _ = writeln!(
            s,
            "  not granted       {:?}; UNKNOWN: {} transport errors, {} others, {} during a \
             replica's kill or drain; messages {:?}",
            self.failed_by_code,
            self.unknown.0,
            self.unknown.1,
            self.unknown_replica_fault,
            self.unknown_messages
        );
        let r = &self.refusals;
        let _ = writeln!(
            s,
            "  refusals          shared Acquires ABORTED {} ({} with no excluding holder in \
             the history, longest {} ms); Releases UNAVAILABLE {} ({} with every master \
             answering)",
            r.shared_aborted.0,
            r.shared_aborted.1,
            r.longest_refused_free_ms,
            r.release_unavailable.0,
            r.release_unavailable.1
        );
        let b = &self.bursts;
        let _ = writeln!(
            s,
            "  bursts            {}: {} calls, {} granted, failures {:?}; \
             UNAVAILABLE with all masters healthy {}, with some faulted {}",
            b.bursts, b.calls, b.granted, b.codes, b.unavailable_healthy, b.unavailable_faulted
        );
        for (i, at, why) in &b.failed {
            let _ = writeln!(
                s,
                "    burst {i} at {:.3} s: FAILED, no calls: {why}",
                at.as_secs_f64()
            );
        }
        let ran = b.per_burst.iter().enumerate().filter(|(_, b)| b.1 > 0);
        for (i, (at, calls, granted, unavailable)) in ran {
            let _ = writeln!(
                s,
                "    burst {i} at {:.3} s: {calls} calls, {granted} granted, {unavailable} \
                 UNAVAILABLE",
                at.as_secs_f64()
            );
        }
        s
    }
}
