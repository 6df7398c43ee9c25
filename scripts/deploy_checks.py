"""Checks of the deployment files that no tool here does (run by scripts/validate-deploy).

  prometheus-rule [--write]   the PrometheusRule is deploy/prometheus/alerts.yml, unchanged
  flags PASTEBIN RENDERED...  every `pastebin <sub> --flag` and PASTEBIN_* setting in the
                              rendered manifests and the Compose file exists in the binary
  monitor RENDERED            the ServiceMonitor's port exists on every Service it selects
  seaweedfs WEED              the Compose file's SeaweedFS is the version the tests pin (WEED
                              is that binary) and every `weed <sub> -flag` it passes exists
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
    """(where, argv, env names) of every container that runs the pastebin image."""
    config_maps = {}
    docs = list(documents(paths))
    for _, doc in docs:
        if doc.get("kind") == "ConfigMap":
            config_maps[doc["metadata"]["name"]] = list(doc.get("data", {}))
    for path, doc in docs:
        pod = doc.get("spec", {}).get("template", {}).get("spec")
        if not pod:
            continue
        for container in pod.get("containers", []):
            if "pastebin" not in container.get("image", ""):
                continue
            env = [e["name"] for e in container.get("env", [])]
            for source in container.get("envFrom", []):
                env += config_maps.get(source.get("configMapRef", {}).get("name"), [])
            where = f"{path}: {doc['kind']}/{doc['metadata']['name']}"
            yield where, container.get("command", []) + container.get("args", []), env


def compose_commands():
    compose = yaml.safe_load(COMPOSE.read_text())
    for name, service in compose["services"].items():
        if not service.get("image", "").startswith("pastebin"):
            continue
        env = service.get("environment", {})
        env = list(env) if isinstance(env, dict) else [e.split("=", 1)[0] for e in env]
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
        selector = monitor["spec"]["selector"]["matchLabels"]
        ports = {e["port"] for e in monitor["spec"]["endpoints"]}
        services = [
            d for d in docs
            if d.get("kind") == "Service"
            and selector.items() <= d["metadata"].get("labels", {}).items()
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
        print("ServiceMonitor: every selected Service has the admin port")
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
