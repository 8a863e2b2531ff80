use redlockd_model::model::Redlock;
use redlockd_model::scripts::{Counterfactuals, Kind};
use redlockd_model::world::{Budget, ClientSpec, World};
use stateright::{Checker, Model};
use std::time::Instant;

fn run(world: World) {
    let started = Instant::now();
    let name = world.name;
    let checker = Redlock(world)
        .checker()
        .threads(2)
        .symmetry_fn(redlockd_model::world::State::representative)
        .finish_when(stateright::HasDiscoveries::AnyFailures)
        .spawn_dfs()
        .join();
    println!(
        "{name}: {} states ({} unique) in {:.1?}, depth {}",
        checker.state_count(),
        checker.unique_state_count(),
        started.elapsed(),
        checker.max_depth()
    );
    for (n, p) in checker.discoveries() {
        println!("  {n}: {} steps", p.clone().into_actions().len());
        if n == "exclusion" || n == "fence order" {
            let v = p.into_vec();
            for (st, a) in &v {
                if let Some(a) = a { println!("    {a:?}"); }
                let _ = st;
            }
            println!("{:#?}", v.last().unwrap().0);
        }
    }
}

const NONE: Counterfactuals = Counterfactuals { recreate_without_limit: false, per_kind_fences: false, recreate_across_kinds: false };

#[test]
fn probe() {
    let permit = |limit, index| Kind::Permit { limit, index };
    let which = std::env::var("W").unwrap_or_default();
    let f = |r, q, l, a| Budget { restarts: r, lost_requests: q, lost_replies: l, lost_answers: a };
    let worlds = vec![
        World { name: "sem", clients: vec![ClientSpec::new(permit(2, 0)).extends(2), ClientSpec::new(Kind::Plain).extends(0)],
            faults: f(1, 1, 0, 0), late_commands: false, witnesses: std::env::var("WIT").is_ok(), proposals: false, cf: NONE },
        World { name: "sem+reply", clients: vec![ClientSpec::new(permit(2, 0)).extends(2), ClientSpec::new(Kind::Plain)],
            faults: f(1, 1, 1, 0), late_commands: false, witnesses: std::env::var("WIT").is_ok(), proposals: true, cf: NONE },
        World { name: "rw", clients: vec![ClientSpec::new(Kind::Shared), ClientSpec::new(Kind::Shared), ClientSpec::new(Kind::Plain)],
            faults: f(1, 0, 0, 0), late_commands: false, witnesses: std::env::var("WIT").is_ok(), proposals: false, cf: NONE },
        World { name: "rid", clients: vec![ClientSpec::new(Kind::Plain).attempts(2).extends(2).request_id(), ClientSpec::new(Kind::Plain)],
            faults: f(1, 1, 1, 1), late_commands: false, witnesses: std::env::var("WIT").is_ok(), proposals: true, cf: NONE },
        World { name: "limits", clients: vec![ClientSpec::new(permit(2, 1)), ClientSpec::new(permit(3, 2)), ClientSpec::new(Kind::Multi)],
            faults: f(1, 0, 0, 0), late_commands: false, witnesses: std::env::var("WIT").is_ok(), proposals: false, cf: NONE },
    ];
    for w in worlds {
        if which.is_empty() || which == w.name {
            run(w);
        }
    }
}
