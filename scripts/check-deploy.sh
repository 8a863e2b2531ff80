#!/usr/bin/env bash
# Checks every deployment file offline, as far as it can be without Docker or
# a cluster (CI's `deploy` step; also: `bash scripts/check-deploy.sh`):
#   - docker-compose.yml loaded by the Compose Specification's own loader
#     (tools/compose-check, Go: schema, durations, depends_on, as
#     `docker compose config` does);
#   - promtool check config on both Prometheus configurations (compose's, and
#     the Kubernetes one laid out as its ConfigMap is: beside alerts.yml);
#   - promtool check rules and promtool test rules on the alert rules, and
#     promtool's PromQL parser on every dashboard query;
#   - kubernetes-validate --strict on every manifest in deploy/kubernetes/
#     against Kubernetes 1.29 (the oldest with native sidecars) and the
#     newest schema it bundles; the pre-1.29 fallback also against 1.25; and
#     the native sidecar must be refused by 1.27 (the old-cluster note);
#   - scripts/check-deploy.py: compose's healthchecks, start conditions,
#     grace period and mounts; the restricted Pod Security Standard, grace
#     periods, probes and masters of the manifests; the dashboard's instance
#     variable and queries; the alerts' metric names.
# Installs what it needs through scripts/setup.sh (promtool, the .venv with
# kubernetes-validate; Go must be there, in /usr/local/go or on PATH); Go
# fetches compose-go through the module proxy. Prints one line per check and "N passed, M failed".
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash scripts/setup.sh >/dev/null
# shellcheck source=/dev/null
source .venv/redlockd-env
py="$repo/.venv/bin/python"
validate="$repo/.venv/bin/kubernetes-validate"
scratch="$(mktemp -d)"
trap 'rm -rf -- "$scratch"' EXIT

passed=0
failed=0
# run WHAT COMMAND...: one check; its output is shown only when it fails.
run() {
  local what="$1"
  shift
  if "$@" >"$scratch/out" 2>&1; then
    passed=$((passed + 1))
    echo "ok   $what"
  else
    failed=$((failed + 1))
    echo "FAIL $what"
    sed 's/^/       /' "$scratch/out"
    return 1
  fi
}
# check WHAT COMMAND...: run, going on after a failure (counted).
check() {
  run "$@" || true
}
# refused WHAT COMMAND...: a check that COMMAND fails.
refused() {
  local what="$1"
  shift
  if "$@" >"$scratch/out" 2>&1; then
    failed=$((failed + 1))
    echo "FAIL $what (it was accepted)"
  else
    passed=$((passed + 1))
    echo "ok   $what"
  fi
}

# --- Compose -------------------------------------------------------------------------
# The Compose Specification's own loader (tools/compose-check, Go), as
# `docker compose config` runs it: schema, durations, depends_on, ports.
compose_check="$repo/target/tools/compose-check"
if run "go build tools/compose-check (the Compose Specification's loader, compose-go)" \
  go build -C tools/compose-check -buildvcs=false -o "$compose_check" .; then
  check "compose-check docker-compose.yml (validated and loaded as docker compose config does)" \
    "$compose_check" docker-compose.yml
fi

# --- Prometheus ------------------------------------------------------------------
check "promtool check config deploy/compose/prometheus.yml (with its rule file)" \
  promtool check config deploy/compose/prometheus.yml

# The Kubernetes configuration as its ConfigMap lays it out (see its header).
k8s="$scratch/k8s-prometheus"
mkdir -p "$k8s"
cp deploy/kubernetes/prometheus.yml "$k8s/prometheus.yml"
cp deploy/prometheus/alerts.yml "$k8s/alerts.yml"
if promtool check config "$k8s/prometheus.yml" >"$scratch/out" 2>&1; then
  check "promtool check config deploy/kubernetes/prometheus.yml (beside alerts.yml)" true
elif grep -q "field kubernetes_sd_configs not found" "$scratch/out"; then
  # Debian's promtool is built without Kubernetes service discovery: check
  # the SD block's fields here, and the rest with a static target instead.
  check "deploy/kubernetes/prometheus.yml: kubernetes_sd_configs blocks are well-formed (this promtool lacks Kubernetes SD)" \
    "$py" - "$k8s/prometheus.yml" <<'PY'
