"""The deployment files' own rules, checked offline (no Docker, no cluster).

Run by scripts/check-deploy.sh, which also runs promtool and
kubernetes-validate; this part checks what those tools cannot:
  compose     healthchecks, start conditions on health, stop_grace_period
              above redlockd's shutdown_grace, every mounted file exists,
              Prometheus/Grafana paths inside the containers resolve to
              the repository's files;
  kubernetes  the "restricted" Pod Security Standard on every pod, grace
              periods against each embedded shutdown_grace, probes, the
              native sidecar, the masters (independent, persistent,
              appendfsync always, noeviction, spread over nodes);
  dashboard   the instance variable, every query filtered by it and
              aggregated, only metrics the daemon exports;
  alerts      the five alerts exist and use only exported metrics.
Prints one line per check and exits 1 if any failed.

Usage: python3 scripts/check-deploy.py REPO
"""

import json
import pathlib
import posixpath
import re
import sys
import tomllib

import yaml

REPO = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
RESULTS = {"passed": 0, "failed": 0}

# Margin between a grace period and the daemon's shutdown_grace: the drain
# itself (release every session's lock) and process exit.
COMPOSE_MARGIN_S = 10
KUBERNETES_MARGIN_S = 15
LOCK_SERVICE = "redlock.v1.LockService"
MASTERS = 5
ALERTS = {
    "RedlockdDown",
    "RedlockQuorumLost",
    "RedlockLocksLost",
    "RedlockMasterQuarantinedLong",
    "RedlockValidityEatenBySlowGrants",
}


def check(what, problems):
    """Records one check: `problems` is a list of strings (empty: passed)."""
    if problems:
        RESULTS["failed"] += 1
        print(f"FAIL {what}")
        for problem in problems:
            print(f"       - {problem}")
    else:
        RESULTS["passed"] += 1
        print(f"ok   {what}")


def seconds(text):
    """A duration as compose, Kubernetes or redlockd write it ("1m30s",
    "20s", "500ms", "7days") in seconds."""
    units = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600,
             "d": 86400, "day": 86400, "days": 86400}
    text = str(text).strip()
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]+)", text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


