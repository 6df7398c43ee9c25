"""Checks of the deployment files that no tool here does (run by scripts/validate-deploy).

  prometheus-rule [--write]   the PrometheusRule is deploy/prometheus/alerts.yml, unchanged
  flags PASTEBIN RENDERED...  every `pastebin <sub> --flag` and PASTEBIN_* setting in the
                              rendered manifests and the Compose file exists in the binary
  monitor RENDERED            the ServiceMonitor's port exists on every Service it selects
  seaweedfs WEED              the Compose file's SeaweedFS is the version the tests pin (WEED
                              is that binary) and every `weed <sub> -flag` it passes exists
  etcd ETCD RENDERED...       Compose and the rendered manifests run three etcd members that
                              form one cluster (each --initial-cluster names all three as
                              they advertise themselves), over mutual TLS, on data volumes of
                              their own, with flags ETCD (the etcd the tests run) has; every
                              `--topology etcd://...` names exactly their client addresses
  systemd PASTEBIN            `systemd-analyze verify` finds nothing to say about the unit
                              (run against PASTEBIN), and its exposure stays at most 2.0
  caddy                       `caddy validate` accepts the Caddyfile
  nginx                       `nginx -t` accepts the nginx site (with a throwaway certificate)
"""

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ALERTS = ROOT / "deploy/prometheus/alerts.yml"
RULE = ROOT / "deploy/kubernetes/base/prometheus-rule.yaml"
COMPOSE = ROOT / "deploy/compose/compose.yaml"
SETTINGS = ROOT / "deploy/kubernetes/base/settings.env"
UNIT = ROOT / "deploy/systemd/pastebin.service"
CADDYFILE = ROOT / "deploy/proxy/Caddyfile"
NGINX_SITE = ROOT / "deploy/proxy/nginx.conf"
# systemd-analyze security's exposure scale: 0 (locked down) to 10; 2.0 is "OK".
MOST_EXPOSURE = "20"
RULE_HEADER = """\
# GENERATED from deploy/prometheus/alerts.yml by `scripts/validate-deploy --write`.
# Do not edit: change the alert rules there. CI fails when the two differ.
"""


def rendered_rule():
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "pastebin"},
        "spec": yaml.safe_load(ALERTS.read_text()),
    }
    return RULE_HEADER + yaml.safe_dump(rule, sort_keys=False, width=1000, allow_unicode=True)


def prometheus_rule(write):
    want = rendered_rule()
    if write:
        RULE.write_text(want)
        print(f"wrote {RULE.relative_to(ROOT)}")
        return 0
    if RULE.read_text() != want:
        print(f"{RULE.relative_to(ROOT)} is not {ALERTS.relative_to(ROOT)}: run scripts/validate-deploy --write")
        return 1
    print("PrometheusRule matches deploy/prometheus/alerts.yml")
    return 0


def documents(paths):
    for path in paths:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if doc:
                yield path, doc


def manifest_commands(paths):
    """(where, argv, env) of every container that runs the pastebin image; env maps each
    variable's name to its value (None when it comes from a Secret)."""
    config_maps = {}
    docs = list(documents(paths))
    for _, doc in docs:
        if doc.get("kind") == "ConfigMap":
            config_maps[doc["metadata"]["name"]] = doc.get("data", {})
    for path, doc in docs:
        pod = doc.get("spec", {}).get("template", {}).get("spec")
        if not pod:
            continue
        for container in pod.get("containers", []):
            if "pastebin" not in container.get("image", ""):
                continue
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            for source in container.get("envFrom", []):
                env |= config_maps.get(source.get("configMapRef", {}).get("name"), {})
            where = f"{path}: {doc['kind']}/{doc['metadata']['name']}"
            yield where, container.get("command", []) + container.get("args", []), env


def compose_commands():
    compose = yaml.safe_load(COMPOSE.read_text())
    for name, service in compose["services"].items():
        if not service.get("image", "").startswith("pastebin"):
            continue
        env = service.get("environment", {})
        env = env if isinstance(env, dict) else dict(e.split("=", 1) for e in env)
        yield f"{COMPOSE.relative_to(ROOT)}: {name}", service.get("command", []), env


