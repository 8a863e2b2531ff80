"""The Python client's conformance runner: runs clients/conformance/scenarios.json
through redlockd_client's public API (Client, Hold, Lease, the error classes).

Usage: runner.py SCENARIOS ENV (started by clients/conformance/harness.py,
whose docstring describes ENV and the line protocol on stdout/stdin).
"""

from __future__ import annotations

import json
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

    def run(self, scenario: Dict[str, Any]) -> None:
        state: Dict[str, Any] = {"locks": {}, "leases": {}, "pending": {}, "fences": {}}
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
        elif op == "pause":
            time.sleep(step["ms"] / 1000)
        elif op == "fault":
            print(f"FAULT {step['name']}", flush=True)
            answer = sys.stdin.readline().strip()
            if answer != "ok":
                raise Failure(f"the harness could not inject {step['name']}: {answer or 'no answer'}")
        else:
            raise Failure(f"unknown op {op}")


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