def load_yaml_docs(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# --- metrics the daemon exports ----------------------------------------------


def exported_metrics():
    """Names declared in crates/redlockd/src/metrics/names.rs, with the series a
    histogram adds, and the standard process metrics it exports."""
    source = (REPO / "crates/redlockd/src/metrics/names.rs").read_text(encoding="utf-8")
    names = set(re.findall(r'"(redlock_[a-z0-9_]+)"', source))
    histograms = set(re.findall(r"\(\s*([A-Z_]+),\s*Kind::Histogram", source))
    consts = dict(re.findall(r'const ([A-Z_]+): &str = "(redlock_[a-z0-9_]+)"', source))
    for const in histograms:
        base = consts[const]
        names |= {base + "_bucket", base + "_sum", base + "_count"}
    names |= {
        "process_cpu_seconds_total", "process_resident_memory_bytes",
        "process_virtual_memory_bytes", "process_virtual_memory_max_bytes",
        "process_open_fds", "process_max_fds", "process_threads",
        "process_start_time_seconds",
    }
    return names


METRIC_WORD = re.compile(r"\b((?:redlock|process)_[a-z0-9_]+)\b")


def unknown_metrics(expr, exported):
    return [m for m in METRIC_WORD.findall(expr) if m not in exported]


# --- compose -------------------------------------------------------------------


def compose_checks():
    compose = load_yaml_docs(REPO / "docker-compose.yml")[0]
    services = compose["services"]
    valkeys = [f"valkey{i}" for i in range(1, MASTERS + 1)]

    problems = []
    for name in valkeys:
        test = (services.get(name) or {}).get("healthcheck", {}).get("test")
        if not test or "valkey-cli ping" not in " ".join(test):
            problems.append(f"{name}: no healthcheck running `valkey-cli ping`")
    check("compose: the five masters have a `valkey-cli ping` healthcheck", problems)

    redlockd = services["redlockd"]
    test = " ".join(redlockd.get("healthcheck", {}).get("test") or [])
    check("compose: redlockd's healthcheck is `redlockctl health`",
          [] if "redlockctl" in test and "health" in test else [f"healthcheck test is {test!r}"])

    problems = []
    deps = redlockd.get("depends_on")
    if not isinstance(deps, dict):
        problems.append("redlockd.depends_on is not a map with conditions")
        deps = {}
    for name in valkeys:
        if (deps.get(name) or {}).get("condition") != "service_healthy":
            problems.append(f"redlockd does not wait for {name} to be healthy")
    for service, spec in services.items():
        for dep, cond in (spec.get("depends_on") or {}).items() if isinstance(spec.get("depends_on"), dict) else []:
            if cond.get("condition") == "service_healthy" and "healthcheck" not in services.get(dep, {}):
                problems.append(f"{service} waits for {dep} to be healthy, but {dep} has no healthcheck")
    grafana = services.get("grafana", {})
    if ((grafana.get("depends_on") or {}).get("prometheus") or {}).get("condition") != "service_healthy":
        problems.append("grafana does not wait for prometheus to be healthy")
    check("compose: start order waits for health (depends_on: service_healthy)", problems)

    env = redlockd.get("environment") or {}
    config = tomllib.loads((REPO / "config/redlockd.toml").read_text(encoding="utf-8"))
    grace_text = env.get("REDLOCKD__SERVER__SHUTDOWN_GRACE") or config.get("server", {}).get("shutdown_grace", "10s")
    stop_text = redlockd.get("stop_grace_period", "10s")
    grace, stop = seconds(grace_text), seconds(stop_text)
    check(f"compose: stop_grace_period {stop_text} >= shutdown_grace {grace_text} + {COMPOSE_MARGIN_S}s",
          [] if stop >= grace + COMPOSE_MARGIN_S else [f"{stop}s < {grace + COMPOSE_MARGIN_S}s"])

    # Every bind mount's source exists; remember where deploy/ lands.
    problems = []
    mounts = {}
    for service, spec in services.items():
        for volume in spec.get("volumes") or []:
            source, target = volume.split(":")[:2]
            if source.startswith((".", "/")):
                if not (REPO / source).exists():
                    problems.append(f"{service}: mounts {source}, which does not exist")
                mounts.setdefault(service, []).append((target, (REPO / source).resolve()))
    check("compose: every file and directory it mounts exists", problems)

    def host_path(service, container_path):
        """The repository path a container path of `service` maps to."""
        for target, source in sorted(mounts.get(service, []), key=lambda m: -len(m[0])):
            if container_path == target or container_path.startswith(target.rstrip("/") + "/"):
                return source / container_path[len(target):].lstrip("/")
        return None

    problems = []
    prometheus = services["prometheus"]
    flags = [a for a in prometheus.get("command") or [] if a.startswith("--config.file=")]
    config_path = host_path("prometheus", flags[0].split("=", 1)[1]) if flags else None
    if config_path != (REPO / "deploy/compose/prometheus.yml").resolve():
        problems.append(f"--config.file does not resolve to deploy/compose/prometheus.yml (got {config_path})")
    else:
        prom = load_yaml_docs(config_path)[0]
        inside = posixpath.dirname(flags[0].split("=", 1)[1])
        for rule in prom.get("rule_files") or []:
            seen = host_path("prometheus", posixpath.normpath(posixpath.join(inside, rule)))
            if seen is None or not seen.is_file():
                problems.append(f"rule file {rule} is not mounted where the container looks for it")
        metrics_port = env.get("REDLOCKD__METRICS__LISTEN", "").rsplit(":", 1)[-1]
        jobs = {j["job_name"]: j for j in prom.get("scrape_configs") or []}
        targets = [t for sc in jobs.get("redlockd", {}).get("static_configs", []) for t in sc.get("targets", [])]
        if f"redlockd:{metrics_port}" not in targets:
            problems.append(f"job `redlockd` does not scrape redlockd:{metrics_port} (targets {targets})")
    if "healthcheck" not in prometheus:
        problems.append("prometheus has no healthcheck")
    check("compose: Prometheus loads deploy/compose/prometheus.yml and the alert rules, scrapes redlockd", problems)

    problems = []
    genv = grafana.get("environment") or {}
    provisioning = genv.get("GF_PATHS_PROVISIONING", "/etc/grafana/provisioning")
    datasources = host_path("grafana", provisioning + "/datasources")
    dashboards_dir = host_path("grafana", provisioning + "/dashboards")
    if datasources is None or not datasources.is_dir() or dashboards_dir is None or not dashboards_dir.is_dir():
        problems.append(f"{provisioning}/datasources and /dashboards are not directories of the repository")
    else:
        sources = [d for f in sorted(datasources.glob("*.yml"))
                   for d in load_yaml_docs(f)[0].get("datasources", [])]
        if not any(d.get("type") == "prometheus" and d.get("url") == "http://prometheus:9090" for d in sources):
            problems.append("no datasource of type prometheus at http://prometheus:9090")
        providers = [p for f in sorted(dashboards_dir.glob("*.yml"))
                     for p in load_yaml_docs(f)[0].get("providers", [])]
        dashboards = []
        for provider in providers:
            folder = host_path("grafana", provider.get("options", {}).get("path", ""))
            if folder is None or not folder.is_dir():
                problems.append(f"dashboard provider {provider.get('name')}: path does not resolve to a directory")
            else:
                dashboards += [p.name for p in folder.glob("*.json")]
        if "redlockd-dashboard.json" not in dashboards:
            problems.append("no dashboard provider loads deploy/grafana/redlockd-dashboard.json")
        home = genv.get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
        if home and not (host_path("grafana", home) or REPO / "missing").is_file():
            problems.append(f"GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH {home} is not a file of the repository")
    check("compose: Grafana is provisioned with the Prometheus datasource and the dashboard", problems)


# --- kubernetes ------------------------------------------------------------------


def pod_templates(docs):
    for doc in docs:
        if doc.get("kind") in ("Deployment", "StatefulSet", "DaemonSet"):
            yield doc, doc["spec"]["template"]["spec"]


def restricted_problems(name, pod):
    """The "restricted" Pod Security Standard (v1.29), field by field."""
    problems = []
    psc = pod.get("securityContext") or {}
    if psc.get("runAsUser") == 0:
        problems.append(f"{name}: pod runAsUser 0")
    if "seccompProfile" in psc and psc["seccompProfile"].get("type") not in ("RuntimeDefault", "Localhost"):
        problems.append(f"{name}: pod seccompProfile is not RuntimeDefault")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            problems.append(f"{name}: {key}")
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            problems.append(f"{name}: hostPath volume {volume['name']}")
    for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
        sc = c.get("securityContext") or {}
        where = f"{name}/{c['name']}"
        if not (sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True):
            problems.append(f"{where}: runAsNonRoot is not true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            problems.append(f"{where}: runAsUser 0")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation is not false")
        if sc.get("privileged"):
            problems.append(f"{where}: privileged")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            problems.append(f"{where}: capabilities.drop lacks ALL")
        if set((sc.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}:
            problems.append(f"{where}: adds capabilities")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{where}: seccompProfile is not RuntimeDefault")
    return problems


def redlockd_config(docs, pod):
    """The redlockd TOML a pod mounts from a ConfigMap of the same file."""
    maps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    for volume in pod.get("volumes") or []:
        name = (volume.get("configMap") or {}).get("name")
        if name in maps and "redlockd.toml" in maps[name].get("data", {}):
            return tomllib.loads(maps[name]["data"]["redlockd.toml"])
    return None


def prestop_sleep(container):
    command = (((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command") or []
    return float(command[1]) if len(command) == 2 and command[0] == "sleep" else 0.0


def redlockd_checks(path, docs, masters_service):
    rel = path.relative_to(REPO)
    for doc, pod in pod_templates(docs):
        name = f"{rel}: {doc['kind']} {doc['metadata']['name']}"
        containers = [(c, True) for c in pod.get("initContainers") or []] + [(c, False) for c in pod.get("containers") or []]
        daemons = [(c, init) for c, init in containers if c["name"] == "redlockd"]
        if not daemons:
            continue
        daemon, is_init = daemons[0]
        problems = []
        config = redlockd_config(docs, pod)
        if config is None:
            check(f"{name}: mounts a redlockd.toml from a ConfigMap in the same file", ["none found"])
            continue
        grace_text = config.get("server", {}).get("shutdown_grace", "10s")
        grace = seconds(grace_text)
        period = pod.get("terminationGracePeriodSeconds", 30)
        sleep = prestop_sleep(daemon)
        if period < sleep + grace + KUBERNETES_MARGIN_S:
            problems.append(f"terminationGracePeriodSeconds {period} < preStop {sleep:g}s + shutdown_grace {grace:g}s + {KUBERNETES_MARGIN_S}s")
        check(f"{name}: terminationGracePeriodSeconds {period} covers preStop {sleep:g}s + shutdown_grace {grace_text} + {KUBERNETES_MARGIN_S}s",
              problems)

        problems = []
        port = int(config.get("server", {}).get("listen", "127.0.0.1:50051").rsplit(":", 1)[1])
        ready = (daemon.get("readinessProbe") or {}).get("grpc") or {}
        if ready.get("service") != LOCK_SERVICE or ready.get("port") != port:
            problems.append(f"readinessProbe is not grpc {LOCK_SERVICE} on port {port}")
        if not daemon.get("startupProbe"):
            problems.append("no startupProbe")
        if not daemon.get("livenessProbe"):
            problems.append("no livenessProbe")
        if daemon.get("imagePullPolicy") != "IfNotPresent":
            problems.append("imagePullPolicy is not IfNotPresent (a locally loaded redlockd:latest would be pulled)")
        metrics_port = config.get("metrics", {}).get("listen", "127.0.0.1:9464").rsplit(":", 1)[1]
        annotation = doc["spec"]["template"]["metadata"].get("annotations", {}).get("redlockd/metrics-port")
        if annotation != metrics_port:
            problems.append(f"annotation redlockd/metrics-port is {annotation!r}, metrics listen on {metrics_port}")
        labels = doc["spec"]["template"]["metadata"].get("labels", {})
        if labels.get("redlockd/masters-client") != "true":
            problems.append("pod lacks the label the masters' NetworkPolicy admits (redlockd/masters-client)")
        if masters_service:
            svc, svc_port, sts = masters_service
            wanted = [f"redis://{sts}-{i}.{svc}:{svc_port}" for i in range(MASTERS)]
            if config.get("redlock", {}).get("nodes") != wanted:
                problems.append(f"redlock.nodes are not the masters of masters.yaml ({wanted})")
        check(f"{name}: probes, metrics annotation, masters of masters.yaml", problems)

        if path.name == "sidecar.yaml":
            problems = []
            if not is_init or daemon.get("restartPolicy") != "Always":
                problems.append("redlockd is not an initContainers entry with restartPolicy: Always")
            check(f"{name}: redlockd is a native sidecar (init container, restartPolicy Always)", problems)


def masters_checks(path, docs):
    """The five masters; returns (service, port, statefulset) for the
    daemons' node lists."""
    rel = path.relative_to(REPO)
    problems = []
    sts = [d for d in docs if d.get("kind") == "StatefulSet"]
    if len(sts) != 1:
        check(f"{rel}: one StatefulSet of masters", [f"{len(sts)} StatefulSets"])
        return None
    sts = sts[0]
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    if spec.get("replicas") != MASTERS:
        problems.append(f"replicas {spec.get('replicas')}, not {MASTERS}")
    services = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Service"}
    service = services.get(spec.get("serviceName"))
    if service is None or service["spec"].get("clusterIP") != "None":
        problems.append("serviceName is not a headless Service of this file")
    if not spec.get("volumeClaimTemplates"):
        problems.append("no volumeClaimTemplates: not persistent")
    data_claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates") or []}
    container = pod["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts") or []}
    maps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    conf = ""
    for volume in pod.get("volumes") or []:
        name = (volume.get("configMap") or {}).get("name")
        if name in maps:
            conf += "\n".join(maps[name]["data"].values())
    settings = {}
    for line in conf.splitlines():
        words = line.split()
        if words and not words[0].startswith("#"):
            settings[words[0].lower()] = " ".join(words[1:])
    args = " ".join(container.get("command", []) + container.get("args", []))
    for key, value in (("appendonly", "yes"), ("appendfsync", "always"), ("maxmemory-policy", "noeviction")):
        if settings.get(key) != value and f"--{key} {value}" not in args:
            problems.append(f"{key} is not {value}")
    if "replicaof" in settings or "slaveof" in settings or "--replicaof" in args:
        problems.append("a master replicates another: the masters must be independent")
    if settings.get("dir") not in mounts.values() or not any(n in data_claims for n in mounts):
        problems.append("the data dir is not on the claimed volume")
    spread = [t for t in pod.get("topologySpreadConstraints") or []
              if t.get("topologyKey") == "kubernetes.io/hostname" and t.get("whenUnsatisfiable") == "DoNotSchedule"]
    anti = ((pod.get("affinity") or {}).get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not spread and not anti:
        problems.append("not spread over nodes (no hostname topology spread or required anti-affinity)")
    check(f"{rel}: {MASTERS} independent persistent masters (appendfsync always, noeviction), spread over nodes", problems)
    port = (service or {}).get("spec", {}).get("ports", [{}])[0].get("port")
    return (spec.get("serviceName"), port, sts["metadata"]["name"])


def kubernetes_checks():
    files = sorted((REPO / "deploy/kubernetes").glob("*.yaml"))
    manifests = {p: load_yaml_docs(p) for p in files}
    masters = next((masters_checks(p, d) for p, d in manifests.items() if p.name == "masters.yaml"), None)
    if masters is None:
        check("deploy/kubernetes/masters.yaml exists", ["missing"])
    for path, docs in manifests.items():
        for doc, pod in pod_templates(docs):
            check(f"{path.relative_to(REPO)}: {doc['kind']} {doc['metadata']['name']} passes the restricted Pod Security Standard",
                  restricted_problems(doc["metadata"]["name"], pod))
        redlockd_checks(path, docs, masters)


# --- dashboard and alerts --------------------------------------------------------


def dashboard_checks(exported):
    path = REPO / "deploy/grafana/redlockd-dashboard.json"
    dashboard = json.loads(path.read_text(encoding="utf-8"))
    variables = {v["name"]: v for v in dashboard.get("templating", {}).get("list", [])}
    instance = variables.get("instance", {})
    problems = []
    if instance.get("type") != "query" or "instance" not in json.dumps(instance.get("query")):
        problems.append("no `instance` query variable")
    elif not (instance.get("multi") and instance.get("includeAll")):
        problems.append("the `instance` variable does not allow several instances / All")
    check("dashboard: has an `instance` template variable (multi, All)", problems)

    problems = []
    aggregations = ("sum", "max", "min", "avg", "count", "histogram_quantile")
    count = 0
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            expr = target["expr"]
            count += 1
            where = f"panel {panel.get('title')!r}: {expr}"
            selectors = re.findall(r"\b((?:redlock|process)_[a-z0-9_]+|up)\b(\{[^}]*\})?", expr)
            if not selectors:
                problems.append(f"{where}: queries no metric")
            for metric, labels in selectors:
                if 'instance=~"$instance"' not in labels:
                    problems.append(f"{where}: {metric} is not filtered by instance=~\"$instance\"")
            if not expr.startswith(tuple(a + "(" for a in aggregations) + tuple(a + " by" for a in aggregations)):
                problems.append(f"{where}: does not aggregate across instances")
            problems += [f"{where}: {m} is not exported" for m in unknown_metrics(expr, exported)]
    check(f"dashboard: all {count} queries filter by $instance, aggregate, use exported metrics", problems)


def alert_checks(exported):
    rules = load_yaml_docs(REPO / "deploy/prometheus/alerts.yml")[0]
    found, problems = set(), []
    for group in rules["groups"]:
        for rule in group["rules"]:
            found.add(rule.get("alert"))
            problems += [f"{rule.get('alert')}: {m} is not exported" for m in unknown_metrics(rule["expr"], exported)]
    problems += [f"missing alert {a}" for a in sorted(ALERTS - found)]
    check(f"alerts: {', '.join(sorted(ALERTS))} exist and use only exported metrics", problems)


def main():
    exported = exported_metrics()
    for part in (compose_checks, kubernetes_checks, lambda: dashboard_checks(exported), lambda: alert_checks(exported)):
        try:
            part()
        except Exception as error:  # a file too broken to inspect is a failure, not a crash
            check(f"{getattr(part, '__name__', 'check')}: files could be inspected", [f"{type(error).__name__}: {error}"])
    print(f"deploy rules: {RESULTS['passed']} passed, {RESULTS['failed']} failed")
    sys.exit(1 if RESULTS["failed"] else 0)


if __name__ == "__main__":
    main()