def help_of(binary, subcommand, cache={}):
    if subcommand not in cache:
        run = subprocess.run([binary, subcommand, "--help"], capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"`pastebin {subcommand} --help` failed: {run.stderr.strip()}")
        cache[subcommand] = run.stdout
    return cache[subcommand]


def flags(binary, paths):
    commands = list(manifest_commands(paths)) + list(compose_commands())
    settings = [line.split("=", 1)[0] for line in SETTINGS.read_text().splitlines() if "=" in line]
    known_env = set()
    failures = []
    for where, argv, env in commands:
        if not argv:
            failures.append(f"{where}: no pastebin subcommand")
            continue
        subcommand, args = argv[0], argv[1:]
        text = help_of(binary, subcommand)
        known_env |= set(re.findall(r"\[env: (PASTEBIN_[A-Z0-9_]+)[=\]]", text))
        offered = set(re.findall(r"(--[a-z0-9-]+)", text))
        unknown = [a.split("=", 1)[0] for a in args if a.startswith("--") and a.split("=", 1)[0] not in offered]
        failures += [f"{where}: `pastebin {subcommand}` has no flag {flag}" for flag in unknown]
        if not unknown:
            print(f"ok  pastebin {' '.join(argv)}  ({where})")
    # Settings given by environment: each must be read by some part (a typo is not a setting).
    for where, _, env in commands:
        for name in env:
            if name.startswith("PASTEBIN_") and name not in known_env:
                failures.append(f"{where}: no part reads the setting {name}")
    for name in settings:
        if name.startswith("PASTEBIN_") and name not in known_env:
            failures.append(f"{SETTINGS.relative_to(ROOT)}: no part reads the setting {name}")
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


def seaweedfs(weed):
    """The SeaweedFS services of the Compose file against the `weed` the tests run."""
    version = subprocess.run([weed, "version"], capture_output=True, text=True, check=True).stdout.split()[2]
    compose = yaml.safe_load(COMPOSE.read_text())
    failures = []
    for name, service in compose["services"].items():
        image = service.get("image", "")
        if not image.startswith("chrislusf/seaweedfs:"):
            continue
        where = f"{COMPOSE.relative_to(ROOT)}: {name}"
        if image.split(":", 1)[1] != version:
            failures.append(f"{where}: image {image}, but the tests run SeaweedFS {version}")
        argv = service.get("command", [])
        if service.get("entrypoint") or not argv:
            # A shell one-shot (the bucket): it passes no flag of weed's own.
            continue
        run = subprocess.run([weed, argv[0], "-h"], capture_output=True, text=True)
        offered = set(re.findall(r"^\s+(-[A-Za-z0-9.]+)", run.stdout + run.stderr, re.MULTILINE))
        unknown = [a.split("=", 1)[0] for a in argv[1:] if a.split("=", 1)[0] not in offered]
        failures += [f"{where}: `weed {argv[0]}` has no flag {flag}" for flag in unknown]
        if not unknown:
            print(f"ok  weed {' '.join(argv)}  ({where})")
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


def etcd_flags_of(etcd):
    run = subprocess.run([etcd, "--help"], capture_output=True, text=True)
    return set(re.findall(r"^\s+(--[a-z0-9-]+)", run.stdout + run.stderr, re.MULTILINE))


def parse_flags(argv):
    """`--flag=value` and bare `--flag` as a dict (a bare flag is True)."""
    flags = {}
    for arg in argv:
        name, _, value = arg.partition("=")
        flags[name] = value if value else True
    return flags


TLS_FLAGS = [
    "--cert-file", "--key-file", "--trusted-ca-file", "--client-cert-auth",
    "--peer-cert-file", "--peer-key-file", "--peer-trusted-ca-file", "--peer-client-cert-auth",
]