import sys, yaml
allowed = {"api_server", "role", "kubeconfig_file", "namespaces", "selectors", "attach_metadata",
           "basic_auth", "authorization", "oauth2", "proxy_url", "no_proxy", "proxy_from_environment",
           "proxy_connect_header", "follow_redirects", "enable_http2", "tls_config", "bearer_token",
           "bearer_token_file"}
roles = {"node", "pod", "service", "endpoints", "endpointslice", "ingress"}
config = yaml.safe_load(open(sys.argv[1]))
blocks = [sd for job in config["scrape_configs"] for sd in job.get("kubernetes_sd_configs", [])]
assert blocks, "no kubernetes_sd_configs"
for sd in blocks:
    assert sd.get("role") in roles, f"role {sd.get('role')!r} is not one of {sorted(roles)}"
    assert not set(sd) - allowed, f"unknown fields {sorted(set(sd) - allowed)}"
PY
  "$py" - "$k8s/prometheus.yml" <<'PY'
import sys, yaml
path = sys.argv[1]
config = yaml.safe_load(open(path))
for job in config["scrape_configs"]:
    if job.pop("kubernetes_sd_configs", None) is not None:
        job["static_configs"] = [{"targets": ["pod.example:9464"]}]
yaml.safe_dump(config, open(path, "w"))
PY
  check "promtool check config deploy/kubernetes/prometheus.yml (beside alerts.yml; Kubernetes SD swapped for a static target)" \
    promtool check config "$k8s/prometheus.yml"
else
  failed=$((failed + 1))
  echo "FAIL promtool check config deploy/kubernetes/prometheus.yml (beside alerts.yml)"
  sed 's/^/       /' "$scratch/out"
fi

check "promtool check rules deploy/prometheus/alerts.yml" promtool check rules deploy/prometheus/alerts.yml
check "promtool test rules deploy/prometheus/alerts_test.yml (each alert firing and not)" \
  promtool test rules deploy/prometheus/alerts_test.yml

# Every dashboard query must parse as PromQL: each becomes a recording rule
# ($instance as ".*", Grafana's $__rate_interval as 1m) for promtool.
"$py" - deploy/grafana/redlockd-dashboard.json "$scratch/dashboard-rules.yml" <<'PY'
import json, sys, yaml
dashboard = json.load(open(sys.argv[1]))
rules = [
    {"record": f"dashboard:panel{panel['id']}:{target['refId']}",
     "expr": target["expr"].replace("$instance", ".*").replace("$__rate_interval", "1m")}
    for panel in dashboard["panels"] for target in panel.get("targets", [])
]
yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(sys.argv[2], "w"))
PY
check "promtool parses every dashboard query (as recording rules)" \
  promtool check rules "$scratch/dashboard-rules.yml"

# --- Kubernetes schemas ------------------------------------------------------------
newest="$("$py" -c 'import kubernetes_validate.utils as u; print(u.latest_version())')"
manifests=(deploy/kubernetes/*.yaml)
for version in 1.29.0 "$newest"; do
  check "kubernetes-validate --strict -k $version: ${manifests[*]}" \
    "$validate" --strict --quiet -k "$version" "${manifests[@]}"
done
check "kubernetes-validate --strict -k 1.25.0: deploy/kubernetes/sidecar-pre-1.29.yaml" \
  "$validate" --strict --quiet -k 1.25.0 deploy/kubernetes/sidecar-pre-1.29.yaml
refused "kubernetes-validate --strict -k 1.27.0 refuses the native sidecar (restartPolicy on an init container)" \
  "$validate" --strict --quiet -k 1.27.0 deploy/kubernetes/sidecar.yaml

# --- the files' own rules ----------------------------------------------------------
"$py" scripts/check-deploy.py "$repo" | tee "$scratch/rules" | grep -v '^deploy rules:' || true
rules_passed="$(sed -n 's/^deploy rules: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$scratch/rules")"
rules_failed="$(sed -n 's/^deploy rules: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$scratch/rules")"
if [ -z "$rules_passed" ]; then
  echo "FAIL scripts/check-deploy.py did not finish"
  rules_passed=0
  rules_failed=1
fi
passed=$((passed + rules_passed))
failed=$((failed + rules_failed))

echo "deploy: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
