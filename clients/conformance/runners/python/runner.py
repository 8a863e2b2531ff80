"""The Python client's conformance runner: runs clients/conformance/scenarios.json
through redlockd_client's public API (Client, Hold, Lease, campaign,
Leadership, leader, observe, resign, proclaim, the error classes).

Usage: runner.py SCENARIOS ENV (started by clients/conformance/harness.py,
whose docstring describes ENV and the line protocol on stdout/stdin).
"""

from __future__ import annotations

import json
import queue
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional

import redlockd_client as rc

#: The scenario language's word for each error class of the package.
KINDS = [
    (rc.LockHeld, "held_elsewhere"),
    (rc.LockNotHeld, "not_held"),
    (rc.Unavailable, "unavailable"),
    (rc.DeadlineExceeded, "deadline"),
    (rc.InvalidArgument, "invalid_argument"),
    (rc.ResourceExhausted, "resource_exhausted"),
    (rc.Unauthenticated, "unauthenticated"),
    (rc.PermissionDenied, "permission_denied"),
    (rc.LockLost, "lost"),
]
#: "<field>: <reason>", as the daemon and the client write INVALID_ARGUMENT.
FIELD = re.compile(r"^([A-Za-z_][\w.]*): ")
#: Longest a step that waits for an outcome may take by default, in seconds.
STEP_LIMIT = 30.0


class Failure(Exception):
    """A step observed something other than what the scenario says."""


def kind_of(error: BaseException) -> str:
    for cls, word in KINDS:
        if isinstance(error, cls):
            return word
    return f"other({type(error).__name__}: {error})"