def etcd_members(where, members, offered):
    """Checks what every three-member etcd needs; `members` maps a member's name, as the
    others must call it, to (its host name, its argv without the program). Returns the
    failures and the members' client addresses (host:port)."""
    failures = []
    if len(members) != 3:
        failures.append(f"{where}: {len(members)} etcd members, not three")
    clusters = set()
    clients = set()
    for name, (host, argv) in members.items():
        flags = parse_flags(argv)
        unknown = [flag for flag in flags if flag not in offered]
        failures += [f"{where}: {name}: etcd has no flag {flag}" for flag in unknown]
        if flags.get("--name") != name:
            failures.append(f"{where}: {name}: --name is {flags.get('--name')}")
        missing = [flag for flag in TLS_FLAGS if flag not in flags]
        failures += [f"{where}: {name}: no {flag} (clients and peers speak mutual TLS)" for flag in missing]
        peer = flags.get("--initial-advertise-peer-urls", "")
        client = flags.get("--advertise-client-urls", "")
        for url, listen in [(peer, "--listen-peer-urls"), (client, "--listen-client-urls")]:
            if not url.startswith(f"https://{host}:"):
                failures.append(f"{where}: {name}: advertises {url!r}, not https://{host}:PORT")
            elif not flags.get(listen, "").endswith(":" + url.rsplit(":", 1)[1]):
                failures.append(f"{where}: {name}: advertises {url} but {listen} is {flags.get(listen)}")
        clients.add(client.removeprefix("https://"))
        clusters.add(flags.get("--initial-cluster", ""))
        listed = dict(entry.split("=", 1) for entry in flags.get("--initial-cluster", "").split(",") if "=" in entry)
        if listed.get(name) != peer:
            failures.append(f"{where}: {name}: --initial-cluster lists it as {listed.get(name)}, it advertises {peer}")
        if set(listed) != set(members):
            failures.append(f"{where}: {name}: --initial-cluster names {sorted(listed)}, the members are {sorted(members)}")
    if len(clusters) > 1:
        failures.append(f"{where}: the members' --initial-cluster differ: {sorted(clusters)}")
    return failures, clients


def topology_failures(where, argv, env, clients):
    """Every part names the etcd members (two shards of a kind: etcd decides who owns
    which slots), as `--topology` or PASTEBIN_TOPOLOGY, exactly their client addresses;
    every shard says the address it is dialled at (`--advertise`)."""
    flags = parse_flags(argv)
    value = flags.get("--topology") or env.get("PASTEBIN_TOPOLOGY")
    if not value:
        return [f"{where}: names no etcd (--topology or PASTEBIN_TOPOLOGY): with two shards of a kind, "
                "etcd decides which owns which slots"]
    failures = []
    named = set(str(value).removeprefix("etcd://").split(","))
    if not str(value).startswith("etcd://") or named != clients:
        failures.append(f"{where}: --topology={value}, but the etcd members are at {sorted(clients)}")
    if argv and argv[0] in ("key-service", "paste-service") and "--advertise" not in flags:
        failures.append(f"{where}: a shard under etcd needs --advertise, the address the others dial it at")
    return failures


def compose_etcd(offered):
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    where = COMPOSE.relative_to(ROOT)
    members, volumes, failures = {}, {}, []
    for name, service in services.items():
        image = service.get("image", "")
        if "/etcd:" not in image:
            continue
        if image.endswith(":latest") or ":v" not in image:
            failures.append(f"{where}: {name}: image {image} is not pinned to a release")
        if "healthcheck" not in service:
            failures.append(f"{where}: {name}: no health check")
        argv = service.get("command", [])[1:]
        members[name] = (name, argv)
        data = parse_flags(argv).get("--data-dir", "")
        mounts = [v.split(":") for v in service.get("volumes", []) if isinstance(v, str)]
        volumes[name] = [source for source, target, *_ in mounts
                         if source in compose.get("volumes", {}) and data.startswith(target)]
        if not volumes[name]:
            failures.append(f"{where}: {name}: its --data-dir {data} is on no named volume")
    shared = [v for v in volumes.values() if list(volumes.values()).count(v) > 1]
    if shared:
        failures.append(f"{where}: etcd members share a data volume: {shared}")
    member_failures, clients = etcd_members(where, members, offered)
    failures += member_failures
    for part, argv, env in compose_commands():
        failures += topology_failures(part, argv, env, clients)
    return failures


def kubernetes_etcd(paths, offered):
    failures = []
    for path in paths:
        docs = [doc for _, doc in documents([path])]
        sets = [d for d in docs if d.get("kind") == "StatefulSet"
                and any("/etcd:" in c.get("image", "") for c in d["spec"]["template"]["spec"]["containers"])]
        if len(sets) != 1:
            failures.append(f"{path}: {len(sets)} etcd StatefulSets, not one")
            continue
        etcd = sets[0]
        where = f"{path}: StatefulSet/{etcd['metadata']['name']}"
        spec = etcd["spec"]
        pods = spec["template"]["metadata"]["labels"]
        service = next((d for d in docs if d.get("kind") == "Service"
                        and d["metadata"]["name"] == spec.get("serviceName")), None)
        if service is None or service["spec"].get("clusterIP") != "None":
            failures.append(f"{where}: serviceName {spec.get('serviceName')} is not a headless Service")
        elif not service["spec"].get("publishNotReadyAddresses"):
            failures.append(f"{where}: its Service must publish members before they are ready (they need each other)")
        elif not service["spec"]["selector"].items() <= pods.items():
            failures.append(f"{where}: its Service does not select its pods")
        budgets = [d for d in docs if d.get("kind") == "PodDisruptionBudget"
                   and d["spec"]["selector"].get("matchLabels", {}).items() <= pods.items()]
        if not any(b["spec"].get("minAvailable") == 2 or b["spec"].get("maxUnavailable") == 1 for b in budgets):
            failures.append(f"{where}: no PodDisruptionBudget keeps two of three members up")
        container = next(c for c in spec["template"]["spec"]["containers"] if "/etcd:" in c["image"])
        argv = container.get("command", [])[1:] + container.get("args", [])
        data = parse_flags(argv).get("--data-dir", "")
        claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
        if not any(m["name"] in claims and data.startswith(m["mountPath"]) for m in container.get("volumeMounts", [])):
            failures.append(f"{where}: its --data-dir {data} is on no volume claim of its own")
        name, headless = etcd["metadata"]["name"], spec.get("serviceName")
        members = {}
        for ordinal in range(spec.get("replicas", 1)):
            pod = f"{name}-{ordinal}"
            members[pod] = (f"{pod}.{headless}", [a.replace("$(POD_NAME)", pod) for a in argv])
        member_failures, clients = etcd_members(where, members, offered)
        failures += member_failures
        for part, part_argv, env in manifest_commands([path]):
            failures += topology_failures(part, part_argv, env, clients)
    return failures


def etcd(binary, paths):
    offered = etcd_flags_of(binary)
    failures = compose_etcd(offered) + kubernetes_etcd(paths, offered)
    for failure in failures:
        print(f"FAIL {failure}")
    if not failures:
        print("etcd: three members in Compose and in each rendered manifest, one cluster, mutual TLS, own data")
    return 1 if failures else 0