class Runner:
    def __init__(self, env: Dict[str, Any]) -> None:
        self.env = env
        self.clients: Dict[str, rc.Client] = {}

    def client(self, name: str) -> rc.Client:
        if name not in self.clients:
            spec = self.env["clients"][name]
            address = spec["address"]
            ca = Path(spec["ca_file"]).read_bytes() if "ca_file" in spec else None
            if spec.get("tls") and ca is None:
                address = "https://" + address
            self.clients[name] = rc.Client(address, token=spec.get("token"), root_certificates=ca)
        return self.clients[name]

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def resource(self, step: Dict[str, Any]) -> str:
        return str(step["resource"]).replace("{prefix}", self.env["prefix"])

    def election(self, step: Dict[str, Any]) -> str:
        return str(step["name"]).replace("{prefix}", self.env["prefix"])

    def run(self, scenario: Dict[str, Any]) -> None:
        state: Dict[str, Any] = {
            "locks": {}, "leases": {}, "pending": {}, "fences": {},
            # Elections, by the steps' names: (Campaign, Leadership) of a
            # leader; (thread, box, Campaign) of a candidacy under way; the
            # Observation; [queue of what it yielded, (term, value_version)
            # of the last leader seen, or None].
            "leaderships": {}, "candidates": {}, "observations": {}, "observed": {},
        }
        try:
            for index, step in enumerate(scenario["steps"]):
                try:
                    self.step(step, state)
                except Failure as failure:
                    raise Failure(f"step {index} ({step['op']}): {failure}") from None
        finally:
            for hold, _ in state["leases"].values():
                try:
                    hold.release()
                except rc.RedlockdError:
                    pass
            for campaign, _ in state["leaderships"].values():
                try:
                    campaign.resign()
                except rc.RedlockdError:
                    pass
            for _, _, campaign in state["candidates"].values():
                # A candidacy still waiting is withdrawn, one elected
                # meanwhile resigns.
                try:
                    campaign.resign()
                except rc.RedlockdError:
                    pass
            for observation in state["observations"].values():
                observation.close()

    def fence_of(self, state: Dict[str, Any], name: Any) -> int:
        if isinstance(name, int):
            return name
        return int(state["fences"][name])

    def outcome(self, step: Dict[str, Any], state: Dict[str, Any], call: Callable[[], Any]) -> Any:
        """Runs `call`; checks the error the step expects, or that there is none."""
        expected = step.get("error")
        try:
            value = call()
        except rc.RedlockdError as error:
            got = kind_of(error)
            if expected is None:
                raise Failure(f"expected success, got {got}: {error}") from None
            if got != expected:
                raise Failure(f"expected {expected}, got {got}: {error}") from None
            if "field" in step:
                match = FIELD.match(error.details or "")
                field = match.group(1) if match else None
                if field != step["field"]:
                    raise Failure(f"expected field {step['field']}, got {field} ({error.details})")
            return None
        if expected is not None and not step.get("may_succeed"):
            raise Failure(f"expected {expected}, got success: {value!r}")
        return value

    def check_lock(self, step: Dict[str, Any], state: Dict[str, Any], lock: Any) -> None:
        if "fence_above" in step:
            floor = self.fence_of(state, step["fence_above"])
            if not lock.fence > floor:
                raise Failure(f"fence {lock.fence} not above {floor}")
        if "fence_equal" in step:
            other = self.fence_of(state, step["fence_equal"])
            if lock.fence != other:
                raise Failure(f"fence {lock.fence} differs from {other}")
        if "save" in step:
            state["locks"][step["save"]] = lock
            state["fences"][step["save"]] = lock.fence
        if "lease" in step:
            state["fences"][step["lease"]] = lock.fence

    def acquire_call(self, step: Dict[str, Any]) -> Callable[[], Any]:
        client = self.client(step["client"])
        resource = self.resource(step)
        wait = step["wait_ms"] / 1000 if "wait_ms" in step else None
        timeout = step["deadline_ms"] / 1000 if "deadline_ms" in step else None
        return lambda: client.acquire(resource, step["ttl_ms"] / 1000, wait, timeout=timeout)

    def hold(self, step: Dict[str, Any]) -> rc.Hold:
        client = self.client(step["client"])
        wait = step["wait_ms"] / 1000 if "wait_ms" in step else None
        return client.hold(self.resource(step), ttl=step["ttl_ms"] / 1000, wait=wait,
                           timeout=step.get("deadline_ms", STEP_LIMIT * 1000) / 1000)

    def step(self, step: Dict[str, Any], state: Dict[str, Any]) -> None:
        op = step["op"]
        if op == "acquire":
            lock = self.outcome(step, state, self.acquire_call(step))
            if lock is not None and step.get("may_succeed"):
                # Granted after all (the race went the other way): released
                # at once, so that the step leaves nothing held either way.
                if not self.client(step["client"]).release(lock).was_held:
                    raise Failure("the lock granted was no longer held when released")
            elif lock is not None:
                self.check_lock(step, state, lock)
        elif op == "acquire_async":
            call = self.acquire_call(step)
            box: Dict[str, Any] = {}

            def background() -> None:
                try:
                    box["value"] = call()
                except BaseException as error:  # handed to the await step
                    box["error"] = error

            thread = threading.Thread(target=background, daemon=True)
            thread.start()
            state["pending"][step["pending"]] = (thread, box, None)
        elif op == "await":
            thread, box, _ = state["pending"][step["pending"]]
            thread.join(step.get("within_ms", STEP_LIMIT * 1000) / 1000)
            if thread.is_alive():
                raise Failure("the pending call did not finish")

            def result() -> Any:
                if "error" in box:
                    raise box["error"]
                return box["value"]

            lock = self.outcome(step, state, result)
            if lock is not None:
                self.check_lock(step, state, lock)
        elif op == "extend":
            client = self.client(step["client"])
            old = state["locks"][step["lock"]]
            lock = self.outcome(step, state, lambda: client.extend(old, ttl=step["ttl_ms"] / 1000))
            if lock is not None:
                self.check_lock(step, state, lock)
        elif op == "release":
            client = self.client(step["client"])
            lock = state["locks"][step["lock"]]
            released = self.outcome(step, state, lambda: client.release(lock))
            if released is not None and "was_held" in step and released.was_held != step["was_held"]:
                raise Failure(f"was_held {released.was_held}, expected {step['was_held']}")
        elif op == "validate":
            client = self.client(step["client"])
            lock = state["locks"][step["lock"]]
            validation = self.outcome(step, state, lambda: client.validate(lock))
            if validation is not None and "held" in step and validation.held != step["held"]:
                raise Failure(f"held {validation.held}, expected {step['held']}")
        elif op == "wait_expired":
            client = self.client(step["client"])
            lock = state["locks"][step["lock"]]
            limit = time.monotonic() + step["within_ms"] / 1000
            while client.validate(lock).held:
                if time.monotonic() > limit:
                    raise Failure("still held after within_ms")
                time.sleep(0.05)
        elif op == "hold":
            hold = self.hold(step)
            lease = self.outcome(step, state, hold.__enter__)
            if lease is not None:
                state["leases"][step["lease"]] = (hold, lease)
                self.check_lock(step, state, lease)
        elif op == "hold_async":
            hold = self.hold(step)
            box: Dict[str, Any] = {}

            def enter() -> None:
                try:
                    box["value"] = hold.__enter__()
                except BaseException as error:  # handed to the await_hold step
                    box["error"] = error

            thread = threading.Thread(target=enter, daemon=True)
            thread.start()
            state["pending"][step["pending"]] = (thread, box, hold)
        elif op == "await_hold":
            thread, box, hold = state["pending"][step["pending"]]
            thread.join(step.get("within_ms", STEP_LIMIT * 1000) / 1000)
            if thread.is_alive():
                raise Failure("the pending session was not granted or refused in time")
            if "value" in box:
                state["leases"][step["lease"]] = (hold, box["value"])

            def granted() -> Any:
                if "error" in box:
                    raise box["error"]
                return box["value"]

            lease = self.outcome(step, state, granted)
            if lease is not None:
                self.check_lock(step, state, lease)
        elif op == "check":
            _, lease = state["leases"][step["lease"]]
            self.outcome(step, state, lease.check)
        elif op == "release_lease":
            hold, lease = state["leases"].pop(step["lease"])
            was_held = self.outcome(step, state, hold.release)
            if "was_held" in step and was_held != step["was_held"]:
                raise Failure(f"was_held {was_held}, expected {step['was_held']}")
        elif op == "await_lost":
            _, lease = state["leases"][step["lease"]]
            if not lease.lost.wait(step["within_ms"] / 1000):
                raise Failure(f"lost did not fire within {step['within_ms']} ms")
        elif op == "await_draining":
            _, lease = state["leases"][step["lease"]]
            limit = time.monotonic() + step["within_ms"] / 1000
            while not lease.draining:
                if time.monotonic() > limit:
                    raise Failure(f"not draining within {step['within_ms']} ms")
                time.sleep(0.01)
        elif op in ELECTION_OPS:
            self.election_step(step, state)
        elif op == "pause":
            time.sleep(step["ms"] / 1000)
        elif op == "fault":
            print(f"FAULT {step['name']}", flush=True)
            answer = sys.stdin.readline().strip()
            if answer != "ok":
                raise Failure(f"the harness could not inject {step['name']}: {answer or 'no answer'}")
        else:
            raise Failure(f"unknown op {op}")

    def term_of(self, state: Dict[str, Any], ref: Any) -> int:
        """A number, or the term of a leadership named by `as`."""
        return self.fence_of(state, ref)

    def elected(self, step: Dict[str, Any], state: Dict[str, Any], campaign: Any, leadership: Any) -> None:
        """Records a leadership under the step's `as`; checks `term_above`."""
        state["leaderships"][step["as"]] = (campaign, leadership)
        state["fences"][step["as"]] = leadership.term
        if "term_above" in step:
            floor = self.term_of(state, step["term_above"])
            if not leadership.term > floor:
                raise Failure(f"term {leadership.term} not above {floor}")

    def check_leader(self, step: Dict[str, Any], state: Dict[str, Any], leader: Optional[Any]) -> None:
        """`none`, or `value` and `term` (a leadership's name or a number)."""
        if step.get("none"):
            if leader is not None:
                raise Failure(f"expected no leader, got {leader}")
            return
        if leader is None:
            raise Failure("expected a leader, got none")
        if "value" in step and leader.value != step["value"]:
            raise Failure(f"leader value {leader.value!r}, expected {step['value']!r}")
        if "term" in step and leader.term != self.term_of(state, step["term"]):
            raise Failure(f"leader term {leader.term}, expected {self.term_of(state, step['term'])}")

    def campaign(self, step: Dict[str, Any], timeout: Optional[float]) -> Any:
        client = self.client(step["client"])
        return client.campaign(self.election(step), value=step.get("value", ""),
                               ttl=step["ttl_ms"] / 1000, timeout=timeout)

    def election_step(self, step: Dict[str, Any], state: Dict[str, Any]) -> None:
        op = step["op"]
        if op == "campaign":
            campaign = None

            def enter() -> Any:
                nonlocal campaign
                campaign = self.campaign(step, step.get("deadline_ms", STEP_LIMIT * 1000) / 1000)
                leadership = campaign.__enter__()
                # Resigned at the scenario's end even if the step expected an error.
                state["leaderships"][step["as"]] = (campaign, leadership)
                return leadership

            leadership = self.outcome(step, state, enter)
            if leadership is not None:
                self.elected(step, state, campaign, leadership)
        elif op == "campaign_async":
            campaign = self.campaign(step, STEP_LIMIT)
            box: Dict[str, Any] = {}

            def stand() -> None:
                try:
                    box["value"] = campaign.__enter__()
                except BaseException as error:  # handed to the await_elected step
                    box["error"] = error

            thread = threading.Thread(target=stand, daemon=True)
            thread.start()
            state["candidates"][step["pending"]] = (thread, box, campaign)
        elif op == "expect_not_elected":
            thread, box, _ = state["candidates"][step["pending"]]
            thread.join(step["for_ms"] / 1000)
            if "value" in box:
                raise Failure(f"elected while another leads: {box['value']}")
            if "error" in box:
                raise Failure(f"the candidacy failed: {kind_of(box['error'])}: {box['error']}")
        elif op == "await_elected":
            thread, box, campaign = state["candidates"][step["pending"]]
            thread.join(step.get("within_ms", STEP_LIMIT * 1000) / 1000)
            if thread.is_alive():
                raise Failure("the pending candidate was not elected in time")
            del state["candidates"][step["pending"]]
            if "value" in box:  # resigned at the scenario's end whatever the step expects
                state["leaderships"][step["as"]] = (campaign, box["value"])

            def result() -> Any:
                if "error" in box:
                    raise box["error"]
                return box["value"]

            leadership = self.outcome(step, state, result)
            if leadership is not None:
                self.elected(step, state, campaign, leadership)
        elif op == "expect_term_above":
            term = self.term_of(state, step["leadership"])
            floor = self.term_of(state, step["than"])
            if not term > floor:
                raise Failure(f"term {term} not above {floor}")
        elif op == "leader":
            client = self.client(step["client"])
            name = self.election(step)
            box = {}

            def read() -> Any:
                box["leader"] = client.leader(name)
                return True

            if self.outcome(step, state, read) is not None:
                self.check_leader(step, state, box["leader"])
        elif op == "resign":
            campaign, _ = state["leaderships"].pop(step["leadership"])
            was_leader = self.outcome(step, state, campaign.resign)
            if "was_leader" in step and was_leader != step["was_leader"]:
                raise Failure(f"was_leader {was_leader}, expected {step['was_leader']}")
        elif op == "resign_token":
            client = self.client(step["client"])
            _, leadership = state["leaderships"][step["leadership"]]
            was_leader = self.outcome(step, state, lambda: client.resign(self.election(step), leadership.token))
            if "was_leader" in step and was_leader != step["was_leader"]:
                raise Failure(f"was_leader {was_leader}, expected {step['was_leader']}")
        elif op == "proclaim":
            if step["leadership"] not in state["leaderships"]:
                raise Failure(f"no leadership {step['leadership']!r} to proclaim by")
            campaign, _ = state["leaderships"][step["leadership"]]
            self.outcome(step, state, lambda: campaign.proclaim(step["value"]))
        elif op == "await_leadership_lost":
            _, leadership = state["leaderships"][step["leadership"]]
            if not leadership.lost.wait(step["within_ms"] / 1000):
                raise Failure(f"lost did not fire within {step['within_ms']} ms")
        elif op == "observe":
            observation = self.client(step["client"]).observe(self.election(step))
            changes: "queue.Queue[Any]" = queue.Queue()

            def read_changes() -> None:
                try:
                    for leader in observation:
                        changes.put(("leader", leader))
                except BaseException as error:  # handed to observe_next
                    changes.put(("error", error))

            threading.Thread(target=read_changes, daemon=True).start()
            state["observations"][step["as"]] = observation
            state["observed"][step["as"]] = [changes, None]
        elif op == "observe_next":
            changes, last = state["observed"][step["observation"]]
            limit = time.monotonic() + step.get("within_ms", STEP_LIMIT * 1000) / 1000
            while True:
                try:
                    kind, value = changes.get(timeout=max(0.0, limit - time.monotonic()))
                except queue.Empty:
                    raise Failure("no change observed in time") from None
                if kind == "error":
                    raise Failure(f"the observation ended: {kind_of(value)}: {value}")
                if value is not None:
                    # Along one observation each leader comes after the one
                    # before: a higher term, or the same term's proclaimed
                    # value (a higher value_version).
                    now = (value.term, value.value_version)
                    if last is not None and not now > last:
                        raise Failure(f"observed (term, value_version) {now} after {last}")
                    last = now
                    state["observed"][step["observation"]][1] = last
                if value is None and step.get("skip_none") and not step.get("none"):
                    continue
                self.check_leader(step, state, value)
                break
        elif op == "close_observation":
            state["observations"].pop(step["observation"]).close()
        else:
            raise Failure(f"unknown op {op}")


#: The election steps (see the README's Steps).
ELECTION_OPS = {
    "campaign", "campaign_async", "expect_not_elected", "await_elected", "expect_term_above",
    "leader", "resign", "resign_token", "proclaim", "await_leadership_lost", "observe",
    "observe_next", "close_observation",
}


def main() -> int:
    scenarios = json.loads(Path(sys.argv[1]).read_text())["scenarios"]
    env = json.loads(Path(sys.argv[2]).read_text())
    runner = Runner(env)
    failed = 0
    try:
        for scenario in scenarios:
            try:
                runner.run(scenario)
                print(f"PASS {scenario['id']}", flush=True)
            except Exception as error:  # any failure of a scenario is reported, the next one runs
                failed += 1
                print(f"FAIL {scenario['id']} {error}", flush=True)
    finally:
        runner.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