def selects(selector, labels):
    """Whether a label selector (matchLabels and matchExpressions) selects `labels`."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        held = {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not held:
            return False
    return True
def run_quietly(argv, **kwargs):
    """(exit code, stdout and stderr together)."""
    run = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    return run.returncode, run.stdout + run.stderr


def systemd(binary):
    """The unit as installed, but starting `binary`: verify checks that ExecStart exists."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        unit = Path(tmp) / UNIT.name
        unit.write_text(UNIT.read_text().replace("/usr/local/bin/pastebin", str(Path(binary).resolve())))
        code, said = run_quietly(["systemd-analyze", "verify", str(unit)])
        # verify exits 0 on an unknown key or a bad value: any word about the unit fails.
        if code != 0 or UNIT.name in said:
            failures.append(f"systemd-analyze verify {UNIT.relative_to(ROOT)}:\n{said}")
        code, said = run_quietly(["systemd-analyze", "security", "--offline=yes", f"--threshold={MOST_EXPOSURE}", str(unit)])
        if code != 0:
            failures.append(f"{UNIT.relative_to(ROOT)} is more exposed than {int(MOST_EXPOSURE) / 10}:\n{said}")
    for failure in failures:
        print(f"FAIL {failure}")
    if not failures:
        print(f"ok  {UNIT.relative_to(ROOT)}: systemd-analyze verify, exposure at most {int(MOST_EXPOSURE) / 10}")
    return 1 if failures else 0


def caddy():
    code, said = run_quietly(["caddy", "validate", "--config", str(CADDYFILE), "--adapter", "caddyfile"])
    if code != 0:
        print(f"FAIL caddy validate {CADDYFILE.relative_to(ROOT)}:\n{said}")
        return 1
    print(f"ok  {CADDYFILE.relative_to(ROOT)}: caddy validate")
    return 0


def nginx():
    """The site inside a minimal nginx.conf, its certificate paths pointed at a throwaway pair."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        code, said = run_quietly([
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=paste.example.com",
            "-keyout", str(tmp / "key.pem"), "-out", str(tmp / "cert.pem"),
        ])
        if code != 0:
            print(f"FAIL openssl could not make a throwaway certificate:\n{said}")
            return 1
        site = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {tmp / 'cert.pem'};", NGINX_SITE.read_text())
        site = re.sub(r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {tmp / 'key.pem'};", site)
        (tmp / "site.conf").write_text(site)
        (tmp / "nginx.conf").write_text(
            f"pid {tmp / 'nginx.pid'};\nerror_log stderr;\nevents {{}}\n"
            f"http {{\n  access_log off;\n  include {tmp / 'site.conf'};\n}}\n"
        )
        code, said = run_quietly(["nginx", "-t", "-p", str(tmp), "-c", str(tmp / "nginx.conf")])
    if code != 0:
        print(f"FAIL nginx -t {NGINX_SITE.relative_to(ROOT)}:\n{said}")
        return 1
    print(f"ok  {NGINX_SITE.relative_to(ROOT)}: nginx -t")
    return 0


def monitor(paths):
    docs = [doc for _, doc in documents(paths)]
    failures = []
    for monitor in (d for d in docs if d.get("kind") == "ServiceMonitor"):
        selector = monitor["spec"]["selector"]
        ports = {e["port"] for e in monitor["spec"]["endpoints"]}
        services = [
            d for d in docs
            if d.get("kind") == "Service" and selects(selector, d["metadata"].get("labels", {}))
        ]
        if not services:
            failures.append(f"ServiceMonitor/{monitor['metadata']['name']} selects no Service")
        for service in services:
            names = {p.get("name") for p in service["spec"]["ports"]}
            for port in ports - names:
                failures.append(f"Service/{service['metadata']['name']} has no port {port} to scrape")
    for failure in failures:
        print(f"FAIL {failure}")
    if not failures:
        print("ServiceMonitor: every selected Service has the port it scrapes")
    return 1 if failures else 0


def main(argv):
    match argv:
        case ["prometheus-rule"]:
            return prometheus_rule(write=False)
        case ["prometheus-rule", "--write"]:
            return prometheus_rule(write=True)
        case ["flags", binary, *paths]:
            return flags(binary, paths)
        case ["monitor", *paths]:
            return monitor(paths)
        case ["seaweedfs", weed]:
            return seaweedfs(weed)
        case ["etcd", binary, *paths]:
            return etcd(binary, paths)
        case ["systemd", binary]:
            return systemd(binary)
        case ["caddy"]:
            return caddy()
        case ["nginx"]:
            return nginx()
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
